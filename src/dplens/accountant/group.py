"""Group privacy: the guarantee of an event for data sets differing in ``group_size`` records.

Each route takes the tightest statement that applies (all are upper bounds, so their minimum is too):

- additive mechanisms, exactly: a group of k changes the query by k sensitivities, so a Gaussian (or any exactly
  μ-GDP event) becomes kμ-GDP and a Laplace mechanism has k-fold ε₀ (its noise scale ÷ k);
- ρ-zCDP becomes k²ρ-zCDP (Bun & Steinke 2016, arXiv 1605.02065, Proposition 1.9);
- pure ε-DP becomes kε-DP (Dwork & Roth 2014, Theorem 2.2), analysed as the class of kε-DP mechanisms;
- (ε, δ)-DP becomes (kε, δ·Σ_{i<k} e^{iε})-DP, by induction on the group (δ_{j+1} = δ + e^ε δ_j); this is at most
  the usual (kε, k·e^{(k−1)ε}δ) (Vadhan 2017, "The complexity of differential privacy", Lemma 2.2);
- any RDP curve: for k ≤ 2^c, ε_k(α) ≤ 3^c·ε(2^c α) for α ≥ 2 (Mironov 2017, arXiv 1702.07476, Proposition 2:
  2^c-stable transformations, from the weak triangle inequality of Proposition 11);
- any privacy profile δ(ε) (the PLD route): the group lemma at every ε′, δ_k(ε′) ≤ δ(ε′/k)·Σ_{i<k} e^{iε′/k},
  turned into a pessimistic PLD (:mod:`dplens.accountant.profile_pld`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant import finite_pld as fpld
from dplens.accountant import pld, rdp
from dplens.accountant.curves import PrivacyProfile, RdpCurve, check_alpha
from dplens.accountant.rdp import UnsupportedEventError

__all__ = ["GroupPrivacy", "approx_dp_group", "group_profile_delta", "mironov_group_rdp"]


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPrivacy(ev.Event):
    """``event``'s guarantee for neighbouring data sets that differ in ``group_size`` records (k ≥ 1).

    Example:
        >>> from dplens.accountant.compose import Accountant, Method
        >>> acc = Accountant().compose(GroupPrivacy(event=ev.Gaussian(noise_multiplier=4.0), group_size=2))
        >>> acc.epsilon(1e-5, method=Method.EXACT) == Accountant().compose(ev.Gaussian(noise_multiplier=2.0)).epsilon(
        ...     1e-5, method=Method.EXACT)
        True
    """

    event: ev.Event
    group_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, ev.Event):
            raise ValueError(f"event must be an Event; got {self.event!r}")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 1:
            raise ValueError(f"group_size must be an integer >= 1; got {self.group_size!r}")

    @property
    def neighboring(self) -> ev.NeighboringRelation | None:
        from dplens.accountant.compose import _entry_relation

        return _entry_relation(self.event)

    def pure_dp_epsilon(self) -> float:
        from dplens.accountant.compose import _pure_epsilon

        return self.group_size * _pure_epsilon(self.event)

    def gdp_mu(self) -> float | None:
        """kμ where the event is exactly μ-GDP (a group shifts the Gaussian mean by k sensitivities)."""
        mu = pld.gaussian_mu(self.event)
        return None if mu is None else self.group_size * mu


def _group_sum(epsilon: float | np.ndarray, k: int) -> float | np.ndarray:
    """Σ_{i<k} e^{iε} = (e^{kε} − 1)/(e^ε − 1) (k at ε = 0)."""
    eps = np.asarray(epsilon, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        value = np.where(eps > 0, np.expm1(k * eps) / np.expm1(np.where(eps > 0, eps, 1.0)), float(k))
    return float(value) if np.ndim(value) == 0 else value


def approx_dp_group(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(kε, δ·Σ_{i<k} e^{iε}) for a group of k under (ε, δ)-DP; at most (kε, k·e^{(k−1)ε}δ) (Vadhan 2017 L. 2.2).

    Example:
        >>> approx_dp_group(0.5, 1e-6, 1)
        (0.5, 1e-06)
        >>> eps, delta = approx_dp_group(0.5, 1e-6, 3)
        >>> eps, round(delta / 1e-6, 6), delta <= 3 * math.exp(2 * 0.5) * 1e-6
        (1.5, 5.367003, True)
    """
    return k * epsilon, min(delta * _group_sum(epsilon, k), 1.0)


