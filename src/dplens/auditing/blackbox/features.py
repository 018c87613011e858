"""The feature map of numeric outputs for learned scores: atom/sentinel indicators beside the values.

Mechanisms mix real answers with special values: the sparse vector's −1000 ("below") and −2000 ("aborted"),
NumericalSVT's 0 and −1000, NaN or None for an abort. A linear or quadratic score on the raw numbers cannot treat
−1000 as a category (DP-Sniper, Bichsel et al., S&P 2021, §6.1, adds such indicator features by hand per
mechanism). Here the atoms are found on the fitting half of the pilot: per coordinate, every non-finite value and
every value repeated in at least ``min_share`` of the draws (at most ``max_atoms`` per coordinate, most frequent
first). The features are one indicator per atom, the coordinate's value with its atoms replaced by the mean of the
other values (so a sentinel does not dominate a regression), and the differences of neighbouring real coordinates
(running sums such as PrefixSum carry their information in increments). Learned scores may add squares.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FeatureMap", "fit_feature_map"]


@dataclass(frozen=True, slots=True)
class FeatureMap:
    """Frozen on the pilot; maps an (n, d) float array to an (n, k) feature matrix."""

    dimension: int
    atoms: tuple[np.ndarray, ...]  # per coordinate: finite atom values (non-finite values are always atoms)
    nonfinite: tuple[bool, ...]  # per coordinate: add an indicator of non-finite values
    fill: np.ndarray  # per coordinate: the value put in place of atoms
    real: np.ndarray  # coordinates with real (non-atom) values
    pairs: np.ndarray  # (m, 2) neighbouring real coordinates whose difference is a feature

    @property
    def has_atoms(self) -> bool:
        return any(a.size for a in self.atoms) or any(self.nonfinite)

    def __call__(self, values: np.ndarray, *, squares: bool = False) -> np.ndarray:
        x = np.asarray(values, dtype=float).reshape(len(values), self.dimension)
        columns = []
        cleaned = np.empty_like(x)
        for j in range(self.dimension):
            column = x[:, j]
            finite = np.isfinite(column)
            is_atom = ~finite
            if self.nonfinite[j]:
                columns.append(is_atom.astype(float))
            categorical = j not in self.real and not self.nonfinite[j]
            for k, value in enumerate(self.atoms[j]):
                hit = column == value
                if not (categorical and k == 0):  # a categorical column's first indicator is implied by the rest
                    columns.append(hit.astype(float))
                is_atom |= hit
            cleaned[:, j] = np.where(is_atom, self.fill[j], column)
        real = cleaned[:, self.real]
        columns.extend(real.T)
        if self.pairs.size:
            columns.extend((cleaned[:, self.pairs[:, 1]] - cleaned[:, self.pairs[:, 0]]).T)
        if squares:
            columns.extend((real * real).T)
        if not columns:
            return np.zeros((len(x), 1))
        return np.stack(columns, axis=1)


def fit_feature_map(
    values: np.ndarray, *, min_share: float = 0.005, max_atoms: int = 8, differences: bool = True
) -> FeatureMap:
    """Find the atoms of every coordinate on pooled pilot outputs ``values`` (n, d)."""
    x = np.asarray(values, dtype=float).reshape(len(values), -1)
    n, d = x.shape
    atoms, nonfinite, fill, real = [], [], np.zeros(d), []
    threshold = max(min_share * n, 5)
    for j in range(d):
        column = x[:, j]
        finite = np.isfinite(column)
        nonfinite.append(bool((~finite).any()))
        unique, counts = np.unique(column[finite], return_counts=True)
        frequent = counts >= threshold
        order = np.argsort(-counts[frequent], kind="stable")[:max_atoms]
        chosen = unique[frequent][order]
        if unique.size and unique.size <= max_atoms and frequent.all():
            chosen = unique  # a categorical coordinate (flags): every value is an atom, none is "real"
        atoms.append(np.sort(chosen))
        rest = finite & ~np.isin(column, chosen)
        if rest.any():
            real.append(j)
            fill[j] = float(column[rest].mean())
    real_index = np.asarray(real, dtype=np.int64)
    pairs = np.zeros((0, 2), dtype=np.int64)
    if differences and real_index.size >= 2:
        adjacent = real_index[1:] == real_index[:-1] + 1
        pairs = np.stack([real_index[:-1][adjacent], real_index[1:][adjacent]], axis=1)
    return FeatureMap(
        dimension=d, atoms=tuple(atoms), nonfinite=tuple(nonfinite), fill=fill, real=real_index, pairs=pairs
    )
