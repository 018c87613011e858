"""Private selection: exponential mechanism, report-noisy-max, permute-and-flip, and repeat-and-select.

Bounded range (Durfee & Rogers 2019, NeurIPS, "Practical differentially private top-k selection with pay-what-you-
get composition", Definition 3): M is ε-BR if for neighbours D, D′ the privacy loss L(o) = log(P[M(D) = o] /
P[M(D′) = o]) ranges over an interval of width ≤ ε. The exponential mechanism sampling ∝ exp(ε·u/(2Δ)) (or
∝ exp(ε·u/Δ) for a monotone utility) is ε-BR and ε-DP (DR19 Lemma 3.2); report-noisy-max with Gumbel noise is the
exponential mechanism.

Because the loss is confined to [t − ε, t] with E_P[e^{−L}] = 1, every quantity convex in e^{−L} (the Rényi
moments, the hockey-stick divergence) is maximised by the two-point pair with losses {t, t − ε}, P(L = t) =
(e^ε − e^t)/(e^ε − 1) (Dong, Durfee, Rogers 2020, "Optimal differential privacy composition for exponential
mechanisms", ICML, Lemma 3.2), and then by the best t ∈ [0, ε]:

- RDP: with x = e^t, the objective log x + log(K − (1 − c)x)/(α − 1) (c = e^{−(α−1)ε}, K = e^ε − c) is concave,
  maximised at x* = (α − 1)K/(α(1 − c)) clipped to [1, e^ε]: an exact closed form. It lies below Cesar & Rogers
  2021 (JPC; arXiv 2004.07223) Lemma 3.4's ε²/8-zCDP bound, αε²/8;
- profile: δ(ε′) = (e^{ε/2} − e^{ε′/2})²/(e^ε − 1) for ε′ < ε (maximiser t* = (ε + ε′)/2), 0 beyond.

Permute-and-flip (McKenna & Sheldon 2020, NeurIPS, Theorem 1), report-noisy-max with exponential noise (the same
mechanism: Ding, Kifer, Saghaian, Steinke, Wang, Xiao, Zhang 2021, Theorem 1) and with Laplace noise (Dwork & Roth
2014, Claim 3.9) are ε-DP but not better than 2ε-BR in general: they get the exact analysis of the class of
ε-DP mechanisms (binary randomized response dominates it, Kairouz, Oh, Viswanath 2015 Thm 2.1).

:class:`RepeatAndSelect` is Papernot & Steinke 2022 (ICLR; arXiv 2110.03620v2): run a mechanism K times, K random,
and release only the best run. Theorem 2 (truncated negative binomial K, shape η > −1: geometric η = 1,
logarithmic η = 0) and Theorem 6 (Poisson K) bound its RDP from the base mechanism's.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant import finite_pld as fpld
from dplens.accountant import pld, rdp
from dplens.accountant.curves import PrivacyProfile, RdpCurve, check_alpha
from dplens.accountant.rdp import UnsupportedEventError
from dplens.accountant.selection_profile import truncated_negative_binomial_gamma

__all__ = [
    "ExponentialMechanism",
    "PermuteAndFlip",
    "RepeatAndSelect",
    "ReportNoisyMax",
    "SelectionNoise",
    "bounded_range_delta",
    "bounded_range_rdp",
    "repeat_and_select_rdp",
    "truncated_negative_binomial_gamma",
]


# --------------------------------------------------------------------------------------------
# Bounded range
# --------------------------------------------------------------------------------------------


def bounded_range_rdp(alpha: np.ndarray, *, epsilon: float) -> np.ndarray:
    """The exact RDP of the class of ε-BR mechanisms: sup over ε-BR pairs of D_α (see the module docstring).

    Example (ε = 1: below Cesar & Rogers' αε²/8 = 0.25 at α = 2, and below pure 1-DP's 0.2656):
        >>> round(float(bounded_range_rdp(np.array([2.0]), epsilon=1.0)[0]), 6)
        0.240229
    """
    alpha = check_alpha(alpha)
    eps = rdp._check_positive("epsilon", epsilon)
    a = np.where(np.isinf(alpha), 2.0, alpha)
    log_c = -(a - 1.0) * eps  # c = e^{−(α−1)ε}
    c = np.exp(log_c)
    big_e = math.exp(eps) if eps < 700 else math.inf
    # x* = (α − 1)(e^ε − c)/(α(1 − c)), clipped to [1, e^ε]; in logs to survive large ε, and as d = log x* − ε
    # (≈ −1/α at large α) so that 1 − x*/e^ε keeps its digits: log x* alone rounds to ε once α > ~1e16, which made
    # P(L = t) and then D_α zero where it is ≈ ε.
    with np.errstate(divide="ignore", over="ignore"):
        d = np.log1p(-1.0 / a) + np.log1p(-np.exp(log_c - eps)) - np.log(-np.expm1(log_c))
    d = np.clip(d, -eps, 0.0)
    log_x = eps + d
    # D = t + log(a(1 − c) + c)/(α − 1), a = (e^ε − x)/(e^ε − 1) = P(L = t).
    prob_top = -np.expm1(d) / -math.expm1(-eps) if math.isfinite(big_e) else -np.expm1(d)
    inner = prob_top * (1.0 - c) + c
    value = log_x + np.log(inner) / (a - 1.0)
    return np.where(np.isinf(alpha), eps, np.clip(value, 0.0, eps))


def bounded_range_delta(epsilons: np.ndarray, *, epsilon: float) -> np.ndarray:
    """The exact privacy profile of the class of ε-BR mechanisms: (e^{ε/2} − e^{ε′/2})²/(e^ε − 1) for ε′ < ε.

    Example:
        >>> round(float(bounded_range_delta(np.array([0.0]), epsilon=1.0)[0]), 6)  # (e^{1/2} − 1)²/(e − 1)
        0.244919
    """
    eps = np.asarray(epsilons, dtype=float)
    half = 0.5 * np.minimum(eps, epsilon)
    # (e^{ε/2} − e^{ε′/2})² / (e^ε − 1) = (1 − e^{(ε′−ε)/2})² / (1 − e^{−ε}).
    value = np.expm1(half - 0.5 * epsilon) ** 2 / -math.expm1(-epsilon)
    return np.where(eps < epsilon, value, 0.0)


class SelectionNoise(enum.Enum):
    """The noise of report-noisy-max: Gumbel (= exponential mechanism), exponential (= permute-and-flip), Laplace.

    Example:
        >>> SelectionNoise("laplace")
        <SelectionNoise.LAPLACE: 'laplace'>
    """

    GUMBEL = "gumbel"
    EXPONENTIAL = "exponential"
    LAPLACE = "laplace"


@dataclass(frozen=True, slots=True, kw_only=True)
class _EpsilonDpSelection(ev.Event):
    """A selection mechanism described by its privacy parameter ε alone: ε-DP (its type decides the finer analysis)."""

    epsilon: float
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE

    def __post_init__(self) -> None:
        ev._positive("epsilon", self.epsilon)

    def pure_dp_epsilon(self) -> float:
        return self.epsilon


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialMechanism(_EpsilonDpSelection):
    """The exponential mechanism at privacy parameter ε: sampling ∝ exp(ε·u/(2Δ)), or ∝ exp(ε·u/Δ) for a monotone
    utility of sensitivity Δ. It is ε-DP and ε-bounded-range (Durfee & Rogers 2019, Lemma 3.2), analysed as such.

    Example:
        >>> from dplens.accountant.compose import Accountant
        >>> round(Accountant().compose(ExponentialMechanism(epsilon=0.1), count=50).epsilon(1e-6), 3)  # basic: 5
        1.636
    """


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ReportNoisyMax(ev.Event):
    """Report-noisy-max at privacy parameter ε with the given noise (Gumbel: the exponential mechanism, ε-BR;
    exponential: permute-and-flip; Laplace: Dwork & Roth 2014 Claim 3.9; the latter two ε-DP).

    Example (50 selections at ε = 0.1: Gumbel noise composes as bounded range, Laplace noise as pure ε-DP):
        >>> from dplens.accountant.compose import Accountant
        >>> for noise in ("gumbel", "laplace"):
        ...     selections = Accountant().compose(ReportNoisyMax(epsilon=0.1, noise=noise), count=50)
        ...     print(noise, round(selections.epsilon(1e-6), 3))
        gumbel 1.636
        laplace 3.173
    """

    epsilon: float
    noise: SelectionNoise = SelectionNoise.GUMBEL
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE

    def __post_init__(self) -> None:
        ev._positive("epsilon", self.epsilon)
        if isinstance(self.noise, str):
            try:
                object.__setattr__(self, "noise", SelectionNoise(self.noise))
            except ValueError:
                raise ValueError(
                    f"noise must be one of {[n.value for n in SelectionNoise]}; got {self.noise!r}"
                ) from None
        if not isinstance(self.noise, SelectionNoise):
            raise ValueError(f"noise must be a SelectionNoise; got {self.noise!r}")

    def pure_dp_epsilon(self) -> float:
        return self.epsilon


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class PermuteAndFlip(_EpsilonDpSelection):
    """Permute-and-flip at privacy parameter ε (McKenna & Sheldon 2020, Theorem 1: ε-DP), analysed as ε-DP.

    Example (50 runs at ε = 0.1, optimal composition of pure ε-DP; basic composition gives 5):
        >>> from dplens.accountant.compose import Accountant
        >>> round(Accountant().compose(PermuteAndFlip(epsilon=0.1), count=50).epsilon(1e-6), 3)
        3.173
    """


def _is_bounded_range(event: ev.Event) -> bool:
    return isinstance(event, ExponentialMechanism) or (
        isinstance(event, ReportNoisyMax) and event.noise is SelectionNoise.GUMBEL
    )


_SELECTION = (ExponentialMechanism, ReportNoisyMax, PermuteAndFlip)


def _register_selection(cls: type) -> None:
    @rdp.rdp_curve.register(cls)
    def _(event) -> RdpCurve:
        if _is_bounded_range(event):
            function = functools.partial(bounded_range_rdp, epsilon=event.epsilon)
            return RdpCurve.from_function(function, description=f"{event.epsilon:g}-bounded-range")
        from dplens.accountant.approx_dp import pure_dp_rdp

        function = functools.partial(pure_dp_rdp, epsilon=event.epsilon)
        return RdpCurve.from_function(function, description=f"{event.epsilon:g}-DP (via binary RR)")

    @pld.privacy_profile.register(cls)
    def _(event) -> PrivacyProfile:
        if _is_bounded_range(event):
            from dplens.accountant import tradeoff

            remove = functools.partial(bounded_range_delta, epsilon=event.epsilon)
            return PrivacyProfile(
                remove=remove,
                description=f"{type(event).__name__}: {event.epsilon:g}-bounded-range (Dong-Durfee-Rogers 2020)",
                trade_off_function=tradeoff.LazyDiscreteTradeOff(_bounded_range_directions(event.epsilon)),
            )
        return _pure(event).profile(description=f"{type(event).__name__}: {event.epsilon:g}-DP")

    @fpld.finite_pld.register(cls)
    def _(event) -> fpld.FinitePld:
        if _is_bounded_range(event):
            raise UnsupportedEventError("a bounded-range mechanism has no single finite dominating pair")
        return _pure(event)

    @pld.event_pld.register(cls)
    def _(event, *, neighboring: ev.NeighboringRelation, value_discretization_interval: float):
        if _is_bounded_range(event):
            from dplens.accountant.profile_pld import symmetric_profile_pld

            return symmetric_profile_pld(
                functools.partial(bounded_range_delta, epsilon=event.epsilon),
                epsilon_max=event.epsilon,
                value_discretization_interval=value_discretization_interval,
            )
        return _pure(event).to_dp_accounting(value_discretization_interval)


def _pure(event) -> fpld.FinitePld:
    from dplens.accountant.approx_dp import ApproxDp

    return ApproxDp(epsilon=event.epsilon, delta=0.0).finite_pld()


def _bounded_range_directions(epsilon: float, points: int = 2001) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The BR profile's trade-off curve: the hull of the two-point pairs over a fine grid of t (each is valid, so
    the hull is a lower bound on the class's curve; the profile itself is exact)."""
    out = []
    for t in np.linspace(0.0, epsilon, points)[1:]:
        top = -math.expm1(t - epsilon) / -math.expm1(-epsilon)  # P(L = t)
        out.append((np.array([t, t - epsilon]), np.array([top, 1.0 - top]), 0.0))
    return out


