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
from dplens.auditing.targets import load_target

__all__ = ["UserScore", "fit_user_score", "load_score"]

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
        return _user_function(self.score)(values)


def fit_user_score(score: UserScore, fit: tuple[Any, Any], kind: str, dimension: int) -> EdgeScoreBinner:
    """The user's score cut at quantiles of its values on the fitting half of the pilot (both sides pooled)."""
    if score.function is None and score.path is None:
        raise ValueError("UserScore needs a function or a path 'module:name'")
    if score.function is not None and not callable(score.function):
        raise ValueError(f"score function must be callable; got {score.function!r}")
    n_fit = len(fit[0])
    numeric_kind = None if kind == OutputKind.CATEGORICAL else kind
    call = _UserCall(score)
    probe_binner = edge_binner(score.name, "user-score", call, np.zeros(0), numeric_kind, dimension)
    fit_scores = np.concatenate([probe_binner.scores(side, n_fit) for side in fit])
    return edge_binner(
        f"user score {score.name}", "user-score", call, quantile_edges(fit_scores), numeric_kind, dimension
    )
