"""Stage 1 for wide outputs: profile outputs of many coordinates without ever holding them whole.

For outputs of more than :data:`~dplens.auditing.stages.memory.MAX_WHOLE_COORDINATES` coordinates the fitting
half of the pilot is drawn in batches (the memory plan's size) and read twice over, each draw once:

1. the first half (spawn keys (0, 21, side)) is folded into per-coordinate statistics
   (:class:`~dplens.auditing.stages.reduction.Screening`), and the reduction is frozen on them
   (:func:`~dplens.auditing.stages.reduction.screen`: the coordinates the float checks read, the most different
   coordinates, and the mean-difference projection);
2. the second half (spawn keys (0, 26, side)) is reduced as it arrives; the scores are fitted on the reduced draws
   (and the user's scores, which read whole outputs, on their values, taken as the draws arrived).

The rest of the audit sees the reduced outputs through the same :class:`~dplens.auditing.stages.reduction.Reduction`.
When the budget leaves no room for the statistics (:attr:`~dplens.auditing.stages.memory.MemoryPlan.screening`),
only the user's scores run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import OutputKind, numeric
from dplens.auditing.blackbox.reachability import queries_of
from dplens.auditing.blackbox.user import UserScore, user_score_values
from dplens.auditing.floats import ProbeResult
from dplens.auditing.stages.checks import Checked
from dplens.auditing.stages.float_models import inputs_as_queries
from dplens.auditing.stages.memory import MemoryPlan
from dplens.auditing.stages.pilot import DISCRETE_PILOT_FRACTION, PILOT_FRACTION
from dplens.auditing.stages.profile import (
    OutputProfile,
    Profiled,
    discrete_pilot,
    models_of,
    pilot_plan,
    profile_of,
)
from dplens.auditing.stages.reduction import Reduction, Screening, draw_in_batches, screen
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import Target

__all__ = ["profile_wide"]

_FITTING_PART = 5  # the reduced fitting draws' streams: spawn keys (0, 21 + 5, side)


def _reduction(
    target: Target, checked: Checked, setting: AuditSetting, plan: MemoryPlan, rows: int
) -> tuple[Reduction, bool]:
    """The reduction frozen on ``rows`` screening draws per side, and whether every finite entry was an integer
    (the statistics are dropped on return: only the reduction goes on)."""
    dimension = plan.size.dimension
    screening = Screening(dimension)
    batches = draw_in_batches(target, checked.pair, seed=setting.seed, rows=rows, batch_rows=plan.batch_rows, part=0)
    for side, outputs, n in batches:
        screening.add(side, numeric(outputs, OutputKind.VECTOR, dimension, n))
    return screen(screening, _candidate_queries(checked, dimension)), screening.integral


def _candidate_queries(checked: Checked, dimension: int) -> list[tuple[Any, Any]]:
    """The full output's candidate query values of (D, D′): stated or probed, and the inputs."""
    queries = queries_of(checked.pair, checked.probe)
    found = [queries] if queries is not None else []
    inputs = inputs_as_queries(checked.pair, OutputKind.VECTOR, dimension, queries)
    return [*found, inputs] if inputs is not None else found


