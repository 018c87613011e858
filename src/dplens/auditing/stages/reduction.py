"""Wide outputs reduced as they arrive: screened coordinates and a mean-difference projection.

An output of more than :data:`~dplens.auditing.stages.memory.MAX_WHOLE_COORDINATES` coordinates (a noisy gradient,
a histogram of a large domain) is never held whole. The screening half of the fitting pilot is streamed through
per-coordinate statistics of each side (draws, finite entries, sums and sums of squares, :class:`Screening`); from
them a :class:`Reduction` is frozen:

- the coordinates whose query values differ (what a float check reads, at most :data:`QUERY_COLUMNS` of each
  candidate query vector), kept exactly;
- the coordinates with the largest Welch statistic of the mean difference (:data:`SCREEN_MEAN`), of the log
  variance ratio (:data:`SCREEN_VARIANCE`) and of the share of non-finite entries (:data:`SCREEN_FINITE`);
- the projection w·x with w_j = (m̂_j − m̂′_j)/v̂_j, the linear discriminant of two Gaussians with a shared diagonal
  covariance (Fisher 1936; for a shift δ in Gaussian noise it is the likelihood-ratio statistic, Neyman–Pearson), so
  a difference spread over every coordinate (a canary gradient) is read in one number.

Every later stage sees the reduced outputs (the fitting half as its draws arrive, the selection and counted trials
batch by batch). The reduction is a fixed function of the output chosen on pilot draws that are independent of
the counted trials, so every bound stays valid (Jagielski, Ullman, Oprea, NeurIPS 2020); a poor choice costs power
only. Memory: a handful of float64 arrays of the output's length, whatever the trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import OutputKind, numeric
from dplens.auditing.targets import Target, TargetPair

__all__ = ["QUERY_COLUMNS", "Reduction", "Screening", "draw_in_batches", "screen"]

QUERY_COLUMNS = 64
SCREEN_MEAN = 16
SCREEN_VARIANCE = 8
SCREEN_FINITE = 4


@dataclass(frozen=True, slots=True)
class Reduction:
    """Full outputs (n, d) → reduced (n, k + 1): the kept ``columns``, then the projection on ``weights``.

    Example:
        >>> import numpy as np
        >>> reduction = Reduction(dimension=4, columns=np.array([1, 3]), weights=np.array([1.0, 0.0, 0.0, -1.0]))
        >>> reduction(np.array([[1.0, 2.0, 3.0, 4.0]]), 1).tolist()
        [[2.0, 4.0, -3.0]]
    """

    dimension: int
    columns: np.ndarray
    weights: np.ndarray
    strongest: int = -1  # the kept coordinate with the largest mean difference on the screening draws (-1: none)

    @property
    def size(self) -> int:
        """The reduced outputs' coordinates (the kept ones and the projection)."""
        return int(self.columns.size) + 1

    def __call__(self, outputs: Any, n: int) -> np.ndarray:
        values = numeric(outputs, OutputKind.VECTOR, self.dimension, n)
        out = np.empty((n, self.size))
        out[:, :-1] = values[:, self.columns]
        finite = np.isfinite(values)
        projected = np.where(finite, values, 0.0) @ self.weights
        out[:, -1] = np.where(finite.all(axis=1), projected, np.nan)  # a non-finite entry: an atom, not a number
        return out

    def reduce_query(self, query: Any) -> np.ndarray:
        """Query values of the full output, as the reduced output's (the projection of the query values last)."""
        q = np.broadcast_to(np.asarray(query, dtype=float).reshape(-1), (self.dimension,))
        return np.concatenate([q[self.columns], [float(np.where(np.isfinite(q), q, 0.0) @ self.weights)]])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the result's ``output_profile["reduction"]``)."""
        strongest = int(np.searchsorted(self.columns, self.strongest)) if self.strongest >= 0 else None
        return {
            "coordinates": int(self.dimension),
            "kept": [int(j) for j in self.columns],
            "strongest": strongest,  # its position among the reduced coordinates
            "projection": self.size - 1,  # the position of the mean-difference projection
        }


