"""Stage 1 — profile the outputs: draw the fitting pilot and read off what the outputs are.

:func:`profile_outputs` draws the fitting half of the pilot (:mod:`.pilot`), classifies the outputs (categories,
integers, reals, vectors), profiles them on both sides pooled (:class:`OutputProfile`: distinct outputs, the share
a frequency table would cover, integrality, atoms such as sentinels, the feature map the learned scores use), grows
the pilot for discrete outputs (their table scores are only as good as the pilot's counts), and judges the float
models (:mod:`.float_models`). It returns a :class:`Profiled` (what the next stages choose from) and the fitting
draws themselves, which the candidate stage fits the scores on and then drops.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import OutputKind, numeric
from dplens.auditing.blackbox.features import FeatureMap, fit_feature_map
from dplens.auditing.blackbox.frequency import JointFrequency, bitwise_only_draws, support_profile
from dplens.auditing.floats import ProbeResult
from dplens.auditing.stages import float_models
from dplens.auditing.stages.checks import Checked
from dplens.auditing.stages.memory import MemoryPlan
from dplens.auditing.stages.pilot import (
    DISCRETE_PILOT_FRACTION,
    MAX_FIT_TRIALS,
    PILOT_FRACTION,
    classify,
    draw_pilot,
    joined,
    pilot_sizes,
)
from dplens.auditing.stages.reduction import Reduction
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import Target, TargetPair

__all__ = [
    "SMALL_SUPPORT",
    "OutputProfile",
    "Profiled",
    "models_of",
    "pooled_features",
    "profile_of",
    "profile_outputs",
]

#: The frequency table of whole outputs whose thresholds decide "a small support" (the default scores' choice).
SMALL_SUPPORT = JointFrequency()


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputProfile:
    """What the fitting pilot showed about the outputs (chooses the default scores).

    Example:
        >>> OutputProfile(kind="real", dimension=1, distinct=40, draws=100).to_dict()["distinct_outputs"]
        40
    """

    kind: str
    dimension: int
    distinct: int = 0  # distinct whole outputs (numeric kinds)
    bitwise_only: int = 0  # draws whose bit pattern only one side shows, with a value both show (−0.0, NaN payloads)
    draws: int = 0  # pilot draws the profile was taken on (both sides)
    coverage: float = 0.0  # share of the draws covered by the JointFrequency table
    integral: bool = False  # every finite output value is an integer
    has_atoms: bool = False  # some value repeats (sentinels, flags) or is non-finite
    # The pooled pilot's feature map (atoms per coordinate), fitted once and shared by the scores that need it.
    features: FeatureMap | None = dataclasses.field(default=None, compare=False, repr=False)
    own_reachable: dict[str, float] | None = None  # per float model: share of D's outputs reachable from q
    own_coordinates: dict[str, tuple[int, ...]] | None = None  # per float model: the coordinates it describes
    reduction: dict[str, Any] | None = None  # wide outputs: the coordinates the scores see (reduction.py)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the result's ``output_profile``)."""
        wide = {} if self.reduction is None else {"reduction": dict(self.reduction)}
        return wide | {
            "kind": self.kind,
            "dimension": self.dimension,
            "distinct_outputs": self.distinct,
            "bitwise_only_draws": self.bitwise_only,
            "pilot_draws": self.draws,
            "frequency_table_coverage": self.coverage,
            "integral": self.integral,
            "atoms": self.has_atoms,
            "own_side_reachable": dict(self.own_reachable or {}),
            "own_side_coordinates": {k: list(v) for k, v in (self.own_coordinates or {}).items()},
        }


def profile_of(fit: tuple[Any, Any], kind: str, dimension: int, *, differences: bool = True) -> OutputProfile:
    """The profile of a pilot's outputs (both sides pooled); ``differences``: the learned scores' features include
    the differences of neighbouring coordinates (not for reduced outputs, whose neighbours are not the output's).

    Example:
        >>> profile_of(([1, 2, 2], [2, 3, 3]), "integer", 1).distinct
        3
    """
    if kind == OutputKind.CATEGORICAL:
        return OutputProfile(kind=kind, dimension=dimension)
    n = len(fit[0])
    values = np.concatenate([numeric(side, kind, dimension, n) for side in fit])
    distinct, coverage = support_profile(values, SMALL_SUPPORT.max_categories)
    sides = values.reshape(2, n, -1)
    bitwise_only = bitwise_only_draws(sides[0], sides[1]) if np.any((values == 0) | np.isnan(values)) else 0
    finite = values[np.isfinite(values)]
    integral = bool(np.all(finite == np.round(finite)))
    features = fit_feature_map(values.reshape(len(values), -1), differences=differences)
    return OutputProfile(
        kind=kind,
        dimension=dimension,
        distinct=distinct,
        bitwise_only=bitwise_only,
        draws=len(values),
        coverage=coverage,
        integral=integral,
        has_atoms=bool(features.has_atoms),
        features=features,
    )


def pooled_features(fit: tuple[Any, Any], kind: str, dimension: int) -> FeatureMap:
    """The feature map of the pooled fitting pilot: per coordinate, its atoms (values repeated in at least 0.5 % of
    the draws: sentinels, flags) beside the real values.

    Example:
        >>> pooled_features(([[1.0, -1000.0]] * 20, [[2.0, 0.5]] * 20), "vector", 2).dimension
        2
    """
    n = len(fit[0])
    return fit_feature_map(np.concatenate([numeric(side, kind, dimension, n).reshape(n, -1) for side in fit]))


