"""Tuning studies in the ledger: a release whose events hold a repeat-and-select is a hyperparameter search of a
random number of runs, only the best released, charged as ONE release (issue 49).

Papernot & Steinke, "Hyperparameter Tuning with Renyi Differential Privacy" (ICLR 2022, Thms 2 and 6): the study's
ε (the :class:`~dplens.accountant.selection.RepeatAndSelect` event's, composed like any other by the budget's rule)
covers every run of the search and the selection; charging the runs one by one would compose them instead. This
module reads the stored events only (no SQL, no privacy quantity): what the study was — its runs on average, their
distribution, the run's event and its privacy unit — for ``dplens budget status``.

Example:
    >>> from dplens.accountant import events as ev
    >>> from dplens.accountant.selection import RepeatAndSelect
    >>> run = ev.Gaussian(noise_multiplier=4.0)
    >>> [s["distribution"] for s in tuning_studies([(RepeatAndSelect(event=run, mean=10.0, shape=1.0), 1)])]
    ['geometric']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dplens.accountant import events as ev

__all__ = ["MARKER", "distribution_name", "study_words", "tuning_studies"]

#: The event type name a stored release's JSON holds when it is a study (a cheap test before decoding).
MARKER = "RepeatAndSelect"


def distribution_name(shape: float) -> str:
    """The number of runs' distribution of a truncated-negative-binomial shape η (PS22: η = 1 geometric, 0
    logarithmic, ∞ Poisson)."""
    if math.isinf(shape):
        return "poisson"
    if shape == 1:
        return "geometric"
    if shape == 0:
        return "logarithmic"
    return f"truncated-negative-binomial (eta = {shape:g})"


def _unit(run: ev.Event) -> dict[str, Any]:
    from dplens.accountant.user_level import UserLevelRun

    if isinstance(run, UserLevelRun):
        return {
            "privacy_unit": "user",
            "max_examples_per_user": run.max_examples_per_user,
            "user_sampling": run.user_sampling,
        }
    return {"privacy_unit": "example" if type(run).__name__ == "DpSgdRun" else None}


def _walk(event: ev.Event, count: int, out: list[dict[str, Any]]) -> None:
    from dplens.accountant.selection import RepeatAndSelect

    if isinstance(event, RepeatAndSelect):
        out.append(
            {
                "mean_runs": float(event.mean),
                "distribution": distribution_name(float(event.shape)),
                "shape": None if math.isinf(event.shape) else float(event.shape),
                "count": count,
                "run": type(event.event).__name__,
                **_unit(event.event),
                "selection": "best run released",
            }
        )
    elif isinstance(event, ev.SelfComposed):
        _walk(event.event, count * int(event.count), out)
    elif isinstance(event, ev.Composed):
        for inner in event.events:
            _walk(inner, count, out)


def tuning_studies(entries: Sequence[tuple[ev.Event, int]]) -> list[dict[str, Any]]:
    """The tuning studies among a release's events (empty: not a study): per study its ``mean_runs``,
    ``distribution``, ``shape`` (None for Poisson), ``count`` (studies of this kind), ``run`` (the run's event type),
    ``privacy_unit`` and ``selection``."""
    out: list[dict[str, Any]] = []
    for event, count in entries:
        _walk(event, int(count), out)
    return out


def study_words(studies: Sequence[dict[str, Any]]) -> str:
    """The studies of one release in words."""
    parts = []
    for study in studies:
        unit = f", {study['privacy_unit']}-level" if study.get("privacy_unit") else ""
        repeated = f" x{study['count']}" if study["count"] != 1 else ""
        parts.append(
            f"tuning study of {study['mean_runs']:g} runs on average ({study['distribution']}) of {study['run']}"
            f"{unit}, best run released{repeated}"
        )
    return "; ".join(parts) + " (charged as one release, the selection included)"
