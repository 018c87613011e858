"""Attack risk read off the trade-off curve: the largest TPR of any membership attack at a given FPR, the largest
advantage TPR − FPR, and the largest success of a Bayesian attacker with a given prior — each a certified upper bound.

An attacker who sees the outputs and tests "the protected unit is in the data" against "it is not" (either way
round: add/remove adjacency is symmetric) runs a hypothesis test; its false-positive rate α and false-negative rate
β lie on or above the mechanism's trade-off curve f (Dong, Roth, Su 2022, JRSS-B, arXiv 1905.02383, Definition 2.1;
Kulynych et al., "Attack-Aware Noise Calibration for Differential Privacy", NeurIPS 2024, §3). So:

- TPR at FPR α ≤ 1 − f(α);
- advantage = max (TPR − FPR) ≤ δ(0), the total-variation distance (DRS 2022, Prop. 2.12 at ε = 0);
- with prior π that the unit is in the data, a Bayesian attacker guesses right with probability at most
  max(π, 1 − π) + min(π, 1 − π)·δ(|log(π/(1 − π))|) (the hockey-stick form of the Bayes risk of a binary test,
  e.g. Kulynych et al. 2025, arXiv 2507.06969, Prop. D.1).

The curve is taken from a privacy profile δ(ε) that bounds both directions of the neighbouring relation (the
larger of the add and remove δ): f(α) ≥ sup_{ε ≥ 0} max(1 − δ(ε) − e^ε α, e^{−ε}(1 − δ(ε) − α)) (DRS 2022, Prop.
2.12; the second branch is the first for the reversed test). This is the lower envelope of the trade-off curves of
both directions (their convex hull), so it holds whichever way round the attacker frames the test.

Routes (each named in the result):

- ``exact``: a closed form — G_μ for compositions of Gaussians (DRS 2022 Def. 2.7: TPR = Φ(Φ⁻¹(α) + μ)), the exact
  curve of finite privacy-loss distributions (randomized response, Laplace); or a closed-form δ(ε) on a fine ε grid
  with a bracket (:func:`_profile_risk`).
- ``pld``: dplens's PLD engine (:mod:`dplens.accountant.pld_engine`): its pessimistic PMFs with every error term
  (mass outside the window, floating point, +∞) added to δ(ε) give the upper bound, its optimistic PMFs with the
  error terms subtracted the other side of a certified bracket. For a discrete PLD the supremum over ε is attained
  at a loss value or where the two directions' δ cross (δ = A − e^ε·B between loss values, so both branches are
  monotone in e^ε there): the sup is computed exactly over those points. The grid is refined until every bracket is
  within ``tolerance`` (relative). Ledgers the engine does not model use dp-accounting's PLD (upper side only).
- ``rdp``: from the RDP curve r(λ) by data processing on the test's decision: D_λ(Bern(TPR) ‖ Bern(FPR)) ≤ r(λ) and
  D_λ(Bern(FPR) ‖ Bern(TPR)) ≤ r(λ) for every order λ (Balle et al. 2020, AISTATS, "Hypothesis testing
  interpretations and Rényi differential privacy", §3); the largest TPR meeting them, minimised over λ (upper side
  only).
- ``best``: the smallest upper bound of the routes that apply, quantity by quantity (each route is valid, so their
  minimum is too), and the largest lower end.

Example (one Gaussian with σ = 1, i.e. 1-GDP: TPR at FPR 1 % is Φ(Φ⁻¹(0.01) + 1) = 0.09236):
    >>> from dplens import Accountant, Gaussian
    >>> risk = attack_risk(Accountant().compose(Gaussian(noise_multiplier=1.0)), fprs=(0.01,))
    >>> round(risk.tpr_upper[0], 4), round(risk.advantage_upper, 4), risk.method.value
    (0.0924, 0.3829, 'exact')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant.rdp import UnsupportedEventError
from dplens.accountant.routes import Method, as_method

__all__ = [
    "CURVE_FPRS",
    "DEFAULT_FPRS",
    "DEFAULT_RISK_TOLERANCE",
    "AttackRisk",
    "attack_risk",
    "budget_risk",
    "check_fpr",
    "check_prior",
]

#: The FPRs a report's attack-risk card shows: 0.1 %, 1 % and 10 %.
DEFAULT_FPRS = (0.001, 0.01, 0.1)
#: The PLD route refines its grid until every bracket (TPR, advantage, success) is within this relative width.
DEFAULT_RISK_TOLERANCE = 1e-3
#: FPRs at which a result samples the curve for figures (log-spaced, with the card's FPRs).
CURVE_FPRS = tuple(
    sorted({*np.geomspace(1e-6, 1.0, 61)[:-1].tolist(), *np.linspace(0.05, 0.95, 19).tolist(), 0.975, 0.99, 0.999})
)
# Floating-point margin: every upper bound is raised (every lower end lowered) by this much, absolute, plus a relative
# 1e-12: the sums behind a bound carry errors of a few ulps of 1.
_ABSOLUTE_MARGIN = 1e-12
_RELATIVE_MARGIN = 1e-12
_FLOOR = 1e-7  # brackets narrower than this (absolute) are within any tolerance
_MAX_ROUNDS = 6
_FIRST_INTERVAL = 2e-3


def _up(value: np.ndarray | float) -> np.ndarray:
    v = np.asarray(value, dtype=float)
    return np.minimum(v + np.abs(v) * _RELATIVE_MARGIN + _ABSOLUTE_MARGIN, 1.0)


def _down(value: np.ndarray | float) -> np.ndarray:
    v = np.asarray(value, dtype=float)
    return np.maximum(v - np.abs(v) * _RELATIVE_MARGIN - _ABSOLUTE_MARGIN, 0.0)


def check_fpr(value: Any, *, name: str = "fpr") -> float:
    """A false-positive rate in the open interval (0, 1), as a float; ValueError naming ``name`` otherwise."""
    try:
        fpr = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1); got {value!r}") from None
    if isinstance(value, bool) or not (0.0 < fpr < 1.0):
        raise ValueError(f"{name} must be a number in (0, 1); got {value!r}")
    return fpr


def check_prior(value: Any) -> float:
    """A prior probability in (0, 1) that the protected unit is in the data; ValueError otherwise."""
    return check_fpr(value, name="prior")


def _check_fprs(fprs: Any) -> tuple[float, ...]:
    if isinstance(fprs, int | float) and not isinstance(fprs, bool):
        fprs = (fprs,)
    try:
        values = tuple(check_fpr(f) for f in fprs)
    except TypeError:
        raise ValueError(f"fprs must be a sequence of numbers in (0, 1); got {fprs!r}") from None
    if not values:
        raise ValueError("fprs must name at least one false-positive rate in (0, 1); got none")
    return tuple(dict.fromkeys(values))


def _key(fpr: float) -> str:
    """A float as a JSON object key that reads back to the same float."""
    return repr(float(fpr))


@dataclass(frozen=True, slots=True, kw_only=True)
class AttackRisk:
    """The attack risk of a ledger: upper bounds on what any attacker can reach, with the bracket and the route.

    ``tpr_upper[i]`` bounds the true-positive rate of every attack at false-positive rate ``fprs[i]``;
    ``advantage_upper`` bounds TPR − FPR over all attacks; ``success_upper`` (with ``prior``) bounds the probability
    that an attacker who knows everything else guesses membership right. Each is an upper bound (rounded up). The
    ``*_lower`` values are the other end of the route's certified bracket: the exact value of the route's curve lies
    in between (None where the route has no lower end: RDP, dp-accounting's PLD).

    Example:
        >>> from dplens import Accountant, Gaussian
        >>> risk = attack_risk(Accountant().compose(Gaussian(noise_multiplier=2.0)), fprs=(0.001, 0.01), prior=0.5)
        >>> risk.tpr(0.01) <= 0.0347, round(risk.success_upper, 4)
        (True, 0.5987)
    """

    fprs: tuple[float, ...]
    tpr_upper: tuple[float, ...]
    advantage_upper: float
    method: Method
    details: str
    neighboring: str
    tpr_lower: tuple[float, ...] | None = None
    advantage_lower: float | None = None
    prior: float | None = None
    success_upper: float | None = None
    success_lower: float | None = None
    curve: tuple[tuple[float, float, float | None], ...] = ()
    routes: tuple[AttackRisk, ...] = field(default=())

    def tpr(self, fpr: float) -> float:
        """The upper bound on the TPR at ``fpr`` (one of :attr:`fprs`)."""
        fpr = check_fpr(fpr)
        if fpr not in self.fprs:
            raise ValueError(f"fpr {fpr!r} was not computed; computed: {list(self.fprs)}")
        return self.tpr_upper[self.fprs.index(fpr)]

    @property
    def low_fpr_ratio(self) -> float:
        """TPR / FPR at the smallest FPR computed: how many times likelier a correct accusation is than a false one."""
        return self.tpr_upper[0] / self.fprs[0] if self.fprs else math.nan

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fprs": list(self.fprs),
            "tpr_upper": {_key(f): t for f, t in zip(self.fprs, self.tpr_upper, strict=True)},
            "tpr_lower": None
            if self.tpr_lower is None
            else {_key(f): t for f, t in zip(self.fprs, self.tpr_lower, strict=True)},
            "advantage_upper": self.advantage_upper,
            "advantage_lower": self.advantage_lower,
            "bracket": {
                "tpr": {
                    _key(f): [None if self.tpr_lower is None else self.tpr_lower[i], self.tpr_upper[i]]
                    for i, f in enumerate(self.fprs)
                },
                "advantage": [self.advantage_lower, self.advantage_upper],
            },
            "is_upper_bound": True,
            "method": self.method.value,
            "details": self.details,
            "neighboring": self.neighboring,
        }
        if self.prior is not None:
            out["bayes"] = {
                "prior": self.prior,
                "success_upper": self.success_upper,
                "success_lower": self.success_lower,
                "baseline": max(self.prior, 1.0 - self.prior),
            }
            out["bracket"]["success"] = [self.success_lower, self.success_upper]
        if self.curve:
            out["curve"] = [{"fpr": f, "tpr_upper": u, "tpr_lower": lo} for f, u, lo in self.curve]
        if self.routes:  # each route's numbers (their curves stay out: the combined one is above)
            out["routes"] = [{k: v for k, v in r.to_dict().items() if k != "curve"} for r in self.routes]
        return out

    def __repr__(self) -> str:
        points = ", ".join(f"TPR@{f:g}<={t:.4g}" for f, t in zip(self.fprs, self.tpr_upper, strict=True))
        return f"AttackRisk({points}, advantage<={self.advantage_upper:.4g} [upper bounds], method={self.method.value})"

    def _repr_html_(self) -> str:
        from dplens._display import html_table

        rows = [(f"TPR at FPR {f:g} (upper bound)", t) for f, t in zip(self.fprs, self.tpr_upper, strict=True)]
        rows += [("advantage TPR − FPR (upper bound)", self.advantage_upper), ("route", self.method.value)]
        if self.prior is not None:
            rows.append((f"Bayesian success, prior {self.prior:g} (upper bound)", self.success_upper))
        return html_table("Attack risk", rows)


# --------------------------------------------------------------------------------------------
# The curve from a privacy profile given on points: sup over ε of the two branches
# --------------------------------------------------------------------------------------------


def _envelope(epsilons: np.ndarray, deltas: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """max over k of max(1 − δ_k − e^{ε_k} α, e^{−ε_k}(1 − δ_k − α)), clipped to [0, 1 − α] (DRS 2022 Prop. 2.12),
    in chunks so that memory stays small."""
    x = np.exp(np.asarray(epsilons, dtype=float))[:, None]
    one_minus = (1.0 - np.asarray(deltas, dtype=float))[:, None]
    alphas = np.asarray(alphas, dtype=float)
    out = np.empty(alphas.size)
    step = max(1, 4_000_000 // max(x.size, 1))
    for start in range(0, alphas.size, step):
        a = alphas[None, start : start + step]
        with np.errstate(over="ignore", invalid="ignore"):
            values = np.maximum(one_minus - x * a, (one_minus - a) / x)
        values = np.where(np.isnan(values), -np.inf, values)
        out[start : start + step] = values.max(axis=0)
    return np.clip(np.minimum(out, 1.0 - alphas), 0.0, 1.0)


@dataclass(frozen=True, slots=True)
class _Direction:
    """δ(ε) = c + Σ_{s > ε} p(s)(1 − e^{ε − s}) for ε ≥ 0 of one direction of a discrete PLD: losses s ≥ 0 sorted,
    suffix sums A = Σ_{s ≥ sⱼ} p and B = Σ_{s ≥ sⱼ} p·e^{−s} (A[n] = B[n] = 0), and the constant c."""

    losses: np.ndarray
    a: np.ndarray
    b: np.ndarray
    constant: float

    @classmethod
    def of(cls, losses: np.ndarray, probs: np.ndarray, constant: float) -> _Direction:
        keep = (losses >= 0) & (probs != 0)
        s, p = losses[keep], probs[keep]
        order = np.argsort(s, kind="stable")
        s, p = s[order], p[order]
        a = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        with np.errstate(under="ignore"):
            b = np.concatenate([np.cumsum((p * np.exp(-s))[::-1])[::-1], [0.0]])
        return cls(s, a, b, float(constant))

    def sums(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(c + A, B) of the losses above each ε: δ(ε) = first − e^ε·second."""
        index = np.searchsorted(self.losses, epsilons, side="right")
        return self.constant + self.a[index], self.b[index]

    def delta(self, epsilons: np.ndarray) -> np.ndarray:
        first, second = self.sums(epsilons)
        with np.errstate(over="ignore", invalid="ignore"):
            return first - np.exp(epsilons) * second


def _breakpoints(directions: Sequence[_Direction]) -> np.ndarray:
    """Every ε ≥ 0 where the supremum can sit: 0, each loss value, and where two directions' δ cross between them."""
    points = np.unique(np.concatenate([[0.0], *[d.losses for d in directions]]))
    if len(directions) < 2 or points.size < 2:
        return points
    inside = 0.5 * (points[:-1] + points[1:])  # any point of an interval gives its sums
    crossings = []
    for i, first in enumerate(directions):
        for second in directions[i + 1 :]:
            a1, b1 = first.sums(inside)
            a2, b2 = second.sums(inside)
            with np.errstate(divide="ignore", invalid="ignore"):
                x = (a1 - a2) / (b1 - b2)  # where a1 − x·b1 = a2 − x·b2
                eps = np.log(np.where(x > 0, x, np.nan))
            ok = np.isfinite(eps) & (eps > points[:-1]) & (eps < points[1:])
            crossings.append(eps[ok])
    return np.unique(np.concatenate([points, *crossings]))


class _DiscreteSide:
    """One side (pessimistic or optimistic) of a discrete PLD ledger: δ(ε) = max over directions, exactly."""

    def __init__(self, directions: Sequence[_Direction]) -> None:
        self.directions = tuple(directions)
        self._points: np.ndarray | None = None
        self._deltas: np.ndarray | None = None

    def delta(self, epsilons: np.ndarray) -> np.ndarray:
        eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
        return np.maximum.reduce([d.delta(eps) for d in self.directions])

    def trade_off(self, alphas: np.ndarray) -> np.ndarray:
        """f(α) = sup over ε ≥ 0 of the two branches, computed at every point where the sup can sit (exact)."""
        if self._points is None:
            self._points = _breakpoints(self.directions)
            self._deltas = self.delta(self._points)
        return _envelope(self._points, self._deltas, alphas)


# --------------------------------------------------------------------------------------------
# Results of one route
# --------------------------------------------------------------------------------------------


def _success(prior: float, delta_at: Callable[[float], float]) -> float:
    """max(π, 1 − π) + min(π, 1 − π)·δ(|log(π / (1 − π))|) (see the module's docstring)."""
    return max(prior, 1.0 - prior) + min(prior, 1.0 - prior) * delta_at(abs(math.log(prior / (1.0 - prior))))


@dataclass(frozen=True, slots=True)
class _Query:
    fprs: tuple[float, ...]
    prior: float | None
    curve: bool
    neighboring: str

    def alphas(self) -> np.ndarray:
        extra = CURVE_FPRS if self.curve else ()
        return np.array(sorted({*self.fprs, *extra}), dtype=float)


def _result(
    query: _Query,
    method: Method,
    details: str,
    *,
    upper: Callable[[np.ndarray], np.ndarray],
    lower: Callable[[np.ndarray], np.ndarray] | None,
    delta_upper: Callable[[float], float],
    delta_lower: Callable[[float], float] | None,
) -> AttackRisk:
    """An :class:`AttackRisk` from TPR functions (upper, optional lower) of α and δ(ε) functions of both sides."""
    alphas = query.alphas()
    tpr_hi = _up(upper(alphas))
    tpr_lo = None if lower is None else np.minimum(_down(lower(alphas)), tpr_hi)
    index = {float(a): i for i, a in enumerate(alphas)}
    pick = [index[f] for f in query.fprs]
    adv_hi = float(_up(delta_upper(0.0)))
    adv_lo = None if delta_lower is None else min(float(_down(delta_lower(0.0))), adv_hi)
    success_hi = success_lo = None
    if query.prior is not None:
        success_hi = float(_up(_success(query.prior, delta_upper)))
        if delta_lower is not None:
            success_lo = min(float(_down(_success(query.prior, delta_lower))), success_hi)
    curve = ()
    if query.curve:
        curve = tuple(
            (float(a), float(tpr_hi[i]), None if tpr_lo is None else float(tpr_lo[i])) for i, a in enumerate(alphas)
        )
    return AttackRisk(
        fprs=query.fprs,
        tpr_upper=tuple(float(tpr_hi[i]) for i in pick),
        tpr_lower=None if tpr_lo is None else tuple(float(tpr_lo[i]) for i in pick),
        advantage_upper=adv_hi,
        advantage_lower=adv_lo,
        method=method,
        details=details,
        neighboring=query.neighboring,
        prior=query.prior,
        success_upper=success_hi,
        success_lower=success_lo,
        curve=curve,
    )


def _scalar(function: Callable[[np.ndarray], np.ndarray]) -> Callable[[float], float]:
    return lambda eps: float(np.asarray(function(np.array([eps])), dtype=float).ravel()[0])


# --------------------------------------------------------------------------------------------
# EXACT
# --------------------------------------------------------------------------------------------


def _composed_event(ledger: Sequence[tuple[ev.Event, int]]) -> ev.Event:
    parts = tuple(e if c == 1 else ev.SelfComposed(event=e, count=c) for e, c in ledger)
    return parts[0] if len(parts) == 1 else ev.Composed(events=parts)


def _gaussian_risk(query: _Query, mu: float) -> AttackRisk:
    """μ-GDP: TPR = Φ(Φ⁻¹(α) + μ) (DRS 2022 Def. 2.7), advantage 2Φ(μ/2) − 1 = δ(0) (Cor. 2.13)."""
    import functools

    from scipy import special

    from dplens.accountant import conversions

    def tpr(alphas: np.ndarray) -> np.ndarray:
        return special.ndtr(special.ndtri(alphas) + mu)

    delta = _scalar(functools.partial(conversions.gdp_delta, mu))
    return _result(
        query,
        Method.EXACT,
        f"exact: the composition is {mu:.6g}-GDP, TPR = Phi(Phi^-1(FPR) + mu) (Dong, Roth, Su 2022, Def. 2.7)",
        upper=tpr,
        lower=tpr,
        delta_upper=delta,
        delta_lower=delta,
    )


def _exact_risk(query: _Query, ledger: Sequence[tuple[ev.Event, int]]) -> AttackRisk:
    from dplens.accountant import pld

    if not ledger:
        raise UnsupportedEventError("the ledger is empty")
    event = _composed_event(ledger)
    mu = pld.gaussian_mu(event)
    if mu is not None:
        return _gaussian_risk(query, mu)
    profile = pld.privacy_profile(event)  # UnsupportedEventError where none is known
    delta = _scalar(profile.deltas)
    if profile.trade_off_function is None:
        return _profile_risk(query, profile.deltas, Method.EXACT, f"exact privacy profile: {profile.description}")
    curve = profile.trade_off_function

    def tpr(alphas: np.ndarray) -> np.ndarray:
        return 1.0 - np.asarray(curve(alphas), dtype=float)

    return _result(
        query,
        Method.EXACT,
        f"exact trade-off curve of {profile.description}",
        upper=tpr,
        lower=tpr,
        delta_upper=delta,
        delta_lower=delta,
    )


# A closed-form δ(ε) is read on this grid (dense where trade-off curves of real mechanisms turn), then around each
# FPR's best ε on a finer one.
_PROFILE_GRID = np.unique(
    np.concatenate([[0.0], np.geomspace(1e-5, 1.0, 120), np.linspace(1.0, 40.0, 600), np.geomspace(40.0, 700.0, 60)])
)
_LOCAL_POINTS = 129


def _profile_envelopes(
    deltas: Callable[[np.ndarray], np.ndarray], alphas: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """(lower, upper) bounds on the curve implied by a continuous, non-increasing δ(ε) known on points.

    Lower: the envelope on the points. Upper: on [ε_k, ε_{k+1}] each branch is at most its value with δ(ε_{k+1})
    and e^{ε_k} (δ is non-increasing), and beyond the last point with δ = 0.
    """
    grid = _PROFILE_GRID
    values = _guarded(deltas, grid)
    x = np.exp(grid)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        lines = np.maximum((1.0 - values)[:, None] - x * alphas, ((1.0 - values)[:, None] - alphas) / x)
    best = np.nanargmax(np.where(np.isnan(lines), -np.inf, lines), axis=0)
    local = [np.linspace(grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)], _LOCAL_POINTS) for k in np.unique(best)]
    grid = np.unique(np.concatenate([grid, *local]))
    values = _guarded(deltas, grid)
    low = _envelope(grid, np.where(np.isnan(values), 1.0, values), alphas)  # a point that failed claims nothing
    if np.any(np.isnan(values)):
        return low, None  # the upper side needs δ at every point
    shifted = np.concatenate([values[1:], [0.0]])  # δ at the right end of each interval (0 beyond the last)
    high = _envelope(grid, shifted, alphas)
    return low, np.maximum(high, low)


