"""The assumption-free audit of the training that ran, and the model-based bound beside it.

**Audit** (valid, no assumption on the implementation): counted trainings of each side (D: the target canary
present; D′: zeroed), the score of :class:`~dplens.auditing.training.harness.Statistic`, one threshold and direction
chosen on pilot trainings that are not counted, and one-sided Clopper–Pearson bounds on the two error rates
(:func:`dplens.auditing.bounds.evaluate` with :class:`~dplens.auditing.bounds.Split`: Jagielski, Ullman, Oprea 2020;
Kairouz, Oh, Viswanath 2015, Theorem 2.1). The bound holds with probability ≥ 1 − α_audit whatever the code does.

**Model-based** (valid only under its stated assumption): an upper confidence bound σ⁺ on the effective noise
multiplier from the coordinates no record touches (Σx²/σ² ~ χ²(n) for Gaussian noise), a lower confidence bound q⁻
on the sampling rate from the canaries' coordinates (their mean is q; normal approximation with variance
q(1 − q) + σ⁺², n in the millions), α_mb split between them, then the accountant's certified lower end at (σ⁺, q⁻):
the two-run recipe of Nasr et al. (USENIX Security 2023) made valid under the assumption that every step is the
declared subsampled Gaussian mechanism with fresh noise and the declared normalisation and clip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from dplens.auditing import bounds
from dplens.auditing.runner import ChunkPlan, pilot_seed, run_chunks
from dplens.auditing.training import harness
from dplens.auditing.training.declared import Declaration

__all__ = ["AuditResult", "ModelBasedBound", "TrainingRuns", "audit_bound", "model_based_bound", "run_trainings"]

_GRID = 96


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingRuns:
    """The counted trainings' statistics (side × training × :data:`harness.COLUMNS`) and the pilot's scores."""

    counted: np.ndarray
    pilot: np.ndarray
    statistic: harness.Statistic
    layout: harness.Layout


def _unpack(chunks: dict[int, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([chunks[i].view(np.float64).reshape(shape[0], -1, shape[2]) for i in sorted(chunks)], axis=1)


class _Packed:
    """The training task with its float statistics carried through the runner's integer channel bit for bit."""

    def __init__(self, task: harness.TrainingTask) -> None:
        self.task = task

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        return np.ascontiguousarray(self.task(index, trials, seed)).view(np.int64)


def run_trainings(
    subject,
    source,
    decl: Declaration,
    *,
    trials: int,
    pilot: int,
    seed: int,
    workers: int,
    scheduler: Any = None,
    progress: bool = False,
) -> TrainingRuns:
    """Pilot (not counted) then counted trainings, through the runner (process pool or Dask)."""
    design = pilot_seed(seed)
    sampler_seed, layout_seed, pilot_runs = design.spawn(3)
    statistic = harness.decide(source, decl, sampler_seed)
    layout = harness.make_layout(decl.dataset_size, statistic.construction, np.random.default_rng(layout_seed))
    task = _Packed(harness.TrainingTask(subject, source, decl, layout, statistic))
    shape = (2, -1, len(harness.COLUMNS))
    size = max(1, min(200, math.ceil(trials / max(1, 4 * workers))))
    pilot_done = run_chunks(
        task,
        ChunkPlan(pilot, size),
        seed=int(pilot_runs.generate_state(1)[0]),
        workers=workers,
        scheduler=scheduler,
        progress=progress,
        description="check-dp-sgd pilot",
    )
    counted = run_chunks(
        task,
        ChunkPlan(trials, size),
        seed=seed,
        workers=workers,
        scheduler=scheduler,
        progress=progress,
        description="check-dp-sgd",
    )
    return TrainingRuns(
        counted=_unpack(counted, shape), pilot=_unpack(pilot_done, shape), statistic=statistic, layout=layout
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditResult:
    """The assumption-free audit: a valid lower bound on ε, against the claim."""

    epsilon_lower_bound: float
    claimed_epsilon: float
    verdict: str
    significance: float
    trials: int
    pilot_trials: int
    statistic: str
    construction: str
    relation: str
    observe: str
    ceiling: float
    bound: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "claimed_epsilon": self.claimed_epsilon,
            "verdict": self.verdict,
            "kind": "assumption-free",
            "significance": self.significance,
            "trials_per_side": self.trials,
            "pilot_trials_per_side": self.pilot_trials,
            "statistic": self.statistic,
            "construction": self.construction,
            "relation_played": self.relation,
            "observe": self.observe,
            "measurability_ceiling": self.ceiling,
            "operating_point": self.bound,
        }


def _counts(grid: np.ndarray, positives: np.ndarray, negatives: np.ndarray) -> bounds.RateCounts:
    k = grid.size + 1
    pos = np.bincount(np.searchsorted(grid, positives, side="right"), minlength=k)
    neg = np.bincount(np.searchsorted(grid, negatives, side="right"), minlength=k)
    return bounds.RateCounts(grid, pos, neg)