for _cls in _SELECTION:
    _register_selection(_cls)


# --------------------------------------------------------------------------------------------
# Repeat and select (Papernot & Steinke 2022)
# --------------------------------------------------------------------------------------------


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatAndSelect(ev.Event):
    """Run ``event`` K times (K random with mean ``mean``) and release the best run only (Papernot & Steinke 2022).
    Accounted by PS22's RDP bound and by the profile bound of :mod:`~dplens.accountant.selection_profile` (the
    exact route): the best route is the smaller.

    ``shape`` selects K's distribution as in dp-accounting's ``RepeatAndSelectDpEvent``: ∞ Poisson (PS22 Thm 6),
    1 geometric, 0 logarithmic, other η > −1 truncated negative binomial (PS22 Thm 2). ``mean`` ≥ 1.

    Example:
        >>> from dplens.accountant.compose import Accountant
        >>> run = ev.SelfComposed(event=ev.Gaussian(noise_multiplier=5.0), count=10)
        >>> study = Accountant().compose(RepeatAndSelect(event=run, mean=10, shape=1))
        >>> round(study.epsilon(1e-6, method="rdp"), 3), round(study.epsilon(1e-6), 3)  # one run: 3.131
        (5.734, 5.586)
    """

    event: ev.Event
    mean: float
    shape: float

    def __post_init__(self) -> None:
        if not isinstance(self.event, ev.Event):
            raise ValueError(f"event must be an Event; got {self.event!r}")
        if isinstance(self.mean, bool) or not isinstance(self.mean, int | float) or not (1 <= self.mean < math.inf):
            raise ValueError(f"mean must be a finite number >= 1; got {self.mean!r}")
        if isinstance(self.shape, bool) or not isinstance(self.shape, int | float) or not (self.shape > -1):
            raise ValueError(f"shape must be > -1 (inf: Poisson); got {self.shape!r}")

    @property
    def neighboring(self) -> ev.NeighboringRelation | None:
        """The relation of the repeated event."""
        from dplens.accountant.compose import _entry_relation

        return _entry_relation(self.event)

    def to_dp_accounting(self):
        from dp_accounting import dp_event

        return dp_event.RepeatAndSelectDpEvent(ev.to_dp_accounting(self.event), float(self.mean), float(self.shape))


