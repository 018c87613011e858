"""Learned density-ratio scores: ridge logistic regression and gradient-boosted trees on the feature map.

A classifier trained to tell M(D) from M(D′) estimates the posterior p(D | o), a monotone function of the
likelihood ratio; thresholding it gives the tests of the audit (DP-Sniper, Bichsel et al., S&P 2021, §4–5: the
optimal attack is a threshold on the posterior; any fixed classifier gives a valid attack). Two classifiers:

- :class:`LogisticRatio` — ridge logistic regression on the features and their squares (DP-Sniper's logistic
  variant, with the atom indicators of :mod:`.features`); exact for independent bits (RAPPOR) and Gaussian shifts;
- :class:`BoostedTrees` — scikit-learn's ``HistGradientBoostingClassifier`` (Friedman 2001; the LightGBM-style
  histogram algorithm of Ke et al. 2017): nonlinear, handles sentinels and interactions (sparse-vector outputs,
  maxima), trains on 10⁵ rows in about a second and predicts several 10⁶ rows a second. It runs on one thread
  per process (threadpoolctl): OpenMP threads spinning on a shared machine were 10–16× slower; parallelism comes
  from the audit's worker processes. Needs the
  ``dplens[learned]`` extra (scikit-learn); without it the score is skipped with a note.

Both are fitted on the fitting half of the pilot only; the score is the classifier's log-odds.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import EdgeScoreBinner, OutputKind, Skipped, edge_binner, numeric, quantile_edges
from dplens.auditing.blackbox.features import FeatureMap

__all__ = ["BoostedTrees", "LogisticRatio", "fit_boosted", "fit_learned", "fit_logistic", "sklearn_available"]

MISSING_SKLEARN = "the boosted-trees score needs scikit-learn: pip install 'dplens[learned]'"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogisticRatio:
    """Ridge logistic regression on the features of the outputs (values, squares, atom indicators, neighbouring
    differences), fitted on the pilot (a density-ratio estimate; Bichsel et al. 2021)."""

    ridge: float = 1e-3


@dataclass(frozen=True, slots=True, kw_only=True)
class BoostedTrees:
    """Gradient-boosted trees (scikit-learn ``HistGradientBoostingClassifier``) on the features, fitted on the
    pilot with early stopping on a tenth of it. Needs ``dplens[learned]``."""

    max_iter: int = 80
    max_leaf_nodes: int = 31
    learning_rate: float = 0.1


def _one_thread() -> Any:
    """Limit BLAS/OpenMP to one thread (threadpoolctl, installed with scikit-learn; a no-op without it)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1)


def sklearn_available() -> bool:
    """Whether scikit-learn (the ``[learned]`` extra) can be imported; without it the boosted-trees score is skipped."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class FeatureLinearScore:
    """x ↦ standardised features · weights (picklable, for worker processes)."""

    features: FeatureMap
    weights: np.ndarray
    centre: np.ndarray
    scale: np.ndarray

    def __call__(self, values: Any) -> np.ndarray:
        x = np.asarray(values, dtype=float).reshape(len(values), -1)
        out = np.empty(len(x))
        for begin in range(0, len(x), CHUNK_ROWS):  # chunks: the feature matrix of a big batch is never whole
            z = self.features(x[begin : begin + CHUNK_ROWS], squares=True)
            out[begin : begin + len(z)] = ((z - self.centre) / self.scale) @ self.weights
        return out


@dataclass(frozen=True, slots=True)
class FeatureModelScore:
    """x ↦ the classifier's log-odds on the features."""

    features: FeatureMap
    model: Any

    def __call__(self, values: Any) -> np.ndarray:
        x = np.asarray(values, dtype=float).reshape(len(values), -1)
        out = np.empty(len(x))
        with _one_thread():  # one thread per process: OpenMP spinning on a shared machine costs 10×+
            for begin in range(0, len(x), CHUNK_ROWS):
                z = self.features(x[begin : begin + CHUNK_ROWS])
                out[begin : begin + len(z)] = np.asarray(self.model.decision_function(z), dtype=float).reshape(-1)
        return out


CHUNK_ROWS = 32_768  # rows of the design matrix built at a time: the fit's memory does not grow with the pilot
TREE_FEATURE_BYTES = 96 * 2**20  # the boosted trees see at most this much feature matrix (rows subsampled evenly)


def _chunks(fit: tuple[np.ndarray, np.ndarray]):
    """(values, labels) in chunks of at most ``CHUNK_ROWS`` rows: D's rows (label 1), then D′'s (label 0)."""
    for side, label in ((fit[0], 1.0), (fit[1], 0.0)):
        for begin in range(0, len(side), CHUNK_ROWS):
            block = side[begin : begin + CHUNK_ROWS]
            yield block, np.full(len(block), label)


