"""Exact privacy profiles: PLD accounting (dplens's engine, dp-accounting's as the fallback) and closed forms.

Two interpreters live here:

- the PLD route (:func:`pld_epsilon`, :func:`pld_delta`, :func:`pld_profile`, :func:`pld_supports`) runs dplens's
  own engine (:mod:`dplens.accountant.pld_engine`) on every event it models — Gaussian, Laplace, randomized
  response, Poisson-subsampled Gaussian and their compositions, plus any event registered on
  :func:`dplens.accountant.pld_engine.loss_distribution` — and returns a certified bracket: ``epsilon`` is an upper
  bound on the true ε, ``epsilon_lower`` a lower bound, refined until they are within a relative ``tolerance``.
  Ledgers with an event the engine does not model fall back to dp-accounting's PLD engine (connect-the-dots,
  pessimistic: Doroshenko et al. 2022, arXiv 2207.04380), upper bound only; :func:`pld_of` exposes that one.
- :func:`privacy_profile` (``functools.singledispatch``) returns the exact closed-form
  :class:`~dplens.accountant.curves.PrivacyProfile` of an event where one is known; research modules
  register their events on it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.curves import Gdp, PrivacyProfile
from dplens.accountant.rdp import UnsupportedEventError

__all__ = [
    "DEFAULT_TOLERANCE",
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "PldResult",
    "gaussian_mu",
    "pld_delta",
    "pld_epsilon",
    "pld_of",
    "pld_profile",
    "pld_supports",
    "privacy_profile",
]

#: Interval of the privacy-loss grid where one is fixed (profiles, the dp-accounting fallback). 1e-4 puts MNIST
#: DP-SGD within 1e-4 of the true ε (notes §5.8).
DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-4
#: The engine refines its grid until (ε − ε_lower) ≤ this × ε.
DEFAULT_TOLERANCE = 1e-3


def _dpa_relation(relation: ev.NeighboringRelation):
    import dp_accounting as dpa

    return {
        ev.NeighboringRelation.ADD_OR_REMOVE_ONE: dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
        ev.NeighboringRelation.REPLACE_ONE: dpa.NeighboringRelation.REPLACE_ONE,
        ev.NeighboringRelation.REPLACE_SPECIAL: dpa.NeighboringRelation.REPLACE_SPECIAL,
    }[relation]


def check_tolerance(tolerance: float) -> float:
    """Validate a relative bracket tolerance in (0, 1)."""
    ok = isinstance(tolerance, int | float) and not isinstance(tolerance, bool) and 0 < tolerance < 1
    if not ok:
        raise ValueError(f"tolerance must be a number in (0, 1); got {tolerance!r}")
    return float(tolerance)


def _check_interval(value_discretization_interval: float | None) -> float | None:
    if value_discretization_interval is None:
        return None
    try:
        interval = float(value_discretization_interval)
    except (TypeError, ValueError):
        raise ValueError(
            f"value_discretization_interval must be a number in (0, 1); got {value_discretization_interval!r}"
        ) from None
    if not (0 < interval < 1):
        raise ValueError(
            f"value_discretization_interval must be a number in (0, 1); got {value_discretization_interval!r}"
        )
    return interval


def pld_of(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
):
    """The pessimistic PLD of a composition from dp-accounting's engine (its ``PLDAccountant``).

    Raises:
        UnsupportedEventError: an event has no PLD in dp-accounting (checked before any work).
    """
    from dp_accounting.pld import pld_privacy_accountant

    interval = _check_interval(value_discretization_interval) or DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    if isinstance(entries, ev.Event):
        entries = [(entries, 1)]
    accountant = pld_privacy_accountant.PLDAccountant(
        _dpa_relation(neighboring), value_discretization_interval=interval
    )
    converted = []
    for event, count in entries:
        try:
            dp_event = ev.to_dp_accounting(event)
        except ValueError as err:
            raise UnsupportedEventError(f"PLD accounting does not support event {event!r}") from err
        if not accountant.supports(dp_event):
            raise UnsupportedEventError(
                f"PLD accounting does not support event {event!r} under neighboring={neighboring.value}"
            )
        converted.append((dp_event, count))
    for dp_event, count in converted:
        accountant.compose(dp_event, count)
    return accountant


def pld_supports(event: ev.Event, *, neighboring: ev.NeighboringRelation) -> bool:
    """Whether the PLD route can interpret ``event``: dplens's engine models it, or dp-accounting does (a dry run)."""
    from dplens.accountant import pld_engine

    if pld_engine.supports(event, neighboring=neighboring):
        return True
    from dp_accounting.pld import pld_privacy_accountant

    try:
        dp_event = ev.to_dp_accounting(event)
    except ValueError:
        return False
    return bool(pld_privacy_accountant.PLDAccountant(_dpa_relation(neighboring)).supports(dp_event))


