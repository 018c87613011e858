"""Spec / event → runnable mechanism, for audits.

Every accountant event type with a runnable counterpart maps to a :class:`~dplens.mechanisms.base.Mechanism`
whose worst-case pair is the pair the accountant's ε is tight for; a ledger of several entries is a
:class:`ProductMechanism` (independent releases: the log-likelihood ratios add). Types without a runnable
mechanism raise ``ValueError`` naming the type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.accountant import events as ev
from dplens.mechanisms.additive import (
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponseMechanism,
    SubsampledGaussianMechanism,
)
from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng, output_size

__all__ = ["ProductMechanism", "Repeated", "mechanism_for_event", "mechanism_from_spec", "repeat"]

#: More than this many repeated releases per trial would make an audit chunk unreasonably large.
MAX_REPEATS = 100_000


@dataclass(frozen=True, slots=True)
class Repeated:
    """``count`` independent releases of ``mechanism`` on the same data (self-composition)."""

    mechanism: Any
    count: int

    def __post_init__(self) -> None:
        check_count(self.count, name="count")
        if self.count > MAX_REPEATS:
            raise ValueError(f"count must be <= {MAX_REPEATS} for an audit; got {self.count!r}")

    @property
    def event(self) -> ev.Event:
        return ev.SelfComposed(event=self.mechanism.event, count=self.count)

    def release(self, data: Any, rng: np.random.Generator) -> Any:
        outputs = self.sample(data, 1, rng)
        return tuple(part[0] for part in outputs) if isinstance(outputs, tuple) else outputs[0]

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> Any:
        """Shape (n, count, …); a mechanism with tuple outputs (a ProductMechanism) gives a tuple of such arrays."""
        n = check_count(n)
        flat = self.mechanism.sample(data, n * self.count, check_rng(rng))
        if isinstance(flat, tuple):
            return tuple(np.asarray(part).reshape(n, self.count, *np.shape(part)[1:]) for part in flat)
        flat = np.asarray(flat)
        return flat.reshape(n, self.count, *flat.shape[1:])

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        parts = outputs if isinstance(outputs, tuple) else (outputs,)
        parts = tuple(np.asarray(part) for part in parts)
        n = parts[0].shape[0]
        flat = tuple(part.reshape(n * self.count, *part.shape[2:]) for part in parts)
        flat = flat if isinstance(outputs, tuple) else flat[0]
        return np.asarray(self.mechanism.log_likelihood_ratio(flat, data, neighbour)).reshape(n, self.count).sum(1)

    def worst_case_pair(self) -> NeighbouringPair:
        pair = self.mechanism.worst_case_pair()
        return NeighbouringPair(pair.data, pair.neighbour, f"{pair.description}; {self.count} releases")

    def output_size(self) -> int:
        return self.count * output_size(self.mechanism)


@dataclass(frozen=True, slots=True)
class ProductMechanism:
    """Independent mechanisms run on the same record: outputs are tuples, log-likelihood ratios add."""

    parts: tuple[Any, ...]

    @property
    def event(self) -> ev.Event:
        return ev.Composed(events=tuple(p.event for p in self.parts))

    def release(self, data: Any, rng: np.random.Generator) -> tuple[Any, ...]:
        return tuple(p.release(d, rng) for p, d in zip(self.parts, data, strict=True))

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return tuple(p.sample(d, n, rng) for p, d in zip(self.parts, data, strict=True))

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        return sum(
            np.asarray(p.log_likelihood_ratio(o, d, e))
            for p, o, d, e in zip(self.parts, outputs, data, neighbour, strict=True)
        )

    def worst_case_pair(self) -> NeighbouringPair:
        pairs = [p.worst_case_pair() for p in self.parts]
        return NeighbouringPair(
            tuple(p.data for p in pairs),
            tuple(p.neighbour for p in pairs),
            "; ".join(f"[{i + 1}] {p.description}" for i, p in enumerate(pairs)),
        )

    def output_size(self) -> int:
        return sum(output_size(p) for p in self.parts)


def _standard(event: ev.Event, count: int) -> Any | None:
    from dplens.accountant.mf_accounting import MfTraining

    if isinstance(event, MfTraining):  # the Dirac-canary game on a BandMF training (cyclic Poisson)
        from dplens.mechanisms.matrix_factorization import BandMfCanaryMechanism

        return repeat(BandMfCanaryMechanism(event), count)
    match event:
        case ev.Gaussian():
            # count Gaussian releases of the same query ≡ one with σ/√count (the mean is sufficient).
            return GaussianMechanism(
                noise_multiplier=event.noise_multiplier / math.sqrt(count), neighboring=event.neighboring
            )
        case ev.Laplace():
            return repeat(LaplaceMechanism(scale=event.noise_multiplier, neighboring=event.neighboring), count)
        case ev.RandomizedResponse():
            rr = RandomizedResponseMechanism(
                epsilon=event.epsilon, num_values=event.num_values, neighboring=event.neighboring
            )
            return repeat(rr, count)
        case ev.PoissonSampled(event=ev.Gaussian() as inner):
            return SubsampledGaussianMechanism(
                noise_multiplier=inner.noise_multiplier,
                sampling_rate=event.sampling_rate,
                steps=count,
                neighboring=event.neighboring,
            )
        case ev.SelfComposed():
            return mechanism_for_event(event.event, event.count * count)
    return None


def _plugin(event: ev.Event, count: int) -> Any | None:
    from dplens.accountant import plugins

    builder = plugins.audit_mechanism_builder(type(event).__name__)
    return None if builder is None else builder(event, count)


def repeat(mechanism: Any, count: int) -> Any:
    """``count`` independent runs of ``mechanism`` on the same data (itself when ``count`` is 1)."""
    return mechanism if count == 1 else Repeated(mechanism, count)


def mechanism_for_event(event: ev.Event, count: int = 1) -> Any:
    """The runnable mechanism of ``count`` runs of ``event``; ``ValueError`` where there is none."""
    if not isinstance(event, ev.Event):
        raise ValueError(f"event must be an Event; got {event!r}")
    check_count(count, name="count")
    if isinstance(event, ev.Composed):
        parts = tuple(mechanism_for_event(e) for e in event.events)
        product = ProductMechanism(parts)
        return product if count == 1 else Repeated(product, count)
    mechanism = _standard(event, count)
    if mechanism is None:
        mechanism = _plugin(event, count)
    if mechanism is None:
        raise ValueError(f"no runnable mechanism for event type {type(event).__name__!r}; it cannot be audited")
    return mechanism


def mechanism_from_spec(spec: Any) -> Any:
    """The mechanism of a parsed :class:`~dplens.spec.Spec` (its entries composed in order)."""
    entries = [(e, c) for e, c in spec.entries if c > 0]
    if not entries:
        raise ValueError("spec has no mechanism to audit (every count is 0)")
    parts = tuple(mechanism_for_event(event, count) for event, count in entries)
    return parts[0] if len(parts) == 1 else ProductMechanism(parts)