def _reduced_draws(
    target: Target,
    checked: Checked,
    setting: AuditSetting,
    plan: MemoryPlan,
    *,
    rows: int,
    reduction: Reduction | None,
    user_scores: tuple[UserScore, ...],
) -> tuple[tuple[np.ndarray, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The fitting draws reduced as they arrive, and the user scores' values on them (per side)."""
    dimension = plan.size.dimension
    reduced: list[list[np.ndarray]] = [[], []]
    values: dict[str, list[list[np.ndarray]]] = {s.name: [[], []] for s in user_scores}
    batches = draw_in_batches(
        target, checked.pair, seed=setting.seed, rows=rows, batch_rows=plan.batch_rows, part=_FITTING_PART
    )
    for side, outputs, n in batches:
        if reduction is not None:
            reduced[side].append(reduction(outputs, n))
        for score in user_scores:
            values[score.name][side].append(
                user_score_values(score, outputs, n, kind=OutputKind.VECTOR, dimension=dimension)
            )
    width = reduction.size if reduction is not None else 0
    fit = tuple(np.concatenate(r) if r else np.zeros((0, width)) for r in reduced)
    user = {name: (np.concatenate(v[0]), np.concatenate(v[1])) for name, v in values.items()}
    return (fit[0], fit[1]), user


def _reduced_probe(probe: ProbeResult, reduction: Reduction | None) -> ProbeResult:
    if reduction is None or not probe.available:
        return probe
    return dataclasses.replace(
        probe,
        query_data=reduction.reduce_query(probe.query_data),
        query_neighbour=reduction.reduce_query(probe.query_neighbour),
        note=probe.note + "; query values of the reduced outputs (the kept coordinates, then the projection)",
    )


def _note(dimension: int, screen_rows: int, reduction: Reduction | None) -> str:
    if reduction is None:
        return f"{dimension} coordinates: only the user scores ran (no room in the memory budget to screen them)"
    return (
        f"{dimension} coordinates, reduced as they arrived: the scores see {reduction.columns.size} of them (chosen "
        f"on {screen_rows} screening draws per side: where the query values differ, the largest mean, variance and "
        "non-finite differences) and the mean-difference projection"
    )


def profile_wide(
    target: Target, checked: Checked, setting: AuditSetting, plan: MemoryPlan, *, user_scores: tuple = ()
) -> tuple[Profiled, tuple[np.ndarray, np.ndarray]]:
    """Stage 1 for wide outputs (see the module docstring): the profile of the reduced outputs and the reduced
    fitting draws of both sides."""
    dimension = plan.size.dimension
    fraction = PILOT_FRACTION if setting.pilot_fraction is None else setting.pilot_fraction
    pilot, fit_trials, selection_trials = pilot_plan(setting, plan, fraction)
    screen_rows = fit_trials // 2 if plan.screening else 0
    reduction, integral = _reduction(target, checked, setting, plan, screen_rows) if plan.screening else (None, False)
    if discrete_pilot(setting, OutputKind.VECTOR, integral):
        fraction = DISCRETE_PILOT_FRACTION
        pilot, fit_trials, selection_trials = pilot_plan(setting, plan, fraction, given=False)
    fit, user = _reduced_draws(
        target, checked, setting, plan, rows=fit_trials - screen_rows, reduction=reduction, user_scores=user_scores
    )
    if reduction is None:
        profile = OutputProfile(kind=OutputKind.VECTOR, dimension=dimension)
        models = models_of(fit, OutputKind.CATEGORICAL, 0, profile, checked.pair, checked.probe)
    else:
        reduced = profile_of(fit, OutputKind.VECTOR, reduction.size, differences=False)
        profile = dataclasses.replace(reduced, integral=integral)
        models = models_of(fit, OutputKind.VECTOR, reduction.size, profile, checked.pair, checked.probe, reduction)
    profile = dataclasses.replace(
        profile,
        dimension=dimension,
        own_reachable=models.own_reachable,
        own_coordinates=models.own_coordinates,
        reduction=reduction.to_dict() if reduction is not None else {"kept": []},
    )
    notes = (*plan.notes, _note(dimension, screen_rows, reduction), *models.notes)
    profiled = Profiled(
        kind=OutputKind.VECTOR, dimension=dimension, profile=profile, pair=models.pair,
        probe=_reduced_probe(checked.probe, reduction), pilot=pilot, fit_trials=fit_trials,
        selection_trials=selection_trials, fraction=float(fraction), queries=models.queries, notes=notes,
        reduction=reduction, user_fit=user, screened=reduction is not None,
    )  # fmt: skip
    return profiled, fit