@dataclass(frozen=True, slots=True, kw_only=True)
class PldResult:
    """An (ε, δ) pair from PLD accounting, with its discretisation and, from dplens's engine, a certified bracket.

    ``epsilon`` (or ``delta``, for a δ query) is an upper bound on the true value; ``epsilon_lower`` /
    ``delta_lower`` a lower bound (None from the dp-accounting fallback, which has none).
    """

    epsilon: float
    delta: float
    value_discretization_interval: float
    neighboring: str
    method: str = "pld (dp-accounting, connect-the-dots, pessimistic)"
    epsilon_lower: float | None = None
    delta_lower: float | None = None
    tolerance: float | None = None
    tolerance_met: bool | None = None

    def to_dict(self) -> dict:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "value_discretization_interval": self.value_discretization_interval,
            "neighboring": self.neighboring,
            "method": self.method,
        }
        for key in ("epsilon_lower", "delta_lower", "tolerance", "tolerance_met"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @property
    def adaptive(self) -> bool:
        return self.tolerance is not None

    def discretisation(self) -> str:
        """The grid as "value_discretization_interval=…", with how it was chosen when the engine refined it."""
        text = f"value_discretization_interval={self.value_discretization_interval:g}"
        if self.tolerance is not None:
            met = "" if self.tolerance_met else ", NOT met"
            text += f" (adaptive: bracket within {self.tolerance:g}{met})"
        return text


_ENGINE_METHOD = "pld (dplens engine: pessimistic connect-the-dots / optimistic inscribed merge, certified bracket)"


def _entries(entries: list[tuple[ev.Event, int]] | ev.Event) -> list[tuple[ev.Event, int]]:
    return [(entries, 1)] if isinstance(entries, ev.Event) else list(entries)


def pld_epsilon(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    delta: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> PldResult:
    """ε(δ) of a composition by PLD (worse of add and remove directions), with a certified bracket.

    dplens's engine refines its grid until (ε − ε_lower) ≤ ``tolerance``·ε, or uses ``value_discretization_interval``
    when one is given; ledgers it does not model go to dp-accounting (upper bound only).

    Example:
        >>> from dplens.accountant import events as ev
        >>> step = ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.0))
        >>> result = pld_epsilon([(step, 1000)], 1e-5)
        >>> low, high = result.epsilon_lower, result.epsilon
        >>> low <= 1.82822 <= high, high - low <= 1e-3 * high
        (True, True)
    """
    from dplens.accountant import pld_engine

    delta = conversions.check_delta(delta)
    tolerance = check_tolerance(tolerance)
    interval = _check_interval(value_discretization_interval)
    entries = _entries(entries)
    try:
        bracket = pld_engine.epsilon_bracket(
            entries, delta, neighboring=neighboring, tolerance=tolerance, interval=interval
        )
    except UnsupportedEventError:
        fallback = interval or DEFAULT_VALUE_DISCRETIZATION_INTERVAL
        accountant = pld_of(entries, neighboring=neighboring, value_discretization_interval=fallback)
        epsilon = conversions.round_up(max(float(accountant.get_epsilon(delta)), 0.0))
        return PldResult(
            epsilon=epsilon, delta=delta, value_discretization_interval=fallback, neighboring=neighboring.value
        )
    return PldResult(
        epsilon=bracket.upper,
        delta=delta,
        value_discretization_interval=bracket.interval,
        neighboring=neighboring.value,
        method=_ENGINE_METHOD,
        epsilon_lower=bracket.lower,
        tolerance=tolerance if interval is None else None,
        tolerance_met=bracket.tolerance_met if interval is None else None,
    )


def pld_delta(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    epsilon: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> PldResult:
    """δ(ε) of a composition by PLD (worse direction), with a certified bracket (``delta_lower``) from the engine."""
    from dplens.accountant import pld_engine

    epsilon = conversions.check_epsilon(epsilon)
    tolerance = check_tolerance(tolerance)
    interval = _check_interval(value_discretization_interval)
    entries = _entries(entries)
    try:
        bracket = pld_engine.delta_bracket(
            entries, epsilon, neighboring=neighboring, tolerance=tolerance, interval=interval
        )
    except UnsupportedEventError:
        fallback = interval or DEFAULT_VALUE_DISCRETIZATION_INTERVAL
        accountant = pld_of(entries, neighboring=neighboring, value_discretization_interval=fallback)
        delta = min(conversions.round_up(max(float(accountant.get_delta(epsilon)), 0.0)), 1.0)
        return PldResult(
            epsilon=epsilon, delta=delta, value_discretization_interval=fallback, neighboring=neighboring.value
        )
    return PldResult(
        epsilon=epsilon,
        delta=bracket.upper,
        value_discretization_interval=bracket.interval,
        neighboring=neighboring.value,
        method=_ENGINE_METHOD,
        delta_lower=bracket.lower,
        tolerance=tolerance if interval is None else None,
        tolerance_met=bracket.tolerance_met if interval is None else None,
    )


def pld_profile(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = None,
) -> PrivacyProfile:
    """The pessimistic PLD as a :class:`PrivacyProfile`, both directions tracked.

    A profile answers queries at every ε, so its grid is fixed: ``value_discretization_interval``, else
    :data:`DEFAULT_VALUE_DISCRETIZATION_INTERVAL`. dplens's engine builds it where it models the ledger (its
    δ(ε) includes the engine's error terms, so every value is an upper bound); otherwise dp-accounting's.
    """
    from dplens.accountant import pld_engine

    interval = _check_interval(value_discretization_interval) or DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    entries = _entries(entries)
    while True:
        try:
            composed = pld_engine.compose(entries, pld_engine.LossGrid(interval=interval, neighboring=neighboring))
            break
        except UnsupportedEventError:
            return _dp_accounting_profile(entries, neighboring=neighboring, interval=interval)
        except pld_engine.WindowTooLargeError:
            if value_discretization_interval is not None:
                raise
            interval *= 4.0  # a ledger too wide for the default grid: a coarser one is still an upper bound
    directions = composed.directions()
    if composed.non_private or not directions:
        level = 1.0 if composed.non_private else 0.0
        return PrivacyProfile(
            remove=functools.partial(_constant_delta, level=level),
            epsilon_for_delta=functools.partial(_constant_epsilon, level=level),
            description="PLD (non-private)" if composed.non_private else "PLD (empty ledger)",
            discretisation=f"value_discretization_interval={interval:g}",
        )

    def epsilon_for_delta(delta: float) -> float:
        return conversions.round_up(max(d.epsilon_upper(delta) for d in directions.values()))

    return PrivacyProfile(
        remove=_vectorised(directions["remove"].delta_upper),
        add=_vectorised(directions["add"].delta_upper) if "add" in directions else None,
        epsilon_for_delta=epsilon_for_delta,
        description="PLD (dplens engine, pessimistic connect-the-dots)",
        discretisation=f"value_discretization_interval={interval:g}",
    )


def _constant_delta(epsilons: np.ndarray, *, level: float) -> np.ndarray:
    return np.full(np.shape(np.atleast_1d(epsilons)), level)


def _constant_epsilon(delta: float, *, level: float) -> float:
    return math.inf if level >= 1.0 else 0.0


def _dp_accounting_profile(
    entries: list[tuple[ev.Event, int]], *, neighboring: ev.NeighboringRelation, interval: float
) -> PrivacyProfile:
    accountant = pld_of(entries, neighboring=neighboring, value_discretization_interval=interval)
    pld = accountant._pld  # dp-accounting keeps the composed PLD here
    remove = getattr(pld, "_pmf_remove", None)
    add = None if getattr(pld, "_symmetric", True) else getattr(pld, "_pmf_add", None)
    if remove is None:  # pragma: no cover - dp-accounting internals changed: fall back to the public max
        remove_fn = _vectorised(pld.get_delta_for_epsilon)
        add_fn = None
    else:
        remove_fn = _vectorised(remove.get_delta_for_epsilon)
        add_fn = _vectorised(add.get_delta_for_epsilon) if add is not None else None

    def epsilon_for_delta(delta: float) -> float:
        return conversions.round_up(max(float(pld.get_epsilon_for_delta(delta)), 0.0))

    return PrivacyProfile(
        remove=remove_fn,
        add=add_fn,
        epsilon_for_delta=epsilon_for_delta,
        description="PLD (dp-accounting, connect-the-dots, pessimistic)",
        discretisation=f"value_discretization_interval={interval:g}",
    )


def _vectorised(function):
    def wrapped(epsilons: np.ndarray) -> np.ndarray:
        eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
        order = np.argsort(eps)
        out = np.empty_like(eps)
        out[order] = np.asarray(function(eps[order]), dtype=float)
        return np.minimum(out, 1.0)

    return wrapped


# --------------------------------------------------------------------------------------------
# Closed-form profiles
# --------------------------------------------------------------------------------------------


def gaussian_mu(event: ev.Event) -> float | None:
    """μ of a (composition of) Gaussian or μ-GDP event(s), or None: μ = √(Σ countᵢ μᵢ²) (DRS 2022 Cor. 3.3)."""
    match event:
        case ev.Gaussian():
            return 1.0 / event.noise_multiplier
        case ev.NoOp():
            return 0.0
        case ev.SelfComposed():
            inner = gaussian_mu(event.event)
            return None if inner is None else inner * math.sqrt(event.count)
        case ev.Composed():
            parts = [gaussian_mu(e) for e in event.events]
            return None if any(p is None for p in parts) else math.sqrt(sum(p * p for p in parts))
    # Research events that are exactly μ-GDP declare μ (e.g. DpFtrl), so their compositions stay exact.
    declared = getattr(event, "gdp_mu", None)
    return float(declared()) if callable(declared) else None


@functools.singledispatch
def privacy_profile(event: ev.Event) -> PrivacyProfile:
    """The exact privacy profile of an event; :class:`UnsupportedEventError` where none is known."""
    mu = gaussian_mu(event)
    if mu is not None:
        return Gdp(mu=mu).profile()
    if isinstance(event, ev.SelfComposed) and event.count == 1:
        return privacy_profile(event.event)
    # An event whose self-composition is exactly another event of its family (e.g. GaussMix(k)×m = GaussMix(k·m)).
    if isinstance(event, ev.SelfComposed) and event.count > 1 and hasattr(event.event, "self_composed"):
        return privacy_profile(event.event.self_composed(event.count))
    raise UnsupportedEventError(f"no exact privacy profile is known for event {event!r}")


def _laplace_delta(epsilons: np.ndarray, *, epsilon0: float) -> np.ndarray:
    # Privacy loss of Lap(0, b) vs Lap(1, b) is ε0·clip(…) with an atom at ±ε0; its hockey stick is
    # δ(ε) = 1 − e^{(ε − ε0)/2} for ε < ε0 and 0 beyond (e.g. notes §5.1 row 22).
    eps = np.asarray(epsilons, dtype=float)
    return np.where(eps < epsilon0, -np.expm1((eps - epsilon0) / 2.0), 0.0)


@privacy_profile.register
def _(event: ev.Laplace) -> PrivacyProfile:
    """Laplace mechanism: δ(ε) = 1 − exp((ε − ε₀)/2) for ε < ε₀ = 1/b (symmetric)."""
    return PrivacyProfile(
        remove=functools.partial(_laplace_delta, epsilon0=1.0 / event.noise_multiplier),
        description=f"Laplace(noise_multiplier={event.noise_multiplier:g}) exact",
    )


def _rr_delta(epsilons: np.ndarray, *, epsilon0: float, num_values: int) -> np.ndarray:
    # Hockey stick of P = (p_hi, p_lo, …) vs Q = (p_lo, p_hi, …): only the first atom has P > e^ε Q.
    eps = np.asarray(epsilons, dtype=float)
    p_lo = 1.0 / (math.exp(epsilon0) + num_values - 1)
    p_hi = math.exp(epsilon0) * p_lo
    return np.maximum(p_hi - np.exp(eps) * p_lo, 0.0)


@privacy_profile.register
def _(event: ev.RandomizedResponse) -> PrivacyProfile:
    """k-ary randomized response (replace-one): δ(ε) = max(0, p_hi − e^ε p_lo)."""
    return PrivacyProfile(
        remove=functools.partial(_rr_delta, epsilon0=event.epsilon, num_values=event.num_values),
        description=f"RandomizedResponse(epsilon={event.epsilon:g}, k={event.num_values}) exact",
    )
