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
    "MixtureOfGaussians",
    "NeighboringRelation",
    "NoOp",
    "NonPrivate",
    "PoissonSampled",
    "RandomizedResponse",
    "ReplaceOneNoise",
    "SampledWithoutReplacement",
    "SelfComposed",
    "SingleEpochTreeAggregation",
    "TruncatedSubsampledGaussian",
    "ZcdpMechanism",
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

    Example:
        >>> NeighboringRelation("replace_one")
        <NeighboringRelation.REPLACE_ONE: 'replace_one'>
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


def _probability(name: str, value: Any, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and (value >= 0 if allow_zero else value > 0)
    if not (ok and value <= 1):
        raise ValueError(f"{name} must be in {'[0, 1]' if allow_zero else '(0, 1]'}; got {value!r}")


def _count(name: str, value: Any, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base class of all events: frozen, keyword-only descriptions of mechanisms that an interpreter (RDP, PLD, exact)
    turns into privacy curves.

    Example:
        >>> from dplens import Gaussian, Laplace
        >>> issubclass(Gaussian, Event), isinstance(Laplace(noise_multiplier=1.0), Event)
        (True, True)
    """

    def __post_init__(self) -> None:  # pragma: no cover - subclasses validate
        pass


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOp(Event):
    """A step that touches no private data (ε = 0).

    Example:
        >>> from dplens import Accountant
        >>> Accountant().compose(NoOp(), count=5).epsilon(1e-5)
        0.0
    """

    neighboring: NeighboringRelation = ADD_REMOVE


@dataclass(frozen=True, slots=True, kw_only=True)
class NonPrivate(Event):
    """A step that releases private data without protection (ε = ∞, δ = 1).

    Example:
        >>> from dplens import Accountant
        >>> Accountant().compose(NonPrivate()).epsilon(1e-5)
        inf
    """

    neighboring: NeighboringRelation = ADD_REMOVE


@dataclass(frozen=True, slots=True, kw_only=True)
class _AdditiveNoise(Event):
    """Additive noise of scale ``noise_multiplier`` × the query's sensitivity under ``neighboring`` (its type says
    which noise)."""

    noise_multiplier: float
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier)


@dataclass(frozen=True, slots=True, kw_only=True)
class Gaussian(_AdditiveNoise):
    """Returns f(D) + N(0, σ² I) where f has ℓ2-sensitivity Δ under ``neighboring``.

    ``noise_multiplier`` = σ / Δ. Under REPLACE_ONE, Δ is the replace-one sensitivity (for a sum of
    vectors clipped to C it is 2C, i.e. the noise multiplier relative to C must be halved). dp-accounting's
    ``GaussianDpEvent`` is relative to C in its docstring and PLD but to Δ in its RDP code: see
    :class:`ReplaceOneNoise` for converting ledgers.

    Example:
        >>> from dplens import Accountant
        >>> round(Accountant().compose(Gaussian(noise_multiplier=1.0)).epsilon(1e-5), 4)  # exactly 1-GDP
        4.3772
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class Laplace(_AdditiveNoise):
    """Returns f(D) + Lap(b) per coordinate, f with ℓ1-sensitivity Δ; ``noise_multiplier`` = b/Δ = 1/ε₀.

    Example:
        >>> from dplens import Accountant
        >>> Accountant().compose(Laplace(noise_multiplier=2.0), count=3).pure_epsilon()  # 3 × 0.5, rounded up
        1.5000000000015
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class RandomizedResponse(Event):
    """k-ary randomized response: the true value with probability e^ε/(e^ε + k − 1), else a uniform other.

    Neighbouring records differ in their value (REPLACE_ONE).

    Example:
        >>> from dplens import Accountant
        >>> round(Accountant().compose(RandomizedResponse(epsilon=1.0)).epsilon(1e-6), 6)
        0.999999
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

    Amplification is analysed under add/remove (or zero-out) adjacency (Mironov, Talwar, Zhang 2019). A sampling
    rate of 0 touches no record (ε = 0 on every route).

    Example:
        >>> from dplens import Accountant, Gaussian, Method
        >>> step = PoissonSampled(sampling_rate=0.01, event=Gaussian(noise_multiplier=1.0))
        >>> round(Accountant().compose(step, count=1000).epsilon(1e-5, method=Method.RDP), 4)
        2.1013
    """

    sampling_rate: float
    event: Event
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _probability("sampling_rate", self.sampling_rate, allow_zero=True)
        if not isinstance(self.event, Event):
            raise ValueError(f"event must be an Event; got {self.event!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SampledWithoutReplacement(Event):
    """A uniformly random subset of ``sample_size`` of ``dataset_size`` records; replace-one adjacency.

    The RDP route is Wang, Balle, Kasiviswanathan 2019 (arXiv 1808.00087) Theorem 27. The PLD route (a Gaussian inner
    event) composes the symmetrised remove pair of the Poisson-subsampled Gaussian at γ = B/N, which dominates every
    step for every order (the argument is in ``pld_engine``; its trade-off curve is the symmetrised one of Dong, Roth
    and Su's subsampling theorem, JRSS-B 2022, Theorem 4.2), and bounds ε from below by the attained Poisson pair
    (:meth:`lower_bound_events`): at 100 steps of γ = 0.01, σ = 1, δ = 1e-5, [0.7175, 0.7681] against the RDP route's
    1.4825.

    Example:
        >>> from dplens import Accountant, Gaussian, NeighboringRelation
        >>> batch = SampledWithoutReplacement(sample_size=100, dataset_size=10_000,
        ...     event=Gaussian(noise_multiplier=1.0, neighboring=NeighboringRelation.REPLACE_ONE))
        >>> batch.sampling_rate, round(Accountant().compose(batch, count=100).epsilon(1e-5), 4)
        (0.01, 0.7681)
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

    def lower_bound_events(self) -> tuple[Event, ...]:
        """The attained pair below the PLD route's pair (its symmetrisation, not attained: ``pld_engine``, which
        models Gaussian inner events only): the Poisson pair at γ = B/N, both directions — for a sum query the record
        at +C, its replacement and every other record at −C: a step holds the record with probability γ, and then
        its output moves by the full replace-one sensitivity."""
        return (PoissonSampled(sampling_rate=self.sampling_rate, event=self.event),)


@dataclass(frozen=True, slots=True, kw_only=True)
class ZcdpMechanism(Event):
    """Any mechanism satisfying (ξ, ρ)-zCDP: D_α(M(D)‖M(D′)) ≤ ξ + ρα for every α > 1.

    Bun & Steinke 2016 (arXiv 1605.02065), Definition 1.1 (ξ = 0: ρ-zCDP; ξ > 0 is their "approximate" zCDP of
    Definition 1.1's general form); dp-accounting's ``ZCDpEvent(rho, xi)``. Only the RDP route applies (zCDP
    bounds a mechanism's divergences, it does not name a dominating pair).

    Example:
        >>> ZcdpMechanism(rho=0.5).rho
        0.5
    """

    rho: float
    xi: float = 0.0
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _positive("rho", self.rho, allow_zero=True)
        _positive("xi", self.xi, allow_zero=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class MixtureOfGaussians(Event):
    """On D the output is N(0, σ²); on the neighbour D′ it is Σᵢ pᵢ N(cᵢ, σ²) (and the reverse pair).

    dp-accounting's ``MixtureOfGaussiansDpEvent`` (Choquette-Choo et al. 2023, arXiv 2310.15526: amplification of
    banded matrix mechanisms): ``standard_deviation`` σ, ``sensitivities`` cᵢ, ``sampling_probs`` pᵢ (summing to
    1). Interpreted by dp-accounting's PLD under add/remove or zero-out adjacency.

    dplens's PLD engine models it under add/remove when the shifts share a sign (a certified bracket); otherwise the
    PLD route falls back to dp-accounting's mixture PLD (seconds per event).

    Example:
        >>> from dplens import Accountant
        >>> step = MixtureOfGaussians(standard_deviation=2.0, sensitivities=(0.0, 1.0), sampling_probs=(0.9, 0.1))
        >>> round(Accountant().compose(step, count=1000).epsilon(1e-5, method="rdp"), 3)
        8.944
    """

    standard_deviation: float
    sensitivities: tuple[float, ...]
    sampling_probs: tuple[float, ...]
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _positive("standard_deviation", self.standard_deviation)
        for name in ("sensitivities", "sampling_probs"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                try:
                    value = tuple(value)
                except TypeError:
                    raise ValueError(f"{name} must be a sequence of numbers; got {value!r}") from None
                object.__setattr__(self, name, value)
            if not value or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
            ):
                raise ValueError(f"{name} must be a non-empty sequence of finite numbers; got {value!r}")
        if len(self.sensitivities) != len(self.sampling_probs):
            raise ValueError(
                f"sensitivities and sampling_probs must have the same length; got {len(self.sensitivities)} and "
                f"{len(self.sampling_probs)}"
            )
        if any(p < 0 for p in self.sampling_probs) or abs(math.fsum(self.sampling_probs) - 1.0) > 1e-9:
            raise ValueError(f"sampling_probs must be >= 0 and sum to 1; got {self.sampling_probs!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SingleEpochTreeAggregation(Event):
    """Tree aggregation over one epoch (one or more trees, each record in at most one leaf across all trees).

    Kairouz et al. 2021 (arXiv 2103.00039), Appendix D; dp-accounting's ``SingleEpochTreeAggregationDpEvent``. A
    record changes one node per level of its tree, so with Gaussian noise of ``noise_multiplier`` × the node
    sensitivity the release is a Gaussian mechanism with ℓ2-sensitivity √depth, depth = ⌈log₂(max steps + 1)⌉:
    exactly μ-GDP with μ = √depth / noise_multiplier. ``step_counts``: steps per tree (an integer for one tree).
    dp-accounting states it under zero-out adjacency (its default here); the same analysis holds under any relation
    with the node sensitivity of that relation.

    Example:
        >>> from dplens import Accountant
        >>> tree = SingleEpochTreeAggregation(noise_multiplier=4.0, step_counts=100)
        >>> tree.depth, round(tree.gdp_mu(), 4)
        (7, 0.6614)
        >>> round(Accountant().compose(tree).epsilon(1e-5), 3)
        2.729
    """

    noise_multiplier: float
    step_counts: int | tuple[int, ...]
    neighboring: NeighboringRelation = NeighboringRelation.REPLACE_SPECIAL

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier)
        counts = self.step_counts
        if isinstance(counts, list):
            counts = tuple(counts)
            object.__setattr__(self, "step_counts", counts)
        values = counts if isinstance(counts, tuple) else (counts,)
        if not values:
            raise ValueError(f"step_counts must be an integer >= 0 or a non-empty sequence of them; got {counts!r}")
        for value in values:
            _count("step_counts", value, minimum=0)

    @property
    def depth(self) -> int:
        """Nodes a record touches: ⌈log₂(max steps + 1)⌉."""
        counts = self.step_counts if isinstance(self.step_counts, tuple) else (self.step_counts,)
        return math.ceil(math.log2(max(counts) + 1))

    def gdp_mu(self) -> float:
        """μ = √depth / noise_multiplier (a Gaussian mechanism of ℓ2-sensitivity √depth)."""
        return math.sqrt(self.depth) / self.noise_multiplier


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncatedSubsampledGaussian(Event):
    """Poisson sampling with probability ``sampling_rate`` from ``dataset_size`` records, the batch truncated to
    ``truncated_batch_size`` by a random subset, then a Gaussian sum with ``noise_multiplier`` × the norm bound C.

    dp-accounting's ``TruncatedSubsampledGaussianDpEvent`` (arXiv 2508.15089), interpreted by its PLD (a mixture
    of the untruncated subsampled Gaussian and a sensitivity-2C one). As in dp-accounting, the noise multiplier is
    relative to the norm bound C under every relation.

    Example (PLD only):
        >>> from dplens import Accountant
        >>> step = TruncatedSubsampledGaussian(
        ...     dataset_size=60000, sampling_rate=0.01, truncated_batch_size=700, noise_multiplier=1.0
        ... )
        >>> round(Accountant().compose(step, count=100).epsilon(1e-5, method="pld"), 3)
        0.734
    """

    dataset_size: int
    sampling_rate: float
    truncated_batch_size: int
    noise_multiplier: float
    neighboring: NeighboringRelation = ADD_REMOVE

    def __post_init__(self) -> None:
        _count("dataset_size", self.dataset_size, minimum=1)
        _count("truncated_batch_size", self.truncated_batch_size, minimum=0)
        _probability("sampling_rate", self.sampling_rate, allow_zero=True)
        _positive("noise_multiplier", self.noise_multiplier)


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfComposed(Event):
    """``event`` run ``count`` times (adaptively) on the same data.

    Example:
        >>> from dplens import Accountant, Laplace
        >>> Accountant().compose(SelfComposed(event=Laplace(noise_multiplier=1.0), count=4)).pure_epsilon()
        4.000000000004
    """

    event: Event
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, Event):
            raise ValueError(f"event must be an Event; got {self.event!r}")
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 0:
            raise ValueError(f"count must be an integer >= 0; got {self.count!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Composed(Event):
    """The adaptive composition of ``events`` in order.

    Example (two Gaussians with σ = 2 are exactly one with σ = √2):
        >>> from dplens import Accountant, Gaussian
        >>> pair = Composed(events=(Gaussian(noise_multiplier=2.0), Gaussian(noise_multiplier=2.0)))
        >>> round(Accountant().compose(pair).epsilon(1e-5), 4)
        2.9432
        >>> round(Accountant().compose(Gaussian(noise_multiplier=2**0.5)).epsilon(1e-5), 4)
        2.9432
    """

    events: tuple[Event, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.events, tuple):
            object.__setattr__(self, "events", tuple(self.events))
        for event in self.events:
            if not isinstance(event, Event):
                raise ValueError(f"events must contain only Events; got {event!r}")


def attained(event: Event) -> bool:
    """False where ``event`` (or a part of a composition) declares ``lower_bound_events()`` other than None: the pair
    its routes account is not attained by the mechanism (a sampler's unamplified or Rényi bound, a user-level bound),
    so what they compute bounds the true privacy loss from above only — their lower ends are not the mechanism's."""
    if isinstance(event, SelfComposed):
        return attained(event.event)
    if isinstance(event, Composed):
        return all(attained(e) for e in event.events)
    declared = getattr(event, "lower_bound_events", None)
    return not callable(declared) or declared() is None


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
    ZcdpMechanism,
    MixtureOfGaussians,
    SingleEpochTreeAggregation,
    TruncatedSubsampledGaussian,
    SelfComposed,
    Composed,
):
    register_event(_cls)

# Core event families that live in their own modules: imported when a serialised ledger names them.
_CORE_EVENT_MODULES: dict[str, str] = {
    "SampledWithReplacement": "dplens.accountant.with_replacement",
    "RepeatAndSelect": "dplens.accountant.selection",
    "ExponentialMechanism": "dplens.accountant.selection",
    "ReportNoisyMax": "dplens.accountant.selection",
    "PermuteAndFlip": "dplens.accountant.selection",
    "ApproxDp": "dplens.accountant.approx_dp",
    "GroupPrivacy": "dplens.accountant.group",
    "DiscreteLaplace": "dplens.accountant.discrete",
    "DiscreteGaussian": "dplens.accountant.discrete",
    "RandomAllocation": "dplens.accountant.samplers",
    "FixedBins": "dplens.accountant.samplers",
    "ShuffledBatches": "dplens.accountant.samplers",
    "CyclicBatches": "dplens.accountant.samplers",
    "ShuffleMaxStatistic": "dplens.accountant.samplers",
    "DpSgdRun": "dplens.accountant.dp_sgd",
    "UserLevelRun": "dplens.accountant.user_level",
    "AdaptiveClipping": "dplens.accountant.adaptive_clipping",
    "MfTraining": "dplens.accountant.mf_accounting",
}


def _core_event_type(name: str) -> type[Event]:
    """A core event class defined in its own module (:data:`_CORE_EVENT_MODULES`), imported on first use."""
    if name not in _REGISTRY:
        import importlib

        importlib.import_module(_CORE_EVENT_MODULES[name])
    return _REGISTRY[name]


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict: ``{"type": ClassName, field: value, …}`` (nested events recursively).

    Example:
        >>> event_to_dict(Gaussian(noise_multiplier=1.0))
        {'type': 'Gaussian', 'noise_multiplier': 1.0, 'neighboring': 'add_remove'}
    """
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
    """Inverse of :func:`event_to_dict` (a plug-in's event types are registered by importing its module).

    Example:
        >>> step = PoissonSampled(sampling_rate=0.01, event=Gaussian(noise_multiplier=1.0))
        >>> event_from_dict(event_to_dict(step)) == step
        True
        >>> event_from_dict({"type": "GaussMix", "k": 10, "gamma": 100.0}).k  # a research plug-in's event
        10
    """
    if not isinstance(data, dict) or "type" not in data:
        raise ValueError(f"event must be a dict with a 'type'; got {data!r}")
    if data["type"] not in _REGISTRY and data["type"] in _CORE_EVENT_MODULES:
        import importlib

        importlib.import_module(_CORE_EVENT_MODULES[data["type"]])
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


class ReplaceOneNoise(enum.Enum):
    """What a dp-accounting Gaussian noise multiplier is relative to under REPLACE_ONE (it differs within 0.6).

    dp-accounting's ``GaussianDpEvent`` docstring defines ``noise_multiplier`` = s/C with C the norm bound of each
    record's contribution (``NORM_BOUND``), and its PLD accountant doubles the sensitivity to 2C under REPLACE_ONE.
    Its RDP accountant ignores the relation for a plain Gaussian, and its sampled-without-replacement RDP (Wang,
    Balle, Kasiviswanathan 2019, Thm 27) uses α/(2σ²) for the inner Gaussian: there σ is relative to the
    replace-one sensitivity (``SENSITIVITY``). The two readings differ by a factor 2 in σ: for ``GaussianDpEvent(2)``
    under REPLACE_ONE, dp-accounting's RDP gives ε = 2.1657 at δ = 1e-5 (sensitivity 1) and its PLD 4.3772
    (sensitivity 2). dplens's own :class:`Gaussian` is relative to the sensitivity of its stated relation, so a
    dp-accounting ledger converts with a factor 2 (``NORM_BOUND``, the default: the documented meaning) or 1.

    Example:
        >>> import dp_accounting
        >>> event = dp_accounting.GaussianDpEvent(2.0)
        >>> replace_one = NeighboringRelation.REPLACE_ONE
        >>> from_dp_accounting(event, neighboring=replace_one).noise_multiplier
        1.0
        >>> as_sensitivity = ReplaceOneNoise.SENSITIVITY
        >>> from_dp_accounting(event, neighboring=replace_one, replace_one_noise=as_sensitivity).noise_multiplier
        2.0
    """

    NORM_BOUND = "norm_bound"
    SENSITIVITY = "sensitivity"


def _dpa_gaussian_factor(
    relation: NeighboringRelation, convention: ReplaceOneNoise = ReplaceOneNoise.NORM_BOUND
) -> float:
    """dp-accounting's Gaussian noise multiplier ÷ ours: 2 under REPLACE_ONE read as σ/C (its docstring), else 1."""
    if not isinstance(convention, ReplaceOneNoise):
        raise ValueError(f"replace_one_noise must be a ReplaceOneNoise; got {convention!r}")
    if relation is NeighboringRelation.REPLACE_ONE and convention is ReplaceOneNoise.NORM_BOUND:
        return 2.0
    return 1.0


def to_dp_accounting(event: Event, *, replace_one_noise: ReplaceOneNoise = ReplaceOneNoise.NORM_BOUND):
    """The dp-accounting ``DpEvent`` with the same meaning; ``ValueError`` where none exists.

    ``replace_one_noise`` says how to write a Gaussian noise multiplier under REPLACE_ONE (see
    :class:`ReplaceOneNoise`).

    Example:
        >>> to_dp_accounting(Gaussian(noise_multiplier=1.5))
        GaussianDpEvent(noise_multiplier=1.5)
    """
    from dp_accounting import dp_event as dpa  # every event type (the package top level lacks some)

    def inner(e: Event):
        return to_dp_accounting(e, replace_one_noise=replace_one_noise)

    match event:
        case NoOp():
            return dpa.NoOpDpEvent()
        case NonPrivate():
            return dpa.NonPrivateDpEvent()
        case Gaussian():
            # dp-accounting's PLD reads a Gaussian's noise multiplier relative to the norm bound and doubles the
            # sensitivity under REPLACE_ONE; ours is relative to the stated relation's own sensitivity.
            factor = _dpa_gaussian_factor(event.neighboring, replace_one_noise)
            return dpa.GaussianDpEvent(event.noise_multiplier * factor)
        case Laplace():
            return dpa.LaplaceDpEvent(event.noise_multiplier)
        case RandomizedResponse():
            # dp-accounting's noise_parameter p: with prob. p output uniform over k buckets.
            k = event.num_values
            p = k / (math.exp(event.epsilon) + k - 1)
            return dpa.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=k)
        case PoissonSampled():
            return dpa.PoissonSampledDpEvent(event.sampling_rate, inner(event.event))
        case SampledWithoutReplacement():
            return dpa.SampledWithoutReplacementDpEvent(event.dataset_size, event.sample_size, inner(event.event))
        case ZcdpMechanism():
            return dpa.ZCDpEvent(rho=event.rho, xi=event.xi)
        case MixtureOfGaussians():
            return dpa.MixtureOfGaussiansDpEvent(
                event.standard_deviation, list(event.sensitivities), list(event.sampling_probs)
            )
        case SingleEpochTreeAggregation():
            counts = event.step_counts
            return dpa.SingleEpochTreeAggregationDpEvent(
                event.noise_multiplier, list(counts) if isinstance(counts, tuple) else counts
            )
        case TruncatedSubsampledGaussian():
            return dpa.TruncatedSubsampledGaussianDpEvent(
                event.dataset_size, event.sampling_rate, event.truncated_batch_size, event.noise_multiplier
            )
        case SelfComposed():
            return dpa.SelfComposedDpEvent(inner(event.event), event.count)
        case Composed():
            return dpa.ComposedDpEvent([inner(e) for e in event.events])
    if type(event).__name__ == "DiscreteLaplace" and type(event).__module__ == "dplens.accountant.discrete":
        # dplens.accountant.discrete (issue 15): PMF ∝ exp(−a|x|), exactly dp-accounting's DiscreteLaplaceDpEvent.
        return dpa.DiscreteLaplaceDpEvent(event.noise_parameter, event.sensitivity)
    # Events of other modules (core families such as RepeatAndSelect, research plug-ins such as DpFtrl) declare
    # their dp-accounting equivalent themselves.
    declared = getattr(event, "to_dp_accounting", None)
    if callable(declared):
        return declared()
    raise ValueError(f"event has no dp-accounting counterpart: {event!r}")


def _from_dp_accounting_mechanism(
    dp_event: Any, neighboring: NeighboringRelation, replace_one_noise: ReplaceOneNoise
) -> Event | None:
    """Our event for a dp-accounting mechanism event (no sampling or composition inside); None for the others."""
    from dp_accounting import dp_event as dpa

    match dp_event:
        case dpa.NoOpDpEvent():
            return NoOp(neighboring=neighboring)
        case dpa.NonPrivateDpEvent():
            return NonPrivate(neighboring=neighboring)
        case dpa.GaussianDpEvent():
            if dp_event.noise_multiplier == 0:
                return NonPrivate(neighboring=neighboring)
            factor = _dpa_gaussian_factor(neighboring, replace_one_noise)
            return Gaussian(noise_multiplier=dp_event.noise_multiplier / factor, neighboring=neighboring)
        case dpa.LaplaceDpEvent():
            if dp_event.noise_multiplier == 0:
                return NonPrivate(neighboring=neighboring)
            return Laplace(noise_multiplier=dp_event.noise_multiplier, neighboring=neighboring)
        case dpa.DiscreteLaplaceDpEvent():
            if dp_event.noise_parameter == 0:
                return NonPrivate(neighboring=neighboring)
            return _core_event_type("DiscreteLaplace")(  # defined with its interpreters in accountant/discrete.py
                noise_parameter=dp_event.noise_parameter, sensitivity=dp_event.sensitivity, neighboring=neighboring
            )
        case dpa.RandomizedResponseDpEvent():
            k, p = dp_event.num_buckets, dp_event.noise_parameter
            if k == 1 or p == 1:
                return NoOp(neighboring=neighboring)
            if p == 0:
                return NonPrivate(neighboring=neighboring)
            relation = NeighboringRelation.REPLACE_ONE if neighboring is ADD_REMOVE else neighboring
            return RandomizedResponse(epsilon=math.log1p(k * (1 - p) / p), num_values=k, neighboring=relation)
        case dpa.ZCDpEvent():
            return ZcdpMechanism(rho=dp_event.rho, xi=dp_event.xi, neighboring=neighboring)
        case dpa.MixtureOfGaussiansDpEvent():
            if all(float(c) == 0 for c in dp_event.sensitivities):
                return NoOp(neighboring=neighboring)
            if dp_event.standard_deviation == 0:
                return NonPrivate(neighboring=neighboring)
            return MixtureOfGaussians(
                standard_deviation=dp_event.standard_deviation,
                sensitivities=tuple(float(c) for c in dp_event.sensitivities),
                sampling_probs=tuple(float(p) for p in dp_event.sampling_probs),
                neighboring=neighboring,
            )
        case dpa.SingleEpochTreeAggregationDpEvent():
            if dp_event.noise_multiplier == 0:
                return NonPrivate(neighboring=neighboring)
            counts = dp_event.step_counts
            return SingleEpochTreeAggregation(
                noise_multiplier=dp_event.noise_multiplier,
                step_counts=tuple(int(c) for c in counts) if isinstance(counts, list | tuple) else int(counts),
                neighboring=neighboring,
            )
        case dpa.TruncatedSubsampledGaussianDpEvent():
            if dp_event.noise_multiplier == 0:
                return NonPrivate(neighboring=neighboring)
            return TruncatedSubsampledGaussian(
                dataset_size=dp_event.dataset_size,
                sampling_rate=dp_event.sampling_probability,
                truncated_batch_size=dp_event.truncated_batch_size,
                noise_multiplier=dp_event.noise_multiplier,
                neighboring=neighboring,
            )
    return None


def from_dp_accounting(
    dp_event,
    *,
    neighboring: NeighboringRelation = ADD_REMOVE,
    replace_one_noise: ReplaceOneNoise = ReplaceOneNoise.NORM_BOUND,
) -> Event:
    """Our event for a dp-accounting ``DpEvent`` (every mechanism type of dp-accounting 0.6); ``ValueError`` for
    ``UnsupportedDpEvent`` and unknown types.

    ``neighboring`` is the relation of the ledger (dp-accounting fixes it on the accountant, not the event);
    ``replace_one_noise`` how a Gaussian noise multiplier under REPLACE_ONE is read (:class:`ReplaceOneNoise`).
    Degenerate parameters map to the structural events: a noise multiplier or parameter 0 → :class:`NonPrivate`,
    randomized response with p = 1 or one bucket → :class:`NoOp`, and so do events that touch no record or shift
    nothing (a sampling probability or sample size 0, a mixture of Gaussians whose every shift is 0: the output has
    the same distribution on both data sets, whatever the noise); sampling from a non-private event is
    :class:`NonPrivate` (its true δ(ε) is the sampling probability at every ε, so ε = ∞ below it: a valid bound).

    Example:
        >>> from dp_accounting import dp_event
        >>> from_dp_accounting(dp_event.ZCDpEvent(0.5))
        ZcdpMechanism(rho=0.5, xi=0.0, neighboring=<NeighboringRelation.ADD_OR_REMOVE_ONE: 'add_remove'>)
    """
    from dp_accounting import dp_event as dpa  # every event type (the package top level lacks some)

    def inner(e, relation: NeighboringRelation = neighboring) -> Event:
        return from_dp_accounting(e, neighboring=relation, replace_one_noise=replace_one_noise)

    leaf = _from_dp_accounting_mechanism(dp_event, neighboring, replace_one_noise)
    if leaf is not None:
        return leaf
    match dp_event:
        case dpa.PoissonSampledDpEvent():
            if dp_event.sampling_probability == 0:
                return NoOp(neighboring=neighboring)
            sampled = inner(dp_event.event)
            if isinstance(sampled, NonPrivate):  # δ(ε) = q at every ε: accounted as non-private (ε = ∞), valid
                return NonPrivate(neighboring=neighboring)
            return PoissonSampled(sampling_rate=dp_event.sampling_probability, event=sampled, neighboring=neighboring)
        case dpa.SampledWithoutReplacementDpEvent():
            if dp_event.sample_size == 0:
                return NoOp(neighboring=NeighboringRelation.REPLACE_ONE)
            sampled = inner(dp_event.event, NeighboringRelation.REPLACE_ONE)
            if isinstance(sampled, NonPrivate):
                return sampled
            return SampledWithoutReplacement(
                sample_size=dp_event.sample_size, dataset_size=dp_event.source_dataset_size, event=sampled
            )
        case dpa.SampledWithReplacementDpEvent():
            return _core_event_type("SampledWithReplacement")(
                sample_size=dp_event.sample_size,
                dataset_size=dp_event.source_dataset_size,
                event=inner(dp_event.event),
                neighboring=neighboring,
            )
        case dpa.RepeatAndSelectDpEvent():
            return _core_event_type("RepeatAndSelect")(
                event=inner(dp_event.event), mean=dp_event.mean, shape=dp_event.shape
            )
        case dpa.SelfComposedDpEvent():
            return SelfComposed(event=inner(dp_event.event), count=dp_event.count)
        case dpa.ComposedDpEvent():
            return Composed(events=tuple(inner(e) for e in dp_event.events))
    raise ValueError(f"dp-accounting event not supported: {dp_event!r}")
