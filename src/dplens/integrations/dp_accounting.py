"""dplens as a dp_accounting ``PrivacyAccountant``: a drop-in for ``PLDAccountant`` and ``RdpAccountant``.

dp_accounting (Google's ``dp-accounting``) describes mechanisms as ``DpEvent``s and interprets them with a
``PrivacyAccountant``: ``supports(event)``, ``compose(event, count)``, ``get_epsilon(δ)``, ``get_delta(ε)``, with the
neighbouring relation fixed at construction. jax_privacy, TensorFlow Privacy and ``calibrate_dp_mechanism`` take any
such accountant. The two classes here are those accountants, answering from dplens's
:class:`~dplens.accountant.compose.Accountant` (the events converted by
:func:`~dplens.accountant.events.from_dp_accounting`):

- :class:`PLDAccountant` — dplens's PLD engine (pessimistic connect-the-dots with an optimistic inscribed merge:
  a certified bracket [``epsilon_lower``, ``epsilon``] around the true ε, refined until its relative width is at
  most ``tolerance``; Doroshenko, Ghazi, Kamath, Kumar, Manurangsi, PETS 2022 for connect-the-dots), and for events
  the engine does not model dp_accounting's own PLD. Where basic composition of pure-DP events (Dwork et al. 2006)
  is smaller, that is the answer (e.g. Laplace runs at δ = 0). A ledger too large for a PLD (ε in the hundreds) is
  answered by the RDP route instead of running for minutes, and ``get_epsilon_bracket(δ).details`` says so.
  It subclasses ``dp_accounting.pld.PLDAccountant`` (so code that checks ``isinstance(…, PLDAccountant)``, as
  jax_privacy's user-level accountant does, takes it) but keeps none of its state: its ``_pld`` attribute does not
  exist, so code reaching into it fails loudly instead of reading an empty PLD.
- :class:`RdpAccountant` — dplens's RDP route, α optimised continuously (Canonne, Kamath, Steinke 2020,
  Prop. 12 for the conversion) instead of on a fixed grid of orders: never looser than dp_accounting's
  ``RdpAccountant`` on the same theorems, and it accounts the events only RDP can (``ZCDpEvent``,
  ``SampledWithoutReplacementDpEvent``, ``RepeatAndSelectDpEvent``), which the PLD accountant refuses. That is why it
  earns its place: jax_privacy's ``RdpAccountantConfig`` and TF Privacy build RDP accountants, and a drop-in must
  accept what they compose.

Both raise ``dp_accounting.UnsupportedEventError`` for what they cannot account, naming the innermost sub-event at
fault ("… caused by subevent …", dp_accounting's contract), before changing any state; ``get_epsilon_bracket``
(an extra method) returns dplens's :class:`~dplens.accountant.compose.EpsilonResult` with the certified lower end
where the route has one. Every ε returned is an upper bound on the true ε of the composed events (rounded up).

Conventions: ``GaussianDpEvent(σ)`` under ``REPLACE_ONE`` is read as σ relative to the norm bound C (dp_accounting's
docstring and its PLD: sensitivity 2C); dp_accounting's RDP code reads it relative to the sensitivity, a factor 2
(``replace_one_noise`` chooses, see :class:`~dplens.accountant.events.ReplaceOneNoise`; the default is the
documented, more pessimistic reading). ``RandomizedResponseDpEvent`` needs a replace relation, as in dp_accounting.

Example:
    >>> import dp_accounting
    >>> from dplens.integrations.dp_accounting import PLDAccountant
    >>> step = dp_accounting.PoissonSampledDpEvent(256 / 60000, dp_accounting.GaussianDpEvent(1.1))
    >>> accountant = PLDAccountant().compose(step, 14063)  # MNIST DP-SGD, 60 epochs
    >>> round(accountant.get_epsilon(1e-5), 3)
    2.382
    >>> bracket = accountant.get_epsilon_bracket(1e-5)
    >>> bracket.epsilon_lower <= 2.3818 <= bracket.epsilon  # dp_accounting's PLD at 1e-4 lies inside
    True
    >>> sigma = dp_accounting.calibrate_dp_mechanism(
    ...     PLDAccountant, lambda s: dp_accounting.SelfComposedDpEvent(
    ...         dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(s)), 1000), 2.0, 1e-5)
    >>> PLDAccountant().compose(dp_accounting.SelfComposedDpEvent(
    ...     dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(sigma)), 1000)).get_epsilon(
    ...     1e-5) <= 2.0
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
from typing import Any

import dp_accounting
from dp_accounting import dp_event as dpe
from dp_accounting.pld import pld_privacy_accountant

from dplens.accountant import events as ev

__all__ = ["PLDAccountant", "RdpAccountant", "jax_privacy_config"]

_RELATIONS = {
    dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE: ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    dp_accounting.NeighboringRelation.REPLACE_ONE: ev.NeighboringRelation.REPLACE_ONE,
    dp_accounting.NeighboringRelation.REPLACE_SPECIAL: ev.NeighboringRelation.REPLACE_SPECIAL,
}
# Events whose inner event is checked first, so that an unsupported event inside them is the one named.
_WRAPPERS = (
    dpe.PoissonSampledDpEvent,
    dpe.SampledWithReplacementDpEvent,
    dpe.SampledWithoutReplacementDpEvent,
    dpe.RepeatAndSelectDpEvent,
)
# The dp_accounting event types from_dp_accounting interprets; an error converting one of them is bad input.
_KNOWN_TYPES = frozenset(
    getattr(dpe, name)
    for name in dir(dpe)
    if name.endswith("DpEvent") and name not in ("DpEvent", "UnsupportedDpEvent")
)
# Events whose dp_accounting parameters dplens reads under one relation only: tree aggregation is stated under
# zero-out adjacency (Kairouz et al. 2021), and dplens's sampling-with-replacement analysis is checked there; under the
# other relations the noise multiplier's reference sensitivity is ambiguous, so they are refused as dp_accounting does.
_DP_ACCOUNTING_RELATIONS = {
    "SingleEpochTreeAggregation": (ev.NeighboringRelation.REPLACE_SPECIAL,),
    "SampledWithReplacement": (ev.NeighboringRelation.REPLACE_SPECIAL,),
}
_CACHE_SIZE = 64
# δ(∞) is bounded by δ at this ε (δ(ε) does not increase with ε); every finite-loss ledger gives 0 there.
_LARGE_EPSILON = 1e3

_Details = dp_accounting.PrivacyAccountant.CompositionErrorDetails


def _relation(neighboring_relation: Any) -> ev.NeighboringRelation:
    if neighboring_relation not in _RELATIONS:
        raise ValueError(
            f"neighboring_relation must be a dp_accounting.NeighboringRelation; got {neighboring_relation!r}"
        )
    return _RELATIONS[neighboring_relation]


def _check_count(count: Any, minimum: int) -> int:
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < minimum:
        raise ValueError(f"count must be an integer >= {minimum}; got {count!r}")
    return int(count)


def _check_probability(name: str, value: Any) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value <= 1
    if not ok:
        raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}")
    return float(value)


def _check_epsilon(value: Any) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and value >= 0
    if not ok:
        raise ValueError(f"target_epsilon must be a number >= 0; got {value!r}")
    return float(value)


class _DplensAccountant:
    """The shared machinery: conversion, the support check, the inner dplens ledger, cached answers."""

    _method: Any  # the dplens route (set by the subclasses)
    _minimum_count = 1

    def _setup(self, neighboring_relation: Any, *, tolerance: float | None, replace_one_noise: Any) -> None:
        from dplens.accountant import pld
        from dplens.accountant.compose import Accountant

        self._relation = _relation(neighboring_relation)
        if not isinstance(replace_one_noise, ev.ReplaceOneNoise):
            raise ValueError(f"replace_one_noise must be a ReplaceOneNoise; got {replace_one_noise!r}")
        self._replace_one_noise = replace_one_noise
        self._tolerance = pld.DEFAULT_TOLERANCE if tolerance is None else pld.check_tolerance(tolerance)
        self._accountant = Accountant(neighboring=self._relation, tolerance=self._tolerance)
        self._cache: dict[tuple[str, float], Any] = {}

    # ---- dp_accounting's interface --------------------------------------------------------------

    def compose(self, event: Any, count: int = 1) -> Any:
        """Compose ``count`` runs of ``event`` (validated first: a refusal changes nothing); returns ``self``.

        Raises:
            ValueError: ``count`` is not an integer ≥ 1 (dp_accounting's ledger refuses 0 too), or an
                event of a known type has invalid parameters (a negative noise multiplier, a sampling probability
                above 1, …), naming the sub-event and the value.
            dp_accounting.UnsupportedEventError: dplens cannot account the event, caused by the sub-event named.
        """
        _check_count(count, self._minimum_count)
        self._check_parameters(event)
        return dp_accounting.PrivacyAccountant.compose(self, event, count)

    def _check_parameters(self, event: Any) -> None:
        """ValueError for an event of a type dplens knows whose parameters are invalid (inner events first)."""
        if isinstance(event, dpe.ComposedDpEvent):
            for inner in event.events:
                self._check_parameters(inner)
            return
        if isinstance(event, (dpe.SelfComposedDpEvent, *_WRAPPERS)):
            self._check_parameters(event.event)
            if self._convertible(event.event) is not None:
                return  # an unknown event inside: a refusal, reported by compose
        if type(event) not in _KNOWN_TYPES:
            return  # not bad input: an event dplens does not know is a refusal (UnsupportedEventError)
        try:
            self._convert(event)
        except ValueError as err:
            raise ValueError(f"event {event!r} has an invalid parameter: {err}") from None

    def _maybe_compose(self, event: Any, count: int, do_compose: bool) -> Any:
        error = self._refusal(event)
        if error is not None or not do_compose:
            return error
        if count > 0:
            self._accountant.compose(self._convert(event), count)
            self._cache.clear()
        return None

    def get_epsilon(self, target_delta: float) -> float:
        """An upper bound on ε at ``target_delta`` for everything composed so far."""
        return float(self.get_epsilon_bracket(target_delta).epsilon)

    def get_delta(self, target_epsilon: float) -> float:
        """An upper bound on δ at ``target_epsilon`` for everything composed so far."""
        epsilon = _check_epsilon(target_epsilon)
        if self._non_private():
            return 1.0
        if not self._accountant.ledger:
            return 0.0
        key = ("delta", epsilon)
        if key not in self._cache:
            self._remember(key, self._delta(epsilon))
        return self._cache[key]

    # ---- extras ---------------------------------------------------------------------------------

    def get_epsilon_bracket(self, target_delta: float) -> Any:
        """ε at ``target_delta`` with its provenance: a :class:`~dplens.accountant.compose.EpsilonResult`.

        ``epsilon`` is what :meth:`get_epsilon` returns (an upper bound); ``epsilon_lower``, where the route has one
        (the PLD engine's optimistic end), is a certified lower bound on the same true ε.
        """
        delta = _check_probability("target_delta", target_delta)
        key = ("epsilon", delta)
        if key not in self._cache:
            self._remember(key, self._epsilon(delta))
        return self._cache[key]

    def to_accountant(self) -> Any:
        """A copy of the composed ledger as a dplens :class:`~dplens.accountant.compose.Accountant` (for reports,
        :func:`dplens.generate_report`, other routes)."""
        from dplens.accountant.compose import Accountant

        return Accountant.from_json(self._accountant.to_json())

    @property
    def tolerance(self) -> float:
        """The PLD engine's relative bracket width, (ε − ε_lower) ≤ tolerance·ε."""
        return self._tolerance

    # ---- internals ------------------------------------------------------------------------------

    def _remember(self, key: tuple[str, float], value: Any) -> None:
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = value

    def _convert(self, event: Any) -> ev.Event:
        return ev.from_dp_accounting(event, neighboring=self._relation, replace_one_noise=self._replace_one_noise)

    def _non_private(self) -> bool:
        return any(_contains_non_private(event) for event, _ in self._accountant.ledger)

    def _refusal(self, event: Any) -> Any:
        """None if ``event`` can be composed, else dp_accounting's error details naming the innermost culprit."""
        if isinstance(event, dpe.SelfComposedDpEvent):
            return self._refusal(event.event)
        if isinstance(event, dpe.ComposedDpEvent):
            for inner in event.events:
                error = self._refusal(inner)
                if error is not None:
                    return error
            return None
        if isinstance(event, _WRAPPERS):
            inner_error = self._convertible(event.event)
            if inner_error is not None:
                return inner_error
        try:
            converted = self._convert(event)
        except ValueError as err:
            return _Details(invalid_event=event, error_message=f"dplens cannot interpret this event: {err}")
        reason = self._relation_refusal(converted)
        if reason is None:
            reason = self._route_refuses(converted)
        if reason is not None:
            return _Details(invalid_event=event, error_message=reason)
        return None

    def _convertible(self, event: Any) -> Any:
        """Details naming the innermost event dplens cannot convert at all (any relation), else None."""
        if isinstance(event, (dpe.SelfComposedDpEvent, dpe.ComposedDpEvent, *_WRAPPERS)):
            inner = [event.event] if not isinstance(event, dpe.ComposedDpEvent) else list(event.events)
            for e in inner:
                error = self._convertible(e)
                if error is not None:
                    return error
        try:
            self._convert(event)
        except ValueError as err:
            return _Details(invalid_event=event, error_message=f"dplens cannot interpret this event: {err}")
        return None

    def _relation_refusal(self, converted: ev.Event) -> str | None:
        from dplens.accountant.compose import _entry_relation

        allowed = _DP_ACCOUNTING_RELATIONS.get(type(converted).__name__)
        if allowed is not None and self._relation not in allowed:
            return (
                f"{type(converted).__name__} is accounted only under "
                f"{' or '.join(repr(r.value) for r in allowed)} adjacency (its noise is stated relative to that "
                f"relation's sensitivity); this accountant's neighboring_relation is {self._relation.value!r}"
            )

        try:
            relation = _entry_relation(converted)
        except ValueError as err:
            return str(err)
        if relation is not None and relation is not self._relation:
            return (
                f"{type(converted).__name__} is stated under {relation.value!r} adjacency; this accountant's "
                f"neighboring_relation is {self._relation.value!r}"
            )
        return None

    def _route_refuses(self, converted: ev.Event) -> str | None:  # pragma: no cover - subclasses define it
        """Why this accountant's route cannot account ``converted`` (the relation already checked), else None."""
        raise NotImplementedError

    def _epsilon(self, delta: float) -> Any:  # pragma: no cover - subclasses define it
        raise NotImplementedError

    def _delta(self, epsilon: float) -> float:  # pragma: no cover - subclasses define it
        raise NotImplementedError

    def _trivial_epsilon(self, delta: float) -> Any:
        """ε without a route: ∞ with a non-private event, 0 for an empty ledger or δ = 1 (every pair is (0, 1)-DP)."""
        from dplens.accountant.compose import EpsilonResult

        if self._non_private():
            return EpsilonResult(epsilon=math.inf, delta=delta, method=self._method, details="a non-private event")
        if not self._accountant.ledger or delta >= 1:
            details = "empty ledger" if not self._accountant.ledger else "delta = 1: every mechanism is (0, 1)-DP"
            return EpsilonResult(epsilon=0.0, delta=delta, method=self._method, details=details)
        return None

    def _pure_delta_at_infinity(self, epsilon: float) -> float | None:
        """δ(∞) = the mass of infinite privacy loss: 0 for pure-DP ledgers; else bounded by δ at a large ε."""
        if math.isinf(epsilon):
            return 0.0 if math.isfinite(self._accountant.pure_epsilon()) else None
        return None


def _contains_non_private(event: ev.Event) -> bool:
    if isinstance(event, ev.NonPrivate):
        return True
    if isinstance(event, ev.SelfComposed):
        return event.count > 0 and _contains_non_private(event.event)
    if isinstance(event, ev.Composed):
        return any(_contains_non_private(e) for e in event.events)
    return False


def _delta_at(accountant: Any, epsilon: float, method: Any) -> float:
    import numpy as np

    with np.errstate(all="ignore"):
        return float(accountant.delta(epsilon, method=method))


class PLDAccountant(_DplensAccountant, pld_privacy_accountant.PLDAccountant):
    """dp_accounting's ``PLDAccountant``, answered by dplens's PLD engine with a certified bracket.

    Args:
        neighboring_relation: dp_accounting's ``NeighboringRelation`` (default ADD_OR_REMOVE_ONE).
        value_discretization_interval: accepted for compatibility with dp_accounting's signature and ignored: dplens
            chooses its grid so that the certified bracket is within ``tolerance`` (an interval of 1e-4, the
            default, is what dp_accounting uses; dplens's grid is usually coarser and its answer as tight).
        tolerance: the relative width of the certified bracket, (ε − ε_lower) ≤ tolerance·ε (default 1e-3).
        replace_one_noise: how ``GaussianDpEvent`` noise is read under REPLACE_ONE
            (:class:`~dplens.accountant.events.ReplaceOneNoise`; default NORM_BOUND, dp_accounting's PLD reading).

    Example:
        >>> import dp_accounting
        >>> accountant = PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
        >>> accountant.supports(dp_accounting.RandomizedResponseDpEvent(0.1, 3))
        True
        >>> PLDAccountant().supports(dp_accounting.ZCDpEvent(0.5))  # zCDP names no dominating pair: RdpAccountant
        False
    """

    def __init__(
        self,
        neighboring_relation: Any = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        value_discretization_interval: float | None = None,
        *,
        tolerance: float | None = None,
        replace_one_noise: ev.ReplaceOneNoise = ev.ReplaceOneNoise.NORM_BOUND,
    ) -> None:
        from dplens.accountant.routes import Method

        # dp_accounting's PrivacyAccountant state only (the ledger of events); PLDAccountant's own PLD is not built.
        dp_accounting.PrivacyAccountant.__init__(self, neighboring_relation)
        self._method = Method.PLD
        self._setup(neighboring_relation, tolerance=tolerance, replace_one_noise=replace_one_noise)
        if value_discretization_interval is not None and not (
            isinstance(value_discretization_interval, numbers.Real) and 0 < value_discretization_interval < 1
        ):
            raise ValueError(
                f"value_discretization_interval must be a number in (0, 1); got {value_discretization_interval!r}"
            )
        self._requested_interval = value_discretization_interval
        self._engine_checked: dict[ev.Event, bool] = {}

    def __repr__(self) -> str:
        return (
            f"dplens PLDAccountant(neighboring_relation={self.neighboring_relation.name}, "
            f"entries={len(self._accountant.ledger)}, tolerance={self._tolerance:g})"
        )

    def _route_refuses(self, converted: ev.Event) -> str | None:
        from dplens.accountant import pld

        if self._engine_models(converted):
            if all(self._engine_models(event) for event, _ in self._accountant.ledger):
                return None  # dplens's engine models the whole ledger
        elif not pld.pld_supports(converted, neighboring=self._relation):
            return (
                f"PLD accounting does not support {type(converted).__name__} under "
                f"{self._relation.value!r} adjacency (dplens.integrations.dp_accounting.RdpAccountant may)"
            )
        # dplens's engine and dp_accounting's PLD (its fallback) each interpret a whole ledger: every entry must be
        # modelled by one of them together.
        entries = [*self._accountant.ledger, (converted, 1)]
        if not pld.pld_supports(ev.Composed(events=tuple(e for e, _ in entries)), neighboring=self._relation):
            return (
                f"PLD accounting cannot compose {type(converted).__name__} with the events already in this "
                "accountant in one privacy-loss distribution"
            )
        return None

    def _engine_models(self, event: ev.Event) -> bool:
        """Whether dplens's own PLD engine models ``event`` (a dry run, remembered per event)."""
        from dplens.accountant import pld_engine

        try:
            return self._engine_checked[event]
        except (KeyError, TypeError):
            pass
        modelled = pld_engine.supports(event, neighboring=self._relation)
        with contextlib.suppress(TypeError):  # an unhashable event is not remembered
            self._engine_checked[event] = modelled
        return modelled

    def _epsilon(self, delta: float) -> Any:
        from dplens.accountant.compose import EpsilonResult, Method
        from dplens.accountant.pld import PldOutOfRangeError

        trivial = self._trivial_epsilon(delta)
        if trivial is not None:
            return trivial
        try:
            result = self._accountant.epsilon_result(delta, method=Method.PLD)
        except PldOutOfRangeError as err:
            best = self._accountant.epsilon_result(delta, method=Method.BEST)
            result = dataclasses.replace(best, details=f"{best.details} (the PLD is out of range: {err})")
        pure = self._accountant.pure_epsilon()
        if pure < result.epsilon:
            lower = result.epsilon_lower
            return EpsilonResult(
                epsilon=pure,
                delta=delta,
                method=result.method,
                details="basic composition of pure-DP events (Dwork et al. 2006), below the PLD's bound",
                epsilon_lower=None if lower is None else min(lower, pure),
                routes=(result,),
            )
        return result

    def _delta(self, epsilon: float) -> float:
        from dplens.accountant.compose import Method
        from dplens.accountant.pld import PldOutOfRangeError

        at_infinity = self._pure_delta_at_infinity(epsilon)
        if at_infinity is not None:
            return at_infinity
        if self._accountant.pure_epsilon() <= epsilon:
            return 0.0
        query = min(epsilon, _LARGE_EPSILON)
        try:
            return _delta_at(self._accountant, query, Method.PLD)
        except PldOutOfRangeError:
            return _delta_at(self._accountant, query, Method.BEST)


class RdpAccountant(_DplensAccountant, dp_accounting.PrivacyAccountant):
    """dp_accounting's ``RdpAccountant`` interface, answered by dplens's RDP route with α optimised continuously.

    Args:
        orders: accepted for compatibility with dp_accounting's signature (jax_privacy passes its grid) and not
            needed: dplens evaluates the RDP curve at any real α and optimises it, so its ε is never above the
            minimum over any grid of orders.
        neighboring_relation: dp_accounting's ``NeighboringRelation`` (default ADD_OR_REMOVE_ONE).
        replace_one_noise: how ``GaussianDpEvent`` noise is read under REPLACE_ONE (default NORM_BOUND; dp_accounting's
            RDP code reads it as SENSITIVITY, half the ε: see :class:`~dplens.accountant.events.ReplaceOneNoise`).

    Example:
        >>> import dp_accounting
        >>> accountant = RdpAccountant().compose(dp_accounting.ZCDpEvent(0.05), 10)  # ρ = 0.5 in all
        >>> round(accountant.get_epsilon(1e-6), 4)
        5.2215
    """

    def __init__(
        self,
        orders: Any = None,
        neighboring_relation: Any = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        *,
        replace_one_noise: ev.ReplaceOneNoise = ev.ReplaceOneNoise.NORM_BOUND,
    ) -> None:
        from dplens.accountant.routes import Method

        dp_accounting.PrivacyAccountant.__init__(self, neighboring_relation)
        self._method = Method.RDP
        self._setup(neighboring_relation, tolerance=None, replace_one_noise=replace_one_noise)
        self._orders = None if orders is None else tuple(float(order) for order in orders)

    def __repr__(self) -> str:
        return (
            f"dplens RdpAccountant(neighboring_relation={self.neighboring_relation.name}, "
            f"entries={len(self._accountant.ledger)})"
        )

    def _route_refuses(self, converted: ev.Event) -> str | None:
        from dplens.accountant import rdp

        if _contains_non_private(converted):
            return None
        try:
            rdp.rdp_curve(converted)
        except ValueError as err:  # UnsupportedEventError is a ValueError
            return f"RDP accounting does not support {type(converted).__name__}: {err}"
        return None

    def _epsilon(self, delta: float) -> Any:
        trivial = self._trivial_epsilon(delta)
        if trivial is not None:
            return trivial
        return self._accountant.epsilon_result(delta, method=self._method)

    def _delta(self, epsilon: float) -> float:
        at_infinity = self._pure_delta_at_infinity(epsilon)
        if at_infinity is not None:
            return at_infinity
        return _delta_at(self._accountant, min(epsilon, _LARGE_EPSILON), self._method)


def jax_privacy_config(*, kind: str = "pld", tolerance: float | None = None) -> Any:
    """A jax_privacy accountant config whose ``create_accountant()`` builds a dplens accountant.

    ``kind="pld"`` subclasses ``jax_privacy.accounting.PldAccountantConfig`` (so jax_privacy's checks for a PLD
    accountant pass: truncated Poisson batches, user-level accounting) and builds a :class:`PLDAccountant`;
    ``kind="rdp"`` subclasses ``RdpAccountantConfig`` and builds an :class:`RdpAccountant`. Needs
    ``pip install "dplens[jax]"``.

    Example:
        >>> from jax_privacy import accounting  # doctest: +SKIP
        >>> training = accounting.DpsgdTrainingAccountant(dp_accountant_config=jax_privacy_config())  # doctest: +SKIP
    """
    if kind not in ("pld", "rdp"):
        raise ValueError(f"kind must be 'pld' or 'rdp'; got {kind!r}")
    try:
        from jax_privacy import accounting
    except ImportError:
        raise ImportError(MISSING_JAX_EXTRA) from None
    if kind == "pld":
        return _config_class(accounting.PldAccountantConfig, PLDAccountant)(tolerance=tolerance)
    return _config_class(accounting.RdpAccountantConfig, RdpAccountant)(tolerance=tolerance)


#: The one-line message when jax_privacy is missing.
MISSING_JAX_EXTRA = 'the jax_privacy integration needs jax-privacy: pip install "dplens[jax]"'

_CONFIG_CLASSES: dict[type, type] = {}


def _config_class(base: type, accountant: type) -> type:
    """A dataclass subclass of jax_privacy's ``base`` config whose accountant is dplens's (built once, then cached)."""
    if base in _CONFIG_CLASSES:
        return _CONFIG_CLASSES[base]

    @dataclasses.dataclass(kw_only=True)
    class DplensAccountantConfig(base):  # type: ignore[misc, valid-type]
        tolerance: float | None = None

        def create_accountant(self) -> Any:
            if accountant is PLDAccountant:
                return PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, tolerance=self.tolerance)
            return RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)

    DplensAccountantConfig.__qualname__ = DplensAccountantConfig.__name__ = f"Dplens{base.__name__}"
    _CONFIG_CLASSES[base] = DplensAccountantConfig
    return DplensAccountantConfig