_NUMERIC_ERRORS = (ValueError, RuntimeError, ArithmeticError)


def _guarded(deltas: Callable[[np.ndarray], np.ndarray], grid: np.ndarray) -> np.ndarray:
    """δ on the grid (≤ 1); where a closed form fails numerically (a research profile's root finder far out in ε),
    the points that fail are NaN (the lower side then skips them, and the upper side is not claimed)."""
    try:
        return np.minimum(np.asarray(deltas(grid), dtype=float), 1.0)
    except _NUMERIC_ERRORS:
        out = np.full(grid.shape, np.nan)
        for i, eps in enumerate(grid):
            try:
                out[i] = min(float(np.asarray(deltas(np.array([eps])), dtype=float).ravel()[0]), 1.0)
            except _NUMERIC_ERRORS:
                continue
        return out


def _profile_risk(
    query: _Query, deltas: Callable[[np.ndarray], np.ndarray], method: Method, description: str
) -> AttackRisk:
    """A closed-form δ(ε) (both directions): the curve bracketed on a fine ε grid (:func:`_profile_envelopes`)."""
    alphas = query.alphas()
    low, high = _profile_envelopes(deltas, alphas)
    upper = {float(a): 1.0 - lo for a, lo in zip(alphas, low, strict=True)}
    lower = None if high is None else {float(a): 1.0 - hi for a, hi in zip(alphas, high, strict=True)}
    delta = _scalar(deltas)
    return _result(
        query,
        method,
        f"{description}; the trade-off curve bracketed on an epsilon grid (DRS 2022 Prop. 2.12)",
        upper=lambda a: np.array([upper[float(v)] for v in a]),
        lower=None if lower is None else (lambda a: np.array([lower[float(v)] for v in a])),
        delta_upper=delta,
        delta_lower=delta,
    )


