"""Immutable descriptions of mechanisms (events). Pure data: no maths here.

Contract (as in dp-accounting's ``dp_event``): an event's meaning never changes, new parameters
are optional, and an interpreter that cannot handle an event says so before changing any state.
Every event states its neighbouring relation. Parameters are validated on construction and bad
values raise ``ValueError`` naming the argument and echoing the value.

Plug-ins (:mod:`dplens.accountant.plugins`; dplens's research mechanisms in :mod:`dplens.research`) define their
events in their own modules as subclasses of :class:`Event` and register them with :func:`register_event`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "Composed",
    "Event",
    "Gaussian",
    "Laplace",
    "NeighboringRelation",
    "NoOp",
    "NonPrivate",
    "PoissonSampled",
    "RandomizedResponse",
    "SampledWithoutReplacement",
    "SelfComposed",
    "event_from_dict",
    "event_to_dict",
    "from_dp_accounting",
    "to_dp_accounting",
]


class NeighboringRelation(enum.Enum):
    """Which data sets are neighbours.

    ADD_OR_REMOVE_ONE: D′ = D with one record added or removed (Poisson-sampled DP-SGD).
    REPLACE_ONE: D′ = D with one record replaced (fixed-size batches; sensitivity of a sum of
    clipped vectors doubles).
    REPLACE_SPECIAL: one record replaced by / with a special "zero" record (zero-out adjacency of
    DP-FTRL and tree aggregation).
    """

    ADD_OR_REMOVE_ONE = "add_remove"
    REPLACE_ONE = "replace_one"
    REPLACE_SPECIAL = "zero_out"


ADD_REMOVE = NeighboringRelation.ADD_OR_REMOVE_ONE


def _positive(name: str, value: Any, *, allow_zero: bool = False, allow_inf: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
    if ok:
        ok = (value >= 0 if allow_zero else value > 0) and (allow_inf or math.isfinite(value))
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}; got {value!r}")


def _probability(name: str, value: Any) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1
    if not ok:
        raise ValueError(f"{name} must be in (0, 1]; got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base class of all events."""

    def __post_init__(self) -> None:  # pragma: no cover - subclasses validate
        pass


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOp(Event):
    """A step that touches no private data (ε = 0)."""

    neighboring: NeighboringRelation = ADD_REMOVE


@dataclass(frozen=True, slots=True, kw_only=True)
class NonPrivate(Event):
    """A step that releases private data without protection (ε = ∞, δ = 1)."""

    neighboring: NeighboringRelation = ADD_REMOVE


@dataclass(frozen=True, slots=True, kw_only=True)
class Gaussian(Event):
    """Returns f(D) + N(0, σ² I) where f has ℓ2-sensitivity Δ under ``neighboring``.

    ``noise_multiplier`` = σ / Δ. Under REPLACE_ONE, Δ is the replace-one sensitivity (for a sum of
    vectors clipped to C it is 2C, i.e. the noise multiplier relative to C must be halved).
    """

    noise_multiplier: float
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier)


@dataclass(frozen=True, slots=True, kw_only=True)
class Laplace(Event):
    """Returns f(D) + Lap(b) per coordinate, f with ℓ1-sensitivity Δ; ``noise_multiplier`` = b/Δ = 1/ε₀."""

    noise_multiplier: float
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier)


