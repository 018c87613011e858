"""The assumption-free audit of the training that ran, and the model-based bound beside it.

**Audit** (valid, no assumption on the implementation): counted trainings of each side (D: the target canary
present; D′: zeroed), the score of :class:`~dplens.auditing.training.harness.Statistic`, one threshold chosen on
pilot trainings that are not counted (:func:`select_threshold`: a candidate between every two pilot scores, each
judged by the bound it predicts at the counted size), and one-sided Clopper–Pearson bounds on the two error rates
at that one threshold (:func:`dplens.auditing.bounds.evaluate` with :class:`~dplens.auditing.bounds.FixedThreshold`:
Jagielski, Ullman, Oprea 2020; Kairouz, Oh, Viswanath 2015, Theorem 2.1). The bound holds with probability
≥ 1 − α_audit whatever the code does: the pilot is independent of the counted trainings.

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
from scipy import special, stats

from dplens.auditing import bounds
from dplens.auditing.runner import ChunkPlan, pilot_seed, run_chunks
from dplens.auditing.training import harness
from dplens.auditing.training.declared import Declaration

__all__ = [
    "AuditResult",
    "ModelBasedBound",
    "Selection",
    "TrainingRuns",
    "audit_bound",
    "model_based_bound",
    "run_trainings",
    "select_threshold",
]

#: The pooled pilot scores the region a candidate's bound divides by must hold, at most a twentieth of them: a
#: threshold further out is predicted from too few scores, and the largest of thousands of noisy predictions would be
#: chosen for its noise (on the DiracCanaryGame's draws at N = 1792, B = 64, T = 28, 2·10³ pilot and 10⁴ counted per
#: side, 200 draws: a mean bound of 0.35 at 150 with the importance-weighted rates, 0.33 at 250, 0.31 at 30; 0.31 at
#: 150 with the counts' rates, 0.27 at 30; the old grid of bulk quantiles: 0.27; the final model's sum, by its
#: counts: 0.17 at 150, the old grid 0.15).
_SUPPORT = 150
#: Below this calibration p-value the score is not taken as the exact likelihood ratio (:func:`_calibration`).
_CALIBRATION = 0.01


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """The threshold the pilot chose, the bound it predicted at the counted size, and how it estimated the rates."""

    threshold: float
    predicted_epsilon: float
    rates: str

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "predicted_epsilon": self.predicted_epsilon, "rates": self.rates}


def select_threshold(pilot: np.ndarray, *, trials: int, delta: float, significance: float, exact: bool) -> Selection:
    """The threshold of the test "score ≥ t ⇒ D" whose bound, predicted from the pilot at ``trials`` counted draws
    per side, is largest; ``pilot`` holds the pilot's scores, (2, n): D then D′.

    The candidates lie midway between consecutive pooled pilot scores, so the tails are as dense as the bulk and a
    separated tail is cut in its gap, not at its first pilot score. A candidate's rates are the pilot's, projected
    to the counted size (rounded counts of ``trials``) and bounded there by Clopper–Pearson at α/2 each, as the
    counted run will be (the projection of :func:`dplens.auditing.bounds.focused_weights`): at the pilot's own size
    the bounds of the tails are wide and a bulk threshold wins, although the counted run is larger. With ``exact``
    (the score is the exact log-likelihood ratio L = log dP_D/dP_D′ of the declared training) and a pilot
    calibrated as that ratio (:func:`_calibration`), both pilot samples estimate both rates, dP_D′ = e^{−L} dP_D
    (multiple importance sampling with the balance heuristic, Veach & Guibas 1995, as
    :func:`dplens.auditing.games.audit` places its focus): FPR(t) = Σ_{L_i ≥ t} σ(−L_i)/n and
    FNR(t) = Σ_{L_i < t} σ(L_i)/n over the 2n pooled scores, so the far tail of M(D′) is seen through the D draws
    there; else each rate is its side's count. Only candidates whose bounded region (above the threshold for D
    against D′, below it for D′ against D) holds enough pooled pilot scores (``_SUPPORT``) are chosen.

    Only the pilot is read, so the bound on the counted trainings at the chosen threshold is valid whatever the
    choice — a score that is not the exact ratio (a buggy training) only misplaces it.
    """
    finite = bool(np.all(np.isfinite(pilot)))
    pos, neg = np.sort(pilot[0]), np.sort(pilot[1])
    n = pos.size
    pooled = np.sort(np.concatenate([pos, neg]))
    scores = np.unique(pooled[np.isfinite(pooled)])
    if scores.size == 0:
        return Selection(threshold=0.0, predicted_epsilon=0.0, rates="none (no finite pilot score)")
    candidates = (scores[:-1] + scores[1:]) / 2 if scores.size > 1 else scores  # in the gaps: where a tail starts
    below = np.searchsorted(pooled, candidates, side="left")  # pooled pilot scores below each candidate
    above = pooled.size - below
    calibration = _calibration(pos, neg) if exact and finite else None
    if calibration is not None and calibration >= _CALIBRATION:
        fnr = np.concatenate([[0.0], np.cumsum(special.expit(pooled))])[below] / n
        tail = np.cumsum(special.expit(-pooled)[::-1])[::-1]  # summed from the top: tiny tails keep their precision
        fpr = np.concatenate([tail, [0.0]])[below] / n
        rates = "importance-weighted pilot rates (the score is the exact likelihood ratio), projected to the counts"
    else:
        fnr = np.searchsorted(pos, candidates, side="left") / n
        fpr = (n - np.searchsorted(neg, candidates, side="left")) / n
        rates = "the pilot's counts, projected to the counts"
        if calibration is not None:
            rates += (
                f" (the score is not the exact likelihood ratio of this training: calibration p = {calibration:.2g})"
            )
    fnr_u = bounds.clopper_pearson_upper(
        np.round(np.clip(fnr, 0, 1) * trials).astype(np.int64), trials, significance / 2
    )
    fpr_u = bounds.clopper_pearson_upper(
        np.round(np.clip(fpr, 0, 1) * trials).astype(np.int64), trials, significance / 2
    )
    forward, reverse = bounds.epsilon_lower_bounds(fpr_u, fnr_u, delta)
    support = min(_SUPPORT, max(5, pooled.size // 20))
    best = np.maximum(np.where(above >= support, forward, -np.inf), np.where(below >= support, reverse, -np.inf))
    if not np.isfinite(best).any():
        return Selection(threshold=float(np.median(candidates)), predicted_epsilon=0.0, rates=rates)
    index = int(np.argmax(best))
    return Selection(threshold=float(candidates[index]), predicted_epsilon=max(0.0, float(best[index])), rates=rates)


def _calibration(pos: np.ndarray, neg: np.ndarray) -> float:
    """The p-value of the pilot's calibration test of L as log dP_D/dP_D′: with n draws per side, a pooled score
    came from D with probability σ(L) if L is the exact ratio. Over bins of equal pooled count, the D draws in each
    against Σσ(L_i) (variance Σσ(1 − σ)), summed as a χ² with as many degrees of freedom as bins. A training that
    does not run as declared (less noise, another sampler) gives a score that is not its ratio, whose importance
    weights would misplace the threshold; its pilot fails this test and its own counts are used."""
    scores = np.concatenate([pos, neg])
    order = np.argsort(scores, kind="stable")
    from_d = (np.arange(scores.size) < pos.size)[order].astype(float)
    p = special.expit(scores[order])
    bins = max(2, min(20, scores.size // 25))
    chi2 = 0.0
    for part in np.array_split(np.arange(scores.size), bins):
        variance = float(np.sum(p[part] * (1 - p[part])))
        if variance > 0:
            chi2 += (float(from_d[part].sum()) - float(p[part].sum())) ** 2 / variance
    return float(stats.chi2.sf(chi2, bins))


def audit_bound(runs: TrainingRuns, decl: Declaration, *, claimed: float, significance: float, observe: str):
    """The valid ε lower bound of the counted trainings at the threshold the pilot chose (:func:`select_threshold`;
    both directions at it, each valid on the same two rate bounds)."""
    column = 0 if observe == "every" else 1
    pilot, counted = runs.pilot[:, :, column], runs.counted[:, :, column]
    chosen = select_threshold(
        pilot,
        trials=counted.shape[1],
        delta=decl.delta,
        significance=significance,
        exact=runs.statistic.exact_ratio(observe),
    )
    grid = np.array([chosen.threshold])
    bound = bounds.evaluate(
        _counts(grid, counted[0], counted[1]),
        delta=decl.delta,
        significance=significance,
        strategy=bounds.FixedThreshold(chosen.threshold),
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
        bound={"direction": bound.direction, **bound.operating_point(), "selection": chosen.to_dict()},
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
