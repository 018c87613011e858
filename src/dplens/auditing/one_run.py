"""One-run auditing: an ε lower bound from a single run of the mechanism on m randomly included canaries.

Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023 (arXiv:2305.08846). Each of
m canaries is included independently with probability ½ *before* the run; from the one output the auditor makes r
guesses ("in" or "out") and abstains on the other m − r; v guesses are correct. If the mechanism is (ε, δ)-DP,
with q = e^ε/(1 + e^ε) (the accuracy of ε-randomized response), their main theorem bounds

    P[V ≥ v] ≤ p(ε) = min(1, β + 2mδ·max_{i=1..v} P[v − i ≤ Binom(r, q) < v]/i),  β = P[Binom(r, q) ≥ v]

(the p-value of their Appendix D reference code), and the audit reports ε_lb = sup{ε ≥ 0 : p(ε) ≤ α}, a valid
(1 − α) lower bound on ε (see :func:`one_run_epsilon_lower_bound` for why the supremum is valid). With δ = 0 the
supremum has a closed form: β(ε) ≤ α ⇔ q ≤ the lower Clopper–Pearson bound of v successes in r trials.

Choosing the guesses from the scores (the top k scores "in", optionally the bottom k "out") and searching over
cut-offs is paid for by a Bonferroni correction over cut-offs fixed before the data (:class:`BonferroniCutoffs`,
the default). :class:`ParetoFrontierHeuristic` reproduces the jax_privacy constants (auditing-anchors §5.5) by
correcting over the vertices of the empirical ROC staircase's concave frontier, a *data-dependent* count: it is a
heuristic and every result it produces says so. It is not even the stronger choice: on the §5.5 scores the default
32 a-priori cut-offs give 1.99 / 3.90 / 5.81 against its 1.13 / 2.31 / 4.40, because the δ term 2mδ·α_term puts a
floor under p(ε) that a level α/386 cannot pass for the short, precise cut-offs.

The f-DP one-run analysis of Mahloujifar, Melis, Chaudhuri, "Auditing f-Differential Privacy in One Run", ICML 2025
(arXiv:2410.22235) tests a hypothesised trade-off curve f against the same counts by a backward recursion
("audit_rh_with_cap"). Run against the (ε, δ)-DP curve f_{ε,δ} (:class:`EpsilonDeltaFDP`) it is a *valid* lower
bound on ε — (ε, δ)-DP is exactly f_{ε,δ}-DP (Dong, Roth, Su 2022, Proposition 2.5) — often tighter than Steinke et
al.'s (neither always wins). Run against the Gaussian family (:class:`GaussianFDP`, what jax_privacy 2.0's
``epsilon_one_run_fdp`` does) it tests "M is μ(ε, δ)-GDP", which is stronger than (ε, δ)-DP, so its ε is an
*estimate*: a lower bound on ε only if the mechanism's trade-off curve is GDP-shaped (on pure ε = 1 randomized
response it exceeds 1 in almost every seed).

:class:`Combined` runs several valid analyses on the same cut-offs and reports the largest bound, each analysis at its
share of the significance (equal shares by default: α/2 each for Steinke et al. and the f-DP (ε, δ) analysis). The
largest of several bounds is valid only with such a split (a union bound: P[any bound > ε] ≤ Σ shares·α = α);
taking the larger of two bounds each at α would not be.

Limits (auditing-anchors §1.6, §9): with a perfect attacker and δ = 0 the bound is only ≈ ln(r / ln(1/α)); the
2mδ term makes large m with non-tiny δ painful (m = 10⁵, δ = 10⁻⁵ and 100 perfect guesses give 0.81); and one-run
audits cannot be tight unless the canaries' effects on the output are separable.

>>> round(one_run_epsilon_lower_bound(canaries=1000, guesses=100, correct=100, significance=0.05), 3)
3.493
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, special

from dplens.accountant import conversions
from dplens.auditing.bounds import check_significance
from dplens.auditing.host import host_array

__all__ = [
    "ApproximateDP",
    "BonferroniCutoffs",
    "Combined",
    "EpsilonDeltaFDP",
    "GaussianFDP",
    "GuessRule",
    "OneRunAnalysis",
    "OneRunResult",
    "ParetoFrontierHeuristic",
    "SearchCorrection",
    "Symmetric",
    "TopK",
    "default_cutoffs",
    "fdp_one_run_epsilon_lower_bound",
    "gaussian_fdp_one_run_epsilon",
    "one_run_audit",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
]

STEINKE_REFERENCE = "Steinke, Nasr, Jagielski 2023 (arXiv:2305.08846)"
FDP_REFERENCE = "Mahloujifar, Melis, Chaudhuri 2025 (arXiv:2410.22235)"
GDP_FAMILY_ASSUMPTION = (
    "f-DP one-run audit against the Gaussian trade-off family: it rejects 'M is mu(eps, delta)-GDP', which is a lower "
    "bound on epsilon only if the mechanism's trade-off curve is GDP-shaped: an estimate, not a bound"
)
PARETO_HEURISTIC_NOTE = (
    "Bonferroni over the Pareto-frontier vertices of the empirical ROC staircase (jax_privacy): the number of "
    "hypotheses depends on the same data, so the bound is a heuristic, not a valid bound"
)

_GRID_POINTS = 65  # grid of the supremum search when p(ε) is not provably monotone (2mδ > 1)
_XTOL = 1e-12
_DEFAULT_SIGNIFICANCE = 0.05


# --------------------------------------------------------------------------------------------
# Options (types, not strings)
# --------------------------------------------------------------------------------------------


class GuessRule:
    """How guesses are made from the canaries' scores (higher score ⇒ "in")."""


@dataclass(frozen=True, slots=True)
class TopK(GuessRule):
    """Guess "in" for the k highest scores and abstain on the rest: r = k guesses (k₊ = k, k₋ = 0)."""


@dataclass(frozen=True, slots=True)
class Symmetric(GuessRule):
    """Guess "in" for the k highest scores, "out" for the k lowest, abstain in between: r = 2k (k₊ = k₋ = k)."""


