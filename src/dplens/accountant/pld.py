"""Exact privacy profiles: PLD accounting over dp-accounting's engine, and closed-form profiles.

Two interpreters live here:

- :func:`pld_of` builds a privacy-loss distribution for a composition of standard events with
  dp-accounting's PLD engine (connect-the-dots, pessimistic: Doroshenko et al. 2022, arXiv 2207.04380),
  so every ε it yields is an upper bound on the true ε at the stated discretisation.
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
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "PldResult",
    "event_pld",
    "gaussian_mu",
    "pld_delta",
    "pld_epsilon",
    "pld_of",
    "pld_profile",
    "pld_supports",
    "privacy_profile",
]

#: Interval of the privacy-loss grid. 1e-4 puts MNIST DP-SGD within 1e-4 of the true ε (notes §5.8).
DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-4


def _dpa_relation(relation: ev.NeighboringRelation):
    import dp_accounting as dpa

    return {
        ev.NeighboringRelation.ADD_OR_REMOVE_ONE: dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
        ev.NeighboringRelation.REPLACE_ONE: dpa.NeighboringRelation.REPLACE_ONE,
        ev.NeighboringRelation.REPLACE_SPECIAL: dpa.NeighboringRelation.REPLACE_SPECIAL,
    }[relation]


def _check_interval(value_discretization_interval: float) -> float:
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
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
):
    """The pessimistic PLD (dp-accounting ``PrivacyLossDistribution``) of a composition.

    Raises:
        UnsupportedEventError: an event has no PLD in dp-accounting (checked before any work).
    """
    from dp_accounting.pld import pld_privacy_accountant

    interval = _check_interval(value_discretization_interval)
    if isinstance(entries, ev.Event):
        entries = [(entries, 1)]
    accountant = pld_privacy_accountant.PLDAccountant(
        _dpa_relation(neighboring), value_discretization_interval=interval
    )
    plan: list[tuple[object, int, bool]] = []  # (dp-accounting event or PLD, count, is a ready-made PLD)
    for event, count in entries:
        _plan_event(event, count, neighboring=neighboring, interval=interval, accountant=accountant, plan=plan)
    for item, count, ready in plan:
        if count == 0:
            continue
        if ready:
            accountant._pld = accountant._pld.compose(item.self_compose(count))
        else:
            accountant.compose(item, count)
    return accountant


@functools.singledispatch
def event_pld(event: ev.Event, *, neighboring: ev.NeighboringRelation, value_discretization_interval: float):
    """A dp-accounting ``PrivacyLossDistribution`` of one run of ``event`` built here, not by its PLDAccountant.

    None (the default) lets dp-accounting's PLDAccountant interpret the event's dp-accounting counterpart. Modules
    register events whose PLD dp-accounting cannot build (or builds wrongly: its PLDAccountant composes a
    ``RandomizedResponseDpEvent`` once whatever the count, see the registration for :class:`~dplens.accountant.
    events.RandomizedResponse` below) and return a pessimistic PLD; :func:`pld_of` self-composes it ``count`` times.
    Raise :class:`UnsupportedEventError` to refuse.
    """
    return None


def _plan_event(event, count, *, neighboring, interval, accountant, plan) -> None:
    """Validate one ledger entry (recursively) and append what to compose; nothing is composed here."""
    if isinstance(event, ev.SelfComposed):
        _plan_event(
            event.event,
            count * event.count,
            neighboring=neighboring,
            interval=interval,
            accountant=accountant,
            plan=plan,
        )
        return
    if isinstance(event, ev.Composed) and event.events:
        for inner in event.events:
            _plan_event(inner, count, neighboring=neighboring, interval=interval, accountant=accountant, plan=plan)
        return
    ready = event_pld(event, neighboring=neighboring, value_discretization_interval=interval)
    if ready is not None:
        plan.append((ready, count, True))
        return
    mu = gaussian_mu(event) if not isinstance(event, ev.Gaussian) else None
    if mu is not None:  # an exactly μ-GDP event (e.g. tree aggregation) composes as a Gaussian of σ = 1/μ
        if mu > 0:
            gaussian = ev.Gaussian(noise_multiplier=1.0 / mu, neighboring=neighboring)
            plan.append((ev.to_dp_accounting(gaussian), count, False))
        return
    try:
        dp_event = ev.to_dp_accounting(event)
    except ValueError as err:
        raise UnsupportedEventError(f"PLD accounting does not support event {event!r}") from err
    if not accountant.supports(dp_event):
        raise UnsupportedEventError(
            f"PLD accounting does not support event {event!r} under neighboring={neighboring.value}"
        )
    plan.append((dp_event, count, False))


def pld_supports(event: ev.Event, *, neighboring: ev.NeighboringRelation) -> bool:
    """Whether the PLD route can interpret ``event`` (a dry run: nothing is composed)."""
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(_dpa_relation(neighboring))
    try:
        # A coarse grid: events whose PLD is built here (event_pld) build it cheaply for this dry run.
        _plan_event(event, 1, neighboring=neighboring, interval=0.5, accountant=accountant, plan=[])
    except UnsupportedEventError:
        return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class PldResult:
    """An (ε, δ) pair from PLD accounting, with its discretisation."""

    epsilon: float
    delta: float
    value_discretization_interval: float
    neighboring: str
    method: str = "pld (dp-accounting, connect-the-dots, pessimistic)"

    def to_dict(self) -> dict:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "value_discretization_interval": self.value_discretization_interval,
            "neighboring": self.neighboring,
            "method": self.method,
        }


def pld_epsilon(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    delta: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> PldResult:
    """ε(δ) of a composition by pessimistic PLD (worse of add and remove directions), rounded up."""
    delta = conversions.check_delta(delta, allow_zero=True)
    accountant = pld_of(entries, neighboring=neighboring, value_discretization_interval=value_discretization_interval)
    epsilon = conversions.round_up(max(float(accountant.get_epsilon(delta)), 0.0))
    return PldResult(
        epsilon=epsilon,
        delta=delta,
        value_discretization_interval=value_discretization_interval,
        neighboring=neighboring.value,
    )


def pld_delta(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    epsilon: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> PldResult:
    """δ(ε) of a composition by pessimistic PLD (worse direction), rounded up."""
    epsilon = conversions.check_epsilon(epsilon)
    accountant = pld_of(entries, neighboring=neighboring, value_discretization_interval=value_discretization_interval)
    delta = min(conversions.round_up(max(float(accountant.get_delta(epsilon)), 0.0)), 1.0)
    return PldResult(
        epsilon=epsilon,
        delta=delta,
        value_discretization_interval=value_discretization_interval,
        neighboring=neighboring.value,
    )


def pld_profile(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> PrivacyProfile:
    """The pessimistic PLD as a :class:`PrivacyProfile`, both directions tracked."""
    accountant = pld_of(entries, neighboring=neighboring, value_discretization_interval=value_discretization_interval)
    if getattr(accountant, "_contains_non_dp_event", False):  # a NonPrivate entry: δ = 1 at every ε
        return PrivacyProfile(
            remove=_non_private_delta,
            epsilon_for_delta=lambda delta: math.inf,
            description="PLD with a non-private event",
            trade_off_function=_non_private_trade_off,
        )
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

    directions = [remove] + ([add] if add is not None else []) if remove is not None else []
    return PrivacyProfile(
        remove=remove_fn,
        add=add_fn,
        epsilon_for_delta=epsilon_for_delta,
        description="PLD (connect-the-dots, pessimistic)",
        discretisation=f"value_discretization_interval={value_discretization_interval:g}",
        trade_off_function=_pmf_trade_off(directions) if directions else None,
    )


def _pmf_trade_off(pmfs):
    """The exact trade-off curve of the discrete PLD (a lower bound on the mechanism's: the PLD is pessimistic)."""
    from dplens.accountant import tradeoff

    return tradeoff.LazyDiscreteTradeOff([tradeoff.dp_accounting_pmf_arrays(pmf) for pmf in pmfs])


def _non_private_delta(epsilons: np.ndarray) -> np.ndarray:
    return np.ones_like(np.asarray(epsilons, dtype=float))


def _non_private_trade_off(alpha: np.ndarray) -> np.ndarray:
    return np.zeros_like(np.asarray(alpha, dtype=float))


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
    value = declared() if callable(declared) else None  # None: not μ-GDP (e.g. a group of a non-Gaussian event)
    return None if value is None else float(value)


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
    from dplens.accountant import finite_pld  # compositions of finite PLDs (randomized response, (ε, δ) events)

    profile = finite_pld.exact_profile(event)
    if profile is not None:
        return profile
    raise UnsupportedEventError(f"no exact privacy profile is known for event {event!r}")


def _laplace_delta(epsilons: np.ndarray, *, epsilon0: float) -> np.ndarray:
    # Privacy loss of Lap(0, b) vs Lap(1, b) is ε0·clip(…) with an atom at ±ε0; its hockey stick is
    # δ(ε) = 1 − e^{(ε − ε0)/2} for ε < ε0 and 0 beyond (e.g. notes §5.1 row 22).
    eps = np.asarray(epsilons, dtype=float)
    return np.where(eps < epsilon0, -np.expm1((eps - epsilon0) / 2.0), 0.0)


@privacy_profile.register
def _(event: ev.Laplace) -> PrivacyProfile:
    """Laplace mechanism: δ(ε) = 1 − exp((ε − ε₀)/2) for ε < ε₀ = 1/b (symmetric); trade-off in closed form."""
    from dplens.accountant import tradeoff

    epsilon0 = 1.0 / event.noise_multiplier
    return PrivacyProfile(
        remove=functools.partial(_laplace_delta, epsilon0=epsilon0),
        description=f"Laplace(noise_multiplier={event.noise_multiplier:g}) exact",
        trade_off_function=functools.partial(tradeoff.laplace_trade_off, epsilon0),
    )


def randomized_response_directions(
    epsilon: float, num_values: int, neighboring: ev.NeighboringRelation
) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The exact privacy-loss distributions of k-ary randomized response, one per direction.

    Each is (losses, probabilities under the first distribution, mass at +∞). Replace-one: the pair
    P = (p_hi, p_lo, …), Q = (p_lo, p_hi, …) is symmetric: losses ±ε and 0. Zero-out: P against the uniform
    response U of the special record, both orders (the two differ). Add/remove is not defined for this mechanism.
    """
    if neighboring is ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(
            "randomized response is analysed under replace-one or zero-out adjacency; got neighboring=add_remove"
        )
    k = num_values
    p_lo = 1.0 / (math.exp(epsilon) + k - 1)
    p_hi = math.exp(epsilon) * p_lo
    if neighboring is ev.NeighboringRelation.REPLACE_ONE:
        losses = np.array([epsilon, -epsilon, 0.0])
        return [(losses, np.array([p_hi, p_lo, (k - 2) * p_lo]), 0.0)]
    up, down = math.log(k * p_hi), math.log(k * p_lo)
    return [
        (np.array([up, down]), np.array([p_hi, (k - 1) * p_lo]), 0.0),
        (np.array([-up, -down]), np.array([1.0 / k, (k - 1) / k]), 0.0),
    ]


def _finite_delta(epsilons: np.ndarray, *, losses: np.ndarray, probs: np.ndarray) -> np.ndarray:
    # Hockey stick of a finite PLD: Σ p·(1 − e^{ε − L})₊.
    eps = np.asarray(epsilons, dtype=float)
    gap = np.maximum(-np.expm1(eps[..., None] - losses), 0.0)
    return np.sum(probs * gap, axis=-1)


@privacy_profile.register
def _(event: ev.RandomizedResponse) -> PrivacyProfile:
    """k-ary randomized response, exact under its relation (replace-one: δ(ε) = max(0, p_hi − e^ε p_lo); zero-out:
    both orders of P against the uniform response), with the exact trade-off curve of its finite PLD."""
    from dplens.accountant import tradeoff

    directions = randomized_response_directions(event.epsilon, event.num_values, event.neighboring)
    functions = [functools.partial(_finite_delta, losses=losses, probs=probs) for losses, probs, _ in directions]
    return PrivacyProfile(
        remove=functions[0],
        add=functions[1] if len(functions) > 1 else None,
        description=f"RandomizedResponse(epsilon={event.epsilon:g}, k={event.num_values}, "
        f"{event.neighboring.value}) exact",
        trade_off_function=tradeoff.discrete_trade_off(directions),
    )


@event_pld.register
def _(event: ev.RandomizedResponse, *, neighboring: ev.NeighboringRelation, value_discretization_interval: float):
    """Randomized response's PLD, built here because dp-accounting 0.6's PLDAccountant composes a
    ``RandomizedResponseDpEvent`` once whatever the count (ε = 1.0987 for 3 runs of ε = log 3, not 3.2961)."""
    from dp_accounting.pld import privacy_loss_distribution as dpa_pld

    if neighboring is ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(
            "randomized response is analysed under replace-one or zero-out adjacency; got neighboring=add_remove"
        )
    k = event.num_values
    return dpa_pld.from_randomized_response(
        noise_parameter=k / (math.exp(event.epsilon) + k - 1),
        num_buckets=k,
        value_discretization_interval=value_discretization_interval,
        neighboring_relation=_dpa_relation(neighboring),
    )
