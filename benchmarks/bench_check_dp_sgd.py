"""``check_dp_sgd`` (issue 46): throughput, the shuffle gap shown by a valid audit, the model-based bound's tightness,
and planted bugs against correct controls over many seeds (framework-free and Opacus subjects).

    python benchmarks/bench_check_dp_sgd.py gap [--trials 10000] [--workers 2]
    python benchmarks/bench_check_dp_sgd.py model-based [--trials 2000]
    python benchmarks/bench_check_dp_sgd.py seeds [--seeds 20]
    python benchmarks/bench_check_dp_sgd.py opacus-seeds [--seeds 20] [--trials 100]
    python benchmarks/bench_check_dp_sgd.py opacus-throughput|opacus-gap [--trials 10000] [--workers 2] [--seed 0]
    python benchmarks/bench_check_dp_sgd.py opacus-floor [--trials 3000]   (--trials: the calls timed)
    python benchmarks/bench_check_dp_sgd.py jax-seeds [--seeds 20] [--trials 100]
    python benchmarks/bench_check_dp_sgd.py dirac-ratio [--seeds 5] [--trials 10000] [--workers 2] [--replicates 200]

- gap: N = 5000, B = 50, T = 100, σ = 1, the reference step on shuffled batches declared Poisson (Poisson ε 0.718):
  the assumption-free audit's valid lower bound against the Poisson ε, and the wall time per step call;
- model-based: the reference step with Poisson batches (dplens forms them), the model-based bound against the
  accountant's ε (target: within 20 % at 2000 trainings per side);
- seeds: every planted bug must be a VIOLATION naming its check in >= 95 % of seeds, the controls flagged at a rate
  consistent with α (one-sided binomial test), over-noising a DEVIATION;
- opacus-seeds: the same over the Opacus subject (`opacus_step`: the user's `make_private` on a gradient-injection
  module; N = 1000, B = 100, T = 10, the loader Opacus's DPDataLoader or a shuffled DataLoader), planted Opacus bugs
  against Opacus controls (Poisson; shuffle accounted as shuffle; Poisson through BatchMemoryManager). Opacus 1.6 is
  not nan_safe, so the controls state ``assume_finite_gradients=True`` (non_finite_rows runs, is reported, is not
  counted) and are also counted as the default would judge them (the same checks: the assumption changes no draw);
- opacus-throughput / opacus-gap: the digits-sized Opacus run (N = 1792, B = 64, 28 steps, σ = 1) on Opacus's Poisson
  loader / on a shuffled loader (poisson_sampling=False) declared Poisson: the shuffle gap.
- jax-seeds: the same over the jax_privacy subject (`jax_privacy_step`: jax_privacy's clipped_grad and Gaussian
  privatizer; N = 1000, B = 100, T = 10, the batches from jax_privacy's CyclicPoissonSampling through
  `batch_selection_sampler`), planted jax_privacy bugs against the correct control (jax_privacy is nan_safe by
  default: no assumption stated). One subject per case, compiled once and reused over the seeds.
- dirac-ratio: the audit's bound against the idealised vectorised DiracCanaryGame on the same N (issue 46): the
  harness (the reference step, dplens's Poisson batches, N = 1792, B = 64, T = 28, σ = 1) and ``games.audit`` of
  ``DiracCanaryGame(σ, B/N, T)`` at the same trainings per side, pilot and confidence (the harness's audit share),
  seed by seed; then, over ``--replicates`` draws, the audit's threshold selection on the game's own draws (the
  distribution of the reference step's target coordinate) against ``games.audit`` at as many seeds: the means.
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
            rows.append(_verdicts(r))
        if check is None:
            summary = _control_summary(rows, count)
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


def _verdicts(r) -> dict:
    """One run's verdicts: overall, each check's, the audit's and the model-based bound's."""
    verdicts = {c.name: c.verdict for c in r.checks}
    return {"verdict": r.verdict, **verdicts, "audit": r.audit.verdict, "model_based": r.model_based.verdict}


def _control_summary(rows: list[dict], count: int) -> dict:
    """A correct implementation's runs: how often it was flagged, with a one-sided binomial test against α = 0.05."""
    flagged = sum(row["verdict"] == "VIOLATION" for row in rows)
    p = float(stats.binomtest(flagged, count, 0.05, alternative="greater").pvalue)
    return {"flagged": flagged, "binomial_p_vs_alpha": p, "pass": sum(row["verdict"] == "PASS" for row in rows)}


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


