"""The statistics of empirical privacy auditing: valid lower bounds on ε from a distinguishing test.

For any test between neighbours D and D′ with false-positive rate FPR = P[M(D′) ∈ S] and false-negative rate
FNR = P[M(D) ∉ S], (ε, δ)-DP implies (Wasserman & Zhou 2010; Kairouz, Oh, Viswanath 2015, Theorem 2.1)

    FPR + e^ε FNR ≥ 1 − δ   and   e^ε FPR + FNR ≥ 1 − δ,

so ε ≥ log((1 − δ − FNR)/FPR) (the forward direction, D against D′) and ε ≥ log((1 − δ − FPR)/FNR) (the
reverse direction, D′ against D, on the complementary event). An audit replaces the rates by one-sided
Clopper–Pearson upper bounds, each at significance α/(2K) for K thresholds fixed before the data are seen (a
union bound over both rates and all thresholds, Jagielski, Ullman, Oprea 2020), so that every bound derived
below holds simultaneously with probability ≥ 1 − α. The two directions are separate statistics — never the
absolute value of one (the jax_privacy PR #270 bug: ε ≈ 3.5 on null scores).

The Gaussian-DP estimate (Nasr et al. 2023; Dong, Roth, Su 2022 Corollary 2.13) is a lower bound on μ that turns
into an ε only *under the assumption that the mechanism is GDP-shaped*; it is returned as an :class:`Estimate`,
never as a bound.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special, stats

from dplens.accountant import conversions
from dplens.auditing.runner import check_seed

__all__ = [
    "BonferroniGrid",
    "Bound",
    "Estimate",
    "FixedThreshold",
    "RateCounts",
    "Split",
    "ThresholdStrategy",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_lower_bounds",
    "evaluate",
    "gdp_mu_lower_bounds",
    "measurability_ceiling",
]

GDP_ASSUMPTION = "valid under the GDP-shape assumption (Nasr et al. 2023): not a bound on epsilon"


def check_significance(significance: Any, name: str = "significance") -> float:
    """Require a significance level α in (0, 1)."""
    if isinstance(significance, bool) or not isinstance(significance, int | float) or not 0 < significance < 1:
        raise ValueError(f"{name} must be in (0, 1); got {significance!r}")
    return float(significance)


def _significances(significance: Any) -> np.ndarray:
    """A significance level or an array of them (weighted Bonferroni), each in (0, 1)."""
    if np.ndim(significance) == 0:
        return np.asarray(check_significance(significance))
    alpha = np.asarray(significance, dtype=float)
    if not np.all((alpha > 0) & (alpha < 1)):
        raise ValueError(f"significance must be in (0, 1); got {significance!r}")
    return alpha


def _counts(successes: Any, trials: Any) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(successes)
    n = np.asarray(trials)
    if not (np.issubdtype(k.dtype, np.integer) and np.issubdtype(n.dtype, np.integer)):
        raise ValueError(f"counts must be integers; got successes={successes!r}, trials={trials!r}")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1; got {successes!r} of {trials!r}")
    return k.astype(float), n.astype(float)


def clopper_pearson_upper(successes: Any, trials: Any, significance: float) -> np.ndarray:
    """One-sided (1 − α) upper Clopper–Pearson bound p with P[Bin(n, p) ≤ k] = α (Clopper & Pearson 1934).

    Computed with the inverse of the *complemented* regularised incomplete beta function, so bounds as small as
    1e-12 keep full relative precision; k = 0 has the closed form 1 − α^{1/n} (evaluated as −expm1(log α / n))
    and k = n gives 1.
    """
    alpha = _significances(significance)
    k, n = _counts(successes, trials)
    with np.errstate(divide="ignore", invalid="ignore"):
        general = special.betainccinv(k + 1.0, np.maximum(n - k, 1.0), alpha)
        zero = -np.expm1(np.log(alpha) / n)
    return np.where(k >= n, 1.0, np.where(k == 0, zero, general))


def clopper_pearson_lower(successes: Any, trials: Any, significance: float) -> np.ndarray:
    """One-sided (1 − α) lower Clopper–Pearson bound p with P[Bin(n, p) ≥ k] = α; 0 at k = 0, α^{1/n} at k = n."""
    alpha = _significances(significance)
    k, n = _counts(successes, trials)
    with np.errstate(divide="ignore", invalid="ignore"):
        general = special.betaincinv(np.maximum(k, 1.0), n - k + 1.0, alpha)
        full = np.exp(np.log(alpha) / n)
    return np.where(k == 0, 0.0, np.where(k >= n, full, general))


def _log_margin(delta: float, rate_upper: np.ndarray) -> np.ndarray:
    """log(1 − δ − r), −∞ where it is not positive."""
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log1p(-(delta + rate_upper))
    return np.where(delta + rate_upper < 1.0, value, -np.inf)


def epsilon_lower_bounds(fpr_upper: Any, fnr_upper: Any, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """(forward, reverse) ε lower bounds from upper bounds on FPR and FNR (see the module docstring).

    forward = log(1 − δ − FNR⁺) − log FPR⁺ (D against D′), reverse = log(1 − δ − FPR⁺) − log FNR⁺ (D′ against D);
    −∞ where a rate bound leaves no room. Valid whenever both rate bounds hold.
    """
    delta = conversions.check_delta(delta, allow_zero=True)
    fpr, fnr = np.asarray(fpr_upper, dtype=float), np.asarray(fnr_upper, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        forward = _log_margin(delta, fnr) - np.log(fpr)
        reverse = _log_margin(delta, fpr) - np.log(fnr)
    # A zero rate with no margin (−∞ − (−∞)) is no evidence at all.
    return np.where(np.isnan(forward), -np.inf, forward), np.where(np.isnan(reverse), -np.inf, reverse)


def gdp_mu_lower_bounds(fpr_upper: Any, fnr_upper: Any) -> tuple[np.ndarray, np.ndarray]:
    """(forward, reverse) lower bounds on μ of a μ-GDP mechanism (Dong, Roth, Su 2022, Definition 2.5).

    G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) bounds every test's FNR from below at FPR α, so μ ≥ Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺);
    the reverse direction swaps the rates. Both can be negative (no evidence); never take an absolute value.
    """
    fpr, fnr = np.asarray(fpr_upper, dtype=float), np.asarray(fnr_upper, dtype=float)
    forward = stats.norm.isf(fpr) - stats.norm.ppf(fnr)
    reverse = stats.norm.isf(fnr) - stats.norm.ppf(fpr)
    return forward, reverse


def measurability_ceiling(trials: int, significance: float, *, delta: float = 0.0, share: float = 1.0) -> float:
    """The largest ε this audit could certify: the bound at zero errors, FP = FN = 0 (auditing-anchors §5.4).

    ``share`` is the part of α given to the most favoured threshold (1/K for K equally weighted thresholds); its
    rate bounds are at α·share/2, u = 1 − (α·share/2)^{1/N}, and the ceiling is log((1 − δ − u)/u)
    ≈ ln(N / ln(2/(α·share))). An audit can never report more, whatever the mechanism.
    """
    alpha = check_significance(significance)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1]; got {share!r}")
    u = float(clopper_pearson_upper(0, int(trials), alpha * share / 2))
    return float(epsilon_lower_bounds(u, u, delta)[0])


# --------------------------------------------------------------------------------------------
# Threshold strategies (options as types) and evaluation of binned counts
# --------------------------------------------------------------------------------------------


class ThresholdStrategy:
    """How thresholds are chosen; the choice never looks at the data it bounds."""


def check_threshold(threshold: Any) -> None:
    """A threshold fixed in advance must be a number (not a bool, not NaN); ValueError otherwise."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or math.isnan(threshold):
        raise ValueError(f"threshold must be a number; got {threshold!r}")


