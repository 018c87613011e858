"""``check_dp_sgd`` (issue 46): throughput, the shuffle gap shown by a valid audit, the model-based bound's tightness,
and planted bugs against correct controls over many seeds (framework-free subject).

    python benchmarks/bench_check_dp_sgd.py gap [--trials 10000] [--workers 2]
    python benchmarks/bench_check_dp_sgd.py model-based [--trials 2000]
    python benchmarks/bench_check_dp_sgd.py seeds [--seeds 20]

- gap: N = 5000, B = 50, T = 100, σ = 1, the reference step on shuffled batches declared Poisson (Poisson ε 0.718):
  the assumption-free audit's valid lower bound against the Poisson ε, and the wall time per step call;
- model-based: the reference step with Poisson batches (dplens forms them), the model-based bound against the
  accountant's ε (target: within 20 % at 2000 trainings per side);
- seeds: every planted bug must be a VIOLATION naming its check in >= 95 % of seeds, the controls flagged at a rate
  consistent with α (one-sided binomial test), over-noising a DEVIATION.
Results go to benchmarks/results_check_dp_sgd_<mode>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from dplens.auditing.training.batches import declared_batches
from dplens.auditing.training.check import check_dp_sgd
from dplens.auditing.training.framework_free import reference_step

HERE = Path(__file__).resolve().parent
N, B, T, SIGMA, C, DELTA = 5000, 50, 100, 1.0, 1.0, 1e-5


def _clipped(g, clip=C):
    g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
    return np.minimum(1.0, clip / np.maximum(np.linalg.norm(g, axis=1), 1e-300)) @ g


def mean_noise_on_sum(g, rng):
    return _clipped(g) + rng.normal(0, SIGMA * C / B, g.shape[1])


def rank_one(g, rng):
    return (_clipped(g) + rng.normal(0, SIGMA * C) * np.ones(g.shape[1])) / B


def no_clipping(g, rng):
    g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
    return (g.sum(axis=0) + rng.normal(0, SIGMA * C, g.shape[1])) / B


def batch_clipping(g, rng):
    g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
    total = g.sum(axis=0)
    total *= min(1.0, C / max(np.linalg.norm(total), 1e-300))
    return (total + rng.normal(0, SIGMA * C, g.shape[1])) / B


def actual_batch(g, rng):
    return (_clipped(g) + rng.normal(0, SIGMA * C, g.shape[1])) / len(g)


def reused_generator(g, rng):
    return (_clipped(g) + np.random.default_rng(1234).normal(0, SIGMA * C, g.shape[1])) / B


def nan_leak(g, rng):
    norms = np.linalg.norm(g, axis=1)
    return (np.minimum(1.0, C / np.maximum(norms, 1e-300)) @ g + rng.normal(0, SIGMA * C, g.shape[1])) / B


def over_noised(g, rng):
    return (_clipped(g) + rng.normal(0, 1.5 * SIGMA * C, g.shape[1])) / B


def shuffled(n, rng):
    return declared_batches("shuffle", n, B, 10**6, rng)


def poisson(n, rng):
    return declared_batches("poisson", n, B, 10**6, rng)


def duplicates(n, rng):
    while True:
        batch = rng.choice(n, size=B, replace=True)
        batch[1] = batch[0]
        yield batch


REF = reference_step(SIGMA, C, B)
# name: (step, declared sampler, sampler function, the check that must say VIOLATION; None: a control)
CASES = {
    "control: reference step, Poisson (dplens's batches)": (REF, "poisson", None, None),
    "control: reference step, Poisson loader": (REF, "poisson", poisson, None),
    "control: reference step, shuffled loader declared shuffle": (REF, "shuffle", shuffled, None),
    "noise for the mean added to the sum": (mean_noise_on_sum, "poisson", None, "noise_std"),
    "rank-one noise": (rank_one, "poisson", None, "noise_gaussian_independent"),
    "no per-sample clipping": (no_clipping, "poisson", None, "clipping"),
    "the batch's sum clipped as a whole": (batch_clipping, "poisson", None, "clipping"),
    "actual-batch normalisation": (actual_batch, "poisson", None, "normalisation"),
    "generator re-seeded at every call": (reused_generator, "poisson", None, "fresh_noise"),
    "NaN row leaks (no nan_safe)": (nan_leak, "poisson", None, "non_finite_rows"),
    "shuffled loader declared Poisson": (REF, "poisson", shuffled, "sampling_law"),
    "Poisson loader declared shuffle": (REF, "shuffle", poisson, "sampling_law"),
    "duplicates in a batch": (REF, "poisson", duplicates, "sampling_law"),
    "over-noised (1.5 sigma): DEVIATION": (over_noised, "poisson", None, "DEVIATION"),
}


def _seeds(count: int, only: str | None = None) -> dict:
    out = {}
    for name, (step, declared, function, check) in CASES.items():
        if only is not None and not any(part in name for part in only.split(",")):
            continue
        started, rows = time.perf_counter(), []
        for seed in range(count):
            r = check_dp_sgd(
                step,
                sampler=declared,
                sampler_function=function,
                noise_multiplier=SIGMA,
                max_grad_norm=C,
                batch_size=B,
                dataset_size=1000,
                steps=40,
                delta=DELTA,
                trials=200,
                seed=seed,
            )
            verdicts = {c.name: c.verdict for c in r.checks}
            rows.append(
                {"verdict": r.verdict, **verdicts, "audit": r.audit.verdict, "model_based": r.model_based.verdict}
            )
        if check is None:
            flagged = sum(row["verdict"] == "VIOLATION" for row in rows)
            p = float(stats.binomtest(flagged, count, 0.05, alternative="greater").pvalue)
            summary = {
                "flagged": flagged,
                "binomial_p_vs_alpha": p,
                "pass": sum(row["verdict"] == "PASS" for row in rows),
            }
        elif check == "DEVIATION":
            summary = {
                "noise_std_deviation": sum(row["noise_std"] == "DEVIATION" for row in rows),
                "any_violation": sum(row["verdict"] == "VIOLATION" for row in rows),
            }
        else:
            summary = {"named_violation": sum(row.get(check) == "VIOLATION" for row in rows)}
        out[name] = {"seeds": count, **summary, "seconds": time.perf_counter() - started}
        print(name, out[name], flush=True)
    return out


def _one(trials: int, workers: int, function, label: str) -> dict:
    started = time.perf_counter()
    r = check_dp_sgd(
        REF,
        sampler="poisson",
        sampler_function=function,
        noise_multiplier=SIGMA,
        max_grad_norm=C,
        batch_size=B,
        dataset_size=N,
        steps=T,
        delta=DELTA,
        trials=trials,
        workers=workers,
        seed=0,
    )
    seconds = time.perf_counter() - started
    calls = 2 * (trials + max(100, trials // 5)) * T
    out = {
        "case": label,
        "trials_per_side": trials,
        "workers": workers,
        "seconds": seconds,
        "step_calls": calls,
        "us_per_step_call_wall": 1e6 * seconds / calls,
        "result": r.to_dict(),
    }
    print(r.summary(), f"\n{seconds:.1f} s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("gap", "model-based", "seeds"))
    parser.add_argument("--trials", type=int)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--only", help="seeds: the cases whose names contain one of these comma-separated words")
    args = parser.parse_args()
    if args.mode == "gap":
        result = _one(args.trials or 10000, args.workers, shuffled, "shuffled loader declared Poisson")
    elif args.mode == "model-based":
        result = _one(args.trials or 2000, args.workers, None, "reference step, Poisson")
    else:
        result = _seeds(args.seeds, args.only)
    result = {"machine": platform.platform(), "python": sys.version.split()[0], "mode": args.mode, "data": result}
    suffix = "" if args.only is None else "_only"
    (HERE / f"results_check_dp_sgd_{args.mode}{suffix}.json").write_text(
        json.dumps(result, indent=1, default=str) + "\n"
    )


if __name__ == "__main__":
    main()
