"""User scores: a function of the outputs the user supplies (``--score MODULE:NAME``), cut at pilot quantiles.

The function maps a batch of outputs to one number per output (higher = "from D"); it is frozen before the counted
trials, so thresholding it gives valid tests (Jagielski, Ullman, Oprea, NeurIPS 2020), and its thresholds are
placed at quantiles of its values on the fitting half of the pilot (:func:`~dplens.auditing.blackbox.base.
quantile_edges`). A path ``"module:name"`` is imported once per worker process; a failure inside the function is
reported in its own words, naming the score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import EdgeScoreBinner, OutputKind, edge_binner, quantile_edges
from dplens.auditing.host import host_value
from dplens.auditing.targets import load_target

__all__ = ["UserScore", "fit_user_score", "load_score", "user_score_values"]

_USER_FUNCTIONS: dict[str, Callable[[Any], Any]] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScore:
    """A user score ``function(outputs) -> scores`` (higher = "from D"); ``path`` ``"module:name"`` lets worker
    processes import it.

    Example:
        >>> UserScore(path="mechanisms:distance_score").name
        'mechanisms:distance_score'
    """

    function: Callable[[Any], Any] | None = None
    path: str | None = None

    @property
    def name(self) -> str:
        """The score's name in the result: its path, else the function's qualified name."""
        if self.path:
            return self.path
        return getattr(self.function, "__qualname__", repr(self.function))


def load_score(path: str) -> Callable[[Any], Any]:
    """Import a user score ``"module:name"`` (like a target); one-line ``ValueError`` when it is not there.

    Example:
        >>> load_score("math:fabs")(-2.0)
        2.0
    """
    target = load_target(path)
    return target.function


def _user_function(score: UserScore) -> Callable[[Any], Any]:
    if score.function is not None:
        return score.function
    if score.path not in _USER_FUNCTIONS:
        _USER_FUNCTIONS[score.path] = load_score(score.path)
    return _USER_FUNCTIONS[score.path]


@dataclass(frozen=True, slots=True)
class _UserCall:
    """A user score as a picklable callable (a path is imported once per worker process)."""

    score: UserScore

    def __call__(self, values: Any) -> Any:
        return host_value(_user_function(self.score)(values))  # a torch / JAX / CuPy result comes to host memory


def _binner(score: UserScore, kind: str, dimension: int, edges: np.ndarray, name: str) -> EdgeScoreBinner:
    if score.function is None and score.path is None:
        raise ValueError("UserScore needs a function or a path 'module:name'")
    if score.function is not None and not callable(score.function):
        raise ValueError(f"score function must be callable; got {score.function!r}")
    numeric_kind = None if kind == OutputKind.CATEGORICAL else kind
    return edge_binner(name, "user-score", _UserCall(score), edges, numeric_kind, dimension)


def user_score_values(score: UserScore, outputs: Any, n: int, *, kind: str, dimension: int) -> np.ndarray:
    """The user score of a batch of ``n`` outputs (one number each, checked).

    Example:
        >>> user_score_values(UserScore(function=lambda x: x * 2), [1.0, 2.0], 2, kind="real", dimension=1).tolist()
        [2.0, 4.0]
    """
    return _binner(score, kind, dimension, np.zeros(0), score.name).scores(outputs, n)


def fit_user_score(
    score: UserScore, fit: tuple[Any, Any], kind: str, dimension: int, *, values: Any = None
) -> EdgeScoreBinner:
    """The user's score cut at quantiles of its values on the fitting half of the pilot (both sides pooled);
    ``values``: those values when they were taken as the draws arrived (wide outputs), else computed on ``fit``."""
    if values is None:
        values = [user_score_values(score, side, len(fit[0]), kind=kind, dimension=dimension) for side in fit]
    edges = quantile_edges(np.concatenate(values))
    return _binner(score, kind, dimension, edges, f"user score {score.name}")