@dataclass(frozen=True, slots=True, kw_only=True)
class Profiled:
    """Stage 1's answer: the kind of outputs, their profile, the pilot's sizes, the pair to audit (with query values
    when the inputs were found to be them), the probe and the query values as the scores see them, and for wide
    outputs the reduction every later stage applies (with the user scores' values on the fitting draws).

    Example:
        >>> from dplens.auditing.floats import ProbeResult
        >>> Profiled(kind="real", dimension=1, profile=OutputProfile(kind="real", dimension=1),
        ...          pair=TargetPair(data=1, neighbour=0), probe=ProbeResult(available=False), pilot=4000,
        ...          fit_trials=2000, selection_trials=2000, fraction=0.1).output_kind
        'real'
    """

    kind: str
    dimension: int
    profile: OutputProfile
    pair: TargetPair
    probe: ProbeResult
    pilot: int
    fit_trials: int
    selection_trials: int
    fraction: float
    queries: tuple[Any, Any] | None = None
    notes: tuple[str, ...] = ()
    reduction: Reduction | None = None
    user_fit: dict[str, tuple[np.ndarray, np.ndarray]] = dataclasses.field(default_factory=dict)
    screened: bool = True  # False: wide outputs the budget could not screen (only the user scores run)

    @property
    def output_kind(self) -> str:
        """The kind as the result states it (vectors with their dimension)."""
        return self.kind if self.kind != OutputKind.VECTOR else f"{self.kind} (dimension {self.dimension})"

    @property
    def scored_dimension(self) -> int:
        """The dimension of the outputs as the scores see them (the reduced outputs' for wide ones)."""
        return self.reduction.size if self.reduction is not None else self.dimension


def _kind_of(fit: tuple[Any, Any]) -> tuple[str, int]:
    kind, dimension = classify(fit[0])
    if (kind, dimension) != classify(fit[1]):
        return OutputKind.CATEGORICAL, 0  # the two inputs give different kinds: compare as categories
    return kind, dimension


def discrete_pilot(setting: AuditSetting, kind: str, integral: bool) -> bool:
    """Whether the larger discrete pilot applies (no pilot size given, integer or categorical outputs)."""
    return (
        setting.pilot_fraction is None and setting.pilot_trials is None and (integral or kind == OutputKind.CATEGORICAL)
    )


def pilot_plan(setting: AuditSetting, plan: MemoryPlan, fraction: float, *, given: bool = True) -> tuple[int, int, int]:
    """(pilot, fit, selection) draws per side, the fitting half capped by the memory plan."""
    pilot_trials = setting.pilot_trials if given else None
    pilot, fit, selection = pilot_sizes(setting.trials, pilot_fraction=fraction, pilot_trials=pilot_trials)
    held = min(fit, plan.max_fit_rows)
    return pilot, held, selection + fit - held


def models_of(
    fit: tuple[Any, Any],
    kind: str,
    dimension: int,
    profile: OutputProfile,
    pair: TargetPair,
    probe: ProbeResult,
    reduction: Reduction | None = None,
) -> float_models.FloatModels:
    """The float models' judgement on the fitting draws (:func:`~.float_models.judge_float_models`)."""
    return float_models.judge_float_models(
        fit,
        kind=kind,
        dimension=dimension,
        integral=profile.integral,
        atoms=profile.features.atoms if profile.features is not None else (),
        pair=pair,
        probe_result=probe,
        reduction=reduction,
    )


def profile_outputs(
    target: Target, checked: Checked, setting: AuditSetting, plan: MemoryPlan
) -> tuple[Profiled, tuple[Any, Any]]:
    """Stage 1 (see the module docstring) for outputs of at most
    :data:`~dplens.auditing.stages.memory.MAX_WHOLE_COORDINATES` coordinates: the profile and the fitting draws
    of both sides, held whole (at most the memory plan's rows per side). Wider outputs:
    :func:`dplens.auditing.stages.wide.profile_wide`."""
    pair, seed = checked.pair, setting.seed
    fraction = PILOT_FRACTION if setting.pilot_fraction is None else setting.pilot_fraction
    pilot, fit_trials, selection_trials = pilot_plan(setting, plan, fraction)
    fit = draw_pilot(target, pair, seed, fit_trials, 0)
    kind, dimension = _kind_of(fit)
    if kind == OutputKind.VECTOR and dimension == 0:
        raise ValueError("the target's outputs are empty (no coordinates): there is nothing to audit")
    profile = profile_of(fit, kind, dimension)
    if discrete_pilot(setting, kind, profile.integral):
        # Discrete outputs: the larger pilot (DISCRETE_PILOT_FRACTION), its extra fitting draws on their own stream.
        fraction = DISCRETE_PILOT_FRACTION
        pilot, wanted, selection_trials = pilot_plan(setting, plan, fraction, given=False)
        if wanted > fit_trials:
            extra = draw_pilot(target, pair, seed, wanted - fit_trials, 4)
            fit = (joined(fit[0], extra[0]), joined(fit[1], extra[1]))
            fit_trials = wanted
            profile = profile_of(fit, kind, dimension)
    models = models_of(fit, kind, dimension, profile, pair, checked.probe)
    profile = dataclasses.replace(profile, own_reachable=models.own_reachable, own_coordinates=models.own_coordinates)
    notes = (*plan.notes, *models.notes)
    if fit_trials < min(pilot // 2, MAX_FIT_TRIALS):
        notes += (f"the memory budget cut the fitting half of the pilot to {fit_trials} draws per side",)
    sizes = {"pilot": pilot, "fit_trials": fit_trials, "selection_trials": selection_trials}
    profiled = Profiled(
        kind=kind, dimension=dimension, profile=profile, pair=models.pair, probe=checked.probe,
        fraction=float(fraction), queries=models.queries, notes=notes, **sizes,
    )  # fmt: skip
    return profiled, fit