class SearchCorrection:
    """How the search over cut-offs is paid for."""


@dataclass(frozen=True, slots=True)
class BonferroniCutoffs(SearchCorrection):
    """Bonferroni over K cut-offs k fixed before the data (valid): each is tested at α/K.

    ``cutoffs`` are the values of k (in-guesses for :class:`TopK`; in-guesses = out-guesses for
    :class:`Symmetric`); ``None`` uses :func:`default_cutoffs` with ``size`` points, which depends on the number of
    canaries only. Ties in the scores at a cut-off are resolved *against* the auditor (see :func:`one_run_audit`).
    """

    cutoffs: tuple[int, ...] | None = None
    size: int = 32

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"size must be an integer >= 1; got {self.size!r}")
        if self.cutoffs is not None:
            values = tuple(self.cutoffs)
            if not values or any(isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1 for k in values):
                raise ValueError(f"cutoffs must be a non-empty sequence of integers >= 1; got {self.cutoffs!r}")
            object.__setattr__(self, "cutoffs", tuple(sorted({int(k) for k in values})))


@dataclass(frozen=True, slots=True)
class ParetoFrontierHeuristic(SearchCorrection):
    """HEURISTIC, offered only to reproduce the published jax_privacy constants (auditing-anchors §1.3, §5.5).

    The candidate rules are "guess in iff score ≥ t" at the vertices of the concave (Pareto) frontier of the
    empirical (false-negative, true-negative) staircase, and the Bonferroni factor is the number of vertices
    (386 / 374 / 140 for the §5.5 shifts 1 / 2 / 4). That number is computed from the same scores and labels that
    are then bounded, so the correction is data-dependent and the result is *not* a valid bound; every result
    carries ``heuristic=True``. Only :class:`TopK`-style (threshold) guesses are supported.
    """


class OneRunAnalysis:
    """Which privacy claim the counts are tested against."""


@dataclass(frozen=True, slots=True)
class ApproximateDP(OneRunAnalysis):
    """(ε, δ)-DP: the p-value of Steinke, Nasr, Jagielski 2023 (:func:`one_run_p_value`). A valid bound."""


@dataclass(frozen=True, slots=True)
class GaussianFDP(OneRunAnalysis):
    """The Gaussian-family f-DP analysis of Mahloujifar, Melis, Chaudhuri 2025 (:func:`gaussian_fdp_one_run_epsilon`).

    Assumes the mechanism's trade-off curve is GDP-shaped: results are labelled estimates. Needs δ > 0.
    """


@dataclass(frozen=True, slots=True)
class EpsilonDeltaFDP(OneRunAnalysis):
    """The f-DP analysis of Mahloujifar, Melis, Chaudhuri 2025 against the (ε, δ)-DP trade-off curve
    (:func:`fdp_one_run_epsilon_lower_bound`). A valid bound (δ = 0 included)."""