# --------------------------------------------------------------------------------------------
# PLD
# --------------------------------------------------------------------------------------------


def _engine_sides(composed: Any) -> tuple[_DiscreteSide, _DiscreteSide]:
    """(pessimistic, optimistic) sides of a composed PLD from the engine, every error term paid for in δ."""
    upper, lower = [], []
    for direction in composed.directions().values():
        for pmf, sign, out in ((direction.upper, 1.0, upper), (direction.lower, -1.0, lower)):
            losses = (pmf.start + np.arange(pmf.pmf.size)) * pmf.interval + pmf.offset
            # The pessimistic side adds the mass outside the window and the floating-point bound (valid for every
            # ε ∈ ℝ: the hockey-stick weights are in [0, 1] and non-decreasing in the loss), the optimistic side
            # subtracts them (pld_engine.ComposedDirection.delta_lower does the same).
            constant = pmf.infinity_mass + sign * (pmf.outside + pmf.round_off)
            out.append(_Direction.of(losses, pmf.pmf, constant))
    return _DiscreteSide(upper), _DiscreteSide(lower)


def _within(low: np.ndarray, high: np.ndarray, tolerance: float) -> bool:
    return bool(np.all(high - low <= np.maximum(tolerance * high, _FLOOR)))


def _engine_risk(query: _Query, ledger: list[tuple[ev.Event, int]], relation, interval, tolerance) -> AttackRisk:
    """The PLD engine's certified bracket, the grid refined until every bracket is within ``tolerance``."""
    from dplens.accountant import pld_engine

    current = interval or _FIRST_INTERVAL
    best = None
    for _ in range(1 if interval is not None else _MAX_ROUNDS):
        try:
            grid = pld_engine.LossGrid(interval=current, neighboring=relation, refining=interval is None)
            composed = pld_engine.compose(ledger, grid)
        except pld_engine.WindowTooLargeError:
            if best is not None:
                break
            raise
        if composed.non_private:
            return _constant_risk(query, 1.0, Method.PLD, "PLD: the ledger holds a non-private event")
        if composed.remove is None:
            return _constant_risk(query, 0.0, Method.PLD, "PLD: empty ledger")
        high, low = _engine_sides(composed)
        details = (
            "pld (dplens engine: pessimistic connect-the-dots / optimistic inscribed merge, certified bracket; "
            f"value_discretization_interval={current:g})"
        )
        best = _result(
            query,
            Method.PLD,
            details,
            upper=lambda a, s=high: 1.0 - s.trade_off(a),
            lower=lambda a, s=low: 1.0 - s.trade_off(a),
            delta_upper=_scalar(high.delta),
            delta_lower=_scalar(low.delta),
        )
        widths = [
            (np.array(best.tpr_lower), np.array(best.tpr_upper)),
            (np.array([best.advantage_lower]), np.array([best.advantage_upper])),
        ]
        if best.success_upper is not None:
            widths.append((np.array([best.success_lower]), np.array([best.success_upper])))
        if all(_within(lo, hi, tolerance) for lo, hi in widths):
            break
        # Bracket widths shrink like Δ² (pld_engine: split and merge cost O(Δ²) per step); aim at 70 % of the goal.
        ratio = max(float(np.max((hi - lo) / np.maximum(tolerance * hi, _FLOOR))) for lo, hi in widths)
        current = max(current * min(max((0.7 / ratio) ** 0.5, 0.1), 0.7), pld_engine.SMALLEST_INTERVAL)
    return best