@dataclass(frozen=True, slots=True)
class _RepeatAndSelectCurve:
    """PS22's bound as a function of λ, from the base curve (picklable: the base curve is a value)."""

    base: RdpCurve
    mean: float
    shape: float

    def __call__(self, alpha: np.ndarray) -> np.ndarray:
        return repeat_and_select_rdp(alpha, base=self.base, mean=self.mean, shape=self.shape)


_LAMBDA_GRID = 1.0 + np.geomspace(1e-3, 1e6, 160)


@functools.lru_cache(maxsize=32)
def _poisson_delta_table(base: RdpCurve) -> tuple[np.ndarray, np.ndarray]:
    """δ̂ of the base curve at ε̂ = log(1 + 1/(λ − 1)) on a grid of λ (ε̂ ascending)."""
    eps_hat = np.log1p(1.0 / (_LAMBDA_GRID - 1.0))[::-1]
    return eps_hat, np.array([base.delta(float(e)) for e in eps_hat])


@functools.lru_cache(maxsize=32)
def _tnb_constant(base: RdpCurve, shape: float, gamma: float) -> float:
    """(1 + η)·min_{λ̂ ≥ 1}[(1 − 1/λ̂)ε(λ̂) + log(1/γ)/λ̂] (PS22 Thm 2), λ̂ searched continuously; λ̂ → 1 gives
    (1 + η)·log(1/γ). Any λ̂ gives a valid bound, so an imperfect search only loosens it."""

    def objective(lam: np.ndarray) -> np.ndarray:
        lam = np.maximum(lam, 1.0 + 1e-12)  # the search may drift to λ̂ → 1, whose limit is handled below
        return (1.0 - 1.0 / lam) * base(lam) - math.log(gamma) / lam

    best, _ = base._minimise(objective)
    return (1.0 + shape) * min(best, -math.log(gamma))