class Screening:
    """Per-coordinate statistics of each side, accumulated batch by batch (a handful of arrays of length d)."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.draws = np.zeros(2, dtype=np.int64)
        self.finite = np.zeros((2, dimension))
        self.sums = np.zeros((2, dimension))
        self.squares = np.zeros((2, dimension))
        self.integral = True

    def add(self, side: int, values: np.ndarray) -> None:
        """Fold a batch of one side's outputs (n, d) into the statistics."""
        finite = np.isfinite(values)
        clean = np.where(finite, values, 0.0)
        self.draws[side] += len(values)
        self.finite[side] += finite.sum(axis=0)
        self.sums[side] += clean.sum(axis=0)
        self.squares[side] += np.einsum("ij,ij->j", clean, clean)
        if self.integral:
            self.integral = bool(np.all(clean == np.round(clean)))

    def nonfinite_statistic(self) -> np.ndarray:
        """Per coordinate: the two-proportion z statistic of the sides' shares of non-finite entries."""
        draws = np.maximum(self.draws, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            first, second = self.finite[0] / draws[0], self.finite[1] / draws[1]
            pooled = np.clip((first + second) / 2.0, 1e-12, 1 - 1e-12)
            return np.abs(first - second) / np.sqrt(pooled * (1 - pooled) * (1 / draws[0] + 1 / draws[1]))

    def moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per side: counts of finite entries, means, variances (each of shape (2, d)), computed in place of the
        accumulators (which they replace: the statistics are read once, and memory stays at a few arrays)."""
        count = np.maximum(self.finite, 1.0, out=self.finite)
        mean = np.divide(self.sums, count, out=self.sums)
        variance = np.divide(self.squares, count, out=self.squares)
        variance -= mean * mean
        np.maximum(variance, 0.0, out=variance)
        variance *= count / np.maximum(count - 1.0, 1.0)
        return count, mean, variance


def _top(statistic: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` largest finite values (largest first; none that are zero)."""
    values = np.where(np.isfinite(statistic), statistic, 0.0)
    k = min(k, int(np.count_nonzero(values)))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    chosen = np.argpartition(-values, k - 1)[:k]
    return chosen[np.argsort(-values[chosen], kind="stable")]


def _query_columns(queries: list[tuple[Any, Any]], dimension: int) -> list[np.ndarray]:
    columns = []
    for first, second in queries:
        q = np.broadcast_to(np.asarray(first, dtype=float).reshape(-1), (dimension,))
        q2 = np.broadcast_to(np.asarray(second, dtype=float).reshape(-1), (dimension,))
        columns.append(np.flatnonzero(q != q2)[:QUERY_COLUMNS])
    return columns


def _mean_and_variance_tops(count: np.ndarray, mean: np.ndarray, variance: np.ndarray, floor: np.ndarray):
    """The coordinates with the largest Welch statistic of the mean difference and of the log variance ratio."""
    welch = np.abs(mean[0] - mean[1])
    welch /= np.sqrt(np.maximum(variance[0] / count[0] + variance[1] / count[1], floor))
    by_mean = _top(welch, SCREEN_MEAN)
    del welch
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.abs(np.log(np.maximum(variance[0], floor) / np.maximum(variance[1], floor)))
        spread /= np.sqrt(2.0 / np.maximum(count[0] - 1, 1) + 2.0 / np.maximum(count[1] - 1, 1))
    return by_mean, _top(spread, SCREEN_VARIANCE)


def screen(screening: Screening, queries: list[tuple[Any, Any]]) -> Reduction:
    """Freeze the reduction on the screening statistics (``queries``: the candidate query values of (D, D′) of
    the full output, whose differing coordinates a float check reads). The statistics are consumed: their
    accumulators become the moments."""
    by_finite = _top(screening.nonfinite_statistic(), SCREEN_FINITE)
    count, mean, variance = screening.moments()
    floor = 1.0 + mean[0] * mean[0]
    np.maximum(floor, 1.0 + mean[1] * mean[1], out=floor)
    floor *= 1e-12
    by_mean, by_variance = _mean_and_variance_tops(count, mean, variance, floor)
    weights = mean[0] - mean[1]
    weights /= np.maximum((variance[0] + variance[1]) / 2.0, floor)
    weights[(count[0] <= 1) | (count[1] <= 1)] = 0.0
    candidates = [*_query_columns(queries, screening.dimension), by_mean, by_variance, by_finite]
    columns = np.unique(np.concatenate([c.astype(np.int64) for c in candidates]))
    strongest = int(by_mean[0]) if by_mean.size else -1
    return Reduction(dimension=screening.dimension, columns=columns, weights=weights, strongest=strongest)


def draw_in_batches(target: Target, pair: TargetPair, *, seed: int, rows: int, batch_rows: int, part: int):
    """The pilot's draws of ``part`` (streams (0, 21 + ``part``, side)) as (side, batch of outputs, n) in batches."""
    for side, data in enumerate((pair.data, pair.neighbour)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 21 + part, side)))
        label = "D" if side == 0 else "D'"
        for start in range(0, rows, batch_rows):
            n = min(batch_rows, rows - start)
            yield side, target.draw(data, n, rng, where=f"pilot on input {label}, draws from {start + 1}"), n