# --- the Opacus subject (issue 46, h10): make_private and loaders at module level (workers fork or unpickle them)
ON, OB, OT = 1000, 100, 10  # opacus-seeds: N, B (Poisson rate 1/10), T = one epoch
DIGITS_N, DIGITS_B = 1792, 64  # the digits example's size (1797 records) rounded so that B divides N: 28 steps


class MakePrivate:
    """``PrivacyEngine().make_private`` with the declared σ and C unless a planted bug changes them.

    ``physical_loader``: make_private is handed a loader of physical batches of that size (the accountant's rate and
    the expected batch size are then the physical ones: "accounted at the physical batch size");
    ``ignore_skips``: the optimizer ignores BatchMemoryManager's skip signals (noise added at every physical step);
    ``planted``: one of :data:`PLANTED_OPTIMIZERS`, a bug planted in the wrapped optimizer's own methods."""

    def __init__(
        self, *, sigma=SIGMA, clip=C, poisson=True, physical_loader=None, ignore_skips=False, planted=None, **options
    ):
        self.sigma, self.clip, self.poisson = sigma, clip, poisson
        self.physical_loader, self.ignore_skips, self.options = physical_loader, ignore_skips, options
        self.planted = planted
        self.__qualname__ = f"MakePrivate(sigma={sigma}, clip={clip}, poisson={poisson}, planted={planted})"

    def __call__(self, module, optimizer, loader):
        import warnings

        from opacus import PrivacyEngine
        from torch.utils.data import DataLoader

        if self.physical_loader is not None:
            loader = DataLoader(loader.dataset, batch_size=self.physical_loader)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapped = PrivacyEngine(accountant="rdp").make_private(
                module=module,
                optimizer=optimizer,
                data_loader=loader,
                noise_multiplier=self.sigma,
                max_grad_norm=self.clip,
                poisson_sampling=self.poisson,
                **self.options,
            )
        if self.ignore_skips:
            wrapped[1].signal_skip_step = _no_skip
        if self.planted is not None:
            optimizer = wrapped[1]
            setattr(optimizer, *PLANTED_OPTIMIZERS[self.planted](optimizer))
        return wrapped


def _no_skip(do_skip=True):
    return None


def _rank_one_noise(optimizer):
    """add_noise drawing one normal per parameter tensor, broadcast over it: every direction orthogonal to the
    all-ones vector is noiseless."""
    import torch
    from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed

    def add_noise():
        std = optimizer.noise_multiplier * optimizer.max_grad_norm
        for p in optimizer.params:
            _check_processed_flag(p.summed_grad)
            draw = torch.normal(0.0, std, size=(), generator=optimizer.generator)
            p.grad = (p.summed_grad + draw).view_as(p)
            _mark_as_processed(p.summed_grad)

    return "add_noise", add_noise


def _actual_batch_scale(optimizer):
    """scale_grad dividing by the batch's realised size instead of the expected one (Opacus issue 420)."""

    def scale_grad():
        for p in optimizer.params:
            grads = p.grad_sample if isinstance(p.grad_sample, list) else [p.grad_sample]
            p.grad /= max(1, sum(int(g.shape[0]) for g in grads))

    return "scale_grad", scale_grad


def _reseeded_generator(optimizer):
    """add_noise re-seeding the optimizer's noise generator to the same state before every step."""
    import torch

    original = optimizer.add_noise

    def add_noise():
        optimizer.generator = torch.Generator().manual_seed(0)
        original()

    return "add_noise", add_noise


PLANTED_OPTIMIZERS = {
    "rank-one": _rank_one_noise,
    "actual-batch": _actual_batch_scale,
    "reseeded-generator": _reseeded_generator,
}