@dataclass(frozen=True, slots=True, kw_only=True)
class RandomizedResponse(Event):
    """k-ary randomized response: the true value with probability e^ε/(e^ε + k − 1), else a uniform other.

    Neighbouring records differ in their value (REPLACE_ONE).
    """

    epsilon: float
    num_values: int = 2
    neighboring: NeighboringRelation = NeighboringRelation.REPLACE_ONE

    def __post_init__(self) -> None:
        _positive("epsilon", self.epsilon)
        if not (isinstance(self.num_values, int) and not isinstance(self.num_values, bool)) or self.num_values < 2:
            raise ValueError(f"num_values must be an integer >= 2; got {self.num_values!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PoissonSampled(Event):
    """Each record is included independently with probability ``sampling_rate``; ``event`` runs on the sample.

    Amplification is analysed under add/remove adjacency (Mironov, Talwar, Zhang 2019).
    """

    sampling_rate: float
    event: Event
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _probability("sampling_rate", self.sampling_rate)
        if not isinstance(self.event, Event):
            raise ValueError(f"event must be an Event; got {self.event!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SampledWithoutReplacement(Event):
    """A uniformly random subset of ``sample_size`` of ``dataset_size`` records; replace-one adjacency.

    Analysed by Wang, Balle, Kasiviswanathan 2019 (arXiv 1808.00087) Theorem 27.
    """

    sample_size: int
    dataset_size: int
    event: Event
    neighboring: NeighboringRelation = NeighboringRelation.REPLACE_ONE

    def __post_init__(self) -> None:
        for name in ("sample_size", "dataset_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
        if self.sample_size > self.dataset_size:
            raise ValueError(
                f"sample_size must be <= dataset_size; got sample_size={self.sample_size!r}, "
                f"dataset_size={self.dataset_size!r}"
            )
        if not isinstance(self.event, Event):
            raise ValueError(f"event must be an Event; got {self.event!r}")

    @property
    def sampling_rate(self) -> float:
        return self.sample_size / self.dataset_size


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfComposed(Event):
    """``event`` run ``count`` times (adaptively) on the same data."""

    event: Event
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, Event):
            raise ValueError(f"event must be an Event; got {self.event!r}")
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 0:
            raise ValueError(f"count must be an integer >= 0; got {self.count!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Composed(Event):
    """The adaptive composition of ``events`` in order."""

    events: tuple[Event, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.events, tuple):
            object.__setattr__(self, "events", tuple(self.events))
        for event in self.events:
            if not isinstance(event, Event):
                raise ValueError(f"events must contain only Events; got {event!r}")


# --------------------------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------------------------

_REGISTRY: dict[str, type[Event]] = {}


def register_event(cls: type[Event]) -> type[Event]:
    """Register an Event subclass for (de)serialisation by its class name."""
    _REGISTRY[cls.__name__] = cls
    return cls


for _cls in (
    NoOp,
    NonPrivate,
    Gaussian,
    Laplace,
    RandomizedResponse,
    PoissonSampled,
    SampledWithoutReplacement,
    SelfComposed,
    Composed,
):
    register_event(_cls)


#: Core event types defined in their own modules (registered when imported): the discrete noise events.
_CORE_LAZY = {"DiscreteLaplace": "dplens.accountant.discrete", "DiscreteGaussian": "dplens.accountant.discrete"}


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict: ``{"type": ClassName, field: value, …}`` (nested events recursively)."""
    out: dict[str, Any] = {"type": type(event).__name__}
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, Event):
            value = event_to_dict(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], Event):
            value = [event_to_dict(v) for v in value]
        elif isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def event_from_dict(data: dict[str, Any]) -> Event:
    """Inverse of :func:`event_to_dict` (a plug-in's event types are registered by importing its module)."""
    if not isinstance(data, dict) or "type" not in data:
        raise ValueError(f"event must be a dict with a 'type'; got {data!r}")
    if data["type"] in _CORE_LAZY and data["type"] not in _REGISTRY:
        import importlib

        importlib.import_module(_CORE_LAZY[data["type"]])
    if data["type"] not in _REGISTRY:
        from dplens.accountant import plugins

        plugins.load_event_type(data["type"])
    cls = _REGISTRY.get(data["type"])
    if cls is None:
        raise ValueError(f"unknown event type {data['type']!r}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "neighboring":
            value = NeighboringRelation(value)
        elif isinstance(value, dict) and "type" in value:
            value = event_from_dict(value)
        elif isinstance(value, list) and value and isinstance(value[0], dict) and "type" in value[0]:
            value = tuple(event_from_dict(v) for v in value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


# --------------------------------------------------------------------------------------------
# dp-accounting interoperability
# --------------------------------------------------------------------------------------------


def _dpa_gaussian_factor(relation: NeighboringRelation) -> float:
    """dp-accounting's Gaussian noise multiplier ÷ ours: 2 under REPLACE_ONE (its sensitivity doubles), else 1."""
    return 2.0 if relation is NeighboringRelation.REPLACE_ONE else 1.0


def to_dp_accounting(event: Event):
    """The dp-accounting ``DpEvent`` with the same meaning; ``ValueError`` where none exists."""
    import dp_accounting as dpa

    match event:
        case NoOp():
            return dpa.NoOpDpEvent()
        case NonPrivate():
            return dpa.NonPrivateDpEvent()
        case Gaussian():
            # dp-accounting reads a Gaussian's noise multiplier relative to the add/remove sensitivity and doubles
            # the sensitivity under REPLACE_ONE; ours is relative to the stated relation's own sensitivity.
            return dpa.GaussianDpEvent(event.noise_multiplier * _dpa_gaussian_factor(event.neighboring))
        case Laplace():
            return dpa.LaplaceDpEvent(event.noise_multiplier)
        case RandomizedResponse():
            # dp-accounting's noise_parameter p: with prob. p output uniform over k buckets.
            k = event.num_values
            p = k / (math.exp(event.epsilon) + k - 1)
            return dpa.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=k)
        case PoissonSampled():
            return dpa.PoissonSampledDpEvent(event.sampling_rate, to_dp_accounting(event.event))
        case SampledWithoutReplacement():
            return dpa.SampledWithoutReplacementDpEvent(
                event.dataset_size, event.sample_size, to_dp_accounting(event.event)
            )
        case SelfComposed():
            return dpa.SelfComposedDpEvent(to_dp_accounting(event.event), event.count)
        case Composed():
            return dpa.ComposedDpEvent([to_dp_accounting(e) for e in event.events])
    # Research events with an exact dp-accounting equivalent declare it (e.g. DpFtrl: a Gaussian mechanism).
    declared = getattr(event, "to_dp_accounting", None)
    if callable(declared):
        return declared()
    raise ValueError(f"event has no dp-accounting counterpart: {event!r}")


def from_dp_accounting(dp_event, *, neighboring: NeighboringRelation = ADD_REMOVE) -> Event:
    """Our event for a dp-accounting ``DpEvent``; ``ValueError`` for ones we do not model."""
    import dp_accounting as dpa

    match dp_event:
        case dpa.NoOpDpEvent():
            return NoOp(neighboring=neighboring)
        case dpa.NonPrivateDpEvent():
            return NonPrivate(neighboring=neighboring)
        case dpa.GaussianDpEvent():
            return Gaussian(
                noise_multiplier=dp_event.noise_multiplier / _dpa_gaussian_factor(neighboring), neighboring=neighboring
            )
        case dpa.LaplaceDpEvent():
            return Laplace(noise_multiplier=dp_event.noise_multiplier, neighboring=neighboring)
        case dpa.RandomizedResponseDpEvent():
            k, p = dp_event.num_buckets, dp_event.noise_parameter
            eps = math.log1p(k * (1 - p) / p) if p > 0 else math.inf
            return RandomizedResponse(epsilon=eps, num_values=k)
        case dpa.PoissonSampledDpEvent():
            return PoissonSampled(
                sampling_rate=dp_event.sampling_probability,
                event=from_dp_accounting(dp_event.event, neighboring=neighboring),
            )
        case dpa.SampledWithoutReplacementDpEvent():
            return SampledWithoutReplacement(
                sample_size=dp_event.sample_size,
                dataset_size=dp_event.source_dataset_size,
                event=from_dp_accounting(dp_event.event, neighboring=NeighboringRelation.REPLACE_ONE),
            )
        case dpa.SelfComposedDpEvent():
            return SelfComposed(event=from_dp_accounting(dp_event.event, neighboring=neighboring), count=dp_event.count)
        case dpa.ComposedDpEvent():
            return Composed(events=tuple(from_dp_accounting(e, neighboring=neighboring) for e in dp_event.events))
    raise ValueError(f"dp-accounting event not supported: {dp_event!r}")
