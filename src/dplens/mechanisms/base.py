"""The Mechanism protocol: what audits and reports need from a runnable mechanism.

Randomness is always a ``numpy.random.Generator`` passed in; nothing reads global state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dplens.accountant.events import Event

__all__ = ["Mechanism", "NeighbouringPair", "check_positive", "check_rng", "output_size"]


@dataclass(frozen=True, slots=True)
class NeighbouringPair:
    """A pair of neighbouring data sets (D, D′) and a sentence saying how they differ."""

    data: Any
    neighbour: Any
    description: str = ""


@runtime_checkable
class Mechanism(Protocol):
    """A runnable DP mechanism.

    - ``release(data, rng)``: one real output.
    - ``sample(data, n, rng)``: n independent outputs, vectorised (leading axis n); this is what
      makes audits fast.
    - ``event``: the accountant's description of the mechanism (its claimed guarantee).
    - ``worst_case_pair()``: the neighbouring pair the audit uses by default.
    - ``log_likelihood_ratio(outputs, data, neighbour)`` (optional): log p_D(o) − log p_D′(o) for each
      output, for the optimal (Neyman–Pearson) attack; mechanisms without known densities omit it.
    """

    @property
    def event(self) -> Event: ...

    def release(self, data: Any, rng: np.random.Generator) -> Any: ...

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray: ...

    def worst_case_pair(self) -> NeighbouringPair: ...


def check_rng(rng: Any) -> np.random.Generator:
    """Require an explicit ``numpy.random.Generator``."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator; got {rng!r}")
    return rng


def check_count(n: Any, *, name: str = "n") -> int:
    """Require a positive integer sample count."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {n!r}")
    return int(n)


def check_positive(name: str, value: Any) -> float:
    """Require a finite number > 0 (a Python or NumPy real, never a bool) and return it as a float."""
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def output_size(mechanism: Any, data: Any = None) -> int:
    """Numbers in one output of ``mechanism`` (summed over the parts of a tuple output), at least 1.

    Uses the mechanism's ``output_size()`` where it has one, else draws one output on ``data`` (default: the
    mechanism's worst-case data set) with a fixed seed.
    """
    size = getattr(mechanism, "output_size", None)
    if callable(size):
        return max(int(size()), 1)
    if data is None:
        data = mechanism.worst_case_pair().data
    sample = mechanism.sample(data, 1, np.random.default_rng(0))
    parts = sample if isinstance(sample, tuple) else (sample,)
    return max(sum(int(np.asarray(part).size) for part in parts), 1)