def audit_bound(runs: TrainingRuns, decl: Declaration, *, claimed: float, significance: float, observe: str):
    """The valid ε lower bound of the counted trainings (threshold and direction from the pilot)."""
    column = 0 if observe == "every" else 1
    pilot, counted = runs.pilot[:, :, column], runs.counted[:, :, column]
    grid = np.unique(np.quantile(pilot.ravel(), np.linspace(0.0, 1.0, _GRID + 2)[1:-1]))
    bound = bounds.evaluate(
        _counts(grid, counted[0], counted[1]),
        delta=decl.delta,
        significance=significance,
        strategy=bounds.Split(),
        selection=_counts(grid, pilot[0], pilot[1]),
    )
    epsilon = bound.epsilon
    trials = counted.shape[1]
    return AuditResult(
        epsilon_lower_bound=float(epsilon),
        claimed_epsilon=claimed,
        verdict="VIOLATION" if epsilon > claimed else "PASS",
        significance=significance,
        trials=trials,
        pilot_trials=pilot.shape[1],
        statistic=runs.statistic.name(observe),
        construction=runs.statistic.construction,
        relation="zero_out (the target canary's gradient zeroed in D')",
        observe=observe,
        ceiling=bounds.measurability_ceiling(trials, significance, delta=decl.delta),
        bound={"direction": bound.direction, **bound.operating_point()},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelBasedBound:
    """The model-based lower bound: valid only under ``assumptions``; never called assumption-free."""

    epsilon_lower_bound: float
    claimed_epsilon: float
    verdict: str
    noise_multiplier_upper: float
    sampling_rate_lower: float | None
    significance: float
    assumptions: str
    observations: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "claimed_epsilon": self.claimed_epsilon,
            "verdict": self.verdict,
            "kind": "model-based",
            "noise_multiplier_upper": self.noise_multiplier_upper,
            "sampling_rate_lower": self.sampling_rate_lower,
            "significance": self.significance,
            "assumptions": self.assumptions,
            "observations": self.observations,
        }


def _sigma_upper(runs: TrainingRuns, decl: Declaration, significance: float) -> tuple[float, int]:
    n = int(runs.counted.shape[0] * runs.counted.shape[1] * decl.steps * runs.layout.free)
    squares = float(runs.counted[:, :, 3].sum())
    return math.sqrt(squares / stats.chi2.ppf(significance, n)), n


def _q_lower(runs: TrainingRuns, decl: Declaration, sigma_upper: float, significance: float) -> tuple[float, int]:
    n = int(runs.counted.shape[0] * runs.counted.shape[1] * decl.steps * runs.layout.m)
    mean = float(runs.counted[:, :, 2].sum()) / n
    spread = math.sqrt((min(max(mean, 0.0), 1.0) * (1 - min(max(mean, 0.0), 1.0)) + sigma_upper**2) / n)
    return min(1.0, max(0.0, mean - stats.norm.isf(significance) * spread)), n


def model_based_bound(runs: TrainingRuns, decl: Declaration, *, claimed: float, significance: float):
    """ε at (σ⁺, q⁻) from the accountant's certified lower end (Poisson), or the declared sampler's lower end."""
    from dplens.accountant import events as ev

    poisson = decl.sampler == "poisson" and runs.layout.m > 0
    sigma_alpha = significance / 2 if poisson else significance
    sigma_upper, n_free = _sigma_upper(runs, decl, sigma_alpha)
    observations = {"noise_draws": n_free}
    q_lower = None
    if poisson:
        q_lower, observations["canary_draws"] = _q_lower(runs, decl, sigma_upper, significance / 2)
        if q_lower <= 0.0:
            epsilon = 0.0
        else:
            epsilon = _poisson_lower(
                ev.PoissonSampled(sampling_rate=q_lower, event=ev.Gaussian(noise_multiplier=sigma_upper)),
                decl.steps,
                decl.delta,
            )
        family = (
            f"every step is the Poisson-subsampled Gaussian mechanism (unknown rate q >= {q_lower:.6g}, noise "
            f"multiplier <= {sigma_upper:.6g}) with fresh noise, per-sample clipping at C and the declared "
            "normalisation"
        )
    else:
        privacy = decl.claimed() if sigma_upper == decl.noise_multiplier else _declared_at(decl, sigma_upper)
        epsilon = privacy.epsilon_lower or 0.0
        rate = (
            "at the declared rate q = B/N (not measured: the batches had fixed sizes, so no canaries were placed)"
            if decl.sampler == "poisson"
            else "(its rate is fixed by N and B)"
        )
        family = (
            f"every step adds fresh Gaussian noise (noise multiplier <= {sigma_upper:.6g}) to the per-sample "
            f"clipped sum with the declared normalisation, and the batches follow the declared {decl.sampler!r} "
            f"sampler {rate}"
        )
    epsilon = max(0.0, float(epsilon))
    return ModelBasedBound(
        epsilon_lower_bound=epsilon,
        claimed_epsilon=claimed,
        verdict="VIOLATION" if epsilon > claimed else "PASS",
        noise_multiplier_upper=sigma_upper,
        sampling_rate_lower=None if q_lower is None else float(q_lower),
        significance=significance,
        assumptions=f"model-based: valid only if {family}; it says nothing about bugs outside that family (the checks "
        "and the assumption-free audit cover those)",
        observations=observations,
    )


def _declared_at(decl: Declaration, sigma: float):
    from dplens.accountant import dp_sgd

    return dp_sgd.dp_sgd_epsilon(
        dataset_size=decl.dataset_size,
        batch_size=decl.batch_size,
        epochs=decl.run().epochs,
        noise_multiplier=sigma,
        delta=decl.delta,
        sampling=decl.sampler,
        neighboring=decl.neighboring,
    )


def _poisson_lower(step: Any, steps: int, delta: float) -> float:
    """The certified lower end of the PLD bracket of ``steps`` compositions of ``step``; where the losses leave the
    engine's range, that of fewer steps (still a lower bound: dropping releases is post-processing)."""
    from dplens.accountant.compose import Accountant
    from dplens.accountant.pld import PldOutOfRangeError

    for count in sorted({steps, max(1, steps // 10), 1}, reverse=True):
        try:
            result = Accountant().compose(step, count=count).epsilon_result(delta, method="pld")
        except PldOutOfRangeError:
            continue
        return result.epsilon_lower if result.epsilon_lower is not None else 0.0
    return 0.0