@dataclass(frozen=True, slots=True)
class FixedThreshold(ThresholdStrategy):
    """One threshold fixed in advance (e.g. from the mechanism's documented worst case): no multiplicity cost."""

    threshold: float

    def __post_init__(self) -> None:
        check_threshold(self.threshold)


@dataclass(frozen=True, slots=True)
class BonferroniGrid(ThresholdStrategy):
    """``size`` equally spaced thresholds fixed before the data, with a weighted Bonferroni correction.

    Threshold j gets significance α·w_j with Σ w_j = 1 (split α_j/2 over FPR and FNR), so the maximum over
    thresholds and both directions is a valid bound. The weights are fixed before the counted draws: a fraction
    ``focus`` goes to the threshold an independent pilot run predicts to be best, the rest is spread evenly (a
    weighted Bonferroni procedure; Holm 1979 / Westfall & Young's weighting, valid for any data-independent
    weights). ``focus=0`` is the plain Bonferroni grid.
    """

    size: int = 201
    focus: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"size must be an integer >= 1; got {self.size!r}")
        if isinstance(self.focus, bool) or not isinstance(self.focus, int | float) or not 0 <= self.focus < 1:
            raise ValueError(f"focus must be in [0, 1); got {self.focus!r}")


def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int, or a ``ValueError`` naming ``name`` when it is not an integer ≥ ``minimum``.

    Example:
        >>> check_int("trials", 10, 1)
        10
        >>> check_int("trials", 0, 1)
        Traceback (most recent call last):
        ...
        ValueError: trials must be an integer >= 1; got 0
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_option(value: Any, kind: type[enum.Enum], name: str) -> Any:
    """``value`` as a member of the enum ``kind`` (a member or its value), or a ``ValueError`` naming ``name`` and
    listing the values."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name} must be one of {[k.value for k in kind]}; got {value!r}") from None


def check_confidence(confidence: Any) -> float:
    """``confidence`` as a float, or a ``ValueError`` when it is not a number in [0.5, 1)."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1); got {confidence!r}")
    return float(confidence)