def _constant_risk(query: _Query, advantage: float, method: Method, details: str) -> AttackRisk:
    """The non-private ledger (TPR = 1 at every FPR) or the empty one (TPR = FPR)."""

    def tpr(alphas: np.ndarray) -> np.ndarray:
        return np.ones_like(alphas) if advantage == 1.0 else np.asarray(alphas, dtype=float)

    def delta(eps: float) -> float:
        return advantage if eps == 0 or advantage == 1.0 else 0.0

    return _result(query, method, details, upper=tpr, lower=tpr, delta_upper=delta, delta_lower=delta)


def _pld_risk(query: _Query, accountant: Any, tolerance: float) -> AttackRisk:
    from dplens.accountant import pld, pld_engine

    ledger = list(accountant.ledger)
    if not ledger:
        return _constant_risk(query, 0.0, Method.PLD, "empty ledger")
    relation = accountant.neighboring
    if pld_engine.supports(ledger, neighboring=relation):
        try:
            return _engine_risk(query, ledger, relation, accountant.value_discretization_interval, tolerance)
        except (pld_engine.WindowTooLargeError, OverflowError) as err:
            raise pld.PldOutOfRangeError(f"out of supported range for PLD accounting: {err}") from None
    profile = accountant.pld_profile()  # dp-accounting's pessimistic PLD: an upper side only
    curve = profile.trade_off()
    return _result(
        query,
        Method.PLD,
        f"{profile.description} ({profile.discretisation}): its exact trade-off curve, a pointwise lower bound",
        upper=lambda a: 1.0 - np.asarray(curve(a), dtype=float),
        lower=None,
        delta_upper=_scalar(profile.deltas),
        delta_lower=None,
    )