@functools.lru_cache(maxsize=32)
def _suffix_minimum(base: RdpCurve, mean: float, shape: float) -> tuple[np.ndarray, np.ndarray]:
    """The bound on the λ grid and its running minimum from the right (RDP is non-decreasing in λ)."""
    values = _raw_bound(_LAMBDA_GRID, base, mean, shape)
    return _LAMBDA_GRID, np.minimum.accumulate(values[::-1])[::-1]


def _raw_bound(lam: np.ndarray, base: RdpCurve, mean: float, shape: float) -> np.ndarray:
    finite = np.where(np.isinf(lam), 2.0, lam)
    if math.isinf(shape):
        eps_hat = np.log1p(1.0 / (finite - 1.0))
        table_eps, table_delta = _poisson_delta_table(base)
        # δ̂ is non-increasing in ε̂: the grid point just below ε̂ gives an upper bound.
        index = np.clip(np.searchsorted(table_eps, eps_hat, side="right") - 1, 0, table_eps.size - 1)
        below = eps_hat >= table_eps[0]
        delta_hat = np.where(below, table_delta[index], 1.0)
        out = base(finite) + mean * delta_hat + math.log(mean) / (finite - 1.0)
    else:
        gamma = truncated_negative_binomial_gamma(mean, shape)
        out = base(finite) + _tnb_constant(base, shape, gamma) + math.log(mean) / (finite - 1.0)
    return np.where(np.isinf(lam), np.inf, out)


