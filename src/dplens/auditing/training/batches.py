"""The batches of a training: the declared samplers formed by dplens, and a user's sampler read lazily and checked.

A user sampler is ``sampler(dataset_size, rng)``, called once per training with a fresh ``numpy.random.Generator``;
it returns a (possibly infinite) iterable of 1-D integer index arrays, consumed one per step. An iterable that ends
before T steps, or a batch that is not a 1-D integer array of indices in [0, N), is bad input (``ValueError`` naming
the sampler and the step). Duplicates inside a batch are not bad input: they are a finding of the sampling check.

The declared samplers follow :class:`dplens.accountant.dp_sgd.Sampler` exactly (Poisson: each record in each step
independently with q = B/N, drawn as geometric gaps over the T·N grid; shuffle: a fresh permutation per epoch cut
into ⌈N/B⌉ batches, the last one smaller when B does not divide N; and so on).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["BatchSource", "declared_batches"]


def _poisson(n: int, q: float, steps: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Independent Bernoulli(q) inclusion of each record in each step: geometric gaps over the steps·n grid."""
    done = 0
    while done < steps:
        block = min(steps - done, max(1, 2**16 // n))  # lazily: a long iterable costs only what is consumed
        cells = block * n
        expected = cells * q
        draws = int(expected + 8 * math.sqrt(expected + 1) + 16)
        positions = np.cumsum(rng.geometric(q, size=draws)) - 1
        while positions[-1] < cells:  # rare: extend until the grid is covered
            more = np.cumsum(rng.geometric(q, size=draws)) + positions[-1]
            positions = np.concatenate([positions, more])
        positions = positions[positions < cells]
        step_of = positions // n
        cuts = np.searchsorted(step_of, np.arange(block + 1))
        for t in range(block):
            yield (positions[cuts[t] : cuts[t + 1]] % n).astype(np.int64)
        done += block


def _epochs(n: int, b: int, rng: np.random.Generator, order: str) -> Iterator[np.ndarray]:
    per_epoch = math.ceil(n / b)
    fixed = None
    while True:
        if order == "shuffle" or fixed is None:
            if order in ("shuffle", "shuffle-once"):
                perm = rng.permutation(n)
            elif order == "cyclic":
                perm = np.arange(n)
            if order in ("shuffle", "shuffle-once", "cyclic"):
                fixed = [perm[i * b : (i + 1) * b].astype(np.int64) for i in range(per_epoch)]
            else:  # balls-and-bins (fresh every epoch) or fixed-bins (one allocation)
                bins = rng.integers(0, per_epoch, size=n)
                order_of = np.argsort(bins, kind="stable")
                cuts = np.searchsorted(bins[order_of], np.arange(per_epoch + 1))
                fixed = [order_of[cuts[i] : cuts[i + 1]].astype(np.int64) for i in range(per_epoch)]
        yield from fixed
        if order == "balls-and-bins":
            fixed = None


def declared_batches(sampler: str, n: int, b: int, steps: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """The batches of one training under the declared sampler (a :class:`~dplens.accountant.dp_sgd.Sampler` name)."""
    if sampler == "poisson":
        return _poisson(n, b / n, steps, rng)
    if sampler == "fixed-size":
        return (np.sort(rng.choice(n, size=b, replace=False)).astype(np.int64) for _ in range(steps))
    if sampler in ("shuffle", "shuffle-once", "cyclic", "balls-and-bins", "fixed-bins"):
        return itertools.islice(_epochs(n, b, rng, sampler), steps)
    raise ValueError(f"check_dp_sgd: the sampler {sampler!r} cannot be formed by dplens")


class BatchSource:
    """Where a training's batches come from: the declared sampler, or the user's ``sampler(dataset_size, rng)``."""

    def __init__(
        self,
        declared: str,
        n: int,
        b: int,
        steps: int,
        function: Callable[..., Any] | None = None,
        name: str | None = None,
    ) -> None:
        self.declared, self.n, self.b, self.steps = declared, n, b, steps
        self.function, self.name = function, name

    @property
    def is_user(self) -> bool:
        return self.function is not None

    def batches(self, rng: np.random.Generator, where: str) -> Iterator[np.ndarray]:
        """The T batches of one training, each checked (``where`` names the training in messages)."""
        if self.function is None:
            yield from declared_batches(self.declared, self.n, self.b, self.steps, rng)
            return
        try:
            iterator = iter(self.function(self.n, rng))
        except Exception as err:  # user code: reported in its own words
            raise ValueError(
                f"check_dp_sgd: the sampler function {self.name!r} raised {type(err).__name__}: {err} ({where})"
            ) from None
        for step in range(self.steps):
            try:
                batch = next(iterator)
            except StopIteration:
                raise ValueError(
                    f"check_dp_sgd: the sampler function {self.name!r} ended after {step} of "
                    f"{self.steps} steps ({where})"
                ) from None
            except Exception as err:
                raise ValueError(
                    f"check_dp_sgd: the sampler function {self.name!r} raised {type(err).__name__}: "
                    f"{err} ({where}, step {step})"
                ) from None
            yield self._checked(batch, f"{where}, step {step}")

    def _checked(self, batch: Any, where: str) -> np.ndarray:
        array = np.asarray(batch)
        what = f"check_dp_sgd: the sampler function {self.name!r}"
        if array.ndim != 1:
            raise ValueError(
                f"{what} yielded a {array.ndim}-D array of shape {array.shape}; expected 1-D indices ({where})"
            )
        if array.size and (array.dtype.kind not in "iu"):
            raise ValueError(f"{what} yielded indices of dtype {array.dtype}; expected integers ({where})")
        array = array.astype(np.int64, copy=False)
        if array.size and (array.min() < 0 or array.max() >= self.n):
            bad = int(array[(array < 0) | (array >= self.n)][0])
            raise ValueError(f"{what} yielded index {bad}, outside [0, {self.n}) ({where})")
        return array