class Loader:
    """The training's loader over an index dataset: Opacus's Poisson ``DPDataLoader`` or a shuffled DataLoader."""

    def __init__(self, kind: str, batch_size: int) -> None:
        self.kind, self.batch_size = kind, batch_size
        self.__qualname__ = f"Loader({kind}, {batch_size})"

    def __call__(self, dataset):
        from opacus.data_loader import DPDataLoader
        from torch.utils.data import DataLoader

        if self.kind == "poisson":
            return DPDataLoader.from_data_loader(DataLoader(dataset, batch_size=self.batch_size))
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=True)


def _opacus_case(make_private, declared: str, loader: str, check, physical=None, n=ON, b=OB):
    return (make_private, declared, loader, check, physical, n, b)


OPACUS_CASES = {
    "control: Opacus Poisson (one physical batch)": _opacus_case(MakePrivate(), "poisson", "poisson", None),
    "control: Opacus shuffle accounted as shuffle": _opacus_case(
        MakePrivate(poisson=False), "shuffle", "shuffle", None
    ),
    "control: Opacus Poisson, BatchMemoryManager (physical 50)": _opacus_case(
        MakePrivate(), "poisson", "poisson", None, physical=50
    ),
    "Opacus under-noised (make_private at sigma/2)": _opacus_case(
        MakePrivate(sigma=SIGMA / 2), "poisson", "poisson", "noise_std"
    ),
    "Opacus clip 4C (larger than declared)": _opacus_case(MakePrivate(clip=4 * C), "poisson", "poisson", "clipping"),
    "Opacus shuffle (poisson_sampling=False) declared Poisson": _opacus_case(
        MakePrivate(poisson=False), "poisson", "shuffle", "sampling_law"
    ),
    "Opacus accounted at the physical batch size (50)": _opacus_case(
        MakePrivate(physical_loader=50), "poisson", "poisson", "gradient_accumulation", physical=50
    ),
    "Opacus rank-one noise (one draw broadcast over each tensor)": _opacus_case(
        MakePrivate(planted="rank-one"), "poisson", "poisson", "noise_gaussian_independent"
    ),
    "Opacus normalised by the actual batch size (issue 420)": _opacus_case(
        MakePrivate(planted="actual-batch"), "poisson", "poisson", "normalisation"
    ),
    "Opacus noise generator re-seeded before every step": _opacus_case(
        MakePrivate(planted="reseeded-generator"), "poisson", "poisson", "fresh_noise"
    ),
    "Opacus noise added at every physical step (50): DEVIATION": _opacus_case(
        MakePrivate(ignore_skips=True), "poisson", "poisson", "DEVIATION:gradient_accumulation", physical=50
    ),
}


def _opacus_summary(rows: list[dict], check: str | None, count: int) -> dict:
    """Controls, run under ``assume_finite_gradients=True``: the overall VIOLATIONs (non_finite_rows not counted),
    with a one-sided binomial test against α, and the VIOLATIONs the default would give on the same checks (Opacus is
    not nan_safe: a NaN row makes its update NaN, a non_finite_rows VIOLATION in every Opacus run)."""
    if check is None:
        flagged = sum(row["verdict"] == "VIOLATION" for row in rows)
        by_default = sum(any(v == "VIOLATION" for k, v in row.items() if k != "verdict") for row in rows)
        p = float(stats.binomtest(flagged, count, 0.05, alternative="greater").pvalue)
        return {
            "assume_finite_gradients": True,
            "flagged_overall": flagged,
            "flagged_overall_without_the_assumption": by_default,
            "binomial_p_vs_alpha": p,
            "non_finite_rows_violation": sum(row["non_finite_rows"] == "VIOLATION" for row in rows),
        }
    if check.startswith("DEVIATION:"):
        name = check.split(":")[1]
        return {
            "named_deviation": sum(row.get(name) == "DEVIATION" for row in rows),
            "violation_other_than_non_finite_rows": sum(
                any(v == "VIOLATION" for k, v in row.items() if k not in ("verdict", "non_finite_rows")) for row in rows
            ),
        }
    return {"named_violation": sum(row.get(check) == "VIOLATION" for row in rows)}