def repeat_and_select_rdp(alpha: np.ndarray, *, base: RdpCurve, mean: float, shape: float) -> np.ndarray:
    """RDP of repeat-and-select from the base mechanism's curve (Papernot & Steinke 2022, arXiv 2110.03620v2).

    Truncated negative binomial K (η > −1, γ from the mean): Theorem 2,
    ε′(λ) = ε(λ) + (1 + η)(1 − 1/λ̂)ε(λ̂) + (1 + η)log(1/γ)/λ̂ + log E[K]/(λ − 1), minimised over λ̂ ≥ 1.
    Poisson K: Theorem 6, ε′(λ) = ε(λ) + μδ̂ + log μ/(λ − 1), where the base mechanism is (ε̂, δ̂)-DP at
    ε̂ = log(1 + 1/(λ − 1)) (δ̂ from the base curve, on a grid rounded to the safe side). Since true RDP is
    non-decreasing in λ, the bound at any larger λ (on a grid) also holds; the smaller is returned. At α = ∞: ∞.
    """
    alpha = check_alpha(alpha)
    flat = alpha.ravel()
    direct = _raw_bound(flat, base, float(mean), float(shape))
    grid, suffix = _suffix_minimum(base, float(mean), float(shape))
    index = np.searchsorted(grid, flat, side="left")
    from_grid = np.where(index < grid.size, suffix[np.minimum(index, grid.size - 1)], np.inf)
    return np.minimum(direct, from_grid).reshape(alpha.shape)


@rdp.rdp_curve.register
def _(event: RepeatAndSelect) -> RdpCurve:
    base = rdp.rdp_curve(event.event)
    function = _RepeatAndSelectCurve(base, float(event.mean), float(event.shape))
    kind = "Poisson" if math.isinf(event.shape) else f"TNB(shape={event.shape:g})"
    return RdpCurve.from_function(function, description=f"RepeatAndSelect({kind}, mean={event.mean:g})")


@pld.privacy_profile.register
def _(event: RepeatAndSelect) -> PrivacyProfile:
    from dplens.accountant.selection_profile import repeat_and_select_profile

    return repeat_and_select_profile(event)
