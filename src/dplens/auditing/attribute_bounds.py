"""Exact bounds on attribute-inference success under an (ε, δ) claim, and the ε lower bound a measured one implies.

Seed 003 (Mahloujifar, Guo, Suh, Chaudhuri, IEEE S&P 2025) bounds a k-ary attribute attacker's success under
feature DP; here the tightest such bound for any prior — closed forms for uniform and binary priors, a hockey-stick
linear programme otherwise (at most :data:`LP_MAX_VALUES` values) — and its inversion: the smallest ε compatible with
a success rate measured with Clopper–Pearson confidence (:func:`bound_from_counts`). The game that measures the
success is :mod:`dplens.auditing.attribute`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, sparse, special

from dplens._numbers import finite_or_none as _finite
from dplens.accountant import conversions
from dplens.auditing import bounds as bd
from dplens.auditing.bounds import check_confidence as _check_confidence
from dplens.auditing.bounds import check_int as _check_int

__all__ = [
    "ADJACENCY",
    "LP_MAX_VALUES",
    "AttributeBound",
    "bound_from_counts",
    "epsilon_lower_bound",
    "max_success",
    "max_success_from_profile",
    "max_success_prior_bound",
]

#: The adjacency every ε of this module presumes.
ADJACENCY = (
    "epsilon here refers to changing this one attribute of one record (feature-level / replace-one adjacency): "
    "the data sets of the game differ only in the target record's protected attribute"
)

#: Largest number of attribute values (with positive prior) for which the exact linear program is solved.
LP_MAX_VALUES = 16
#: Added to every linear-programme optimum, so that solver tolerance never makes an upper bound too small.
_LP_MARGIN = 1e-8
#: Above this ε every bound is within e^−30 of 1; the linear programme is not solved there (ill-conditioned).
_LP_MAX_EPSILON = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AttackCounts:
    """An attribute-inference attack's successes in its trials and the bounds they give (a bound, not an
    estimate): the fields every attribute result holds first (:class:`AttributeBound`,
    :class:`~dplens.auditing.attribute.AttributeAuditResult`)."""

    successes: int
    trials: int
    success_rate: float
    success_lower_bound: float
    confidence_interval: tuple[float, float]
    baseline: float
    advantage: float
    advantage_lower_bound: float
    epsilon_lower_bound: float

    def attack_counts(self) -> dict[str, Any]:
        """These fields as they stand (to build a result that carries them)."""
        return {name: getattr(self, name) for name in AttackCounts.__dataclass_fields__}

    def attack_fields(self) -> dict[str, Any]:
        """These fields JSON-ready, as every attribute result writes them first."""
        return {
            "successes": self.successes,
            "trials": self.trials,
            "success_rate": self.success_rate,
            "success_lower_bound": self.success_lower_bound,
            "confidence_interval": list(self.confidence_interval),
            "baseline": self.baseline,
            "advantage": self.advantage,
            "advantage_lower_bound": self.advantage_lower_bound,
            "epsilon_lower_bound": _finite(self.epsilon_lower_bound),
            "is_estimate": False,
        }


# --------------------------------------------------------------------------------------------
# Priors and the bounds on success
# --------------------------------------------------------------------------------------------


def _check_prior(prior: Any, name: str = "prior") -> np.ndarray:
    try:
        p = np.asarray(prior, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a vector of probabilities summing to 1; got {prior!r}") from None
    if p.ndim != 1 or p.size < 2 or not np.all(np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must be a vector of at least 2 probabilities summing to 1; got {prior!r}")
    if np.count_nonzero(p) < 2:
        raise ValueError(f"{name} must give positive probability to at least 2 values; got {prior!r}")
    return p / p.sum()


def _support(prior: np.ndarray) -> np.ndarray:
    return prior[prior > 0]


def _is_uniform(support: np.ndarray) -> bool:
    return bool(np.ptp(support) <= 1e-12 * support.max())


def _epsilon_delta(epsilon: Any, delta: Any) -> tuple[float, float]:
    return conversions.check_epsilon(epsilon), conversions.check_delta(delta, allow_zero=True)


def _uniform_success(epsilon: np.ndarray, delta: np.ndarray, k: int) -> np.ndarray:
    """(e^ε + (k − 1)δ)/(e^ε + k − 1) = 1 − (1 − δ)·expit(ln(k − 1) − ε), stable for any ε."""
    return 1.0 - (1.0 - delta) * special.expit(math.log(k - 1) - epsilon)


def _binary_success(epsilon: np.ndarray, delta: np.ndarray, top: float) -> np.ndarray:
    """max{π_max + (1 − π_max)δ, (e^ε + δ)/(e^ε + 1)}: the exact binary maximum for any prior."""
    return np.maximum(top + (1.0 - top) * delta, _uniform_success(epsilon, delta, 2))


def _prior_bound(epsilon: np.ndarray, delta: np.ndarray, support: np.ndarray) -> np.ndarray:
    """m(e^ε + (k₊ − 1)δ)/(m e^ε + 1 − m) in the stable form 1 − (1 − m − m(k₊ − 1)δ)e^{−ε}/(m + (1 − m)e^{−ε})."""
    m, k = float(support.max()), support.size
    decay = np.exp(-np.asarray(epsilon, dtype=float))
    return np.minimum(1.0, 1.0 - (1.0 - m - m * (k - 1) * delta) * decay / (m + (1.0 - m) * decay))


def _lp_success(epsilon: float, delta: float, support: np.ndarray) -> float:
    """The exact maximum success by linear programming (see the module docstring), plus a safety margin."""
    return _lp_cached(float(epsilon), float(delta), tuple(float(p) for p in support))


@functools.lru_cache(maxsize=4096)
def _lp_cached(epsilon: float, delta: float, prior: tuple[float, ...]) -> float:
    # Cached: an audit's ceiling and repeated audits of one design invert the same programme many times.
    support = np.asarray(prior)
    k = support.size
    scale = math.exp(epsilon)
    pairs = np.array([(a, b) for a in range(k) for b in range(k) if a != b])
    npairs = len(pairs)
    nq = k * k
    g = np.arange(k)
    # Rows r = pair·k + g: Q[a, g] − e^ε Q[b, g] − T[pair, g] ≤ 0.
    rows = np.repeat(np.arange(npairs * k), 2)
    cols = np.stack([(pairs[:, :1] * k + g).ravel(), (pairs[:, 1:] * k + g).ravel()], axis=1).ravel()
    vals = np.tile([1.0, -scale], npairs * k)
    nvars, nrows = nq, npairs * k
    upper = [np.zeros(npairs * k)]
    if delta > 0:
        slack = nq + np.arange(npairs * k)
        rows = np.concatenate([rows, np.arange(npairs * k), nrows + np.repeat(np.arange(npairs), k)])
        cols = np.concatenate([cols, slack, slack])
        vals = np.concatenate([vals, -np.ones(npairs * k), np.ones(npairs * k)])
        nvars, nrows = nq + npairs * k, nrows + npairs
        upper.append(np.full(npairs, delta))
    a_ub = sparse.csr_array((vals, (rows, cols)), shape=(nrows, nvars))
    a_eq = sparse.csr_array((np.ones(nq), (np.repeat(g, k), np.arange(nq))), shape=(k, nvars))
    cost = np.zeros(nvars)
    cost[g * k + g] = -support
    result = optimize.linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.concatenate(upper),
        A_eq=a_eq,
        b_eq=np.ones(k),
        bounds=(0, None),
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if result.status != 0:  # pragma: no cover - the programme is always feasible and bounded
        return float(_prior_bound(epsilon, delta, support))
    return min(1.0, -float(result.fun) + _LP_MARGIN)


def _exact_success(epsilon: float, delta: float, support: np.ndarray) -> float:
    if _is_uniform(support):
        return float(_uniform_success(epsilon, delta, support.size))
    if support.size == 2:
        return float(_binary_success(epsilon, delta, float(support.max())))
    bound = float(_prior_bound(epsilon, delta, support))
    if support.size > LP_MAX_VALUES or epsilon > _LP_MAX_EPSILON:
        return bound
    return min(bound, _lp_success(epsilon, delta, support))


def max_success(*, epsilon: float, delta: float, prior: Sequence[float] | np.ndarray) -> float:
    """The largest success probability of any attacker against any mechanism that is (ε, δ)-DP between every two
    values of the attribute (replace-one adjacency on the attribute), for attribute values drawn from ``prior``.

    Derived in auditing-anchors §6.1 and in this module's docstring (not from a paper): uniform prior
    (e^ε + (k − 1)δ)/(e^ε + k − 1); k = 2, max{π_max + (1 − π_max)δ, (e^ε + δ)/(e^ε + 1)}; otherwise the exact
    linear program over (ε, δ)-DP guess channels (k₊ ≤ 16 values with positive prior; beyond, or for ε > 30, the
    valid but looser :func:`max_success_prior_bound`). Rounded up.

    Args:
        epsilon: ε ≥ 0.
        delta: δ ∈ [0, 1).
        prior: probabilities of the k attribute values (values of zero probability are never drawn and do not
            change the bound).
    """
    eps, d = _epsilon_delta(epsilon, delta)
    support = _support(_check_prior(prior))
    return min(1.0, conversions.round_up(_exact_success(eps, d, support)))


def max_success_prior_bound(*, epsilon: float, delta: float, prior: Sequence[float] | np.ndarray) -> float:
    """The closed-form bound m(e^ε + (k₊ − 1)δ)/(m e^ε + 1 − m) on the success of any attacker (m = max π, k₊ the
    number of values of positive prior), for (ε, δ)-DP between every two attribute values.

    At δ = 0 it is the posterior-odds bound e^ε π_max/(e^ε π_max + 1 − π_max) (auditing-anchors §6.1); the δ > 0
    form is derived in this module's docstring (not from a paper). Exact for a uniform prior, loose otherwise: use
    :func:`max_success` for the exact maximum. Rounded up, capped at 1.
    """
    eps, d = _epsilon_delta(epsilon, delta)
    support = _support(_check_prior(prior))
    return min(1.0, conversions.round_up(float(_prior_bound(eps, d, support))))


def _invert(function: Callable[[float], float], target: float, low: float) -> float:
    """inf{ε ≥ low : function(ε) ≥ target} for a continuous non-decreasing function, rounded down."""
    if function(low) >= target:
        return low
    high = max(2.0 * low, 1.0)
    while function(high) < target:
        if high > _LP_MAX_EPSILON:
            return high
        low, high = high, 2.0 * high
    root = optimize.brentq(lambda e: function(e) - target, low, high, xtol=1e-10, rtol=1e-12)
    return max(low, root - 1e-7)


def epsilon_lower_bound(success_lower_bound: float, *, delta: float, prior: Sequence[float] | np.ndarray) -> float:
    """The smallest ε whose :func:`max_success` reaches ``success_lower_bound``: ε_lb = inf{ε ≥ 0 :
    max_success(ε, δ, π) ≥ p_lb}, clamped at 0 (derived in auditing-anchors §6.1, not from a paper).

    Uniform prior: ε_lb = ln((k − 1)(p_lb − δ)/(1 − p_lb)) (δ = 0: ln(p_lb(k − 1)/(1 − p_lb))); k = 2 with any
    prior: ln((p_lb − δ)/(1 − p_lb)) once p_lb exceeds π_max + (1 − π_max)δ; otherwise the linear programme is
    inverted numerically (Brent's method, rounded down by 1e-7). Replace-one adjacency on the attribute
    (:data:`ADJACENCY`).
    """
    p = float(success_lower_bound) if isinstance(success_lower_bound, int | float | np.number) else math.nan
    if not 0 <= p <= 1:
        raise ValueError(f"success_lower_bound must be in [0, 1]; got {success_lower_bound!r}")
    d = conversions.check_delta(delta, allow_zero=True)
    support = _support(_check_prior(prior))
    if p >= 1.0:
        return math.inf
    if _is_uniform(support) or support.size == 2:
        k = support.size
        floor = _binary_success(0.0, d, float(support.max())) if k == 2 else _uniform_success(0.0, d, k)
        if p <= floor or p <= d:
            return 0.0
        return max(0.0, math.log(k - 1) + math.log(p - d) - math.log1p(-p))
    low = _invert(lambda e: float(_prior_bound(e, d, support)), p, 0.0)  # the looser bound is reached first
    return _invert(lambda e: _exact_success(e, d, support), p, low)


# --------------------------------------------------------------------------------------------
# Counts → statistics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributeBound(AttackCounts):
    """The statistics of S successes in n trials of an attribute-inference attack (a bound, not an estimate)."""

    delta: float
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.attack_fields(),
            "delta": self.delta,
            "confidence": self.confidence,
            "adjacency": ADJACENCY,
        }


def bound_from_counts(
    successes: int,
    trials: int,
    *,
    prior: Sequence[float] | np.ndarray,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> AttributeBound:
    """Bound ε from the successes of any attribute-inference attack (auditing-anchors §6.2's recommended API).

    The success lower bound is one-sided Clopper–Pearson at α = 1 − confidence (Clopper & Pearson 1934); the
    interval is two-sided exact at the same confidence (α/2 per side), for reporting. The baseline is
    max π (the best guess without the output; Jayaraman & Evans 2022 insist on reporting it) and the normalised
    advantage is (P − baseline)/(1 − baseline). The trials must be independent, each with its attribute drawn from
    ``prior`` and guessed by one fixed attacker.
    """
    n = _check_int("trials", trials, 1)
    s = _check_int("successes", successes, 0)
    if s > n:
        raise ValueError(f"successes must be <= trials ({n}); got {successes!r}")
    p = _check_prior(prior)
    d = conversions.check_delta(delta, allow_zero=True)
    alpha = 1.0 - _check_confidence(confidence)
    lower = float(bd.clopper_pearson_lower(s, n, alpha))
    interval = (float(bd.clopper_pearson_lower(s, n, alpha / 2)), float(bd.clopper_pearson_upper(s, n, alpha / 2)))
    base = float(p.max())
    return AttributeBound(
        successes=s,
        trials=n,
        success_rate=s / n,
        success_lower_bound=lower,
        confidence_interval=interval,
        baseline=base,
        advantage=(s / n - base) / (1.0 - base),
        advantage_lower_bound=(lower - base) / (1.0 - base),
        epsilon_lower_bound=epsilon_lower_bound(lower, delta=d, prior=p),
        delta=d,
        confidence=1.0 - alpha,
    )


# ε ≥ 0 grid on which a GDP or profile claim is read as (ε, δ(ε)) pairs: every point gives a valid bound.
_CLAIM_GRID = np.unique(np.concatenate([[0.0], np.geomspace(1e-6, 60.0, 600), np.arange(0.0, 30.0, 0.005)]))


def max_success_from_profile(delta_of: Callable[[np.ndarray], np.ndarray], support: np.ndarray) -> float:
    """The largest success any mechanism with privacy profile δ(ε) allows: min over ε of the exact (ε, δ(ε))
    maximum (valid for any claim that implies every (ε, δ(ε))).

    For k = 2 and a uniform prior under μ-GDP the minimum sits at ε = 0 and equals Φ(μ/2), the exact f-DP optimum;
    for larger k it may exceed the f-DP optimum (a single (ε, δ) point is a weaker constraint than the curve).
    """
    eps = _CLAIM_GRID
    deltas = np.clip(np.nan_to_num(np.asarray(delta_of(eps), dtype=float), nan=1.0), 0.0, 1.0)
    if _is_uniform(support):
        values = _uniform_success(eps, deltas, support.size)
    elif support.size == 2:
        values = _binary_success(eps, deltas, float(support.max()))
    else:
        values = _prior_bound(eps, deltas, support)
        best = int(np.argmin(values))
        if support.size <= LP_MAX_VALUES:
            candidates = np.unique(np.clip(eps[best] + np.linspace(-1.0, 1.0, 21), 0.0, _LP_MAX_EPSILON))
            cand_deltas = np.clip(np.asarray(delta_of(candidates), dtype=float), 0.0, 1.0)
            lp = [_lp_success(float(e), float(d), support) for e, d in zip(candidates, cand_deltas, strict=True)]
            return min(1.0, conversions.round_up(min(float(np.min(values)), *lp)))
    return min(1.0, conversions.round_up(float(np.min(values))))
