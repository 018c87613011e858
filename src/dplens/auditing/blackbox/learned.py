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

from dplens.auditing.blackbox.features import FeatureMap

__all__ = ["BoostedTrees", "LogisticRatio", "fit_boosted", "fit_logistic", "sklearn_available"]

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
        z = self.features(np.asarray(values, dtype=float).reshape(len(values), -1), squares=True)
        return ((z - self.centre) / self.scale) @ self.weights


@dataclass(frozen=True, slots=True)
class FeatureModelScore:
    """x ↦ the classifier's log-odds on the features."""

    features: FeatureMap
    model: Any

    def __call__(self, values: Any) -> np.ndarray:
        z = self.features(np.asarray(values, dtype=float).reshape(len(values), -1))
        with _one_thread():  # one thread per process: OpenMP spinning on a shared machine costs 10×+
            return np.asarray(self.model.decision_function(z), dtype=float).reshape(-1)


def fit_logistic(score: LogisticRatio, features: FeatureMap, fit: tuple[np.ndarray, np.ndarray]) -> FeatureLinearScore:
    """Ridge logistic regression by Newton's method on the features (and squares) of both pilot sides."""
    x = np.concatenate([features(side, squares=True) for side in fit])
    y = np.concatenate([np.ones(len(fit[0])), np.zeros(len(fit[1]))])
    centre, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = np.concatenate([np.ones((len(x), 1)), (x - centre) / scale], axis=1)
    w = np.zeros(z.shape[1])
    penalty = score.ridge * len(x) * np.eye(z.shape[1])
    penalty[0, 0] = 0.0
    with _one_thread():  # BLAS threads spinning on a shared machine cost more than they give
        for _ in range(30):
            p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -500, 500)))
            gradient = z.T @ (p - y) + penalty @ w
            hessian = (z * (p * (1 - p))[:, None]).T @ z + penalty + 1e-9 * np.eye(z.shape[1])
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

    x = np.concatenate([features(side) for side in fit])
    y = np.concatenate([np.ones(len(fit[0])), np.zeros(len(fit[1]))])
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