def tree_rows(fit: tuple[np.ndarray, np.ndarray], width: int) -> tuple[np.ndarray, np.ndarray]:
    """The pilot rows the boosted trees are fitted on: every k-th row of each side, so that the two sides' feature
    matrices (``width`` float64 columns) take at most :data:`TREE_FEATURE_BYTES` (at least 1 000 rows a side)."""
    rows = max(1_000, TREE_FEATURE_BYTES // (8 * max(width, 1) * 2))
    return fit[0][:: max(1, -(-len(fit[0]) // rows))], fit[1][:: max(1, -(-len(fit[1]) // rows))]


def fit_logistic(score: LogisticRatio, features: FeatureMap, fit: tuple[np.ndarray, np.ndarray]) -> FeatureLinearScore:
    """Ridge logistic regression by Newton's method on the features (and squares) of both pilot sides.

    The design matrix is never held whole: the standardisation, the gradient and the Hessian are sums over chunks
    of rows, so the fit needs memory for one chunk and the k × k Hessian, whatever the pilot's size."""
    n = len(fit[0]) + len(fit[1])
    total = total_squares = None
    for block, _ in _chunks(fit):
        x = features(block, squares=True)
        total = x.sum(axis=0) if total is None else total + x.sum(axis=0)
        squared = np.square(x).sum(axis=0)
        total_squares = squared if total_squares is None else total_squares + squared
    centre = total / n
    scale = np.sqrt(np.maximum(total_squares / n - np.square(centre), 0.0))
    scale = np.where(scale > 1e-12 * np.maximum(np.abs(centre), 1.0), scale, 1.0)
    k = centre.size + 1
    w = np.zeros(k)
    penalty = score.ridge * n * np.eye(k)
    penalty[0, 0] = 0.0
    with _one_thread():  # BLAS threads spinning on a shared machine cost more than they give
        for _ in range(30):
            gradient = penalty @ w
            hessian = penalty + 1e-9 * np.eye(k)
            for block, y in _chunks(fit):
                z = np.concatenate([np.ones((len(block), 1)), (features(block, squares=True) - centre) / scale], axis=1)
                p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -500, 500)))
                gradient += z.T @ (p - y)
                hessian += (z * (p * (1 - p))[:, None]).T @ z
            step = np.linalg.solve(hessian, gradient)
            w -= step
            if np.max(np.abs(step)) < 1e-7:
                break
    return FeatureLinearScore(features, w[1:], centre, scale)


def fit_boosted(
    score: BoostedTrees, features: FeatureMap, fit: tuple[np.ndarray, np.ndarray], *, seed: int
) -> FeatureModelScore:
    """Fit the boosted trees on the features of both pilot sides (``random_state`` from the audit's seed)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    # At most TREE_FEATURE_BYTES of features: a wide output (20 coordinates with sentinels: ~80 features) keeps
    # every k-th pilot row instead of all of them, so the fit's memory is capped whatever the trials.
    kept = tree_rows(fit, features(fit[0][:1]).shape[1])
    x = np.concatenate([features(side) for side in kept])
    y = np.concatenate([np.ones(len(kept[0])), np.zeros(len(kept[1]))])
    model = HistGradientBoostingClassifier(
        max_iter=score.max_iter,
        max_leaf_nodes=score.max_leaf_nodes,
        learning_rate=score.learning_rate,
        early_stopping=True,
        validation_fraction=0.1,
        n_iter_no_change=8,
        l2_regularization=1.0,
        random_state=seed % (2**32),
    )
    with _one_thread():
        model.fit(x, y)
    return FeatureModelScore(features, model)


def fit_learned(
    score: LogisticRatio | BoostedTrees,
    fit: tuple[Any, Any],
    *,
    kind: str,
    dimension: int,
    features: FeatureMap,
    seed: int,
) -> EdgeScoreBinner | Skipped:
    """The learned score fitted on the fitting half of the pilot (``features``: the pooled pilot's feature map),
    cut at quantiles of its values there; or why it cannot run (categories, or no scikit-learn for the trees)."""
    if kind == OutputKind.CATEGORICAL:
        return Skipped(f"{type(score).__name__} needs numeric outputs")
    if isinstance(score, BoostedTrees) and not sklearn_available():
        return Skipped(MISSING_SKLEARN)
    n_fit = len(fit[0])
    values = [numeric(side, kind, dimension, n_fit).reshape(n_fit, -1) for side in fit]
    described = "values, squares" + (", atom indicators" if features.has_atoms else "")
    described += ", neighbouring differences" if features.pairs.size else ""
    if isinstance(score, LogisticRatio):
        fitted: Any = fit_logistic(score, features, (values[0], values[1]))
        name, family = f"logistic density ratio on ({described}), pilot", "logistic-ratio"
    else:
        fitted = fit_boosted(score, features, (values[0], values[1]), seed=seed)
        name, family = "gradient-boosted trees (scikit-learn HistGradientBoosting), pilot", "boosted-trees"
    fit_scores = np.concatenate([fitted(v) for v in values])
    return edge_binner(name, family, fitted, quantile_edges(fit_scores), kind, dimension)