def _opacus_seeds(count: int, only: str | None, trials: int) -> dict:
    from dplens.integrations.opacus_step import loader_sampler, opacus_step

    out = {}
    for name, (make_private, declared, loader, check, physical, n, b) in OPACUS_CASES.items():
        if only is not None and not any(part in name for part in only.split(",")):
            continue
        started, rows = time.perf_counter(), []
        for seed in range(count):
            step = opacus_step(make_private, dataset_size=n, batch_size=b, max_physical_batch_size=physical)
            r = check_dp_sgd(
                step,
                sampler=declared,
                sampler_function=loader_sampler(Loader(loader, b)),
                noise_multiplier=SIGMA,
                max_grad_norm=C,
                batch_size=b,
                dataset_size=n,
                steps=OT,
                delta=DELTA,
                trials=trials,
                seed=seed,
                assume_finite_gradients=check is None,  # the controls: Opacus users whose gradients are finite
            )
            rows.append(_verdicts(r))
            print(name, "seed", seed, rows[-1], f"{time.perf_counter() - started:.0f} s", flush=True)
        summary = _opacus_summary(rows, check, count)
        out[name] = {"seeds": count, "n": n, "b": b, "steps": OT, "trials_per_side": trials, **summary}
        out[name]["seconds"] = time.perf_counter() - started
        print(name, out[name], flush=True)
    return out


