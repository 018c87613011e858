"""The black-box score interface: a score frozen before the counted trials, as raw bins ranked by the score.

A *binner* maps a batch of outputs to raw bin indices in ``[0, raw_size)`` (what each chunk counts: memory stays
flat in the number of trials) and each raw bin to a rank in ``[0, ranks)`` ordered by the score; a threshold
between ranks r − 1 and r is the test "rank ≥ r ⇒ D" (Jagielski, Ullman, Oprea, NeurIPS 2020: any score fixed
before the counted draws gives valid Clopper–Pearson bounds on its tests). Every family (frequency, learned
density ratio, float reachability, user scores) is a binner, so the game and the Bonferroni split never know which
score they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing import bounds as bd

__all__ = [
    "Binner",
    "EdgeScoreBinner",
    "OutputKind",
    "Skipped",
    "edge_binner",
    "log_ratio",
    "numeric",
    "ordered",
    "quantile_edges",
]


class OutputKind:
    """How the target's outputs were read (from the pilot)."""

    CATEGORICAL = "categorical"
    INTEGER = "integer"
    REAL = "real"
    VECTOR = "vector"


def numeric(outputs: Any, kind: str, dimension: int, n: int) -> np.ndarray:
    """The outputs as floats of shape (n,) or (n, dimension); ``None`` entries become NaN (an atom)."""
    try:
        array = np.asarray(outputs, dtype=float)
    except (ValueError, TypeError):
        try:
            array = np.asarray(outputs, dtype=object)
            array = np.where(array == None, np.nan, array).astype(float)  # noqa: E711 - elementwise None test
        except (ValueError, TypeError):
            raise ValueError(f"the target's outputs changed type during the audit (expected {kind} numbers)") from None
    shape = (n,) if kind != OutputKind.VECTOR else (n, dimension)
    if array.size != n * max(dimension, 1):
        raise ValueError(f"the target's outputs changed shape during the audit (expected {shape})")
    return array.reshape(shape)


@dataclass(frozen=True, slots=True, kw_only=True)
class Binner:
    """Raw bins (what is counted) mapped to ranks ordered by score (what the thresholds cut)."""

    name: str
    kind: str
    rank: np.ndarray  # raw bin → rank in [0, B)
    cut_scores: np.ndarray  # B − 1 score values at which ranks 1..B−1 start (reported thresholds)

    @property
    def raw_size(self) -> int:
        return int(self.rank.size)

    @property
    def ranks(self) -> int:
        return int(self.cut_scores.size) + 1

    def rate_counts(self, raw: np.ndarray) -> bd.RateCounts:
        """RateCounts from raw counts of shape (2, raw_size)."""
        ranked = np.zeros((2, self.ranks), dtype=np.int64)
        for side in range(2):
            np.add.at(ranked[side], self.rank, raw[side])
        return bd.RateCounts(thresholds=self.cut_scores, positives=ranked[0], negatives=ranked[1])

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:  # pragma: no cover - every family overrides it
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Skipped:
    """A score that cannot be fitted on these outputs, and why (the audit reports ``note`` and goes on without it).

    Example:
        >>> Skipped("HistogramRatio needs scalar numbers; the outputs are vector").note
        'HistogramRatio needs scalar numbers; the outputs are vector'
    """

    note: str


def log_ratio(positive: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Smoothed log frequency ratio per bin (add-½ to every bin, Krichevsky–Trofimov).

    Example:
        >>> import numpy as np
        >>> [round(float(v), 3) for v in log_ratio(np.array([3.0, 1.0]), np.array([1.0, 3.0]))]
        [0.847, -0.847]
    """
    p = (positive + 0.5) / (positive.sum() + 0.5 * positive.size)
    q = (negative + 0.5) / (negative.sum() + 0.5 * negative.size)
    return np.log(p) - np.log(q)


def ordered(name: str, kind: str, scores: np.ndarray, **extra: Any) -> dict[str, Any]:
    """The :class:`Binner` fields of raw bins with estimated ``scores``: ``rank`` (ascending score; ties kept in raw
    order) and the ``cut_scores`` between ranks.

    Example:
        >>> import numpy as np
        >>> fields = ordered("t", "table", np.array([0.5, -1.0, 2.0]))
        >>> fields["rank"].tolist(), fields["cut_scores"].tolist()
        ([1, 0, 2], [0.5, 2.0])
    """
    order = np.argsort(scores, kind="stable")
    rank = np.empty(scores.size, dtype=np.int64)
    rank[order] = np.arange(scores.size)
    return {"name": name, "kind": kind, "rank": rank, "cut_scores": scores[order][1:].astype(float), **extra}


def quantile_edges(scores: np.ndarray, *, interior: int = 128, tail: int = 24) -> np.ndarray:
    """Thresholds at pooled quantiles of fitted scores: ``interior`` evenly spaced levels plus ``tail`` levels on a
    log scale in each tail (10⁻⁵ … 0.05), so both the bulk and the extreme-ratio tails can be cut."""
    finite = scores[np.isfinite(scores)]
    if finite.size == 0:
        return np.zeros(0)
    levels = np.concatenate(
        [np.linspace(0, 1, interior + 1)[1:-1], np.logspace(-5, np.log10(0.05), tail), 1 - np.logspace(-5, -1.3, tail)]
    )
    levels = np.unique(np.clip(levels, 0, 1))
    return np.unique(np.quantile(finite, levels))


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeScoreBinner(Binner):
    """A fitted real-valued score cut at fixed ``edges`` (raw bin = number of edges ≤ score; ranks = raw bins)."""

    function: Any  # outputs (numeric array, or as they came when ``numeric_kind`` is None) → one score per output
    edges: np.ndarray
    numeric_kind: str | None
    dimension: int = 1

    def scores(self, outputs: Any, n: int) -> np.ndarray:
        values = outputs if self.numeric_kind is None else numeric(outputs, self.numeric_kind, self.dimension, n)
        try:
            scores = np.asarray(self.function(values), dtype=float).reshape(-1)
        except Exception as err:
            raise ValueError(f"score {self.name} failed: {type(err).__name__}: {err}") from err
        if scores.size != n or np.isnan(scores).any():
            raise ValueError(f"score {self.name} must return one number (not NaN) per output; got {scores.size}")
        return scores

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        return np.searchsorted(self.edges, self.scores(outputs, n), side="right").astype(np.int64)


def edge_binner(name: str, kind: str, function: Any, edges: np.ndarray, numeric_kind: str | None, dimension: int):
    """An :class:`EdgeScoreBinner` whose ranks are its raw bins."""
    return EdgeScoreBinner(
        name=name,
        kind=kind,
        rank=np.arange(edges.size + 1),
        cut_scores=np.asarray(edges, dtype=float),
        function=function,
        edges=np.asarray(edges, dtype=float),
        numeric_kind=numeric_kind,
        dimension=dimension,
    )
