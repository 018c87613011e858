"""The distinguishing game: a Monte Carlo likelihood-ratio attack on M(D) against M(D′).

N trials per side are drawn in vectorised chunks (:mod:`dplens.auditing.runner`), scored — by the mechanism's exact
log-likelihood ratio where it provides one (the Neyman–Pearson optimal test), else by a black-box score — and
binned on a threshold grid fixed before the data are seen (placed from an independent pilot run). The binned
counts give a valid (1 − α) lower bound on ε (:mod:`dplens.auditing.bounds`; Jagielski, Ullman, Oprea 2020), the
labelled GDP and raw-count estimates, the measurability ceiling and a verdict against the claimed ε.

Validity rests on three things, each enforced here: the thresholds and the score are fixed before the counted
draws (pilot and training draws come from their own seed streams and are never counted); every rate bound is
one-sided Clopper–Pearson at α/(2K) over the K thresholds and both rates (a union bound covering both
directions); and the counted draws of the two sides come from independent streams.
"""

from __future__ import annotations

import enum
import hashlib
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

from dplens._numbers import finite_or_none as _finite
from dplens.auditing import bounds as bd
from dplens.auditing import runner
from dplens.auditing.bounds import check_confidence as _check_confidence
from dplens.auditing.bounds import check_int as _check_int
from dplens.auditing.host import host_value
from dplens.mechanisms.base import NeighbouringPair, output_size

__all__ = [
    "AuditResult",
    "BlackBoxScore",
    "ExactLikelihoodRatio",
    "LearnedScore",
    "Verdict",
    "audit",
    "audit_spec",
]

RESULT_FORMAT_VERSION = 1
DEFAULT_PILOT_TRIALS = 10_000
# Beyond 10^6 trials the pilot grows to 1 % of them: the best (ε, δ) threshold moves into tails that the pilot must
# reach to place the focus there (N = 1e7 Gaussian σ = 1, 10 seeds: mean ratio 0.83 → 0.87), at 1 % more draws.
_PILOT_FRACTION = 100
_MAX_CHUNK_VALUES = 1 << 21  # output values drawn per side per chunk (memory, and enough chunks to parallelise)
_MIN_CHUNKS = 8  # so the bound-vs-trials trajectory and a worker pool have something to work with
# At most this many chunks: the per-chunk counts (a few kB each) are all kept, so beyond 1024 · 2²¹ ≈ 2·10⁹ trials
# the chunks grow instead (a chunk draws in cache-sized batches whatever its size). Memory stays flat in the trials.
_MAX_CHUNKS = 1024
# Within a chunk, draw, score and bin in batches of about this many output values: the sample, the score and the
# binning pass over arrays that stay in the core's cache instead of streaming ~10 MB temporaries through memory
# (1.3–1.7× faster per chunk for Gaussian and Laplace, identical counts; less memory traffic for a pool). At least
# _MIN_BATCH_TRIALS trials per call bounds the per-call overhead of mechanisms with a fixed cost per sample().
_BATCH_VALUES = 1 << 15
_MIN_BATCH_TRIALS = 1024
_MAX_BATCH_VALUES = 1 << 22  # 32 MB of float64 per side per call, whatever the output size
_FOCUS_MIN_SUPPORT = 15  # pooled pilot scores a focused threshold's bounded region must hold
_KEPT_PILOT_SCORES = 1 << 18  # a pilot up to this size per side keeps its scores (2 MB); a larger one is streamed


class Verdict(enum.Enum):
    """The outcome of an audit against a claimed ε: VIOLATION when the valid lower bound exceeds the claim,
    INCONCLUSIVE when no audit of that size could have shown a violation (the ceiling is below the claim).

    Example:
        >>> verdict_for(2.5, 10.0, 1.0, 0.95)[0], verdict_for(0.5, 10.0, 1.0, 0.95)[0]
        (<Verdict.VIOLATION: 'VIOLATION'>, <Verdict.CONSISTENT: 'CONSISTENT'>)
    """

    CONSISTENT = "CONSISTENT"
    VIOLATION = "VIOLATION"
    INCONCLUSIVE = "INCONCLUSIVE"


# --------------------------------------------------------------------------------------------
# Scores (options as types)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExactLikelihoodRatio:
    """Score = log p_D(o) − log p_D′(o) from the mechanism (the optimal test, Neyman & Pearson 1933)."""

    name: str = "exact log-likelihood ratio"


@dataclass(frozen=True, slots=True)
class BlackBoxScore:
    """Score = ``function(outputs)``, higher meaning "drawn from M(D)"; must be picklable for pools and Dask."""

    function: Callable[[Any], np.ndarray]
    name: str = "black-box score"


@dataclass(frozen=True, slots=True)
class LearnedScore:
    """A logistic-regression score on the outputs and their squares, fitted on ``training_trials`` held-out draws
    per side from their own seed stream (never counted), then frozen (the DP-Sniper recipe, Bichsel et al. 2021)."""

    training_trials: int = 20_000
    ridge: float = 1e-3
    name: str = "black-box: logistic regression on (o, o²), trained on held-out draws"