def _opacus_one(trials: int, workers: int, loader: str, epochs: int = 1, sigma: float = SIGMA, seed: int = 0) -> dict:
    """The digits-sized Opacus run: N = 1792, B = 64 (28 steps an epoch), σ (1 by default), declared Poisson,
    ``loader`` (Opacus's Poisson DPDataLoader, or a shuffled DataLoader under poisson_sampling=False: the shuffle
    gap)."""
    from dplens.integrations.opacus_step import loader_sampler, opacus_step

    steps = epochs * DIGITS_N // DIGITS_B
    started = time.perf_counter()
    step = opacus_step(
        MakePrivate(sigma=sigma, poisson=loader == "poisson"), dataset_size=DIGITS_N, batch_size=DIGITS_B
    )
    r = check_dp_sgd(
        step,
        sampler="poisson",
        sampler_function=loader_sampler(Loader(loader, DIGITS_B)),
        noise_multiplier=sigma,
        max_grad_norm=C,
        batch_size=DIGITS_B,
        dataset_size=DIGITS_N,
        steps=steps,
        delta=DELTA,
        trials=trials,
        workers=workers,
        seed=seed,
        assume_finite_gradients=loader == "poisson",  # the control states it (Opacus 1.6 is not nan_safe)
    )
    seconds = time.perf_counter() - started
    calls = 2 * (trials + max(100, trials // 5)) * steps
    print(r.summary(), f"\n{seconds:.1f} s", flush=True)
    game = None
    if loader == "poisson":  # issue 46's ≥ 0.95×: the idealised game at the same N, pilot, confidence and seed
        from dplens.auditing import games
        from dplens.auditing.canaries import DiracCanaryGame

        ideal = DiracCanaryGame(noise_multiplier=sigma, sampling_rate=DIGITS_B / DIGITS_N, steps=steps)
        game = games.audit(
            ideal, trials=trials, delta=DELTA, claimed_epsilon=r.claimed_epsilon, confidence=1 - r.audit.significance,
            seed=seed, pilot_trials=max(100, trials // 5), estimates=False,
        ).epsilon_lower_bound  # fmt: skip
        print(f"DiracCanaryGame at the same N: {game:.4g} (harness / game = {r.audit.epsilon_lower_bound / game:.3f})")
    return {
        "seed": seed,
        "dirac_game_bound": game,
        "case": f"Opacus, {loader} loader declared Poisson, digits-sized (N {DIGITS_N}, B {DIGITS_B}, T {steps}, "
        f"sigma {sigma})",
        "trials_per_side": trials,
        "workers": workers,
        "seconds": seconds,
        "step_calls": calls,
        "us_per_step_call_wall": 1e6 * seconds / calls,
        "result": r.to_dict(),
    }


def _opacus_floor(calls: int) -> dict:
    """Per-step floors of the Opacus subject on the digits-sized configuration (N = 1792, B = 64, the audit's width
    d = 201), in CPU seconds of this process (one intra-op thread, as in a worker): a full step call of the adapter,
    and its parts — the forward and backward through Opacus's hooks, a bare ``DPOptimizer.step()``, ``zero_grad`` —
    and one batch of the loader (Opacus's DPDataLoader and a shuffled DataLoader through ``loader_sampler``)."""
    import torch

    from dplens.integrations.opacus_step import loader_sampler, opacus_step

    torch.set_num_threads(1)
    d, rng = 201, np.random.default_rng(0)
    step = opacus_step(MakePrivate(), dataset_size=DIGITS_N, batch_size=DIGITS_B)
    grads = np.zeros((DIGITS_B, d))
    grads[np.arange(DIGITS_B), rng.integers(0, d, DIGITS_B)] = 1.0
    for _ in range(50):
        step(grads, rng)
    clock = time.process_time
    started = clock()
    for _ in range(calls):
        step(grads, rng)
    out = {"full_step_call_us": 1e6 * (clock() - started) / calls}
    w = step.step._wrapped(d)
    ones, target = torch.ones(DIGITS_B, 1, requires_grad=True), torch.from_numpy(grads.astype(np.float32)) / DIGITS_B
    parts = np.empty((calls, 3))
    for i in range(calls):
        t0 = clock()
        w.module(ones).backward(target)
        t1 = clock()
        w.optimizer.step()
        t2 = clock()
        w.optimizer.zero_grad(set_to_none=True)
        parts[i] = (t1 - t0, t2 - t1, clock() - t2)
    for j, name in enumerate(("forward_backward_with_hooks_us", "bare_dpoptimizer_step_us", "zero_grad_us")):
        out[name] = 1e6 * float(parts[:, j].mean())
    for kind in ("poisson", "shuffle"):
        batches = loader_sampler(Loader(kind, DIGITS_B))(DIGITS_N, rng)
        next(batches)
        started = clock()
        for _ in range(calls):
            next(batches)
        out[f"loader_{kind}_batch_us"] = 1e6 * (clock() - started) / calls
    out["torch"] = torch.__version__
    print(out, flush=True)
    return out


# --- the jax_privacy subject (issue 46, h12): one subject per case, its jitted blocks compiled once for all seeds
JN, JB, JT = 1000, 100, 10


def _noise_each(sums, privatize):
    """A hand-written accumulation that noises every physical batch (jax_privacy leaves accumulation to the user)."""
    total = privatize(sums[0])
    for part in sums[1:]:
        total = total + privatize(part)
    return total


def _jax_cases() -> dict:
    from jax_privacy import accounting, batch_selection, noise_addition

    from dplens.integrations.jax_privacy_step import batch_selection_sampler, jax_privacy_step

    def step(stddev=SIGMA * C, *, accounted_batch=JB, physical=None, accumulate=None, **options):
        return jax_privacy_step(
            lambda key: noise_addition.gaussian_privatizer(stddev=stddev, prng_key=key),
            clipped_grad_options={"l2_clip_norm": C, **options},
            normalise=JB,
            dp_params=accounting.DpParams(
                noise_multipliers=SIGMA, num_samples=JN, batch_size=accounted_batch, delta=DELTA
            ),
            max_physical_batch_size=physical,
            accumulate=accumulate,
        )

    poisson = batch_selection_sampler(batch_selection.CyclicPoissonSampling(sampling_prob=JB / JN, iterations=10**6))
    bins = batch_selection_sampler(batch_selection.BallsInBinsSampling(cycle_length=JN // JB, iterations=10**6))
    correct = step()
    return {  # name: (subject, sampler, the check that must say VIOLATION; None: a control)
        "control: jax_privacy clipped_grad + gaussian_privatizer, CyclicPoissonSampling": (correct, poisson, None),
        "control: jax_privacy microbatched (microbatch_size 25)": (step(microbatch_size=25), poisson, None),
        "jax_privacy noise for the mean added to the sum (stddev sigma C / B)": (
            step(SIGMA * C / JB),
            poisson,
            "noise_std",
        ),
        "jax_privacy clipping off (l2_clip_norm inf)": (step(l2_clip_norm=float("inf")), poisson, "clipping"),
        "jax_privacy nan_safe=False": (step(nan_safe=False), poisson, "non_finite_rows"),
        "jax_privacy BallsInBinsSampling declared Poisson": (correct, bins, "sampling_law"),
        "jax_privacy accounted at the physical batch size (25)": (
            step(accounted_batch=25, physical=25),
            poisson,
            "gradient_accumulation",
        ),
        "jax_privacy noise added at every physical batch (25): DEVIATION": (
            step(physical=25, accumulate=_noise_each),
            poisson,
            "DEVIATION:gradient_accumulation",
        ),
        "jax_privacy clipped_grad(normalize_by=B), noise for the sum (issue 383): DEVIATION": (
            step(normalize_by=JB),
            poisson,
            "DEVIATION:noise_std",
        ),
    }


def _jax_seeds(count: int, only: str | None, trials: int) -> dict:
    out = {}
    for name, (subject, sampler, check) in _jax_cases().items():
        if only is not None and not any(part in name for part in only.split(",")):
            continue
        started, rows = time.perf_counter(), []
        for seed in range(count):
            r = check_dp_sgd(
                subject,
                sampler="poisson",
                sampler_function=sampler,
                noise_multiplier=SIGMA,
                max_grad_norm=C,
                batch_size=JB,
                dataset_size=JN,
                steps=JT,
                delta=DELTA,
                trials=trials,
                seed=seed,
            )
            rows.append(_verdicts(r))
            print(name, "seed", seed, rows[-1], f"{time.perf_counter() - started:.0f} s", flush=True)
        if check is None:
            summary = _control_summary(rows, count)
        elif check.startswith("DEVIATION:"):
            named = check.split(":")[1]
            summary = {
                "named_deviation": sum(row.get(named) == "DEVIATION" for row in rows),
                "any_violation": sum(row["verdict"] == "VIOLATION" for row in rows),
            }
        else:
            summary = {"named_violation": sum(row.get(check) == "VIOLATION" for row in rows)}
        out[name] = {"seeds": count, "n": JN, "b": JB, "steps": JT, "trials_per_side": trials, **summary}
        out[name]["seconds"] = time.perf_counter() - started
        print(name, out[name], flush=True)
    return out


def _dirac_ratio(seeds: int, trials: int, workers: int, replicates: int) -> dict:
    from dplens.auditing import bounds, games
    from dplens.auditing.canaries import DiracCanaryGame
    from dplens.auditing.training import audit, harness

    n, b, steps = DIGITS_N, DIGITS_B, 28
    pilot = max(100, trials // 5)
    game = DiracCanaryGame(noise_multiplier=SIGMA, sampling_rate=b / n, steps=steps)
    rows = []
    for seed in range(seeds):
        started = time.perf_counter()
        r = check_dp_sgd(
            reference_step(SIGMA, C, b),
            sampler="poisson",
            noise_multiplier=SIGMA,
            max_grad_norm=C,
            batch_size=b,
            dataset_size=n,
            steps=steps,
            delta=DELTA,
            trials=trials,
            workers=workers,
            seed=seed,
        )
        seconds = time.perf_counter() - started
        share = r.audit.significance
        g = games.audit(
            game, trials=trials, delta=DELTA, claimed_epsilon=r.claimed_epsilon, confidence=1 - share, seed=seed,
            pilot_trials=pilot, estimates=False,
        )  # fmt: skip
        rows.append(
            {
                "seed": seed,
                "harness": r.audit.epsilon_lower_bound,
                "game": g.epsilon_lower_bound,
                "ratio": r.audit.epsilon_lower_bound / g.epsilon_lower_bound if g.epsilon_lower_bound > 0 else None,
                "significance": share,
                "harness_seconds": seconds,
                "operating_point": r.audit.bound,
            }
        )
        print(
            rows[-1]["seed"], rows[-1]["harness"], rows[-1]["game"], rows[-1]["ratio"], f"{seconds:.0f} s", flush=True
        )
    share = rows[0]["significance"] if rows else 0.05 / 8
    statistic = harness.Statistic(construction=harness.VARIABLE, sigma=SIGMA, q=b / n)
    mine, theirs = [], []
    for r in range(replicates):  # the selection on the game's draws: the reference step's target coordinate
        rng = np.random.default_rng([46, r])
        draws = [
            np.stack([statistic.scores(game.sample(side, size, rng))[0] for side in (True, False)])
            for size in (pilot, trials)
        ]
        chosen = audit.select_threshold(draws[0], trials=trials, delta=DELTA, significance=share, exact=True)
        grid = np.array([chosen.threshold])
        counts = audit._counts(grid, draws[1][0], draws[1][1])
        mine.append(
            bounds.evaluate(
                counts, delta=DELTA, significance=share, strategy=bounds.FixedThreshold(chosen.threshold)
            ).epsilon
        )
        theirs.append(
            games.audit(
                game, trials=trials, delta=DELTA, claimed_epsilon=1.0, confidence=1 - share, seed=10**6 + r,
                pilot_trials=pilot, estimates=False,
            ).epsilon_lower_bound
        )  # fmt: skip
    ratios = [row["ratio"] for row in rows if row["ratio"] is not None]
    summary = {
        "n": n,
        "b": b,
        "steps": steps,
        "trials_per_side": trials,
        "pilot_per_side": pilot,
        "seeds": rows,
        "mean_harness": float(np.mean([row["harness"] for row in rows])) if rows else None,
        "mean_game": float(np.mean([row["game"] for row in rows])) if rows else None,
        "mean_of_ratios": float(np.mean(ratios)) if ratios else None,
        "seeds_at_or_above_0.95": sum(ratio >= 0.95 for ratio in ratios),
        "replicates": replicates,
    }
    if replicates:
        summary |= {
            "selection_on_game_draws_mean": float(np.mean(mine)),
            "selection_on_game_draws_sd": float(np.std(mine)),
            "game_audit_mean": float(np.mean(theirs)),
            "game_audit_sd": float(np.std(theirs)),
            "ratio_of_means": float(np.mean(mine) / np.mean(theirs)),
        }
    print({k: v for k, v in summary.items() if k != "seeds"}, flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "mode",
        choices=(
            "gap",
            "model-based",
            "seeds",
            "opacus-seeds",
            "opacus-throughput",
            "opacus-gap",
            "opacus-floor",
            "jax-seeds",
            "dirac-ratio",
        ),
    )
    parser.add_argument("--trials", type=int)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--only", help="seeds: the cases whose names contain one of these comma-separated words")
    parser.add_argument("--tag", default="only", help="the results file's suffix (given, or with --only)")
    parser.add_argument("--replicates", type=int, default=200, help="dirac-ratio: draws of the selection study")
    parser.add_argument("--epochs", type=int, default=1, help="opacus-throughput, opacus-gap: epochs of the run")
    parser.add_argument("--sigma", type=float, default=SIGMA, help="opacus-throughput, opacus-gap: σ of the run")
    parser.add_argument("--seed", type=int, default=0, help="opacus-throughput, opacus-gap: the check's seed")
    args = parser.parse_args()
    if args.mode == "gap":
        result = _one(args.trials or 10000, args.workers, shuffled, "shuffled loader declared Poisson")
    elif args.mode == "model-based":
        result = _one(args.trials or 2000, args.workers, None, "reference step, Poisson")
    elif args.mode == "seeds":
        result = _seeds(args.seeds, args.only)
    elif args.mode == "opacus-floor":
        result = _opacus_floor(args.trials or 3000)
    elif args.mode == "opacus-seeds":
        result = _opacus_seeds(args.seeds, args.only, args.trials or 100)
    elif args.mode == "jax-seeds":
        result = _jax_seeds(args.seeds, args.only, args.trials or 100)
    elif args.mode == "dirac-ratio":
        result = _dirac_ratio(args.seeds, args.trials or 10000, args.workers, args.replicates)
    else:
        loader = "poisson" if args.mode == "opacus-throughput" else "shuffle"
        result = _opacus_one(args.trials or 10000, args.workers, loader, args.epochs, args.sigma, args.seed)
    result = {"machine": platform.platform(), "python": sys.version.split()[0], "mode": args.mode, "data": result}
    suffix = "" if args.only is None and args.tag == "only" else f"_{args.tag}"
    (HERE / f"results_check_dp_sgd_{args.mode}{suffix}.json").write_text(
        json.dumps(result, indent=1, default=str) + "\n"
    )


if __name__ == "__main__":
    main()
