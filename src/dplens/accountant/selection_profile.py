"""Repeat-and-select by the base mechanism's privacy profile: a bound derived here, beside Papernot & Steinke's RDP.

The setting is Papernot & Steinke 2022 (ICLR; arXiv 2110.03620v2): the base mechanism Q (a training run and its
score) is run K times on the same data, K ~ 𝒟 independent of the data with probability generating function
φ(x) = E[x^K], and only the best run is released (nothing if K = 0). Koskela, Redberg and Wang (ICML 2024) bound the
privacy profile of this selection by the base mechanism's profile; their theorem was not at hand here, so dplens uses
the following bound, proved in full below. It is a different (and in the high-privacy regime looser) bound than
theirs: dplens reports the smaller of it and the RDP route, never their numbers.

**The bound.** Let P, P′ be Q's output laws on neighbours D, D′, totally ordered by score (ties broken by an
independent uniform tag, a post-processing that leaves Q's profile unchanged), δ_Q(ε) = H_{e^ε}(P ‖ P′). For every
ε₁ ∈ [0, ε]:

    H_{e^ε}(A(D) ‖ A(D′)) ≤ 1 − φ(1 − δ_Q(ε₁)) + e^{ε₁} ∫₀¹ (φ′(Ψ(u)) − e^{ε−ε₁} φ′(u))₊ du,
    Ψ(u) = min(1, inf_{ε₃ ≥ 0} e^{ε₃} u + δ_Q(ε₃)).

*Proof.* With F(y) = P(Y ≺ y), the best of K runs has density a(y) = p(y)·φ′(F(y)) (Σ_k P(K = k)·k·p·F^{k−1}); the
release ⊥ of K = 0 has the same probability φ(0) under D and D′ and adds nothing for ε ≥ 0. With γ = e^ε = γ₁γ₂,
γ₁ = e^{ε₁}: a − γa′ = φ′(F)(p − γ₁p′) + γ₁p′(φ′(F) − γ₂φ′(F′)), so (a − γa′)₊ is at most the sum of the two parts'
positive parts (φ′ ≥ 0). (i) m = (p − γ₁p′)₊/p ∈ [0, 1] has E_P[m] = δ_Q(ε₁); under P, U = F(Y) is uniform, so
∫φ′(F)(p − γ₁p′)₊ = E[φ′(U)·E[m | U]] ≤ ∫_{1−δ_Q(ε₁)}^1 φ′ = 1 − φ(1 − δ_Q(ε₁)), φ′ being non-decreasing (the largest
weights on the top δ_Q(ε₁) of the order). (ii) F(y) is the probability of the event {Y ≺ y}, so F ≤ e^{ε₃}F′ + δ_Q(ε₃)
for every ε₃, F ≤ Ψ(F′) and φ′(F) ≤ φ′(Ψ(F′)); under P′, F′(Y′) is uniform, so the second part integrates to at most
γ₁∫₀¹(φ′(Ψ(u)) − γ₂φ′(u))₊ du. ∎ With K = 1 (φ(x) = x) and ε₁ = ε it is δ_Q(ε) itself. The other direction is the
same with D and D′ exchanged (the base profile's other direction).

**Numerics, all rounded up.** Ψ is the minimum over a grid of ε₃ (each line is a valid bound); the integral is an
upper Riemann sum on a grid geometric towards 0 and 1 (Ψ and φ′ are non-decreasing, so on [u_i, u_{i+1}] the
integrand is at most (φ′(Ψ(u_{i+1})) − γ₂φ′(u_i))₊), tabulated on a grid of log γ₂ and read at the grid point below
(the integral is non-increasing in γ₂); the minimum over ε₁ is over a grid of [0, ε] (each point a valid bound);
δ_Q is the base event's exact profile where dplens has one, else its pessimistic PLD profile; 1 − φ(1 − δ) is
evaluated without cancellation. For the truncated negative binomial, γ is solved from the mean and rounded down
(:func:`truncated_negative_binomial_gamma`): a larger mean.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant import pld
from dplens.accountant.curves import PrivacyProfile

__all__ = ["repeat_and_select_delta", "repeat_and_select_profile", "truncated_negative_binomial_gamma"]

#: ε₃ at which the base profile is read for Ψ (lines e^{ε₃}u + δ_Q(ε₃)).
_ENVELOPE_EPSILONS = np.concatenate([np.linspace(0.0, 2.0, 101), np.linspace(2.05, 60.0, 1160)])
#: The integration grid: geometric from 1e-18 to 1/2 and mirrored towards 1, 2·2¹³ cells (0.5 % wide).
_HALF = np.geomspace(1e-18, 0.5, 2**13)
_GRID = np.concatenate([[0.0], _HALF, (1.0 - _HALF[::-1])[1:], [1.0]])
#: ε₁ points on [0, ε].
_SPLITS = 65
#: Relative slack for the floating-point sums (each a few hundred ulps at most).
_ROUNDING = 1e-9


def _tnb_mean(gamma: float, shape: float) -> float:
    """E[K] of the truncated negative binomial (PS22 Definition 1): η(1 − γ)/(γ(1 − γ^η)); η = 0: (1/γ − 1)/log(1/γ)."""
    if gamma >= 1.0:
        return 1.0
    log_gamma = math.log(gamma)
    if shape == 0:
        return (1.0 / gamma - 1.0) / -log_gamma
    return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * log_gamma))


def truncated_negative_binomial_gamma(mean: float, shape: float) -> float:
    """γ of the truncated negative binomial with E[K] = ``mean`` (shape η > −1), rounded down (a larger
    log(1/γ) only loosens PS22 Theorem 2's bound)."""
    if shape == 1:
        return 1.0 / mean
    lo, hi = 0.0, 1.0  # E[K] decreases from ∞ (γ → 0) to 1 (γ = 1)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= 0 or hi - lo <= 1e-15 * hi:
            break
        if _tnb_mean(mid, shape) > mean:
            lo = mid
        else:
            hi = mid
    return lo


def _generating_function(mean: float, shape: float):
    """(φ′(x), 1 − φ(1 − δ)) of K: Poisson(``mean``) for shape ∞, else the truncated negative binomial of PS22
    Definition 1 (P(K = k) ∝ (1 − γ)^k·C(k + η − 1, k), k ≥ 1; η = 0 logarithmic, η = 1 geometric)."""
    if math.isinf(shape):

        def slope(x):
            return mean * np.exp(mean * (np.asarray(x, dtype=float) - 1.0))

        def tail(delta):
            return -np.expm1(-mean * np.asarray(delta, dtype=float))

        return slope, tail
    gamma = truncated_negative_binomial_gamma(mean, shape)
    if gamma >= 1.0:  # K = 1
        return (lambda x: np.ones_like(np.asarray(x, dtype=float))), (lambda delta: np.asarray(delta, dtype=float))
    rest, log_gamma = 1.0 - gamma, math.log(gamma)
    if shape == 0:

        def slope(x):
            return rest / ((1.0 - rest * np.asarray(x, dtype=float)) * -log_gamma)

        def tail(delta):
            return np.log1p(rest * np.asarray(delta, dtype=float) / gamma) / -log_gamma

        return slope, tail
    scale = math.exp(-shape * log_gamma) - 1.0  # γ^{−η} − 1 (negative for η < 0, as is η)

    def slope(x):
        return shape * rest * (1.0 - rest * np.asarray(x, dtype=float)) ** (-shape - 1.0) / scale

    def tail(delta):
        grown = np.log1p(rest * np.asarray(delta, dtype=float) / gamma)
        return -np.expm1(-shape * grown) * (scale + 1.0) / scale

    return slope, tail


def _envelope(base_delta) -> np.ndarray:
    """Ψ on the integration grid: min(1, min over the ε₃ grid of e^{ε₃}u + δ_Q(ε₃))."""
    intercepts = np.minimum(1.0, np.asarray(base_delta(_ENVELOPE_EPSILONS), dtype=float))
    slopes = np.exp(_ENVELOPE_EPSILONS)
    out = np.ones_like(_GRID)
    for start in range(0, _GRID.size, 4096):
        part = _GRID[start : start + 4096]
        out[start : start + 4096] = np.minimum(1.0, np.min(part[:, None] * slopes + intercepts, axis=1))
    return np.maximum.accumulate(out)  # Ψ is non-decreasing; rounding must not make it otherwise


def repeat_and_select_delta(epsilons: Any, *, base_delta, mean: float, shape: float) -> np.ndarray:
    """The bound of the module docstring on δ(ε) of repeat-and-select, for each ε ≥ 0, from ``base_delta`` (one
    direction of the base mechanism's profile, vectorised) and K's ``mean`` and ``shape`` (dp-accounting's
    ``RepeatAndSelectDpEvent`` convention: ∞ Poisson, 1 geometric, 0 logarithmic)."""
    return _SelectionBound(base_delta, float(mean), float(shape))(epsilons)


class _SelectionBound:
    """:func:`repeat_and_select_delta` with Ψ and the integrand's end values computed once (a profile is queried at
    many ε by ε(δ)'s search)."""

    def __init__(self, base_delta, mean: float, shape: float) -> None:
        self.base_delta, self.mean, self.shape = base_delta, mean, shape
        self._tables = None

    def __getstate__(self):
        return {"base_delta": self.base_delta, "mean": self.mean, "shape": self.shape}

    def __setstate__(self, state) -> None:
        self.__init__(state["base_delta"], state["mean"], state["shape"])

    def _cells(self):
        """(1 − φ(1 − ·), log γ₂ grid, the integral at each): I(γ₂) = upper sum of (φ′(Ψ) − γ₂φ′)₊, tabulated once
        on log γ₂ = 0, 0.01, …, 40; between grid points the point below is used (I is non-increasing in γ₂, so the
        smaller γ₂ gives the larger, still valid, value), and beyond 40 the last one."""
        if self._tables is None:
            slope, tail = _generating_function(self.mean, self.shape)
            psi = _envelope(self.base_delta)
            upper, lower, widths = slope(psi[1:]), slope(_GRID[:-1]), np.diff(_GRID)
            logs = np.arange(0.0, 40.0 + 1e-9, 0.01)
            integrals = np.empty(logs.size)
            for start in range(0, logs.size, 256):
                gammas = np.exp(logs[start : start + 256])[:, None]
                integrals[start : start + 256] = np.maximum(upper - gammas * lower, 0.0) @ widths
            self._tables = (tail, logs, integrals * (1.0 + _ROUNDING))
        return self._tables

    def __call__(self, epsilons: Any) -> np.ndarray:
        return np.asarray([self._at(e) for e in np.atleast_1d(np.asarray(epsilons, dtype=float)).tolist()])

    def _value(self, epsilon: float, splits: np.ndarray) -> np.ndarray:
        """The bound at each ε₁ of ``splits`` (each a valid bound)."""
        tail, logs, integrals = self._cells()
        heads = tail(np.minimum(1.0, np.asarray(self.base_delta(splits), dtype=float)))
        index = np.clip(np.searchsorted(logs, epsilon - splits, side="right") - 1, 0, logs.size - 1)
        integral = integrals[index]
        with np.errstate(over="ignore", invalid="ignore"):
            second = np.where(integral > 0, np.exp(splits) * integral, 0.0)  # e^{ε₁} may overflow: then ≥ 1
        return np.minimum(1.0, (heads + second) * (1.0 + _ROUNDING))

    def _at(self, epsilon: float) -> float:
        """The smallest bound over ε₁ on a grid of [0, ε], then on a finer grid around the best point."""
        if not epsilon >= 0:
            raise ValueError(f"epsilon must be >= 0; got {epsilon!r}")
        splits = np.linspace(0.0, epsilon, _SPLITS)
        values = self._value(epsilon, splits)
        best = int(np.argmin(values))
        around = np.linspace(splits[max(0, best - 1)], splits[min(_SPLITS - 1, best + 1)], 17)
        return float(min(values[best], self._value(epsilon, around).min()))


def _base_profile(event: ev.Event) -> PrivacyProfile:
    """The base event's exact profile where dplens has one, else its pessimistic PLD profile."""
    from dplens.accountant.rdp import UnsupportedEventError

    try:
        return pld.privacy_profile(event)
    except UnsupportedEventError:
        relation = getattr(event, "neighboring", None) or ev.NeighboringRelation.ADD_OR_REMOVE_ONE
        return pld.pld_profile([(event, 1)], neighboring=relation)


def repeat_and_select_profile(event: Any) -> PrivacyProfile:
    """The profile of a :class:`~dplens.accountant.selection.RepeatAndSelect` event: the bound above in each
    direction of its base event's profile (cached per event: a report asks for it several times, and each direction
    tabulates its integral once)."""
    try:
        hash(event)
    except TypeError:  # an event with an unhashable field: no cache
        return _profile(event)
    return _cached_profile(event)


@functools.lru_cache(maxsize=64)
def _cached_profile(event: Any) -> PrivacyProfile:
    return _profile(event)


def _profile(event: Any) -> PrivacyProfile:
    base = _base_profile(event.event)
    kind = "Poisson" if math.isinf(event.shape) else f"TNB(shape={event.shape:g})"
    mean, shape = float(event.mean), float(event.shape)
    return PrivacyProfile(
        remove=_SelectionBound(base.remove, mean, shape),
        add=None if base.add is None else _SelectionBound(base.add, mean, shape),
        description=(
            f"RepeatAndSelect({kind}, mean={event.mean:g}): an upper bound from the base profile "
            f"({base.description}; dplens.accountant.selection_profile, not Koskela-Redberg-Wang's theorem)"
        ),
    )