@dataclass(frozen=True, slots=True)
class Combined(OneRunAnalysis):
    """Several valid analyses on the same cut-offs, the significance split between them; the largest bound wins.

    ``shares`` are the fractions of α each analysis is run at (default: equal). Each analysis pays its own Bonferroni
    correction over the K cut-offs at α·share, so every (analysis, cut-off) hypothesis is tested at α·share/K and the
    shares sum to one: the largest bound is a valid (1 − α) lower bound (a union bound). Only bounds can be combined
    (not :class:`GaussianFDP`, an estimate).
    """

    analyses: tuple[OneRunAnalysis, ...] = (ApproximateDP(), EpsilonDeltaFDP())
    shares: tuple[float, ...] | None = None

    @classmethod
    def default(cls) -> Combined:
        """Steinke et al. at α/5 and the f-DP (ε, δ) analysis at 4α/5 — the split of ``dplens audit-scores
        --one-run``. Fixed before any data, from simulations (benchmarks/bench_one_run.py): the f-DP analysis gave
        the larger bound in every Gaussian setting measured (by up to 2.7 at m = 10⁵, δ = 10⁻⁵, where Steinke et
        al.'s 2mδ term bites) and Steinke et al.'s the larger by at most 0.015 on pure-DP randomized response, so
        most of α goes to the former; the split costs ≲ 0.05 against the f-DP analysis run alone at α."""
        return cls(analyses=(ApproximateDP(), EpsilonDeltaFDP()), shares=(0.2, 0.8))

    def __post_init__(self) -> None:
        analyses = tuple(self.analyses) if isinstance(self.analyses, tuple | list) else ()
        if not analyses or not all(isinstance(a, ApproximateDP | EpsilonDeltaFDP) for a in analyses):
            raise ValueError(
                f"analyses must be a non-empty tuple of ApproximateDP() / EpsilonDeltaFDP() (bounds only); "
                f"got {self.analyses!r}"
            )
        if len(set(analyses)) != len(analyses):
            raise ValueError(f"analyses must not repeat an analysis; got {self.analyses!r}")
        if self.shares is None:
            shares = tuple(1.0 / len(analyses) for _ in analyses)
        else:
            try:
                shares = tuple(float(w) for w in self.shares)
            except (TypeError, ValueError):
                raise ValueError(f"shares must be numbers; got {self.shares!r}") from None
            ok = len(shares) == len(analyses) and all(0 < w <= 1 for w in shares)
            if not ok or not math.isclose(sum(shares), 1.0, rel_tol=1e-9) or sum(shares) > 1.0 + 1e-12:
                raise ValueError(
                    f"shares must be {len(analyses)} numbers in (0, 1] summing to 1 (one per analysis); "
                    f"got {self.shares!r}"
                )
        object.__setattr__(self, "analyses", analyses)
        object.__setattr__(self, "shares", shares)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _check_count(value: Any, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _check_counts(canaries: Any, guesses: Any, correct: Any) -> tuple[int, int, int]:
    m = _check_count(canaries, "canaries", minimum=1)
    r = _check_count(guesses, "guesses", minimum=0)
    v = _check_count(correct, "correct", minimum=0)
    if r > m:
        raise ValueError(f"guesses must be <= canaries ({m}); got {guesses!r}")
    if v > r:
        raise ValueError(f"correct must be <= guesses ({r}); got {correct!r}")
    return m, r, v


def _check_delta(delta: Any) -> float:
    if isinstance(delta, bool):
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    return conversions.check_delta(delta, allow_zero=True)


def _check_scores_labels(scores: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    scores, labels = host_array(scores, name="scores"), host_array(labels, name="labels")  # torch/JAX/CuPy too
    s = score_array(scores, name="scores", shown=lambda: repr(scores), allow_nan=False)
    return s, bool_labels(labels, name="labels", length=s.size, meaning="1 = included", shown=repr(labels))


def score_array(values: Any, *, name: str, shown: Callable[[], str], allow_nan: bool = True) -> np.ndarray:
    """``values`` (on the host) as a non-empty 1-D float array, NaN refused unless ``allow_nan``; else a ValueError
    naming ``name`` (``shown()``: how a value that is not numbers is echoed). The score checks of every score audit."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of numbers; got {shown()}") from None
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array; got shape {array.shape}")
    if not allow_nan and np.isnan(array).any():
        raise ValueError(f"{name} must not contain NaN; got NaN at index {int(np.flatnonzero(np.isnan(array))[0])}")
    return array


def bool_labels(values: Any, *, name: str, length: int, meaning: str, shown: str | None = None) -> np.ndarray:
    """``values`` as a 1-D boolean array of ``length`` (booleans, or numbers 0/1), else a ValueError naming ``name``."""
    raw = np.asarray(values)
    if raw.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array; got shape {raw.shape}")
    if raw.size != length:
        raise ValueError(f"{name} must have the same length as scores ({length}); got {raw.size}")
    if raw.dtype == bool:
        return raw
    if np.issubdtype(raw.dtype, np.number) and np.isin(raw, (0, 1)).all():
        return raw.astype(bool)
    got = shown if shown is not None else f"values of dtype {raw.dtype}"
    raise ValueError(f"{name} must be booleans or 0/1 ({meaning}); got {got}")


# --------------------------------------------------------------------------------------------
# The p-value (Steinke, Nasr, Jagielski 2023) in log space
# --------------------------------------------------------------------------------------------


class _PValue:
    """log p(ε) for fixed counts; log C(r, k) is computed once and reused across ε."""

    __slots__ = ("log_c", "log_choose", "log_i", "m", "r", "v")

    def __init__(self, m: int, r: int, v: int, delta: float) -> None:
        self.m, self.r, self.v = m, r, v
        k = np.arange(r + 1, dtype=float)
        # log C(r, k) = −log(r + 1) − log B(k + 1, r − k + 1): no cancellation between large log-gammas.
        self.log_choose = -math.log1p(r) - special.betaln(k + 1.0, r - k + 1.0)
        self.log_i = np.log(np.arange(1, v + 1, dtype=float))
        self.log_c = math.log(2.0 * m * delta) if delta > 0 else -math.inf

    def log_p(self, epsilon: float) -> float:
        r, v = self.r, self.v
        if v == 0:
            return 0.0  # β = P[Binom(r, q) ≥ 0] = 1
        # log q and log(1 − q) as −softplus(∓ε): exact even where q rounds to 1.
        log_q, log_1mq = -np.logaddexp(0.0, -epsilon), -np.logaddexp(0.0, epsilon)
        k = np.arange(r + 1, dtype=float)
        log_pmf = self.log_choose + k * log_q + (r - k) * log_1mq
        log_beta = float(special.logsumexp(log_pmf[v:]))
        if self.log_c == -math.inf:
            return min(0.0, log_beta)
        # S_i = P[v − i ≤ Binom < v] as a running log-sum of pmf(v − 1), pmf(v − 2), …: no tail subtraction.
        window = np.logaddexp.accumulate(log_pmf[v - 1 :: -1])
        log_alpha = float(np.max(window - self.log_i))
        return min(0.0, float(np.logaddexp(log_beta, self.log_c + log_alpha)))


def one_run_p_value(epsilon: float, *, canaries: int, guesses: int, correct: int, delta: float = 0.0) -> float:
    """The p-value of the one-run game under (ε, δ)-DP (Steinke, Nasr, Jagielski 2023, main theorem; Appendix D).

    p(ε) = min(1, β + 2mδ·max_{i=1..v} P[v − i ≤ Binom(r, q) < v]/i) with β = P[Binom(r, q) ≥ v] and
    q = e^ε/(1 + e^ε): if the mechanism is (ε, δ)-DP then P[V ≥ v] ≤ p(ε). All tail probabilities are log-sum-exps
    of binomial log-pmfs (no subtraction of one tail from another), so tiny tails keep full relative precision
    down to the smallest float (2^-800 at r = v = 800, ε = 0 comes out within 1e-12 relative).

    Monotonicity (proved for 2mδ ≤ 1, checked by property tests): p is *non-decreasing* in ε — a weaker claim
    (larger ε) can only be harder to reject — and non-increasing in v. Proof sketch: with
    A_i = P[v − i ≤ B < v] and c = 2mδ, d/dq (β + c·A_i/i) = r·[pmf_{r−1}(v − 1)(1 − c/i) + (c/i)·pmf_{r−1}(v − i − 1)]
    ≥ 0 when c ≤ i, and a maximum of non-decreasing functions is non-decreasing; in v, β drops by pmf(v) while
    each A_i/i rises by at most pmf(v)/i. For 2mδ > 1 neither holds in general.

    Args:
        epsilon: ε ≥ 0 of the null hypothesis.
        canaries: m, the number of canaries, each included independently with probability ½.
        guesses: r ≤ m, the number of guesses (abstentions excluded).
        correct: v ≤ r, the number of correct guesses.
        delta: δ ∈ [0, 1) of the null hypothesis.

    Returns:
        The p-value in [0, 1].
    """
    epsilon = conversions.check_epsilon(epsilon)
    m, r, v = _check_counts(canaries, guesses, correct)
    delta = _check_delta(delta)
    return math.exp(_PValue(m, r, v, delta).log_p(epsilon))


def _log_cp_lower(r: np.ndarray, v: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """log q* and log(1 − q*) of the lower Clopper–Pearson bound q*: P[Binom(r, q*) ≥ v] = α (v ≥ 1)."""
    with np.errstate(divide="ignore"):
        q = special.betaincinv(v, r - v + 1.0, alpha)
        one_minus_q = special.betainccinv(r - v + 1.0, v, alpha)  # 1 − X ~ Beta(r − v + 1, v): no cancellation
        return np.log(q), np.log(one_minus_q)


def _epsilon_pure(r: np.ndarray | int, v: np.ndarray | int, alpha: float) -> np.ndarray:
    """sup{ε : β(ε) ≤ α} = logit(q*) clipped at 0 — the δ = 0 bound, and an upper limit of every δ > 0 bound.

    β(ε) = P[Binom(r, q) ≥ v] is increasing in q, so β(ε) ≤ α ⇔ q ≤ q*, the lower Clopper–Pearson bound.
    """
    r_arr, v_arr = np.broadcast_arrays(np.asarray(r, dtype=float), np.asarray(v, dtype=float))
    shape = r_arr.shape
    r_arr, v_arr = r_arr.ravel(), v_arr.ravel()
    out = np.zeros(r_arr.size)
    ok = v_arr >= 1
    if np.any(ok):
        log_q, log_1mq = _log_cp_lower(r_arr[ok], v_arr[ok], alpha)
        out[ok] = np.maximum(log_q - log_1mq, 0.0)
    # Round down by a relative 1e-12: a lower bound must err on the low side.
    return (out * (1.0 - 1e-12)).reshape(shape)


def _sup_epsilon(pv: _PValue, alpha: float, *, floor: float = 0.0) -> float:
    """sup{ε ≥ floor : p(ε) ≤ α}, or ``floor`` when no ε ≥ floor qualifies.

    The supremum is at most the closed-form δ = 0 bound (p ≥ β). For 2mδ ≤ 1, p is monotone in ε (see
    :func:`one_run_p_value`) and the crossing is found by Brent's method; otherwise the largest ε with p ≤ α is
    located on a 65-point grid and refined by bisection between that grid point and the next (documented
    approximation of the supremum).
    """
    hi = float(_epsilon_pure(pv.r, pv.v, alpha))
    if hi <= floor:
        return floor
    if pv.log_c == -math.inf:
        return hi
    log_alpha = math.log(alpha)

    def slack(eps: float) -> float:  # ≥ 0 ⇔ p(ε) ≤ α
        return log_alpha - pv.log_p(eps)

    monotone = pv.log_c <= 0.0  # 2mδ ≤ 1
    if monotone:
        if slack(floor) < 0:
            return floor
        if slack(hi) >= 0:
            return hi
        left, right = floor, hi
    else:
        grid = np.linspace(floor, hi, _GRID_POINTS)
        ok = np.array([slack(float(e)) >= 0 for e in grid])
        if not ok.any():
            return floor
        j = int(np.flatnonzero(ok)[-1])
        if j == grid.size - 1:
            return hi
        left, right = float(grid[j]), float(grid[j + 1])
    root = optimize.brentq(slack, left, right, xtol=_XTOL, rtol=4 * np.finfo(float).eps)
    # Brent's answer may sit a hair on the rejected side; step down until p(ε) ≤ α holds at the reported ε.
    step = _XTOL * (1.0 + root)
    while root > left and slack(root) < 0:
        root = max(left, root - step)
        step *= 2.0
    return max(root, floor)


def one_run_epsilon_lower_bound(
    *, canaries: int, guesses: int, correct: int, significance: float = _DEFAULT_SIGNIFICANCE, delta: float = 0.0
) -> float:
    """ε_lb = sup{ε ≥ 0 : p(ε) ≤ α}: the (1 − α) one-run lower bound from counts (Steinke, Nasr, Jagielski 2023).

    Validity of the supremum: if the mechanism is (ε*, δ)-DP it is (ε, δ)-DP for every ε ≥ ε*, and p_ε(v) is
    non-increasing in v, so {∃ ε > ε* : p_ε(V) ≤ α} = {V ≥ t} with t = min_ε t_ε attained at some ε' > ε*, an event
    of probability ≤ p_{ε'}(t) ≤ α. For δ = 0 the bound is the closed form logit of the lower Clopper–Pearson bound
    on v successes in r trials; for 0 < δ ≤ 1/(2m), p is monotone in ε and the crossing is found by Brent's method
    (xtol 1e-12, then stepped down so that p(ε_lb) ≤ α holds); for δ > 1/(2m) the supremum is located on a grid
    and refined by bisection (p need not be monotone there; the bound is then also seldom useful).

    Args:
        canaries: m, each included independently with probability ½ before the run.
        guesses: r, the number of guesses made (fixed before the run, e.g. "the top r scores").
        correct: v, the number of correct guesses.
        significance: α ∈ (0, 1); the bound holds with probability ≥ 1 − α.
        delta: δ ∈ [0, 1) of the (ε, δ) statement under test.

    Returns:
        ε_lb ≥ 0 (0 when the counts are no evidence).
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    alpha = check_significance(significance)
    delta = _check_delta(delta)
    return _sup_epsilon(_PValue(m, r, v, delta), alpha)


# --------------------------------------------------------------------------------------------
# f-DP one-run (Mahloujifar, Melis, Chaudhuri 2025): the (ε, δ)-DP curve (a bound) and the Gaussian family
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _gdp_mu(epsilon: float, delta: float) -> float:
    """μ with δ_μ(ε) = δ (Dong, Roth, Su 2022 Corollary 2.13), by Brent's method to ~1e-14 (an estimate's input).

    Not :func:`dplens.accountant.conversions.gdp_mu`, whose ulp-by-ulp rounding down costs ~0.1 s per call here.
    """

    def excess(mu: float) -> float:
        return float(conversions.gdp_delta(mu, epsilon)) - delta

    hi = 1.0
    while excess(hi) < 0:
        hi *= 2.0
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps))


_GAUSSIAN, _EPSILON_DELTA = "gaussian", "epsilon_delta"
_MAX_EXP = 700.0  # e^700 is finite in double precision; an (ε, δ) curve beyond it is 0 except at α = 0


def _inverse_curve(epsilon: float, delta: float, curve: str) -> Any:
    """x ↦ f(1 − x) for the hypothesised trade-off curve f (the "inverse blow-up" of Mahloujifar et al. 2025).

    Gaussian family: f = G_μ with μ = μ(ε, δ), so f(1 − x) = Φ(Φ⁻¹(x) − μ). (ε, δ)-DP: f_{ε,δ}(a) = max(0,
    1 − δ − e^ε·a, e^(−ε)·(1 − δ − a)) (Kairouz, Oh, Viswanath 2015; Dong, Roth, Su 2022 Proposition 2.5), so
    f(1 − x) = max(0, 1 − δ − e^ε·(1 − x), e^(−ε)·(x − δ)).
    """
    if curve == _GAUSSIAN:
        mu = _gdp_mu(epsilon, delta)
        return lambda x: float(special.ndtr(special.ndtri(x) - mu))
    grow = math.exp(min(epsilon, _MAX_EXP))
    shrink = 1.0 / grow
    return lambda x: max(0.0, 1.0 - delta - grow * (1.0 - x), shrink * (x - delta))


def _fdp_excess(epsilon: float, m: int, r: int, v: int, alpha: float, delta: float, curve: str = _GAUSSIAN) -> float:
    """> 0 ⇔ the counts falsify the f-DP claim of ``curve`` at ε at level α ("audit_rh_with_cap" of Mahloujifar,
    Melis, Chaudhuri 2025).

    Backward recursion from r₀ = α·v/m, h₀ = α·(r − v)/m: for i = v − 1, …, 0, h ← max(h, f(1 − r_c)),
    r_c ← min(1, r_c + i/(r − i)·Δh); the claim is falsified if r_c + h > r/m. r_c + h is non-decreasing in the
    curve pointwise (every step is), and both curves decrease pointwise as ε grows: the excess is non-increasing in
    ε, so the rejected ε form an interval [0, ε_lb) and the supremum is a valid bound when the curve's claim is.
    """
    inverse = _inverse_curve(epsilon, delta, curve)
    rc, h = alpha * v / m, alpha * (r - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(h, inverse(rc))
        if h_new == h:
            break  # neither h nor r_c can change any more
        rc = min(rc + i / (r - i) * (h_new - h), 1.0)
        h = h_new
    return rc + h - r / m


def _sup_epsilon_fdp(
    m: int, r: int, v: int, alpha: float, delta: float, *, floor: float = 0.0, curve: str = _GAUSSIAN
) -> float:
    """sup{ε ≥ floor : the counts falsify the curve at ε}, or ``floor``: doubling, Brent's method, then stepped down
    until the reported ε is itself falsified (a bound must err on the low side)."""

    def excess(eps: float) -> float:
        return _fdp_excess(eps, m, r, v, alpha, delta, curve)

    if v == 0 or excess(floor) <= 0:
        return floor
    lo, hi = floor, max(1.0, 2.0 * floor)
    while excess(hi) > 0:
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:
            return lo
    root = optimize.brentq(excess, lo, hi, xtol=1e-10)
    step = 1e-10 * (1.0 + root)
    while root > lo and excess(root) <= 0:
        root = max(lo, root - step)
        step *= 2.0
    return root


def fdp_one_run_epsilon_lower_bound(
    *, canaries: int, guesses: int, correct: int, significance: float = _DEFAULT_SIGNIFICANCE, delta: float = 0.0
) -> float:
    """The f-DP one-run lower bound against the (ε, δ)-DP curve (Mahloujifar, Melis, Chaudhuri 2025, ICML).

    The largest ε whose trade-off curve f_{ε,δ} (:func:`_inverse_curve`) is falsified at level α by the backward
    recursion "audit_rh_with_cap" (:func:`_fdp_excess`). A mechanism that is (ε, δ)-DP is f_{ε,δ}-DP, so this is a
    valid (1 − α) lower bound on ε — unlike the Gaussian-family number (:func:`gaussian_fdp_one_run_epsilon`),
    which assumes the curve's shape. It is often tighter than :func:`one_run_epsilon_lower_bound` on the same
    counts, not always.

    Args:
        canaries: m, each included independently with probability ½ before the run.
        guesses: r, the number of guesses made (fixed before the run).
        correct: v, the number of correct guesses.
        significance: α ∈ (0, 1).
        delta: δ ∈ [0, 1) of the (ε, δ) statement under test.

    Returns:
        ε_lb ≥ 0.

    Example:
        >>> round(fdp_one_run_epsilon_lower_bound(canaries=1000, guesses=100, correct=100, significance=0.05), 3)
        3.493
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    alpha = check_significance(significance)
    delta = _check_delta(delta)
    return _sup_epsilon_fdp(m, r, v, alpha, delta, curve=_EPSILON_DELTA)


def gaussian_fdp_one_run_epsilon(
    *, canaries: int, guesses: int, correct: int, significance: float = _DEFAULT_SIGNIFICANCE, delta: float
) -> float:
    """ε estimate of the Gaussian-family f-DP one-run audit (Mahloujifar, Melis, Chaudhuri 2025, ICML).

    The largest ε whose GDP curve G_μ, μ = μ(ε, δ) (Dong, Roth, Su 2022 Corollary 2.13, inverted by
    :func:`dplens.accountant.conversions.gdp_mu`), is falsified at level α by the backward recursion
    "audit_rh_with_cap" (see :func:`_fdp_excess`), found by doubling and Brent's method.

    ASSUMPTION: the test rejects "M is μ(ε, δ)-GDP", a stronger claim than (ε, δ)-DP; the number is a lower bound on
    ε only if the mechanism's trade-off curve is GDP-shaped. It is an estimate, not a bound (roughly twice the
    :func:`one_run_epsilon_lower_bound` on Gaussian scores, auditing-anchors §5.5).

    Args:
        canaries: m, each included independently with probability ½ before the run.
        guesses: r, the number of guesses.
        correct: v, the number of correct guesses.
        significance: α ∈ (0, 1).
        delta: δ ∈ (0, 1) fixing the GDP curve of each ε (δ = 0 has no GDP curve).

    Returns:
        The ε estimate ≥ 0.
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    alpha = check_significance(significance)
    delta = conversions.check_delta(delta)
    return _sup_epsilon_fdp(m, r, v, alpha, delta)


# --------------------------------------------------------------------------------------------
# Guessing rules from scores, and the search over cut-offs
# --------------------------------------------------------------------------------------------


def _max_cutoff(canaries: int, rule: GuessRule) -> int:
    match rule:
        case TopK():
            return canaries
        case Symmetric():
            return canaries // 2
        case _:
            raise ValueError(f"rule must be TopK() or Symmetric(); got {rule!r}")


def default_cutoffs(canaries: int, *, rule: GuessRule | None = None, size: int = 32) -> tuple[int, ...]:
    """The default a-priori cut-offs: ``size`` geometrically spaced k from min(16, k_max) to k_max, deduplicated.

    k_max = m for :class:`TopK` and ⌊m/2⌋ for :class:`Symmetric`. Depends on the number of canaries only, so it is
    fixed before the run and the Bonferroni correction over it is valid.
    """
    m = _check_count(canaries, "canaries", minimum=1)
    size = _check_count(size, "size", minimum=1)
    k_max = _max_cutoff(m, TopK() if rule is None else rule)
    if k_max < 1:
        raise ValueError(f"canaries must be >= 2 for symmetric guesses; got {canaries!r}")
    k_min = min(16, k_max)
    grid = np.unique(np.rint(np.geomspace(k_min, k_max, size)).astype(np.int64))
    return tuple(int(k) for k in grid)


@dataclass(frozen=True, slots=True)
class _Candidate:
    guesses: int
    correct: int
    in_guesses: int
    in_correct: int
    out_guesses: int
    out_correct: int
    in_threshold: float | None
    out_threshold: float | None


def _cutoff_candidates(
    scores: np.ndarray, labels: np.ndarray, rule: GuessRule, cutoffs: tuple[int, ...]
) -> list[_Candidate]:
    """Counts of each a-priori cut-off, ties resolved against the auditor.

    Ranking by score descending with "out" canaries before "in" canaries among equal scores makes the top-k pick
    the fewest possible true "in"s and the bottom-k the fewest possible true "out"s: v is never larger than under
    any tie-breaking, in particular a uniformly random one, and p is non-increasing in v, so this is conservative.
    """
    m = scores.size
    order = np.lexsort((labels, -scores))  # primary key −score (ascending), ties: label 0 (out) first
    ranked_scores = scores[order]
    in_before = np.concatenate(([0], np.cumsum(labels[order])))  # number of "in"s among the first j
    n_in = int(in_before[-1])
    out: list[_Candidate] = []
    for k in cutoffs:
        tp = int(in_before[k])
        match rule:
            case TopK():
                out.append(_Candidate(k, tp, k, tp, 0, 0, float(ranked_scores[k - 1]), None))
            case Symmetric():
                tn = k - (n_in - int(in_before[m - k]))
                out.append(
                    _Candidate(2 * k, tp + tn, k, tp, k, tn, float(ranked_scores[k - 1]), float(ranked_scores[m - k]))
                )
    return out


def _upper_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the upper concave hull of a staircase — x and y non-decreasing, no point repeated, as the (FN, TN)
    counts of the distinct scores taken as thresholds are — collinear points dropped, both ends kept.

    Vectorised passes drop every interior point on or below the chord of its two neighbours at once — such a point
    lies on or below a chord of two other points of the set, so it is no hull vertex — until none is: the hull of
    Andrew's monotone chain, in a few array operations per pass instead of a Python loop over the points (the
    bootstrap builds a frontier per resample). Integer coordinates (counts) keep the cross products exact.
    """
    index = np.arange(x.size)
    while index.size > 2:
        px, py = x[index], y[index]
        cross = (px[1:-1] - px[:-2]) * (py[2:] - py[:-2]) - (py[1:-1] - py[:-2]) * (px[2:] - px[:-2])
        dropped = cross >= 0
        if not dropped.any():
            break
        index = index[np.concatenate(([True], ~dropped, [True]))]
    return index.astype(np.int64)


def _pareto_candidates(scores: np.ndarray, labels: np.ndarray) -> tuple[list[_Candidate], int]:
    """The "guess in iff score ≥ t" rules at the Pareto-frontier vertices, and the number of vertices (heuristic).

    Thresholds are the distinct scores and +∞; at each, FN = #in below t and TN = #out below t. The vertices are the
    points of the (FN, TN) staircase not weakly dominated by a chord of two others (the concave hull), as in
    jax_privacy's CanaryScoreAuditor; their count, endpoints included, is the Bonferroni factor.
    """
    thresholds = np.concatenate((np.unique(scores), [np.inf]))
    in_sorted, out_sorted = np.sort(scores[labels]), np.sort(scores[~labels])
    fn = np.searchsorted(in_sorted, thresholds, side="left")
    tn = np.searchsorted(out_sorted, thresholds, side="left")
    vertices = _upper_hull(fn.astype(np.int64), tn.astype(np.int64))
    n_in, n_out = in_sorted.size, out_sorted.size
    out: list[_Candidate] = []
    for j in vertices:
        tp, fp = n_in - int(fn[j]), n_out - int(tn[j])
        if tp + fp > 0:
            out.append(_Candidate(tp + fp, tp, tp + fp, tp, 0, 0, float(thresholds[j]), None))
    return out, int(vertices.size)


@dataclass(frozen=True, slots=True, kw_only=True)
class OneRunResult:
    """The outcome of a one-run audit: the bound, its confidence, the counts and the cut-off that produced it.

    ``is_estimate`` is True only for :class:`GaussianFDP` (GDP-shape assumption); ``heuristic`` is True only for
    :class:`ParetoFrontierHeuristic` (data-dependent correction). A result with both False is a valid (1 − α)
    lower bound on ε (Steinke, Nasr, Jagielski 2023; Mahloujifar, Melis, Chaudhuri 2025 against the (ε, δ) curve).
    ``share`` is the fraction of α the reported analysis ran at and ``components`` the bound of every analysis of a
    :class:`Combined` one (each at its share; the largest is reported).
    """

    epsilon_lower_bound: float
    significance: float
    delta: float
    canaries: int
    guesses: int
    correct: int
    in_guesses: int
    in_correct: int
    out_guesses: int
    out_correct: int
    in_threshold: float | None
    out_threshold: float | None
    rule: str
    correction: str
    hypotheses: int
    heuristic: bool
    analysis: str
    reference: str
    is_estimate: bool = False
    assumption: str | None = None
    share: float = 1.0
    components: tuple[dict[str, Any], ...] = ()

    @property
    def confidence(self) -> float:
        return 1.0 - self.significance

    @property
    def hypothesis_significance(self) -> float:
        """α·share/K, the level each of the K candidate cut-offs was tested at (share < 1: :class:`Combined`)."""
        return self.significance * self.share / self.hypotheses

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": "one_run",
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "is_estimate": self.is_estimate,
            "heuristic": self.heuristic,
            "assumption": self.assumption,
            "significance": self.significance,
            "confidence": self.confidence,
            "delta": self.delta,
            "canaries": self.canaries,
            "guesses": self.guesses,
            "correct": self.correct,
            "cutoff": {
                "in_guesses": self.in_guesses,
                "in_correct": self.in_correct,
                "out_guesses": self.out_guesses,
                "out_correct": self.out_correct,
                "in_threshold": self.in_threshold,
                "out_threshold": self.out_threshold,
            },
            "rule": self.rule,
            "correction": self.correction,
            "hypotheses": self.hypotheses,
            "hypothesis_significance": self.hypothesis_significance,
            "analysis": self.analysis,
            "reference": self.reference,
            "share": self.share,
            "components": [dict(c) for c in self.components],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OneRunResult:
        """Inverse of :meth:`to_dict` (a missing field raises ``ValueError`` naming it)."""
        if not isinstance(data, dict):
            raise ValueError(f"one-run result must be a dict; got {type(data).__name__}")
        cutoff_names = ("in_guesses", "in_correct", "out_guesses", "out_correct", "in_threshold", "out_threshold")
        cutoff = data.get("cutoff")
        if not isinstance(cutoff, dict):
            raise ValueError("one-run result is missing required field 'cutoff'")
        optional = {"share": 1.0, "components": ()}  # results written before the combined analysis have neither
        names = [n for n in cls.__dataclass_fields__ if n not in cutoff_names and n not in optional]
        missing = [n for n in names if n not in data] + [n for n in cutoff_names if n not in cutoff]
        if missing:
            raise ValueError(f"one-run result is missing required field {missing[0]!r}")
        components = tuple(dict(c) for c in data.get("components", ()))
        extra = {"share": float(data.get("share", 1.0)), "components": components}
        return cls(**{n: data[n] for n in names}, **{n: cutoff[n] for n in cutoff_names}, **extra)


def _analysis_fields(analysis: OneRunAnalysis, delta: float) -> tuple[str, str, bool, str | None]:
    """(name, reference, is_estimate, assumption) of the analysis (a ``ValueError`` for one that does not apply)."""
    match analysis:
        case ApproximateDP():
            return "approximate_dp", STEINKE_REFERENCE, False, None
        case EpsilonDeltaFDP():
            return "epsilon_delta_fdp", FDP_REFERENCE, False, None
        case GaussianFDP():
            if delta <= 0:
                raise ValueError(f"delta must be in (0, 1) for GaussianFDP; got {delta!r}")
            return "gaussian_fdp", FDP_REFERENCE, True, GDP_FAMILY_ASSUMPTION
        case Combined(analyses=analyses):
            names = " + ".join(_analysis_fields(a, delta)[0] for a in analyses)
            references = "; ".join(dict.fromkeys(_analysis_fields(a, delta)[1] for a in analyses))
            return f"combined ({names})", references, False, None
    raise ValueError(
        f"analysis must be ApproximateDP(), EpsilonDeltaFDP(), GaussianFDP() or Combined(...); got {analysis!r}"
    )


def _best_candidate(
    candidates: list[Any], analysis: OneRunAnalysis, *, m: int, level: float, delta: float
) -> tuple[float, Any]:
    """The largest ε lower bound over the candidate cut-offs (each at ``level``) and its candidate.

    Candidates are visited in decreasing order of their δ = 0 Steinke bound (cheap); the search starts every later
    candidate at the best ε so far (one evaluation decides that it cannot beat it: both tests are monotone in ε).
    """
    r = np.array([c.guesses for c in candidates])
    v = np.array([c.correct for c in candidates])
    ceiling = _epsilon_pure(r, v, level)  # the δ = 0 bound of each candidate: cheap, and ≥ its δ > 0 bound
    order = np.argsort(-ceiling, kind="stable")
    best_eps, best = 0.0, candidates[int(order[0])]
    for j in order:
        cand = candidates[int(j)]
        if isinstance(analysis, ApproximateDP):
            if ceiling[j] <= best_eps:
                break  # sorted: no later candidate can beat the best
            eps = _sup_epsilon(_PValue(m, cand.guesses, cand.correct, delta), level, floor=best_eps)
        else:
            curve = _EPSILON_DELTA if isinstance(analysis, EpsilonDeltaFDP) else _GAUSSIAN
            eps = _sup_epsilon_fdp(m, cand.guesses, cand.correct, level, delta, floor=best_eps, curve=curve)
        if eps > best_eps:
            best_eps, best = eps, cand
    return best_eps, best


def _combined_best(
    candidates: list[Any], analysis: Combined, *, m: int, alpha: float, hypotheses: int, delta: float
) -> tuple[float, Any, float, OneRunAnalysis, tuple[dict[str, Any], ...]]:
    """Every analysis of ``analysis`` on the same candidates at its share of α; the best, its share and the parts."""
    best: tuple[float, Any, float, OneRunAnalysis] | None = None
    parts = []
    for part, share in zip(analysis.analyses, analysis.shares, strict=True):
        eps, cand = _best_candidate(candidates, part, m=m, level=alpha * share / hypotheses, delta=delta)
        name, reference, _, _ = _analysis_fields(part, delta)
        parts.append(
            {
                "analysis": name,
                "reference": reference,
                "share": share,
                "significance": alpha * share,
                "hypothesis_significance": alpha * share / hypotheses,
                "epsilon_lower_bound": float(eps),
                "guesses": cand.guesses,
                "correct": cand.correct,
            }
        )
        if best is None or eps > best[0]:
            best = (eps, cand, share, part)
    assert best is not None
    return (*best, tuple(parts))


def one_run_audit(
    scores: Any,
    labels: Any,
    *,
    significance: float = _DEFAULT_SIGNIFICANCE,
    delta: float = 0.0,
    rule: GuessRule | None = None,
    correction: SearchCorrection | None = None,
    analysis: OneRunAnalysis | None = None,
) -> OneRunResult:
    """One-run audit from canary scores: the best guessing rule, paid for by a multiplicity correction.

    Steinke, Nasr, Jagielski 2023 (their auditor: k₊ "in" guesses for the highest scores, k₋ "out" guesses for the
    lowest, abstentions in between): each candidate cut-off k gives r guesses with v correct; each is tested at
    α/K and the largest ε_lb over the K candidates is reported (a union bound: valid whenever the candidates are
    fixed before the data, as with :class:`BonferroniCutoffs`). Ties at a cut-off are resolved against the auditor
    (conservative).

    The labels must come from the one-run game: each canary included independently with probability ½ before the
    run (a balanced design with exactly m/2 included, as in the jax_privacy test of auditing-anchors §5.5, is not
    covered by the theorem). m is the number of scores.

    Args:
        scores: one attack score per canary, higher ⇒ "in" (negate a score with the opposite convention).
        labels: the true inclusion of each canary (booleans or 0/1; 1 = included).
        significance: α ∈ (0, 1) for the whole search.
        delta: δ ∈ [0, 1) of the (ε, δ) statement under test (δ > 0 required by :class:`GaussianFDP`).
        rule: :class:`TopK` (default) or :class:`Symmetric`.
        correction: :class:`BonferroniCutoffs` (default, valid) or :class:`ParetoFrontierHeuristic` (heuristic).
        analysis: :class:`ApproximateDP` (default, a bound), :class:`EpsilonDeltaFDP` (a bound),
            :class:`Combined` (the largest of several bounds, α split between them) or :class:`GaussianFDP`
            (an estimate).

    Returns:
        A :class:`OneRunResult`.
    """
    s, lab = _check_scores_labels(scores, labels)
    alpha = check_significance(significance)
    delta = _check_delta(delta)
    rule = TopK() if rule is None else rule
    correction = BonferroniCutoffs() if correction is None else correction
    analysis = ApproximateDP() if analysis is None else analysis
    m = s.size
    k_max = _max_cutoff(m, rule)
    analysis_name, reference, is_estimate, assumption = _analysis_fields(analysis, delta)
    match correction:
        case BonferroniCutoffs(cutoffs=cutoffs, size=size):
            if k_max < 1:
                raise ValueError(f"scores must hold at least 2 canaries for symmetric guesses; got {m}")
            if cutoffs is None:
                cutoffs = default_cutoffs(m, rule=rule, size=size)
            elif cutoffs[-1] > k_max:
                name = type(rule).__name__
                raise ValueError(f"cutoffs must be <= {k_max} for {name}() on {m} canaries; got {cutoffs!r}")
            candidates = _cutoff_candidates(s, lab, rule, cutoffs)
            hypotheses, correction_name, heuristic = len(cutoffs), "bonferroni_cutoffs", False
        case ParetoFrontierHeuristic():
            if not isinstance(rule, TopK):
                raise ValueError(f"rule must be TopK() with ParetoFrontierHeuristic; got {rule!r}")
            candidates, hypotheses = _pareto_candidates(s, lab)
            correction_name, heuristic = "pareto_frontier_heuristic", True
            assumption = PARETO_HEURISTIC_NOTE if assumption is None else f"{assumption}; {PARETO_HEURISTIC_NOTE}"
        case _:
            raise ValueError(f"correction must be BonferroniCutoffs() or ParetoFrontierHeuristic(); got {correction!r}")
    if not candidates:
        raise ValueError(f"labels give no candidate guesses (all scores tie at +inf?); got {m} canaries")

    share, components = 1.0, ()
    if isinstance(analysis, Combined):
        best_eps, best, share, _, components = _combined_best(
            candidates, analysis, m=m, alpha=alpha, hypotheses=hypotheses, delta=delta
        )
    else:
        best_eps, best = _best_candidate(candidates, analysis, m=m, level=alpha / hypotheses, delta=delta)
    return OneRunResult(
        epsilon_lower_bound=float(best_eps),
        significance=alpha,
        delta=delta,
        canaries=m,
        **asdict(best),  # the counts and thresholds of the cut-off that gave the bound
        rule="top_k" if isinstance(rule, TopK) else "symmetric",
        correction=correction_name,
        hypotheses=hypotheses,
        heuristic=heuristic,
        analysis=analysis_name,
        reference=reference,
        is_estimate=is_estimate,
        assumption=assumption,
        share=share,
        components=components,
    )
