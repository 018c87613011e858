"""One coordinate as a score: for wide outputs, the strongest screened coordinate and the mean-difference projection.

A learned score over every kept coordinate of a wide output (:mod:`dplens.auditing.stages.reduction`) pays for its
many weights with the pilot's noise; when one coordinate carries the difference (a sensitivity slipped on one
coordinate of a gradient) that coordinate alone is the likelihood-ratio statistic, and when every coordinate
carries a little (a canary gradient spread out) the projection on the mean difference is (Fisher's linear
discriminant). Each is a fixed function of the output, cut at quantiles of its values on the fitting pilot, so its
tests are valid whatever the screening chose (Jagielski, Ullman, Oprea, NeurIPS 2020).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import EdgeScoreBinner, OutputKind, edge_binner, numeric, quantile_edges

__all__ = ["CoordinateScore", "fit_coordinate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinateScore:
    """The value of coordinate ``index`` of the (reduced) outputs as a score; ``label`` names it in the result.

    Example:
        >>> CoordinateScore(index=3, label="the mean-difference projection").index
        3
    """

    index: int
    label: str = ""


@dataclass(frozen=True, slots=True)
class _Column:
    """outputs (n, d) → their ``index``-th coordinate (picklable for worker processes)."""

    index: int

    def __call__(self, values: Any) -> np.ndarray:
        return np.asarray(values, dtype=float)[:, self.index]


def fit_coordinate(score: CoordinateScore, fit: tuple[Any, Any], *, dimension: int) -> EdgeScoreBinner:
    """The coordinate cut at quantiles of its values on the fitting draws (both sides pooled)."""
    n_fit = len(fit[0])
    values = np.concatenate([numeric(side, OutputKind.VECTOR, dimension, n_fit)[:, score.index] for side in fit])
    name = f"{score.label or f'coordinate {score.index} of the outputs'}, pilot quantiles"
    column = _Column(score.index)
    return edge_binner(name, "coordinate", column, quantile_edges(values), OutputKind.VECTOR, dimension)