# --------------------------------------------------------------------------------------------
# RDP
# --------------------------------------------------------------------------------------------

_RDP_ORDERS = 1.0 + np.geomspace(1e-3, 512.0, 90)  # extended by decades while the best order sits at the top
_RDP_MAX_ORDER = 1e7
_BISECTIONS = 60


def _log_binary(t: np.ndarray, a: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """log Σ t^λ a^{1−λ} over the two outcomes: (λ − 1)·D_λ(Bern(t) ‖ Bern(a)), in log space."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        first = lam * np.log(t) + (1.0 - lam) * np.log(a)
        second = lam * np.log1p(-t) + (1.0 - lam) * np.log1p(-a)
        first = np.where(t > 0, first, -np.inf)
        second = np.where(t < 1, second, -np.inf)
        return np.logaddexp(first, second)


def _rdp_tpr(curve: Any, alphas: np.ndarray) -> np.ndarray:
    """The largest TPR at each FPR allowed by the RDP curve (Balle et al. 2020 §3), minimised over the orders (any
    order gives a valid bound; the grid grows by decades while the best order of some FPR sits at its top)."""
    import warnings

    from dplens.accountant.curves import RdpConvergenceWarning

    top = curve.alpha_max * (1 - 1e-9) if math.isfinite(curve.alpha_max) else math.inf
    best = np.ones_like(alphas)
    pure = float(curve(math.inf)) if math.isinf(curve.alpha_max) else math.inf
    if math.isfinite(pure):  # D_∞ ≤ ε₀ in both orders: TPR ≤ e^{ε₀}·FPR and 1 − FPR ≤ e^{ε₀}(1 − TPR)
        best = np.minimum(best, np.minimum(math.exp(min(pure, 700.0)) * alphas, 1.0 - math.exp(-pure) * (1 - alphas)))
    if curve.integer_only:
        grid = np.unique(np.round(np.geomspace(2.0, min(top, 2.0**30), 120)))
    else:
        grid = _RDP_ORDERS
    while True:
        orders = grid[grid < top]
        with warnings.catch_warnings():  # an order whose RDP does not converge is +∞: it is just not used
            warnings.simplefilter("ignore", RdpConvergenceWarning)
            values = np.asarray(curve(orders), dtype=float) if orders.size else np.array([])
        bounds = _rdp_bounds(orders[np.isfinite(values)], values[np.isfinite(values)], alphas)
        if bounds is None:
            return best
        tpr, at_top = bounds
        best = np.minimum(best, tpr)
        upper = float(grid[-1])
        if curve.integer_only or not at_top or upper >= min(top, _RDP_MAX_ORDER):
            return best
        grid = 1.0 + np.geomspace(upper - 1.0, 10.0 * (upper - 1.0), 12)[1:]


def _rdp_bounds(orders: np.ndarray, values: np.ndarray, alphas: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """(the smallest TPR bound over ``orders`` at each FPR, whether some FPR's best order is the largest one)."""
    if orders.size == 0:
        return None
    lam, r = orders[:, None], values[:, None]
    a = np.broadcast_to(alphas[None, :], (orders.size, alphas.size))
    limit = (lam - 1.0) * r
    lo, hi = a.copy(), np.ones_like(a)  # lo is feasible (TPR = FPR), hi infeasible or 1
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        ok = (_log_binary(mid, a, lam) <= limit) & (_log_binary(a, mid, lam) <= limit)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    feasible_one = (_log_binary(np.ones_like(a), a, lam) <= limit) & (_log_binary(a, np.ones_like(a), lam) <= limit)
    hi = np.where(feasible_one, 1.0, hi)
    at_top = bool(np.any((np.argmin(hi, axis=0) == orders.size - 1) & (hi.min(axis=0) < 1.0)))
    return hi.min(axis=0), at_top


def _rdp_risk(query: _Query, accountant: Any) -> AttackRisk:
    curve = accountant.rdp_curve()  # UnsupportedEventError where no RDP curve is known
    cache: dict[float, float] = {}

    def delta(eps: float) -> float:
        if eps not in cache:
            cache[eps] = float(curve.delta(eps))
        return cache[eps]

    return _result(
        query,
        Method.RDP,
        "rdp: the largest TPR with D_lambda(Bern(TPR) || Bern(FPR)) <= r(lambda) in both orders, minimised over "
        "lambda (Balle et al. 2020); advantage and Bayes success from delta(epsilon) (Canonne-Kamath-Steinke 2020)",
        upper=lambda a: _rdp_tpr(curve, a),
        lower=None,
        delta_upper=delta,
        delta_lower=None,
    )


# --------------------------------------------------------------------------------------------
# The front: any ledger, any route
# --------------------------------------------------------------------------------------------


def _best_of(query: _Query, routes: list[AttackRisk]) -> AttackRisk:
    """Quantity by quantity, the smallest upper bound and the largest lower end (each route is valid)."""
    uppers = np.min([r.tpr_upper for r in routes], axis=0)
    lows = [r.tpr_lower for r in routes if r.tpr_lower is not None]
    lower = None if not lows else tuple(np.minimum(np.max(lows, axis=0), uppers).tolist())

    def pick(values: list[float | None], high: bool) -> float | None:
        present = [v for v in values if v is not None]
        return None if not present else (max(present) if high else min(present))

    adv = pick([r.advantage_upper for r in routes], False)
    success = pick([r.success_upper for r in routes], False)
    lead = min(routes, key=lambda r: (r.advantage_upper, sum(r.tpr_upper)))
    curve = ()
    if query.curve:
        rows = list(zip(*[r.curve for r in routes], strict=True))
        curve = tuple((row[0][0], min(p[1] for p in row), pick([p[2] for p in row], True)) for row in rows)
        curve = tuple((f, u, None if lo is None else min(lo, u)) for f, u, lo in curve)
    adv_low = pick([r.advantage_lower for r in routes], True)
    success_low = pick([r.success_lower for r in routes], True)
    return AttackRisk(
        fprs=query.fprs,
        tpr_upper=tuple(uppers.tolist()),
        tpr_lower=lower,
        advantage_upper=adv,
        advantage_lower=None if adv_low is None else min(adv_low, adv),
        method=lead.method,
        details=lead.details
        if len(routes) == 1
        else f"tightest of {', '.join(r.method.value for r in routes)}; {lead.method.value}: {lead.details}",
        neighboring=query.neighboring,
        prior=query.prior,
        success_upper=success,
        success_lower=None if success_low is None or success is None else min(success_low, success),
        curve=curve,
        routes=tuple(routes),
    )


def attack_risk(
    accountant: Any,
    *,
    fprs: Sequence[float] | float = DEFAULT_FPRS,
    prior: float | None = None,
    method: Method | str = Method.BEST,
    tolerance: float = DEFAULT_RISK_TOLERANCE,
    curve: bool = False,
) -> AttackRisk:
    """Upper bounds on the attack risk of everything composed in ``accountant`` (see the module's docstring).

    Args:
        accountant: an :class:`~dplens.accountant.compose.Accountant` (any composition it accounts).
        fprs: the false-positive rates at which to bound the attack TPR, each in (0, 1).
        prior: with a prior probability in (0, 1) that the unit is in the data, also bound the Bayesian attacker's
            success.
        method: ``exact``, ``pld``, ``rdp`` or ``best`` (the tightest that apply).
        tolerance: the PLD route's relative bracket width.
        curve: also sample the curve at :data:`CURVE_FPRS` (for figures).

    Raises:
        ValueError: an FPR or the prior outside (0, 1), a bad tolerance, or a route that does not apply
            (:class:`~dplens.accountant.rdp.UnsupportedEventError`).
    """
    query = _Query(_check_fprs(fprs), None if prior is None else check_prior(prior), bool(curve),
                   accountant.neighboring.value)  # fmt: skip
    if not (isinstance(tolerance, int | float) and 0 < tolerance < 1):
        raise ValueError(f"tolerance must be in (0, 1); got {tolerance!r}")
    method = as_method(method)
    if not accountant.ledger:
        return _constant_risk(query, 0.0, method, "empty ledger: nothing is released")
    risk = _routes_risk(query, accountant, method, tolerance)
    if all(ev.attained(event) for event, _ in accountant.ledger):
        return risk
    return _upper_only(risk)


def _upper_only(risk: AttackRisk) -> AttackRisk:
    """``risk`` without its lower ends, for a ledger whose accounted pair is not attained (:func:`events.attained`):
    a route's lower end bounds the accounted pair's risk, not the mechanism's (a fixed-bins matrix factorisation's
    unamplified μ-GDP, a shuffled sampler's bound), so it is no certified lower end here."""
    note = "; upper bounds only: the accounted pair is not attained by the mechanism, so no lower end is certified"
    return replace(
        risk,
        tpr_lower=None,
        advantage_lower=None,
        success_lower=None,
        curve=tuple((f, u, None) for f, u, _ in risk.curve),
        details=risk.details + note,
        routes=tuple(_upper_only(r) for r in risk.routes),
    )


def _routes_risk(query: _Query, accountant: Any, method: Method, tolerance: float) -> AttackRisk:
    """The risk by ``method``, or BEST: the exact route where it closes a bracket, else the tightest of all."""
    if method is Method.EXACT:
        return _exact_risk(query, accountant.ledger)
    if method is Method.PLD:
        return _pld_risk(query, accountant, tolerance)
    if method is Method.RDP:
        return _rdp_risk(query, accountant)
    try:
        exact = _exact_risk(query, accountant.ledger)
        attained = all(ev.attained(event) for event, _ in accountant.ledger)
        if (
            attained
            and exact.tpr_lower is not None
            and all(
                hi - lo <= max(tolerance * hi, _FLOOR) for lo, hi in zip(exact.tpr_lower, exact.tpr_upper, strict=True)
            )
        ):
            return exact  # a closed form: nothing is tighter
        routes = [exact]
    except UnsupportedEventError:
        routes = []
    for route in (_pld_risk, _rdp_risk):
        try:
            routes.append(route(query, accountant, tolerance) if route is _pld_risk else route(query, accountant))
        except UnsupportedEventError:
            continue
    if not routes:
        raise UnsupportedEventError("no accounting route supports the whole ledger")
    return _best_of(query, routes)


def budget_risk(
    epsilon: float, delta: float, *, fprs: Sequence[float] | float = DEFAULT_FPRS, prior: float | None = None
) -> AttackRisk:
    """What an (ε, δ) guarantee alone allows: TPR ≤ 1 − f_{ε,δ}(FPR) = min(1, δ + e^ε·FPR, 1 − e^{−ε}(1 − δ − FPR))
    (DRS 2022 Prop. 2.5), advantage ≤ (e^ε − 1 + 2δ)/(e^ε + 1) (Kairouz, Oh, Viswanath 2015), Bayesian success from
    the profile of f_{ε,δ}. For a budget's ceiling: whatever is charged within it, no attack does better.

    Example:
        >>> risk = budget_risk(1.0, 1e-5, fprs=(0.01,))
        >>> round(risk.tpr_upper[0], 5), round(risk.advantage_upper, 5)
        (0.02719, 0.46212)
    """
    from dplens.accountant import conversions

    epsilon = conversions.check_epsilon(epsilon)
    delta = conversions.check_delta(delta, allow_zero=True)
    query = _Query(_check_fprs(fprs), None if prior is None else check_prior(prior), False, "any")

    def tpr(alphas: np.ndarray) -> np.ndarray:
        return 1.0 - np.asarray(conversions.dp_trade_off(epsilon, delta, alphas), dtype=float)

    def profile(eps: float) -> float:
        # δ(ε') of f_{ε,δ}: δ + (1 − δ)(e^ε − e^ε')/(e^ε + 1) for ε' ≤ ε, δ beyond (Kairouz, Oh, Viswanath 2015)
        if eps >= epsilon:
            return delta
        return delta + (1.0 - delta) * (math.exp(epsilon) - math.exp(eps)) / (math.exp(epsilon) + 1.0)

    return _result(
        query,
        Method.EXACT,
        f"what ({epsilon:g}, {delta:g})-DP allows (Dong, Roth, Su 2022, Prop. 2.5)",
        upper=tpr,
        lower=tpr,
        delta_upper=profile,
        delta_lower=profile,
    )