def mironov_group_rdp(alpha: np.ndarray, *, base: RdpCurve, group_size: int) -> np.ndarray:
    """ε_k(α) ≤ 3^c·ε(2^c α) for α ≥ 2, c = ⌈log₂ k⌉ (Mironov 2017 Proposition 2); ∞ below α = 2 (c ≥ 1)."""
    alpha = check_alpha(alpha)
    c = math.ceil(math.log2(group_size)) if group_size > 1 else 0
    if c == 0:
        return base(alpha)
    scaled = np.where(alpha >= 2.0, alpha, 2.0) * 2.0**c
    with np.errstate(over="ignore", invalid="ignore"):
        value = 3.0**c * base(scaled)
    return np.where(alpha >= 2.0, value, np.inf)


def group_profile_delta(epsilons: np.ndarray, *, base: PrivacyProfile, group_size: int) -> np.ndarray:
    """δ_k(ε′) ≤ δ(ε′/k)·Σ_{i<k} e^{iε′/k}: the (ε, δ) group lemma at ε = ε′/k, for every ε′ (capped at 1)."""
    eps = np.asarray(epsilons, dtype=float)
    inner = eps / group_size
    return np.minimum(base.deltas(inner) * _group_sum(inner, group_size), 1.0)


def _scaled_additive(event: ev.Event, k: int) -> ev.Event | None:
    """The exactly equivalent event for a group of k, where the event is additive noise; else None."""
    match event:
        case ev.Gaussian():
            return ev.Gaussian(noise_multiplier=event.noise_multiplier / k, neighboring=event.neighboring)
        case ev.Laplace():
            return ev.Laplace(noise_multiplier=event.noise_multiplier / k, neighboring=event.neighboring)
        case ev.NoOp():
            return event
        case ev.SelfComposed():
            inner = _scaled_additive(event.event, k)
            return None if inner is None else ev.SelfComposed(event=inner, count=event.count)
        case ev.Composed():
            parts = [_scaled_additive(e, k) for e in event.events]
            return None if any(p is None for p in parts) else ev.Composed(events=tuple(parts))
    return None


def _approx_dp_of(event: ev.Event) -> tuple[float, float] | None:
    from dplens.accountant.approx_dp import ApproxDp

    if isinstance(event, ApproxDp):
        return event.epsilon, event.delta
    return None


@rdp.rdp_curve.register
def _(event: GroupPrivacy) -> RdpCurve:
    k = event.group_size
    if k == 1:
        return rdp.rdp_curve(event.event)
    exact = _scaled_additive(event.event, k)
    if exact is not None:
        return rdp.rdp_curve(exact)
    candidates: list[RdpCurve] = []
    if isinstance(event.event, ev.ZcdpMechanism) and event.event.xi == 0:
        from dplens.accountant.curves import Zcdp

        candidates.append(Zcdp(rho=k * k * event.event.rho).rdp_curve())
    pure = event.pure_dp_epsilon()
    if math.isfinite(pure):
        from dplens.accountant.approx_dp import pure_dp_rdp

        candidates.append(RdpCurve.from_function(functools.partial(pure_dp_rdp, epsilon=pure), description="pure"))
    try:
        base = rdp.rdp_curve(event.event)
        candidates.append(
            RdpCurve.from_function(
                functools.partial(mironov_group_rdp, base=base, group_size=k),
                alpha_max=base.alpha_max / 2 ** math.ceil(math.log2(k)),
                description=f"Mironov Prop. 2 (group of {k})",
            )
        )
    except UnsupportedEventError:
        pass
    if not candidates:
        raise UnsupportedEventError(f"no RDP group-privacy bound applies to {event.event!r}")
    if len(candidates) == 1:
        return candidates[0]
    return RdpCurve.from_function(
        functools.partial(_pointwise_minimum, curves=tuple(candidates)),
        description=f"GroupPrivacy(k={k}): min of {len(candidates)} bounds",
    )


