"""Audit-layer benchmark: tightness of the distinguishing game and its speed, side by side in one run.

    python benchmarks/bench_audit.py [--quick] [--seeds S] [--repeat R] [--write PATH | --no-write]

A full run (≈ 30 s) prints the section and replaces it in benchmarks/RESULTS.md (between the bench_audit markers;
the hand-written notes after them are kept); ``--quick`` is a few-second smoke run that only prints.

Tightness (auditing-anchors §5.2, §5.3, §5.6): ratio ε_lb / ε_true at 95 % confidence, N trials per side, the
default strategy and score of ``games.audit`` (weighted Bonferroni grid placed from an independent pilot; the
mechanism's exact log-likelihood ratio), several seeds, mean and min:

- Laplace(scale = 1/ε), ε ∈ {0.5, 1, 2}, δ = 0: ≥ 0.93 at N = 1e5, ≥ 0.975 at N = 1e6;
- Gaussian σ = 1, δ = 1e-5 (true ε = 4.377, exactly 1-GDP): (ε, δ) bound ≥ 0.69 at N = 1e6; the GDP estimate
  (labelled an estimate) ≥ 0.98 at N = 1e6.

A floating-point probe checks that the shipped ``LaplaceMechanism`` score has no rounding leak at its atoms: a
threshold fixed exactly at −ε must not certify more than ε.

Next to each, the "oracle" ratio: one threshold fixed in advance at the best value for that N, all of α on it,
expected counts (the ceiling of any threshold-based Clopper–Pearson audit, §5.2).

Speed (interleaved repetitions, medians; the machine is a shared 2-core VM, so ratios are the claim):

- a 1e6-per-side Gaussian audit vs numpy drawing the 2·10^6 normals alone: ≤ 5×;
- N = 1e7 per side, process pool on 2 workers vs in-process: ≥ 1.6× faster (the counts must be identical).
  Alongside, the speed-up the machine itself offered at that moment: a pure numpy workload (the same 2·10^7
  normals in cache-sized batches) on the same 2-worker pool vs in-process, so that contention from other users
  is visible rather than guessed.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import platform
import statistics
import sys
import time
import warnings
from concurrent import futures
from pathlib import Path

import numpy as np
from scipy import stats

from dplens.accountant import conversions
from dplens.auditing import bounds as bd
from dplens.auditing import games
from dplens.mechanisms.additive import GaussianMechanism, LaplaceMechanism

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
GAUSS_DELTA = 1e-5
GAUSS_TRUE = conversions.gdp_epsilon(1.0, GAUSS_DELTA)  # σ = 1, Δ = 1: exactly 1-GDP; 4.3771
BEGIN, END = "<!-- bench_audit:begin -->", "<!-- bench_audit:end -->"


# --------------------------------------------------------------------------------------------
# Oracles (expected counts, one threshold fixed in advance, all of α on it)
# --------------------------------------------------------------------------------------------


def _cp_forward(fpr: np.ndarray, fnr: np.ndarray, n: int, delta: float) -> np.ndarray:
    fp = np.round(fpr * n).astype(np.int64)
    fn = np.round(fnr * n).astype(np.int64)
    level = ALPHA / 2
    forward, _ = bd.epsilon_lower_bounds(
        bd.clopper_pearson_upper(fp, n, level), bd.clopper_pearson_upper(fn, n, level), delta
    )
    return forward


def oracle_gaussian(n: int) -> float:
    """max over thresholds t on the loss (o − ½) of the CP bound at expected counts (§5.2 "CP oracle")."""
    t = np.linspace(0.0, 7.0, 7001)
    return float(np.max(_cp_forward(stats.norm.sf(t + 0.5), stats.norm.cdf(t - 0.5), n, GAUSS_DELTA)))


def oracle_gdp(n: int) -> float:
    """GDP estimate at the best moderate threshold, expected counts, all of α on it (§5.2 "oracle GDP")."""
    t = np.linspace(-2.0, 3.0, 2001)
    fp = np.round(stats.norm.sf(t + 0.5) * n).astype(np.int64)
    fn = np.round(stats.norm.cdf(t - 0.5) * n).astype(np.int64)
    mu, _ = bd.gdp_mu_lower_bounds(
        bd.clopper_pearson_upper(fp, n, ALPHA / 2), bd.clopper_pearson_upper(fn, n, ALPHA / 2)
    )
    return conversions.gdp_epsilon(float(np.max(mu)), GAUSS_DELTA)


def oracle_laplace(epsilon: float, n: int) -> float:
    """The optimal region o ≥ 1: FPR = e^{−ε}/2, FNR = 1/2 (§5.3 "CP oracle")."""
    return float(_cp_forward(np.array([0.5 * math.exp(-epsilon)]), np.array([0.5]), n, 0.0)[0])


# --------------------------------------------------------------------------------------------
# Tightness
# --------------------------------------------------------------------------------------------


def _ratios(mechanism, true_epsilon: float, *, n: int, delta: float, seeds: int, **options):
    results = [
        games.audit(mechanism, trials=n, delta=delta, claimed_epsilon=true_epsilon, seed=seed, **options)
        for seed in range(seeds)
    ]
    return results, [r.epsilon_lower_bound / true_epsilon for r in results]


def bench_tightness(sizes_laplace, sizes_gauss, seeds: int) -> tuple[list[dict], list[dict]]:
    rows, fp_rows = [], []
    for epsilon in (0.5, 1.0, 2.0):
        mechanism = LaplaceMechanism(scale=1 / epsilon)
        for n in sizes_laplace:
            start = time.perf_counter()
            results, ratio = _ratios(mechanism, epsilon, n=n, delta=0.0, seeds=seeds, estimates=False)
            seconds = time.perf_counter() - start
            target = {100_000: 0.93, 1_000_000: 0.975}.get(n)
            rows.append(
                {
                    "case": f"Laplace ε = {epsilon:g}, (ε, 0) bound",
                    "n": n,
                    "ratios": ratio,
                    "target": target,
                    "oracle": oracle_laplace(epsilon, n) / epsilon,
                    "seconds": seconds,
                }
            )
            fp_rows.append(
                {
                    "epsilon": epsilon,
                    "n": n,
                    "above": sum(r > 1 for r in ratio),
                    "max_bound": max(r.epsilon_lower_bound for r in results),
                    "seeds": seeds,
                }
            )
    gaussian = GaussianMechanism(noise_multiplier=1.0)
    for n in sizes_gauss:
        start = time.perf_counter()
        results, ratio = _ratios(gaussian, GAUSS_TRUE, n=n, delta=GAUSS_DELTA, seeds=seeds)
        gdp = [next(e for e in r.estimates if e["name"] == "gdp")["epsilon"] / GAUSS_TRUE for r in results]
        seconds = time.perf_counter() - start
        rows.append(
            {
                "case": "Gaussian σ = 1, δ = 1e-5, (ε, δ) bound",
                "n": n,
                "ratios": ratio,
                "target": {1_000_000: 0.69}.get(n),
                "oracle": oracle_gaussian(n) / GAUSS_TRUE,
                "seconds": seconds,
            }
        )
        rows.append(
            {
                "case": "Gaussian σ = 1, δ = 1e-5, GDP *estimate*",
                "n": n,
                "ratios": gdp,
                "target": {1_000_000: 0.98}.get(n),
                "oracle": oracle_gdp(n) / GAUSS_TRUE,
                "seconds": None,
            }
        )
    return rows, fp_rows


def floating_point_probe(n: int) -> dict:
    """A threshold exactly at the atom −ε of the Laplace LLR: unclipped, (|o| − |o − 1|)/b rounded differently on the
    two sides there and separated them (a floating-point artefact of the score); the shipped score clips o to [0, 1]."""
    epsilon = 1.0
    mechanism = LaplaceMechanism(scale=1 / epsilon)
    result = games.audit(
        mechanism, trials=n, delta=0.0, claimed_epsilon=epsilon, strategy=bd.FixedThreshold(-epsilon), estimates=False
    )
    rng = np.random.default_rng(12345)
    below = []
    for side in (1.0, 0.0):
        scores = mechanism.log_likelihood_ratio(mechanism.sample(side, n, rng), 1.0, 0.0)
        below.append(float(np.mean(scores < -epsilon)))
    return {"n": n, "bound": result.epsilon_lower_bound, "below_D": below[0], "below_D_prime": below[1]}


# --------------------------------------------------------------------------------------------
# Speed
# --------------------------------------------------------------------------------------------


def _numpy_work(total: int, batch: int = 1 << 16) -> float:
    rng = np.random.default_rng(7)
    acc = 0.0
    for start in range(0, total, batch):
        acc += float(rng.standard_normal(min(batch, total - start)).sum())
    return acc


def bench_speed_draws(n: int, repeat: int) -> dict:
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    rng = np.random.default_rng(0)
    games.audit(mechanism, trials=n, delta=GAUSS_DELTA, claimed_epsilon=GAUSS_TRUE, seed=0)  # warm-up
    t_numpy, t_audit = [], []
    for rep in range(repeat):
        start = time.perf_counter()
        rng.standard_normal(2 * n)
        t_numpy.append(time.perf_counter() - start)
        start = time.perf_counter()
        games.audit(mechanism, trials=n, delta=GAUSS_DELTA, claimed_epsilon=GAUSS_TRUE, seed=rep)
        t_audit.append(time.perf_counter() - start)
    numpy_s, audit_s = statistics.median(t_numpy), statistics.median(t_audit)
    return {"n": n, "numpy_s": numpy_s, "audit_s": audit_s, "ratio": audit_s / numpy_s, "repeat": repeat}


def bench_speed_pool(n: int, repeat: int, workers: int = 2) -> dict:
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    t_in, t_pool, t_np_seq, t_np_par, identical = [], [], [], [], True
    games.audit(mechanism, trials=max(n // 100, 1000), delta=GAUSS_DELTA, claimed_epsilon=GAUSS_TRUE, workers=workers)
    for rep in range(repeat):
        start = time.perf_counter()
        serial = games.audit(mechanism, trials=n, delta=GAUSS_DELTA, claimed_epsilon=GAUSS_TRUE, seed=rep)
        t_in.append(time.perf_counter() - start)
        start = time.perf_counter()
        pooled = games.audit(
            mechanism, trials=n, delta=GAUSS_DELTA, claimed_epsilon=GAUSS_TRUE, seed=rep, workers=workers
        )
        t_pool.append(time.perf_counter() - start)
        identical &= serial.counts == pooled.counts and serial.epsilon_lower_bound == pooled.epsilon_lower_bound
        # The machine's own parallel capacity right now: the same number of normals, no audit.
        start = time.perf_counter()
        for _ in range(workers):
            _numpy_work(2 * n // workers)
        t_np_seq.append(time.perf_counter() - start)
        start = time.perf_counter()
        with futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            list(pool.map(_numpy_work, [2 * n // workers] * workers))
        t_np_par.append(time.perf_counter() - start)
    in_s, pool_s = statistics.median(t_in), statistics.median(t_pool)
    seq_s, par_s = statistics.median(t_np_seq), statistics.median(t_np_par)
    return {
        "n": n,
        "workers": workers,
        "in_s": in_s,
        "pool_s": pool_s,
        "speedup": in_s / pool_s,
        "speedups": [a / b for a, b in zip(t_in, t_pool, strict=True)],
        "machine": seq_s / par_s,
        "machine_s": (seq_s, par_s),
        "identical": identical,
        "chunks": serial.chunks,
        "repeat": repeat,
    }


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _fmt_n(n: int) -> str:
    exponent = math.floor(math.log10(n))
    mantissa, rest = divmod(n, 10**exponent)
    return f"{mantissa}e{exponent}" if rest == 0 else f"{n:,}"


def _verdict(value: float, target: float | None, *, at_most: bool = False) -> str:
    if target is None:
        return "–"
    ok = value <= target if at_most else value >= target
    return "**met**" if ok else "**MISSED**"


def _pool_rows(pool: dict, *, target: float | None) -> list[str]:
    goal = f"≥ {target:g}×" if target else "(at 1e7)" if pool["n"] < 10_000_000 else "(no target)"
    return [
        f"| N = {_fmt_n(pool['n'])} per side: in-process vs process pool ({pool['workers']} workers) | "
        f"{pool['in_s']:.2f} s | {pool['pool_s']:.2f} s | {pool['speedup']:.2f}× | {goal} | "
        f"{_verdict(pool['speedup'], target)} |",
        f"| same moment, pure numpy (2·{_fmt_n(pool['n'])} normals): in-process vs the same pool | "
        f"{pool['machine_s'][0]:.2f} s | {pool['machine_s'][1]:.2f} s | {pool['machine']:.2f}× | "
        "(the machine's capacity) | – |",
    ]


def render(rows, fp_rows, probe, draws, pool, pool_long, *, seeds: int, command: str, started: float, loads) -> str:
    draws_target = 5.0 if draws["n"] == 1_000_000 else None  # the targets apply at the full run's sizes
    lines = [
        BEGIN,
        f"### Audit: tightness and speed of the distinguishing game ({time.strftime('%Y-%m-%d')}, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, numpy {np.__version__})",
        "",
        f"Command: `{command}` (wall time {time.perf_counter() - started:.0f} s; load average "
        f"{loads[0]:.2f} before, {loads[1]:.2f} after)",
        "",
        f"Tightness: ratio ε_lb / ε_true at 95 % confidence, N trials per side, default strategy of `games.audit`, "
        f"seeds 0–{seeds - 1}. *Oracle* = one threshold fixed in advance at the best value for that N with all of α "
        "on it, expected counts: the ceiling of any threshold-based Clopper–Pearson audit (auditing-anchors §5.2).",
        "",
        "| case | N / side | target | mean ratio | min ratio | oracle | result | time (all seeds) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratios = row["ratios"]
        target = f"≥ {row['target']:g}" if row["target"] is not None else "–"
        seconds = f"{row['seconds']:.1f} s" if row["seconds"] is not None else "″"
        lines.append(
            f"| {row['case']} | {_fmt_n(row['n'])} | {target} | {np.mean(ratios):.4f} | {min(ratios):.4f} | "
            f"{row['oracle']:.4f} | {_verdict(min(ratios), row['target'])} | {seconds} |"
        )
    lines += [
        "",
        "Laplace audits above the true ε, per (ε, N) (the shipped `LaplaceMechanism`, whose score is evaluated on "
        "the output clipped to [0, 1]): "
        + "; ".join(
            f"ε = {r['epsilon']:g}, N = {_fmt_n(r['n'])}: {r['above']}/{r['seeds']} (max ε_lb {r['max_bound']:.3f})"
            for r in fp_rows
        )
        + ".",
        "",
        f"Floating-point probe (Laplace LLR, ε = 1, N = {_fmt_n(probe['n'])}, `FixedThreshold(-1.0)` "
        f"exactly at the atom): ε_lb = {probe['bound']:.3f}; fraction of scores strictly below −ε: "
        f"{probe['below_D']:.4f} under D, {probe['below_D_prime']:.4f} under D′.",
        "",
        f"Speed ({draws['repeat']} / {pool['repeat']} interleaved repetitions, medians):",
        "",
        "| measurement | baseline | dplens | ratio | target | result |",
        "|---|---|---|---|---|---|",
        f"| {_fmt_n(draws['n'])}-per-side Gaussian audit vs `rng.standard_normal({2 * draws['n']:_})` | "
        f"{draws['numpy_s'] * 1e3:.1f} ms | {draws['audit_s'] * 1e3:.1f} ms | {draws['ratio']:.2f}× | "
        f"{'≤ 5×' if draws_target else '(at 1e6)'} | {_verdict(draws['ratio'], draws_target, at_most=True)} |",
        *_pool_rows(pool, target=1.6 if pool["n"] == 10_000_000 else None),
        *(_pool_rows(pool_long, target=None) if pool_long else []),
        "",
    ]
    for p in (pool, pool_long) if pool_long else (pool,):
        lines.append(
            f"- Pool speed-ups per repetition at N = {_fmt_n(p['n'])}: {', '.join(f'{s:.2f}' for s in p['speedups'])} "
            f"({p['chunks']} chunks); pooled and in-process counts and bounds "
            f"{'identical' if p['identical'] else 'DIFFERENT (bug)'} in every repetition."
        )
    lines.append(END)
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    """Replace the section between the markers, or append it (hand-written notes live outside the markers)."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        new = head + text + rest.split(END, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n\n" + text + "\n"
    path.write_text(new, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small N, 2 seeds, 3 repetitions")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per tightness case (default 5)")
    parser.add_argument("--repeat", type=int, default=None, help="timed repetitions (default 9 and 5)")
    parser.add_argument(
        "--write",
        metavar="PATH",
        help="write (replace) the audit section of this Markdown file (default for a full run: benchmarks/RESULTS.md)",
    )
    parser.add_argument("--no-write", action="store_true", help="only print")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    started = time.perf_counter()
    loads = [os.getloadavg()[0]]
    if args.quick:
        seeds, repeat_draws, repeat_pool = args.seeds or 2, args.repeat or 3, args.repeat or 3
        sizes_laplace, sizes_gauss, n_draws, n_pool, n_probe = [10_000, 100_000], [100_000], 100_000, 1_000_000, 100_000
        n_pool_long = 0
    else:
        seeds, repeat_draws, repeat_pool = args.seeds or 5, args.repeat or 9, args.repeat or 7
        sizes_laplace, sizes_gauss = [100_000, 1_000_000], [100_000, 1_000_000, 10_000_000]
        n_draws, n_pool, n_probe, n_pool_long = 1_000_000, 10_000_000, 1_000_000, 50_000_000
    # Speed first and again at the end would double the run; one interleaved block each is the compromise.
    draws = bench_speed_draws(n_draws, repeat_draws)
    pool = bench_speed_pool(n_pool, repeat_pool)
    # Supplementary: a longer run amortises the pool's fixed costs (fork, shutdown, the serial pilot and bounds).
    pool_long = bench_speed_pool(n_pool_long, max(repeat_pool // 2, 1)) if n_pool_long else None
    rows, fp_rows = bench_tightness(sizes_laplace, sizes_gauss, seeds)
    probe = floating_point_probe(n_probe)
    loads.append(os.getloadavg()[0])
    command = "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    text = render(
        rows, fp_rows, probe, draws, pool, pool_long, seeds=seeds, command=command, started=started, loads=loads
    )
    print(text)
    target = args.write or (None if args.quick else Path(__file__).resolve().parent / "RESULTS.md")
    if target and not args.no_write:
        write_section(Path(target), text)
        print(f"(written to {target})")


if __name__ == "__main__":
    main()
