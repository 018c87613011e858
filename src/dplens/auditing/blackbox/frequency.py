"""The frequency-ratio score of whole outputs: the exact likelihood-ratio test of a discrete mechanism.

For outputs with a small support (sparse-vector flag patterns, report-noisy-max indices, bit vectors of a few
bits) the optimal test between M(D) and M(D′) rejects on the outputs o with the largest ratio P[M(D) = o] /
P[M(D′) = o] (Neyman–Pearson). The ratio of each whole output (row) is estimated on the fitting half of the pilot
(add-½ smoothing, Krichevsky–Trofimov); rows outside the ``max_categories`` most frequent ones, and rows never seen
in the pilot, share one pooled bin. The thresholds then cut the rows in ratio order; which cut is used is chosen
on the other, independent half of the pilot (:mod:`.operating`). StatDP (Ding et al., CCS 2018, §4) searches
such output events by hand; DP-Sniper (Bichsel et al., S&P 2021, §5) learns them; for a small support the table
itself is the optimal classifier.

Rows are keyed by a 64-bit hash of their float64 bit patterns (−0.0 read as 0.0; all NaNs alike). A collision
merges two rows into one bin: the score is still a fixed function of the output, so bounds stay valid.

The *bit-pattern* variant (``JointFrequency(bitwise=True)``) keys rows by their raw bit patterns: −0.0 and 0.0,
or NaNs with different payloads, are different outputs. Outputs that are equal as numbers but differ in their bits
identify the input exactly as well as any other difference (a mechanism whose zero carries the sign of its input
is not ε-DP for any ε; Mironov, CCS 2012, on what the bits of a float reveal), and a table of bit patterns tests
that with the same exact bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import Binner, OutputKind, log_ratio, numeric

__all__ = [
    "JointFrequency",
    "RowFrequencyBinner",
    "bitwise_only_draws",
    "fit_joint_frequency",
    "row_hashes",
    "support_profile",
]

_MULTIPLIERS = np.random.default_rng(20211123).integers(1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class JointFrequency:
    """Discrete vectors: the log frequency ratio of whole outputs (at most ``max_categories`` distinct rows; the
    rest and unseen rows pooled). Chosen by default when the pilot's rows take at most ``max_categories`` values
    covering at least ``min_coverage`` of the draws, with at least ``min_draws_per_output`` pilot draws per
    distinct output on average (a support that is small, not just a small pilot). ``bitwise``: rows keyed by their
    raw bit patterns (signed zeros and NaN payloads told apart; see the module docstring).

    Example:
        >>> JointFrequency().max_categories, JointFrequency(bitwise=True).bitwise
        (4096, True)
    """

    max_categories: int = 4096
    min_coverage: float = 0.99
    min_draws_per_output: int = 20
    bitwise: bool = False


def row_hashes(values: np.ndarray, *, bitwise: bool = False) -> np.ndarray:
    """A 64-bit hash per row of a numeric array (n,) or (n, d): of its values (−0.0 read as 0.0, all NaNs alike),
    or with ``bitwise`` of its raw float64 bit patterns.

    Example:
        >>> import numpy as np
        >>> same = row_hashes(np.array([0.0, -0.0]))
        >>> bool(same[0] == same[1]), bool(np.unique(row_hashes(np.array([0.0, -0.0]), bitwise=True)).size == 2)
        (True, True)
    """
    matrix = np.ascontiguousarray(values, dtype=np.float64).reshape(len(values), -1)
    if not bitwise:
        matrix = matrix + 0.0  # −0.0 → 0.0
        matrix = np.where(np.isnan(matrix), np.nan, matrix)
    bits = matrix.view(np.uint64)
    d = bits.shape[1]
    multipliers = _MULTIPLIERS[np.arange(d) % _MULTIPLIERS.size]
    with np.errstate(over="ignore"):
        mixed = bits ^ (bits >> np.uint64(29))
        out = (mixed * multipliers).sum(axis=1, dtype=np.uint64)
        out ^= out >> np.uint64(32)
        out *= np.uint64(0x9E3779B97F4A7C15)
    return out


def bitwise_only_draws(first: np.ndarray, second: np.ndarray, *, min_draws: int = 10, distance: float = 0.5) -> int:
    """How many draws of two samples (n, d) fall on values whose bit patterns the two samples draw differently:
    for every value both show at least ``min_draws`` times among its zero or NaN rows (only those hide bits: −0.0,
    NaN payloads), the total variation distance between the two samples' bit patterns given that value; the draws
    of the values where it reaches ``distance`` are counted. Outputs that differ only in their bits score high
    (−0.0 on one input, 0.0 on the other: distance 1); a sign of zero that follows the noise scores near 0.

    Example:
        >>> import numpy as np
        >>> signed = bitwise_only_draws(np.full((20, 1), -0.0), np.full((20, 1), 0.0))
        >>> signed, bitwise_only_draws(np.ones(5), np.ones(5))
        (40, 0)
    """
    sides = []
    for values in (first, second):
        matrix = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        rows = matrix[np.any((matrix == 0) | np.isnan(matrix), axis=1)]  # only zeros and NaNs hide bits
        if len(rows) < min_draws:
            return 0
        sides.append((row_hashes(rows), row_hashes(rows, bitwise=True)))
    found = 0
    for value in np.intersect1d(sides[0][0], sides[1][0]):
        patterns = [bits[hashes == value] for hashes, bits in sides]
        if min(p.size for p in patterns) < min_draws:
            continue
        seen = np.unique(np.concatenate(patterns))
        shares = [np.array([np.count_nonzero(p == b) for b in seen]) / p.size for p in patterns]
        if 0.5 * np.abs(shares[0] - shares[1]).sum() >= distance:
            found += patterns[0].size + patterns[1].size
    return found


def support_profile(values: np.ndarray, max_categories: int) -> tuple[int, float]:
    """(distinct rows, share of the draws covered by the ``max_categories`` most frequent rows)."""
    unique, counts = np.unique(row_hashes(values), return_counts=True)
    top = np.sort(counts)[::-1][:max_categories]
    return int(unique.size), float(top.sum() / max(len(values), 1))


@dataclass(frozen=True, slots=True, kw_only=True)
class RowFrequencyBinner(Binner):
    """Raw bin = index of the row's hash in ``table`` (sorted), or ``table.size`` (pooled)."""

    table: np.ndarray  # sorted uint64 hashes of the kept rows
    positions: np.ndarray  # table index → raw bin
    numeric_kind: str
    dimension: int
    bitwise: bool = False

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        hashes = row_hashes(numeric(outputs, self.numeric_kind, self.dimension, n), bitwise=self.bitwise)
        pooled = self.table.size
        if pooled == 0:
            return np.zeros(n, dtype=np.int64)
        where = np.minimum(np.searchsorted(self.table, hashes), pooled - 1)
        found = self.table[where] == hashes
        return np.where(found, self.positions[where], pooled).astype(np.int64)