def check_fraction(fraction: Any) -> None:
    """The fraction of a split (a number in (0, 1), not a bool), else ``ValueError``."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1); got {fraction!r}")


@dataclass(frozen=True, slots=True)
class SeededSplit:
    """The options of a random split of each class (checked): the ``fraction`` of the scores that chooses, the
    ``seed`` of the independent draws that assign each score to a part (the base of the two score audits' splits,
    :class:`~dplens.auditing.score_auditor.Split` and :class:`~dplens.auditing.scores.SplitSelection`)."""

    fraction: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        check_fraction(self.fraction)
        check_seed(self.seed)


@dataclass(frozen=True, slots=True)
class Split(ThresholdStrategy):
    """Choose one (threshold, direction) on the first ``fraction`` of the chunks, bound on the rest at α."""

    fraction: float = 0.5
    size: int = 201

    def __post_init__(self) -> None:
        check_fraction(self.fraction)
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"size must be an integer >= 1; got {self.size!r}")


@dataclass(frozen=True, slots=True)
class RateCounts:
    """Binned scores of both sides on a threshold grid t₀ < … < t_{K−1}.

    ``positives[j]`` / ``negatives[j]`` count the scores of M(D) / M(D′) in [t_{j−1}, t_j) (t_{−1} = −∞, t_K = +∞),
    so a test "score ≥ t_j ⇒ D" has FN = Σ_{i ≤ j} positives[i] and FP = Σ_{i > j} negatives[i].
    """

    thresholds: np.ndarray
    positives: np.ndarray
    negatives: np.ndarray

    @property
    def n_positives(self) -> int:
        return int(self.positives.sum())

    @property
    def n_negatives(self) -> int:
        return int(self.negatives.sum())

    def false_negatives(self) -> np.ndarray:
        return np.cumsum(self.positives)[:-1]

    def false_positives(self) -> np.ndarray:
        return self.n_negatives - np.cumsum(self.negatives)[:-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Bound:
    """A valid (1 − α) lower bound on ε, with the operating point that produced it."""

    epsilon: float
    direction: str  # "D_vs_D'" (forward) or "D'_vs_D" (reverse)
    threshold: float
    false_positives: int
    false_negatives: int
    negatives: int
    positives: int
    fpr_upper: float
    fnr_upper: float
    hypotheses: int
    significance: float

    def operating_point(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
            "negatives": self.negatives,
            "positives": self.positives,
            "fpr": self.false_positives / self.negatives,
            "fnr": self.false_negatives / self.positives,
            "fpr_upper": self.fpr_upper,
            "fnr_upper": self.fnr_upper,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """A number that is NOT a bound (labelled everywhere as an estimate, with the assumption it rests on)."""

    name: str
    epsilon: float
    assumption: str
    details: dict[str, Any] = field(default_factory=dict)
    is_estimate: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "epsilon": self.epsilon,
            "is_estimate": True,
            "assumption": self.assumption,
            **self.details,
        }


FORWARD, REVERSE = "D_vs_D'", "D'_vs_D"


def _per_rate(counts: RateCounts, significance: float, weights: np.ndarray | None) -> np.ndarray:
    size = counts.thresholds.size
    w = np.full(size, 1.0 / size) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (size,) or np.any(w < 0) or not math.isclose(float(w.sum()), 1.0, rel_tol=1e-9):
        raise ValueError(f"weights must be {size} non-negative numbers summing to 1; got {weights!r}")
    # A zero weight means "never tested": give it a vanishing level (its bound is then useless, never invalid).
    return np.maximum(significance * w / 2, 1e-300)


def _best(
    counts: RateCounts, delta: float, significance: float, per_rate: np.ndarray, only: tuple[int, str] | None = None
) -> Bound:
    fn, fp = counts.false_negatives(), counts.false_positives()
    n_pos, n_neg = counts.n_positives, counts.n_negatives
    fnr_u = clopper_pearson_upper(fn, n_pos, per_rate)
    fpr_u = clopper_pearson_upper(fp, n_neg, per_rate)
    forward, reverse = epsilon_lower_bounds(fpr_u, fnr_u, delta)
    if only is not None:
        index, direction = only
        value = (forward if direction == FORWARD else reverse)[index]
    else:
        f, r = int(np.argmax(forward)), int(np.argmax(reverse))
        index, direction = (f, FORWARD) if forward[f] >= reverse[r] else (r, REVERSE)
        value = forward[f] if direction == FORWARD else reverse[r]
    return Bound(
        epsilon=max(float(value), 0.0),
        direction=direction,
        threshold=float(counts.thresholds[index]),
        false_positives=int(fp[index]),
        false_negatives=int(fn[index]),
        negatives=n_neg,
        positives=n_pos,
        fpr_upper=float(fpr_u[index]),
        fnr_upper=float(fnr_u[index]),
        hypotheses=int(counts.thresholds.size),
        significance=significance,
    )


def evaluate(
    counts: RateCounts,
    *,
    delta: float,
    significance: float,
    strategy: ThresholdStrategy,
    selection: RateCounts | None = None,
    weights: np.ndarray | None = None,
) -> Bound:
    """The valid ε lower bound of binned counts under a threshold strategy.

    Args:
        counts: the data the bound is computed on.
        delta: δ of the (ε, δ) statement under test.
        significance: α; the bound holds with probability ≥ 1 − α.
        strategy: :class:`FixedThreshold` and :class:`BonferroniGrid` use ``counts`` (whose grid must match),
            the latter with the Bonferroni ``weights`` (default uniform) fixed before the data;
            :class:`Split` picks the threshold and direction on ``selection`` (independent draws) and bounds on
            ``counts`` at α.
    """
    delta = conversions.check_delta(delta, allow_zero=True)
    significance = check_significance(significance)
    match strategy:
        case FixedThreshold() | BonferroniGrid():
            return _best(counts, delta, significance, _per_rate(counts, significance, weights))
        case Split():
            if selection is None:
                raise ValueError("strategy Split needs the selection counts (the first part of the chunks)")
            single = np.full(counts.thresholds.size, significance / 2)
            chosen = _best(selection, delta, significance, single)
            index = int(np.searchsorted(counts.thresholds, chosen.threshold))
            bound = _best(counts, delta, significance, single, only=(index, chosen.direction))
            return Bound(**{**_fields(bound), "hypotheses": 1})
        case _:
            raise ValueError(f"strategy must be a ThresholdStrategy; got {strategy!r}")


def _fields(bound: Bound) -> dict[str, Any]:
    return {name: getattr(bound, name) for name in Bound.__dataclass_fields__}


def focused_weights(
    pilot: RateCounts, *, trials: int, delta: float, significance: float, focus: float, min_count: int = 5
) -> np.ndarray:
    """Bonferroni weights for :class:`BonferroniGrid`: ``focus`` on the threshold an independent pilot predicts
    to be best at ``trials`` draws, the rest uniform. Only thresholds where the pilot saw at least ``min_count``
    errors on the bounded side are candidates (a pilot cannot predict tails it has not seen)."""
    size = pilot.thresholds.size
    weights = np.full(size, (1.0 - focus) / size)
    if focus == 0 or pilot.n_positives == 0 or pilot.n_negatives == 0:
        return np.full(size, 1.0 / size)
    fn, fp = pilot.false_negatives(), pilot.false_positives()
    projected_fn = np.round(fn / pilot.n_positives * trials).astype(np.int64)
    projected_fp = np.round(fp / pilot.n_negatives * trials).astype(np.int64)
    level = significance * focus / 2
    fnr_u = clopper_pearson_upper(projected_fn, trials, level)
    fpr_u = clopper_pearson_upper(projected_fp, trials, level)
    forward, reverse = epsilon_lower_bounds(fpr_u, fnr_u, delta)
    forward = np.where(fp >= min_count, forward, -np.inf)
    reverse = np.where(fn >= min_count, reverse, -np.inf)
    best = np.maximum(forward, reverse)
    if not np.isfinite(best).any():
        return np.full(size, 1.0 / size)
    weights[int(np.argmax(best))] += focus
    return weights


def gdp_estimate(
    counts: RateCounts, *, delta: float, significance: float, weights: np.ndarray | None = None
) -> Estimate:
    """The GDP estimate: the largest μ lower bound over the grid (same simultaneous rate bounds) → ε(δ) of G_μ.

    Labelled an estimate: it is a valid lower bound on μ, and an ε lower bound only if the mechanism's trade-off
    curve is exactly G_μ-shaped (Nasr et al. 2023; Dong, Roth, Su 2022 Corollary 2.13).
    """
    per_rate = _per_rate(counts, significance, weights)
    fnr_u = clopper_pearson_upper(counts.false_negatives(), counts.n_positives, per_rate)
    fpr_u = clopper_pearson_upper(counts.false_positives(), counts.n_negatives, per_rate)
    forward, reverse = gdp_mu_lower_bounds(fpr_u, fnr_u)
    mu = float(max(np.max(forward), np.max(reverse), 0.0))
    if not math.isfinite(mu):
        mu = 0.0
    epsilon = 0.0
    if mu > 0 and delta > 0:
        epsilon = conversions.gdp_epsilon(mu, delta)
    elif mu > 0:
        epsilon = math.inf  # μ-GDP with μ > 0 is not (ε, 0)-DP for any finite ε
    return Estimate(name="gdp", epsilon=epsilon, assumption=GDP_ASSUMPTION, details={"mu": mu})


def point_estimate(counts: RateCounts, *, delta: float, min_count: int = 10) -> Estimate:
    """ε from raw rates at the best threshold with at least ``min_count`` errors on the bounded side (no
    confidence at all: an estimate, biased upwards by the maximisation)."""
    fn, fp = counts.false_negatives(), counts.false_positives()
    fnr, fpr = fn / counts.n_positives, fp / counts.n_negatives
    with np.errstate(divide="ignore"):
        forward = np.where(fp >= min_count, epsilon_lower_bounds(fpr, fnr, delta)[0], -np.inf)
        reverse = np.where(fn >= min_count, epsilon_lower_bounds(fpr, fnr, delta)[1], -np.inf)
    value = float(max(np.max(forward), np.max(reverse), 0.0))
    return Estimate(
        name="point",
        epsilon=value,
        assumption=f"raw counts at the best threshold (at least {min_count} errors), no confidence: not a bound",
    )
