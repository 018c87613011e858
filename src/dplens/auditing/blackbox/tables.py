"""Table scores of scalar and categorical outputs: the pilot's log frequency ratio per category or per bin.

For a discrete mechanism the optimal test between M(D) and M(D′) rejects on the outputs o with the largest ratio
P[M(D) = o] / P[M(D′) = o] (Neyman–Pearson); the table estimates each category's (or each histogram bin's) ratio
on the fitting half of the pilot (add-½ smoothing, Krichevsky–Trofimov) and the thresholds cut the bins in ratio
order (StatDP, Ding et al., CCS 2018, §4, searches such output events by hand). Two families:

- :class:`FrequencyRatio` — categorical outputs: one bin per category (at most ``max_categories``; unseen and rare
  categories share one bin);
- :class:`HistogramRatio` — numeric scalars: one bin per value the pilot saw for integer outputs with a small
  range, else bins at pooled pilot quantiles.

A table's order is a function of pilot counts only, so it may be re-estimated on more of the pilot
(:func:`rerank`) without touching the validity of the counted trials' bounds (Jagielski, Ullman, Oprea, NeurIPS
2020: any test fixed before the counted draws is valid).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import Binner, OutputKind, Skipped, log_ratio, numeric, ordered

__all__ = [
    "RERANKED",
    "RERANK_MAX_BINS",
    "CategoryBinner",
    "EdgeBinner",
    "FrequencyRatio",
    "HistogramRatio",
    "fit_frequency_ratio",
    "fit_histogram_ratio",
    "output_key",
    "rerank",
]

#: The families whose order is a pilot frequency table (re-ranked on the whole pilot once the selection half is in).
RERANKED = ("frequency-ratio", "histogram-ratio", "joint-frequency", "bit-pattern")
#: Larger tables are re-ranked on part of the pilot and predicted on the rest (in-sample predictions over many bins
#: are too optimistic).
RERANK_MAX_BINS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class FrequencyRatio:
    """Categorical outputs: the log frequency ratio per category, estimated on the pilot (at most
    ``max_categories`` categories; the rest share one bin).

    Example:
        >>> FrequencyRatio().max_categories
        256
    """

    max_categories: int = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class HistogramRatio:
    """Numeric scalars: the log frequency ratio per bin (``bins`` pooled-quantile bins, or one bin per integer
    for integer outputs spanning at most ``max_integer_bins`` values).

    Example:
        >>> HistogramRatio(bins=16).bins
        16
    """

    bins: int = 64
    max_integer_bins: int = 512


def output_key(output: Any) -> Any:
    """A hashable key of one output (arrays by shape, dtype and bytes; unhashable objects by ``repr``).

    Example:
        >>> output_key([1, "a"]), output_key({"x": 1})
        ((1, 'a'), "{'x': 1}")
    """
    if isinstance(output, np.ndarray):
        return (output.shape, output.dtype.str, output.tobytes())
    if isinstance(output, list):
        return tuple(output_key(o) for o in output)
    if isinstance(output, np.generic):
        return output.item()
    try:
        hash(output)
    except TypeError:
        return repr(output)
    return output


@dataclass(frozen=True, slots=True, kw_only=True)
class CategoryBinner(Binner):
    """Raw bin = the category's index in ``table``; unseen categories → ``len(table)``."""

    table: dict[Any, int]

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        other = len(self.table)
        return np.fromiter((self.table.get(output_key(o), other) for o in outputs), dtype=np.int64, count=n)


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeBinner(Binner):
    """Raw bin = the number of ``edges`` at or below the output (a histogram of scalar outputs)."""

    edges: np.ndarray
    dimension: int = 1

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        values = numeric(outputs, OutputKind.REAL, 1, n)
        return np.searchsorted(self.edges, values, side="right").astype(np.int64)


def fit_frequency_ratio(score: FrequencyRatio, fit: tuple[Any, Any]) -> CategoryBinner:
    """Freeze the category table and its ratio order on the fitting half of the pilot (both sides' outputs)."""
    keys = [[output_key(o) for o in side] for side in fit]
    counts: dict[Any, list[int]] = {}
    for side, values in enumerate(keys):
        for k in values:
            counts.setdefault(k, [0, 0])[side] += 1
    common = sorted(counts, key=lambda k: -(counts[k][0] + counts[k][1]))[: score.max_categories]
    table = {k: i for i, k in enumerate(common)}
    positive = np.array([counts[k][0] for k in common] + [0], dtype=float)
    negative = np.array([counts[k][1] for k in common] + [0], dtype=float)
    estimate = log_ratio(positive, negative)
    estimate[-1] = 0.0  # unseen categories: no evidence either way
    return CategoryBinner(**ordered("frequency ratio (pilot)", "frequency-ratio", estimate), table=table)


def fit_histogram_ratio(score: HistogramRatio, fit: tuple[Any, Any], kind: str) -> EdgeBinner | Skipped:
    """Freeze the histogram's edges and its ratio order on the fitting half of the pilot (scalar outputs)."""
    if kind not in (OutputKind.INTEGER, OutputKind.REAL):
        return Skipped(f"HistogramRatio needs scalar numbers; the outputs are {kind}")
    n_fit = len(fit[0])
    values = [numeric(side, kind, 1, n_fit) for side in fit]
    pooled = np.concatenate(values)
    low, high = float(pooled.min()), float(pooled.max())
    integral = kind == OutputKind.INTEGER or bool(np.all(pooled == np.round(pooled)))
    per_integer = integral and high - low <= score.max_integer_bins
    if per_integer:
        # One bin per value the pilot saw (a snapping mechanism's multiples of 16, not every integer between
        # them): few bins are re-ranked on the whole pilot; unseen values join a neighbour.
        seen = np.unique(pooled)
        edges = (seen[:-1] + seen[1:]) / 2.0
    else:
        edges = np.unique(np.quantile(pooled, np.linspace(0, 1, score.bins + 1)[1:-1]))
    if edges.size == 0:
        return Skipped("HistogramRatio: the pilot outputs are all equal")
    positive = np.bincount(np.searchsorted(edges, values[0], side="right"), minlength=edges.size + 1)
    negative = np.bincount(np.searchsorted(edges, values[1], side="right"), minlength=edges.size + 1)
    estimate = log_ratio(positive.astype(float), negative.astype(float))
    label = "per integer" if per_integer else "pooled quantiles"
    return EdgeBinner(**ordered(f"histogram ratio ({label}, pilot)", "histogram-ratio", estimate), edges=edges)


def rerank(binner: Binner, raw: np.ndarray) -> Binner:
    """The same table ordered by the log frequency ratio of more of the pilot (``raw``: counts of shape (2, raw
    bins)): a table's order is only a function of pilot counts, so re-estimating it on more pilot draws keeps every
    bound valid and halves the variance of the order. Predictions on the same draws become in-sample, an optimism
    that can only cost power and stays mild for tables of at most :data:`RERANK_MAX_BINS` bins."""
    estimate = log_ratio(raw[0].astype(float), raw[1].astype(float))
    estimate[(raw[0] + raw[1]) == 0] = 0.0  # bins the pilot never saw (pooled or empty): no evidence either way
    fields = ordered(binner.name, binner.kind, estimate)
    return dataclasses.replace(binner, rank=fields["rank"], cut_scores=fields["cut_scores"])