def fit_joint_frequency(
    score: JointFrequency, fit: tuple[np.ndarray, np.ndarray], kind: str, dimension: int
) -> RowFrequencyBinner:
    """Freeze the row table and the ratio order on the fitting half of the pilot."""
    hashes = [row_hashes(side, bitwise=score.bitwise) for side in fit]
    unique, inverse = np.unique(np.concatenate(hashes), return_inverse=True)
    n0 = hashes[0].size
    counts = np.zeros((2, unique.size))
    np.add.at(counts[0], inverse[:n0], 1)
    np.add.at(counts[1], inverse[n0:], 1)
    keep = np.sort(np.argsort(-(counts[0] + counts[1]), kind="stable")[: score.max_categories])
    rest = np.setdiff1d(np.arange(unique.size), keep)
    positive = np.concatenate([counts[0, keep], [counts[0, rest].sum()]])
    negative = np.concatenate([counts[1, keep], [counts[1, rest].sum()]])
    estimate = log_ratio(positive, negative)
    if rest.size == 0:
        estimate[-1] = 0.0  # nothing pooled in the pilot: unseen rows carry no evidence either way
    order = np.argsort(estimate, kind="stable")
    rank = np.empty(estimate.size, dtype=np.int64)
    rank[order] = np.arange(estimate.size)
    label = "whole outputs" if kind == OutputKind.VECTOR else "outputs"
    if score.bitwise:
        label = f"the bit patterns of {label}"
    return RowFrequencyBinner(
        name=f"frequency ratio of {label} ({keep.size} kept, rest pooled; pilot)",
        kind="bit-pattern" if score.bitwise else "joint-frequency",
        rank=rank,
        cut_scores=estimate[order][1:].astype(float),
        table=unique[keep],
        positions=np.arange(keep.size, dtype=np.int64),
        numeric_kind=kind,
        dimension=dimension,
        bitwise=score.bitwise,
    )