def _pointwise_minimum(alpha: np.ndarray, *, curves: tuple[RdpCurve, ...]) -> np.ndarray:
    return np.minimum.reduce([np.asarray(curve(alpha), dtype=float) for curve in curves])


def _group_finite(event: GroupPrivacy) -> fpld.FinitePld:
    """The finite PLD of a group: (kε, δ_k) of an (ε, δ) event, or kε of a pure-DP event (class analysis)."""
    from dplens.accountant.approx_dp import ApproxDp

    approx = _approx_dp_of(event.event)
    if approx is not None:
        eps, delta = approx_dp_group(*approx, event.group_size)
        return ApproxDp(epsilon=eps, delta=delta).finite_pld()
    pure = event.pure_dp_epsilon()
    if math.isfinite(pure):
        return ApproxDp(epsilon=pure, delta=0.0).finite_pld()
    raise UnsupportedEventError(f"no finite group PLD for {event.event!r}")


@fpld.finite_pld.register
def _(event: GroupPrivacy) -> fpld.FinitePld:
    if event.group_size == 1:
        return fpld.finite_pld(event.event)
    return _group_finite(event)


@pld.privacy_profile.register
def _(event: GroupPrivacy) -> PrivacyProfile:
    k = event.group_size
    if k == 1:
        return pld.privacy_profile(event.event)
    mu = event.gdp_mu()
    if mu is not None:
        return pld.privacy_profile(ev.Gaussian(noise_multiplier=1.0 / mu)) if mu > 0 else pld.privacy_profile(ev.NoOp())
    exact = _scaled_additive(event.event, k)
    if exact is not None:
        return pld.privacy_profile(exact)
    return _group_finite(event).profile(description=f"GroupPrivacy(k={k}) of {type(event.event).__name__}")


@pld.event_pld.register
def _(event: GroupPrivacy, *, neighboring: ev.NeighboringRelation, value_discretization_interval: float):
    k = event.group_size
    exact = _scaled_additive(event.event, k) if k > 1 else event.event
    if exact is not None or k == 1:
        return pld.pld_of(
            exact, neighboring=neighboring, value_discretization_interval=value_discretization_interval
        )._pld
    mu = event.gdp_mu()
    if mu is not None:
        gaussian = ev.Gaussian(noise_multiplier=1.0 / mu, neighboring=neighboring) if mu > 0 else ev.NoOp()
        return pld.pld_of(
            gaussian, neighboring=neighboring, value_discretization_interval=value_discretization_interval
        )._pld
    try:
        return _group_finite(event).to_dp_accounting(value_discretization_interval)
    except UnsupportedEventError:
        pass
    # The general case: the group lemma on the event's own profile (exact if known, else its PLD).
    try:
        base = pld.privacy_profile(event.event)
    except UnsupportedEventError:
        base = pld.pld_profile(
            event.event, neighboring=neighboring, value_discretization_interval=value_discretization_interval
        )
    from dplens.accountant.profile_pld import symmetric_profile_pld

    # Beyond ε′ = k·ε(δ₀) the remaining δ becomes mass at +∞ (valid; δ₀ = 1e-12, or 1e-9 where a PLD's own
    # truncation mass already exceeds 1e-12).
    base_epsilon = base.epsilon(1e-12)
    if not math.isfinite(base_epsilon):
        base_epsilon = base.epsilon(1e-9)
    epsilon_max = max(k * base_epsilon, value_discretization_interval)
    if not math.isfinite(epsilon_max) or epsilon_max / value_discretization_interval > 2_000_000:
        raise UnsupportedEventError(
            f"the group profile of {event.event!r} needs epsilon up to {epsilon_max!r}: too wide a PLD grid"
        )
    return symmetric_profile_pld(
        functools.partial(group_profile_delta, base=base, group_size=k),
        epsilon_max=epsilon_max,
        value_discretization_interval=value_discretization_interval,
    )