def _features(outputs: Any) -> np.ndarray:
    parts = outputs if isinstance(outputs, tuple) else (outputs,)
    n = np.asarray(parts[0]).shape[0]
    flat = np.concatenate([np.asarray(p, dtype=float).reshape(n, -1) for p in parts], axis=1)
    return np.concatenate([flat, flat * flat], axis=1)


@dataclass(frozen=True, slots=True)
class _LinearScore:
    weights: np.ndarray
    centre: np.ndarray
    scale: np.ndarray

    def __call__(self, outputs: Any) -> np.ndarray:
        return ((_features(outputs) - self.centre) / self.scale) @ self.weights


def _fit_logistic(positive: np.ndarray, negative: np.ndarray, ridge: float) -> _LinearScore:
    """Ridge logistic regression by Newton's method (a few dozen features at most)."""
    x = np.concatenate([positive, negative])
    y = np.concatenate([np.ones(len(positive)), np.zeros(len(negative))])
    centre, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = np.concatenate([np.ones((len(x), 1)), (x - centre) / scale], axis=1)
    w = np.zeros(z.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        gradient = z.T @ (p - y) + ridge * len(x) * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + ridge * len(x) * np.eye(z.shape[1])
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-9:
            break
    return _LinearScore(weights=w[1:], centre=centre, scale=scale)


@dataclass(frozen=True, slots=True)
class _Scorer:
    """The frozen score a chunk applies (exact LLR of the mechanism, or a fitted / user function)."""

    function: Callable[[Any], np.ndarray] | None = None

    def __call__(self, mechanism: Any, outputs: Any, pair: NeighbouringPair) -> np.ndarray:
        if self.function is None:
            scores = mechanism.log_likelihood_ratio(outputs, pair.data, pair.neighbour)
        else:
            scores = host_value(self.function(outputs))  # a score computed in torch / JAX / CuPy: to host memory
        scores = np.asarray(scores, dtype=float).reshape(-1)
        if np.isnan(scores).any():
            raise ValueError("the score returned NaN for some outputs")
        return scores


# --------------------------------------------------------------------------------------------
# The chunk task
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UniformGrid:
    """``size`` thresholds lower, lower + step, …; binning is O(n) (no sort)."""

    lower: float
    step: float
    size: int

    @property
    def thresholds(self) -> np.ndarray:
        return self.lower + self.step * np.arange(self.size)

    def index(self, scores: np.ndarray) -> np.ndarray:
        """The bin j of each score: [t_{j−1}, t_j) for j = 0..size (t_{−1} = −∞, t_size = +∞)."""
        if self.size == 1 or self.step == 0:
            return (scores >= self.lower).astype(np.int64)
        position = np.floor((scores - self.lower) / self.step) + 1.0
        return np.clip(position, 0, self.size).astype(np.int64)

    def counts(self, scores: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """How many scores fall in each bin (or the sum of their ``weights``)."""
        return np.bincount(self.index(scores), weights=weights, minlength=self.size + 1)


def batch_trials(output_size: int) -> int:
    """Trials per ``sample()`` call for outputs of ``output_size`` values (the distinguishing and attribute games):
    about ``_BATCH_VALUES`` values, at least ``_MIN_BATCH_TRIALS`` trials, but never more than ``_MAX_BATCH_VALUES``
    values in one call (1024 trials of 10⁵ releases would be 800 MB)."""
    return max(1, min(max(_BATCH_VALUES // output_size, _MIN_BATCH_TRIALS), _MAX_BATCH_VALUES // output_size))


@dataclass(frozen=True, slots=True)
class _CountTask:
    """Counts of one chunk: each side draws from its own stream, in batches of ``batch`` trials."""

    mechanism: Any
    pair: NeighbouringPair
    scorer: _Scorer
    grid: UniformGrid
    batch: int = _BATCH_VALUES

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        counts = np.zeros((2, self.grid.size + 1), dtype=np.int64)
        for side, data in enumerate((self.pair.data, self.pair.neighbour)):
            rng = runner.side_rng(seed, side)
            for start in range(0, trials, self.batch):
                outputs = self.mechanism.sample(data, min(self.batch, trials - start), rng)
                counts[side] += self.grid.counts(self.scorer(self.mechanism, outputs, self.pair))
        return counts


# --------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectedBound:
    """The head of a two-sample audit's result: the bound, the test direction that gave it, the claim it is read
    against (the base of :class:`AuditResult` and :class:`~dplens.auditing.scores.ScoresAuditResult`)."""

    epsilon_lower_bound: float
    bound_direction: str
    epsilon_claimed: float
    delta: float
    confidence: float
    claim_source: str

    def bound_fields(self) -> dict[str, Any]:
        """The bound, its direction and the claim, JSON-ready, in the order the results write them."""
        return {
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "is_estimate": False,
            "bound_direction": self.bound_direction,
            **claim_fields(self),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditResult(DirectedBound):
    """The outcome of a distinguishing game (a bound, labelled estimates, the raw counts, the verdict).

    ``epsilon_lower_bound`` is a valid (``confidence``) lower bound on the ε of the audited pair at ``delta``;
    ``estimates`` are never bounds (each carries ``is_estimate`` and its assumption).

    Example:
        >>> from dplens.mechanisms.additive import GaussianMechanism
        >>> result = audit(GaussianMechanism(noise_multiplier=1.0), trials=20_000, delta=1e-5, claimed_epsilon=1.0)
        >>> result.verdict.value, result.epsilon_lower_bound > 1.0  # σ = 1 is far from ε = 1 at δ = 1e-5
        ('VIOLATION', True)
        >>> [e["name"] for e in result.estimates]  # labelled estimates, never bounds
        ['gdp', 'point']
        >>> AuditResult.from_dict(result.to_dict()).epsilon_lower_bound == result.epsilon_lower_bound
        True
    """

    trials: int
    method: str
    threshold_strategy: dict[str, Any]
    score: str
    mechanism: str
    pair: str
    operating_point: dict[str, Any]
    ceiling: float
    estimates: tuple[dict[str, Any], ...]
    empirical_trade_off: tuple[dict[str, float], ...]
    trajectory: tuple[dict[str, float], ...]
    verdict: Verdict
    verdict_reason: str
    seed: int
    chunks: int
    backend: str
    elapsed_seconds: float
    pilot_trials: int = 0
    counts: dict[str, list[int]] = field(default_factory=dict)
    format_version: int = RESULT_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (no ±inf: undefined values are None); stable keys, read by the report layer."""
        return {
            "format_version": self.format_version,
            **self.bound_fields(),
            "trials": self.trials,
            "method": self.method,
            "threshold_strategy": dict(self.threshold_strategy),
            "score": self.score,
            "mechanism": self.mechanism,
            "pair": self.pair,
            "operating_point": dict(self.operating_point),
            "ceiling": self.ceiling,
            "estimates": [
                {k: (_finite(v) if isinstance(v, float) else v) for k, v in e.items()} for e in self.estimates
            ],
            "empirical_trade_off": [dict(p) for p in self.empirical_trade_off],
            "trajectory": [dict(p) for p in self.trajectory],
            "verdict": self.verdict.value,
            "verdict_reason": self.verdict_reason,
            "seed": self.seed,
            "chunks": self.chunks,
            "backend": self.backend,
            "elapsed_seconds": self.elapsed_seconds,
            "pilot_trials": self.pilot_trials,
            "counts": {k: list(v) for k, v in self.counts.items()},
            "bound_region": bound_region(self.epsilon_lower_bound, self.delta),
            "claim_region": bound_region(self.epsilon_claimed, self.delta),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditResult:
        """Inverse of :meth:`to_dict` (a missing field raises ``ValueError`` naming it)."""
        convert = {"verdict": Verdict, "estimates": tuple, "empirical_trade_off": tuple, "trajectory": tuple}
        optional = ("format_version", "counts", "pilot_trials")
        kwargs = result_kwargs(cls, data, "audit result", convert, optional=optional)
        return cls(**kwargs, pilot_trials=data.get("pilot_trials", 0), counts=data.get("counts", {}))

    def __repr__(self) -> str:
        return (
            f"AuditResult({self.verdict.value}: epsilon >= {self.epsilon_lower_bound:.6g} [valid "
            f"{self.confidence:.0%} lower bound] vs claimed {self.epsilon_claimed:.6g} at delta={self.delta:g}, "
            f"{self.trials} trials per side)"
        )

    def _repr_html_(self) -> str:
        from dplens._display import html_table

        rows = [
            ("verdict", self.verdict.value),
            (f"ε lower bound (valid, {self.confidence:.0%})", self.epsilon_lower_bound),
            ("claimed ε", self.epsilon_claimed),
            ("δ", self.delta),
            ("trials per side", self.trials),
            ("measurability ceiling", self.ceiling),
        ]
        rows += [(f"ESTIMATE {e['name']} ε (not a bound)", e.get("epsilon")) for e in self.estimates]
        return html_table(f"Audit: {self.mechanism}", rows)


def infinite_if_none(value: Any) -> float:
    """A float read back from a result's JSON, where None stands for an infinite ε (the inverse of ``_finite``)."""
    return math.inf if value is None else float(value)


def check_result_dict(data: Any, what: str, version: int = RESULT_FORMAT_VERSION) -> None:
    """``data`` is the dict form of a result of format ``version`` (``what`` names it in the ``ValueError``)."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a dict; got {type(data).__name__}")
    if data.get("format_version", version) != version:
        raise ValueError(f"unsupported {what} format_version {data.get('format_version')!r}")


def result_kwargs(
    cls: type,
    data: Any,
    what: str,
    convert: dict[str, Callable[[Any], Any]],
    *,
    optional: tuple[str, ...] = (),
    version: int = RESULT_FORMAT_VERSION,
) -> dict[str, Any]:
    """The keyword arguments of the result dataclass ``cls`` from its ``to_dict()`` form ``data``: every field but
    ``optional`` as it stands, then each ``convert[name](data[name])`` in the table's order; a ``ValueError`` for a
    non-dict, another format version or a missing field (naming the first, in field order)."""
    check_result_dict(data, what, version)
    names = [name for name in cls.__dataclass_fields__ if name not in optional]
    missing = [name for name in names if name not in data]
    if missing:
        raise ValueError(f"{what} is missing required field {missing[0]!r}")
    kwargs = {name: data[name] for name in names}
    for name, to in convert.items():
        kwargs[name] = to(data[name])
    return kwargs


def claim_fields(result: Any) -> dict[str, Any]:
    """The claim audited and the level of the bound, JSON-ready, in the order every audit result writes them (after
    the bound)."""
    return {
        "epsilon_claimed": result.epsilon_claimed,
        "delta": result.delta,
        "confidence": result.confidence,
        "claim_source": result.claim_source,
    }


def bound_region(epsilon: float, delta: float, points: int = 200) -> list[dict[str, float]]:
    """Samples of the trade-off curve f_{ε,δ} (Dong, Roth, Su 2022 Prop. 2.5) at an audit's bound or claim: any
    mechanism whose (FPR, FNR) points fall below it is not (ε, δ)-DP; the report draws it (1 − f is the largest TPR
    the (ε, δ) statement allows at each FPR) next to the empirical points."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        return []
    from dplens.accountant import conversions

    alphas = np.concatenate([[0.0], np.geomspace(1e-7, 1.0, points)])
    betas = np.asarray(conversions.dp_trade_off(epsilon, delta, alphas), dtype=float)
    return [{"alpha": float(a), "beta": float(b)} for a, b in zip(alphas, betas, strict=True)]


def decide(
    found: float, ceiling: float, allowed: float, *, violation: str, inconclusive: str, consistent: str
) -> tuple[Verdict, str]:
    """The verdict rule of every audit, with the caller's wording of each verdict: VIOLATION if what the audit
    found exceeds what the claim allows; INCONCLUSIVE if even a perfect attack's result at this many trials (the
    ceiling) would not; else CONSISTENT."""
    if found > allowed:
        return Verdict.VIOLATION, violation
    if ceiling <= allowed:
        return Verdict.INCONCLUSIVE, inconclusive
    return Verdict.CONSISTENT, consistent


def verdict_for(bound: float, ceiling: float, claim: float, confidence: float) -> tuple[Verdict, str]:
    """VIOLATION if the bound exceeds the claim; INCONCLUSIVE if even a perfect attack could not; else CONSISTENT."""
    level = f"{confidence:.0%}"
    return decide(
        bound,
        ceiling,
        claim,
        violation=(
            f"With {level} confidence the mechanism's epsilon is at least {bound:.4g}, above the claimed "
            f"{claim:.4g}: the claim is violated."
        ),
        inconclusive=(
            f"With this many trials no audit could certify more than epsilon = {ceiling:.4g} "
            f"(the measurability ceiling), which does not exceed the claimed {claim:.4g}: a violation could not "
            "have been detected. Run more trials."
        ),
        consistent=(
            f"The audit found no evidence against the claim: the {level} lower bound {bound:.4g} does not exceed "
            f"the claimed epsilon {claim:.4g} (this supports, but cannot prove, the claim)."
        ),
    )


# --------------------------------------------------------------------------------------------
# The game
# --------------------------------------------------------------------------------------------


def default_chunk_size(trials: int, output_size: int) -> int:
    """Trials per chunk for outputs of ``output_size`` values (the distinguishing and attribute games): memory flat
    in the trials, at least _MIN_CHUNKS chunks where they fit, at most _MAX_CHUNKS."""
    by_memory = max(1, _MAX_CHUNK_VALUES // output_size)
    by_count = max(1, math.ceil(trials / _MIN_CHUNKS))
    return max(min(by_memory, max(by_count, min(trials, 4096))), math.ceil(trials / _MAX_CHUNKS))


def _resolve_score(score: Any, mechanism: Any, pair: NeighbouringPair, seed: int) -> tuple[_Scorer, str]:
    if score is None:
        score = ExactLikelihoodRatio() if hasattr(mechanism, "log_likelihood_ratio") else LearnedScore()
    match score:
        case ExactLikelihoodRatio():
            if not hasattr(mechanism, "log_likelihood_ratio"):
                raise ValueError(f"score: the mechanism {type(mechanism).__name__} has no log_likelihood_ratio")
            return _Scorer(None), score.name
        case BlackBoxScore():
            if not callable(score.function):
                raise ValueError(f"score function must be callable; got {score.function!r}")
            return _Scorer(score.function), f"black-box: {score.name}"
        case LearnedScore():
            training = runner.pilot_seed(seed).spawn(3)[2]
            n = _check_int("training_trials", score.training_trials, 10)
            rng_pos, rng_neg = (np.random.default_rng(s) for s in training.spawn(2))
            positive = _features(mechanism.sample(pair.data, n, rng_pos))
            negative = _features(mechanism.sample(pair.neighbour, n, rng_neg))
            return _Scorer(_fit_logistic(positive, negative, score.ridge)), score.name
    raise ValueError(f"score must be ExactLikelihoodRatio, BlackBoxScore or LearnedScore; got {score!r}")


def _place_grid(
    strategy: bd.ThresholdStrategy,
    mechanism: Any,
    pair: NeighbouringPair,
    scorer: _Scorer,
    *,
    seed: int,
    pilot: int,
    trials: int,
    delta: float,
    significance: float,
) -> tuple[UniformGrid, np.ndarray | None, int]:
    """The threshold grid and Bonferroni weights, fixed before the counted draws (from an independent pilot)."""
    match strategy:
        case bd.FixedThreshold(threshold=t):
            return UniformGrid(float(t), 0.0, 1), None, 0
        case bd.BonferroniGrid(size=size) | bd.Split(size=size):
            pass
        case _:
            raise ValueError(f"strategy must be a ThresholdStrategy; got {strategy!r}")
    # A large pilot is streamed in batches twice over the same draws (the range, then the counts on the grid): its
    # memory is one batch whatever its size, and the grid is exactly the one placed from all of its scores. A small
    # one keeps its scores from the first pass (the same numbers, without drawing them twice).
    streams = runner.pilot_seed(seed).spawn(2)
    batch = batch_trials(output_size(mechanism, pair.data))
    kept: dict[int, list[np.ndarray]] | None = {0: [], 1: []} if pilot <= _KEPT_PILOT_SCORES else None

    def pilot_scores(side: int) -> Any:
        if kept is not None and kept[side]:
            yield from kept[side]
            return
        rng = np.random.default_rng(streams[side])
        data = (pair.data, pair.neighbour)[side]
        for start in range(0, pilot, batch):
            scores = scorer(mechanism, mechanism.sample(data, min(batch, pilot - start), rng), pair)
            if kept is not None:
                kept[side].append(scores)
            yield scores

    low, high = math.inf, -math.inf
    for side in (0, 1):
        for scores in pilot_scores(side):
            finite = scores[np.isfinite(scores)]
            if finite.size:
                low, high = min(low, float(finite.min())), max(high, float(finite.max()))
    if not low <= high:
        low, high = -1.0, 1.0
    # The counted run is larger than the pilot and reaches further into the tails, where the best (ε, δ)
    # thresholds of a Gaussian-like loss lie: extend the pilot's range by half of it on each side.
    width = max(high - low, 1e-9 * max(1.0, abs(low), abs(high)), 1e-12)
    low, high = low - 0.5 * width, high + 0.5 * width
    grid = UniformGrid(0.5 * (low + high), 0.0, 1) if size == 1 else UniformGrid(low, (high - low) / (size - 1), size)
    weights = None
    if isinstance(strategy, bd.BonferroniGrid) and strategy.focus > 0:
        positive, negative = (sum(grid.counts(scores) for scores in pilot_scores(side)) for side in (0, 1))
        if scorer.function is None:  # the exact log-likelihood ratio: the pilot sees both tails through both sides
            weights = _focused_weights_exact(
                grid,
                positive + negative,
                pilot,
                trials=trials,
                delta=delta,
                significance=significance,
                focus=strategy.focus,
            )
        else:
            pilot_counts = bd.RateCounts(thresholds=grid.thresholds, positives=positive, negatives=negative)
            weights = bd.focused_weights(
                pilot_counts, trials=trials, delta=delta, significance=significance, focus=strategy.focus
            )
    return grid, weights, pilot


def _focused_weights_exact(
    grid: UniformGrid,
    pooled: np.ndarray,
    n: int,
    *,
    trials: int,
    delta: float,
    significance: float,
    focus: float,
    min_count: int = _FOCUS_MIN_SUPPORT,
) -> np.ndarray:
    """Bonferroni weights (``focus`` on the threshold the pilot predicts best at ``trials``, the rest uniform),
    predicted from a pilot scored with the exact log-likelihood ratio L = log dP_D/dP_D′.

    Then dP_D′ = e^{−L} dP_D, so both pilot samples estimate both rates at every threshold (multiple importance
    sampling with the balance heuristic, Veach & Guibas 1995): with n draws per side, FPR(t) = Σ_{L_i ≥ t}
    σ(−L_i)/n and FNR(t) = Σ_{L_i < t} σ(L_i)/n over the pooled 2n scores (σ the logistic function). The far
    tail of M(D′) above t, which holds the best (ε, δ) thresholds of a Gaussian-like loss and which the pilot's
    own D′ draws never reach, is seen through the D draws there. The sums are taken per grid bin with L at the
    bin's midpoint (a relative error below half a grid step in L, a few per cent in the rates — ample for
    choosing a threshold, and ten times cheaper than per-score weights). A threshold is a candidate when at
    least ``min_count`` pooled pilot scores lie in the region whose rate the bound divides by.

    Only the weights depend on the pilot (independent draws, never counted), so the bound is valid whatever
    they are — even if the score were not the exact ratio, which would only misplace the focus.
    """
    size = grid.size
    if size == 1:
        return np.ones(1)
    # pooled: the pilot's n scores per side binned on the grid, both sides summed; bin j = [t_{j−1}, t_j), the two
    # end bins open
    thresholds = grid.thresholds
    middle = np.concatenate([[-np.inf], (thresholds[:-1] + thresholds[1:]) / 2, [np.inf]])
    below = np.cumsum(pooled)[:-1]  # pooled pilot scores below each threshold
    above = pooled.sum() - below
    fnr = np.cumsum(pooled * special.expit(middle))[:-1] / n
    tail = pooled * special.expit(-middle)
    fpr = np.cumsum(tail[::-1])[::-1][1:] / n  # summed from the top: tiny tails keep their relative precision
    level = significance * focus / 2
    fnr_u = bd.clopper_pearson_upper(np.round(np.clip(fnr, 0, 1) * trials).astype(np.int64), trials, level)
    fpr_u = bd.clopper_pearson_upper(np.round(np.clip(fpr, 0, 1) * trials).astype(np.int64), trials, level)
    forward, reverse = bd.epsilon_lower_bounds(fpr_u, fnr_u, delta)
    best = np.maximum(np.where(above >= min_count, forward, -np.inf), np.where(below >= min_count, reverse, -np.inf))
    if not np.isfinite(best).any():
        return np.full(size, 1.0 / size)
    weights = np.full(size, (1.0 - focus) / size)
    weights[int(np.argmax(best))] += focus
    return weights


def _strategy_dict(strategy: bd.ThresholdStrategy, grid: UniformGrid) -> dict[str, Any]:
    match strategy:
        case bd.FixedThreshold(threshold=t):
            return {"name": "fixed", "threshold": float(t), "hypotheses": 1}
        case bd.BonferroniGrid(size=size, focus=focus):
            return {
                "name": "bonferroni-grid",
                "size": size,
                "focus": focus,
                "lower": grid.lower,
                "upper": float(grid.thresholds[-1]),
                "hypotheses": size,
            }
        case bd.Split(fraction=fraction, size=size):
            return {"name": "split", "fraction": fraction, "size": size, "hypotheses": 1}
    raise ValueError(f"strategy must be a ThresholdStrategy; got {strategy!r}")


def _method(strategy: bd.ThresholdStrategy) -> str:
    match strategy:
        case bd.FixedThreshold():
            return "Clopper-Pearson, one threshold fixed before the data; union bound over FPR and FNR"
        case bd.BonferroniGrid(size=size, focus=focus):
            weighting = (
                f"weighted Bonferroni ({focus:.0%} of the significance on the pilot's best threshold)"
                if focus
                else "Bonferroni"
            )
            return (
                f"Clopper-Pearson, {weighting} over an a-priori grid of {size} thresholds (placed from an "
                "independent pilot run) and both rates, both test directions"
            )
        case bd.Split(fraction=fraction):
            return (
                f"Clopper-Pearson at one threshold and direction chosen on the first {fraction:.0%} of the chunks, "
                "bounded on the rest"
            )
    return repr(strategy)


def _rate_counts(grid: UniformGrid, counts: np.ndarray) -> bd.RateCounts:
    return bd.RateCounts(thresholds=grid.thresholds, positives=counts[0], negatives=counts[1])


def _trade_off_points(counts: bd.RateCounts, limit: int = 201) -> tuple[dict[str, float], ...]:
    fpr = counts.false_positives() / counts.n_negatives
    fnr = counts.false_negatives() / counts.n_positives
    index = np.unique(np.linspace(0, fpr.size - 1, min(limit, fpr.size)).round().astype(int))
    return tuple({"threshold": float(counts.thresholds[i]), "fpr": float(fpr[i]), "fnr": float(fnr[i])} for i in index)


def _checked_pair(mechanism: Any, pair: NeighbouringPair | None, claimed_epsilon: Any) -> NeighbouringPair:
    """The audited pair (the mechanism's worst case by default), the claim and the mechanism checked."""
    if (
        isinstance(claimed_epsilon, bool)
        or not isinstance(claimed_epsilon, int | float)
        or not (claimed_epsilon >= 0 and math.isfinite(claimed_epsilon))
    ):
        raise ValueError(f"claimed_epsilon must be a finite number >= 0; got {claimed_epsilon!r}")
    if not hasattr(mechanism, "sample"):
        raise ValueError(f"mechanism must implement sample(data, n, rng); got {mechanism!r}")
    pair = mechanism.worst_case_pair() if pair is None else pair
    if not isinstance(pair, NeighbouringPair):
        raise ValueError(f"pair must be a NeighbouringPair; got {pair!r}")
    return pair


def _count_chunks(
    mechanism: Any,
    pair: NeighbouringPair,
    scorer: Any,
    grid: Any,
    strategy: bd.ThresholdStrategy,
    score_name: str,
    *,
    trials: int,
    seed: int,
    chunk_size: int | None,
    execution: dict[str, Any],
) -> tuple[runner.ChunkPlan, dict[int, np.ndarray]]:
    """The counted trials in chunks (resumable: the checkpoint key fingerprints everything that fixes the counts)."""
    values_per_output = output_size(mechanism, pair.data)
    size = default_chunk_size(trials, values_per_output) if chunk_size is None else chunk_size
    plan = runner.ChunkPlan(trials, _check_int("chunk_size", size, 1))
    if isinstance(strategy, bd.Split) and plan.chunks < 2:
        raise ValueError(f"strategy Split needs at least two chunks; got trials={trials}, chunk_size={size}")
    key = runner.fingerprint(
        {
            "mechanism": _stable_description(mechanism),
            "pair": repr((pair.data, pair.neighbour)),
            "score": _stable_description(scorer.function) if scorer.function is not None else "exact LLR",
            "grid": (grid.lower, grid.step, grid.size),
            "trials": trials,
            "chunk_size": plan.chunk_size,
            "batch": batch_trials(values_per_output),
            "seed": seed,
        }
    )
    done = runner.run_chunks(
        _CountTask(mechanism, pair, scorer, grid, batch_trials(values_per_output)),
        plan,
        seed=seed,
        key=key,
        about={
            "game": "distinguishing",
            "mechanism": _describe(mechanism),
            "pair": pair.description or "D vs D'",
            "score": score_name,
            "threshold_strategy": _strategy_dict(strategy, grid),
        },
        **execution,
    )
    return plan, done


def _split_chunks(
    per_chunk: list[np.ndarray], strategy: bd.ThresholdStrategy, grid: Any
) -> tuple[bd.RateCounts | None, list[np.ndarray]]:
    """A :class:`~dplens.auditing.bounds.Split` strategy's selection counts (its first chunks) and the chunks that
    are bounded; every other strategy bounds every chunk."""
    if not isinstance(strategy, bd.Split):
        return None, per_chunk
    k = min(max(1, round(strategy.fraction * len(per_chunk))), len(per_chunk) - 1)
    return _rate_counts(grid, np.sum(per_chunk[:k], axis=0)), per_chunk[k:]


def _trajectory(bounded: list[np.ndarray], grid: Any, bound: bd.Bound, judge: dict[str, Any]) -> list[dict[str, Any]]:
    """The bound after 1, 2, 4, … of the counted chunks (at most 12 marks; the last is the audit's bound)."""
    trajectory = []
    marks = np.unique(np.geomspace(1, len(bounded), num=min(12, len(bounded))).round().astype(int))
    running, cumulative = np.zeros_like(bounded[0]), {}
    for m, chunk_counts in enumerate(bounded, start=1):  # running sums at the marks only: memory flat in the chunks
        running += chunk_counts
        if m in marks:
            cumulative[m] = running.copy()
    for m in marks:
        partial = _rate_counts(grid, cumulative[m])
        epsilon = bound.epsilon if m == len(bounded) else bd.evaluate(partial, **judge).epsilon  # the last is all
        trajectory.append({"trials": partial.n_positives, "epsilon_lower_bound": epsilon})
    return trajectory


def _estimates(counts: bd.RateCounts, *, delta: float, significance: float, weights: Any) -> list[dict[str, Any]]:
    """The labelled estimates beside the bound: the GDP estimate (δ > 0) and the raw-count point estimate."""
    found: list[dict[str, Any]] = []
    if delta > 0:
        found.append(bd.gdp_estimate(counts, delta=delta, significance=significance, weights=weights).to_dict())
    found.append(bd.point_estimate(counts, delta=delta).to_dict())
    return found


def audit(
    mechanism: Any,
    *,
    trials: int,
    delta: float,
    claimed_epsilon: float,
    pair: NeighbouringPair | None = None,
    score: ExactLikelihoodRatio | BlackBoxScore | LearnedScore | None = None,
    strategy: bd.ThresholdStrategy | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: str | Path | None = None,
    progress: bool = False,
    chunk_size: int | None = None,
    pilot_trials: int | None = None,
    claim_source: str = "given",
    estimates: bool = True,
) -> AuditResult:
    """Run the distinguishing game on ``mechanism`` and bound its ε from below.

    Args:
        mechanism: a :class:`~dplens.mechanisms.base.Mechanism` (``sample``; ``log_likelihood_ratio`` for the
            exact score).
        trials: N draws per side that are counted.
        delta: δ of the (ε, δ) statement under test (0 for pure DP).
        claimed_epsilon: the ε under test (the verdict compares against it).
        pair: (D, D′); default ``mechanism.worst_case_pair()``.
        score: default the exact LLR where the mechanism has one, else :class:`LearnedScore`.
        strategy: default :class:`~dplens.auditing.bounds.BonferroniGrid` (201 thresholds).
        confidence: 1 − α.
        seed: root seed; the result is a deterministic function of it, whatever ``workers``/``scheduler``.
        workers, scheduler, checkpoint, progress: execution (:func:`dplens.auditing.runner.run_chunks`).
        chunk_size: trials per chunk (default: ≥ 8 chunks, ≤ 2²¹ output values per side per chunk).
        pilot_trials: draws per side of the independent pilot that places the grid (default
            min(N, max(10 000, N/100))).
        claim_source: where the claim comes from (recorded).
        estimates: also compute the GDP and raw-count estimates.

    Returns:
        A frozen :class:`AuditResult`.
    """
    start = time.perf_counter()
    trials = runner.check_trials(_check_int("trials", trials, 1))
    seed = _check_int("seed", seed, 0)
    confidence = _check_confidence(confidence)
    delta = bd.conversions.check_delta(delta, allow_zero=True)
    pair = _checked_pair(mechanism, pair, claimed_epsilon)
    strategy = bd.BonferroniGrid() if strategy is None else strategy
    significance = 1.0 - confidence
    if pilot_trials is None:
        pilot = min(trials, max(DEFAULT_PILOT_TRIALS, trials // _PILOT_FRACTION))
    else:
        pilot = _check_int("pilot_trials", pilot_trials, 1)

    scorer, score_name = _resolve_score(score, mechanism, pair, seed)
    grid, weights, pilot_used = _place_grid(
        strategy, mechanism, pair, scorer, seed=seed, pilot=pilot, trials=trials, delta=delta,
        significance=significance,
    )  # fmt: skip
    execution = {"workers": workers, "scheduler": scheduler, "checkpoint": checkpoint, "progress": progress}
    plan, done = _count_chunks(
        mechanism, pair, scorer, grid, strategy, score_name, trials=trials, seed=seed, chunk_size=chunk_size,
        execution=execution,
    )  # fmt: skip
    selection, bounded = _split_chunks([done[i] for i in range(plan.chunks)], strategy, grid)
    total = np.sum(bounded, axis=0)
    counts = _rate_counts(grid, total)
    judge = dict(delta=delta, significance=significance, strategy=strategy, selection=selection, weights=weights)
    bound = bd.evaluate(counts, **judge)
    share = 1.0 if bound.hypotheses == 1 else float(np.max(weights)) if weights is not None else 1 / bound.hypotheses
    ceiling = bd.measurability_ceiling(counts.n_positives, significance, delta=delta, share=share)

    trajectory = _trajectory(bounded, grid, bound, judge)
    estimate_list = _estimates(counts, delta=delta, significance=significance, weights=weights) if estimates else []
    verdict, reason = verdict_for(bound.epsilon, ceiling, float(claimed_epsilon), confidence)
    return AuditResult(
        epsilon_lower_bound=bound.epsilon,
        bound_direction=bound.direction,
        epsilon_claimed=float(claimed_epsilon),
        delta=delta,
        confidence=confidence,
        claim_source=claim_source,
        trials=counts.n_positives,
        method=_method(strategy),
        threshold_strategy=_strategy_dict(strategy, grid),
        score=score_name,
        mechanism=_describe(mechanism),
        pair=pair.description or "D vs D'",
        operating_point=bound.operating_point(),
        ceiling=ceiling,
        estimates=tuple(estimate_list),
        empirical_trade_off=_trade_off_points(counts),
        trajectory=tuple(trajectory),
        verdict=verdict,
        verdict_reason=reason,
        seed=seed,
        chunks=plan.chunks,
        backend=runner.backend_name(workers=workers, scheduler=scheduler),
        elapsed_seconds=round(time.perf_counter() - start, 3),
        pilot_trials=pilot_used,
        counts={"positives": total[0].tolist(), "negatives": total[1].tolist()},
    )


def _stable_description(thing: Any) -> str:
    """What identifies ``thing`` across processes, for checkpoint fingerprints (a default repr's memory address
    changes with every run, which would make a killed audit impossible to resume): a function by its module,
    qualified name and bytecode, anything else by its repr with addresses removed."""
    code = getattr(thing, "__code__", None)
    if code is not None:
        body = hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()
        return f"{getattr(thing, '__module__', '?')}.{getattr(thing, '__qualname__', '?')}:{body}"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(thing))


def _describe(mechanism: Any) -> str:
    text = repr(mechanism)
    return text if len(text) <= 300 else text[:297] + "..."


def spec_claim(spec: Any, delta: float | None) -> tuple[float, float, str]:
    """(claimed ε, δ, source): the spec's ``[claim]`` (a different ``delta`` is refused), else the accountant's ε."""
    if spec.claim is not None:
        if delta is not None and delta != spec.claim.delta:
            raise ValueError(
                f"delta {delta!r} differs from the spec's claim delta {spec.claim.delta!r}; the claim under test is "
                "an (epsilon, delta) pair"
            )
        return spec.claim.epsilon, spec.claim.delta, "spec [claim]"
    delta = 1e-5 if delta is None else delta
    accountant = spec.accountant()
    if delta == 0:
        claimed, source = accountant.pure_epsilon(), "accountant (pure-DP basic composition)"
    else:
        result = accountant.epsilon_result(delta)
        claimed, source = result.epsilon, f"accountant ({result.method.value}: {result.details})"
    if not math.isfinite(claimed):
        raise ValueError(
            f"the accountant's epsilon at delta={delta!r} is infinite; audit at a delta > 0 or add a [claim]"
        )
    return claimed, delta, source


def audit_spec(
    spec: Any,
    *,
    trials: int,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: str | Path | None = None,
    progress: bool = False,
) -> AuditResult:
    """Audit the mechanism a spec describes against its ``[claim]`` (or, without one, the accountant's ε).

    δ defaults to the claim's δ (1e-5 without a claim); a ``delta`` different from the claim's is refused, since
    the claim is an (ε, δ) pair. Without a claim, the claimed ε is the accountant's tightest valid ε at δ
    (basic-composition pure ε at δ = 0).
    """
    from dplens.mechanisms.registry import mechanism_from_spec

    mechanism = mechanism_from_spec(spec)
    claimed, delta, source = spec_claim(spec, delta)
    return audit(
        mechanism,
        trials=trials,
        delta=delta,
        claimed_epsilon=claimed,
        confidence=confidence,
        seed=seed,
        workers=workers,
        scheduler=scheduler,
        checkpoint=checkpoint,
        progress=progress,
        claim_source=source,
    )
