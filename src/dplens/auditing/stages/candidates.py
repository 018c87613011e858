"""Stage 2 — choose the candidate scores and fit them on the fitting half of the pilot.

The default scores follow the profile (:func:`default_scores`): frequency tables for categories and small supports,
histograms for scalars, learned density ratios for real vectors, float reachability where a sampler model describes
the outputs; the user's scores (``--score``) join them. Each score is one family of
:mod:`dplens.auditing.blackbox` and is frozen here into a binner (:func:`fit_candidates`): outputs → raw bins →
ranks ordered by the score. A family that cannot run on these outputs is skipped with a note; the table scores'
counts on the fitting half are kept for the operating-point stage, which re-ranks them on more of the pilot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import Binner, OutputKind, Skipped, numeric
from dplens.auditing.blackbox.coordinates import CoordinateScore, fit_coordinate
from dplens.auditing.blackbox.features import FeatureMap
from dplens.auditing.blackbox.frequency import JointFrequency, fit_joint_frequency
from dplens.auditing.blackbox.learned import (
    CHUNK_ROWS,
    TREE_FEATURE_BYTES,
    BoostedTrees,
    LogisticRatio,
    fit_learned,
    sklearn_available,
)
from dplens.auditing.blackbox.reachability import Reachability, fit_reachability, model_labels, queries_of
from dplens.auditing.blackbox.tables import (
    RERANKED,
    CategoryBinner,
    FrequencyRatio,
    HistogramRatio,
    fit_frequency_ratio,
    fit_histogram_ratio,
)
from dplens.auditing.blackbox.user import UserScore, fit_user_score, load_score
from dplens.auditing.floats import ProbeResult
from dplens.auditing.stages.float_models import REACH_MIN_SHARE, candidate_models
from dplens.auditing.stages.memory import MemoryPlan, format_bytes
from dplens.auditing.stages.profile import SMALL_SUPPORT, OutputProfile, Profiled, pooled_features
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import TargetPair

__all__ = [
    "Candidates",
    "Score",
    "choose_candidates",
    "default_scores",
    "fit_candidates",
    "requested_scores",
    "user_scores_of",
]

Score = (
    FrequencyRatio
    | HistogramRatio
    | JointFrequency
    | LogisticRatio
    | BoostedTrees
    | UserScore
    | Reachability
    | CoordinateScore
)
_TABLE_ONLY = 64  # at most this many distinct outputs: the frequency table alone


def _base_scores(kind: str, profile: OutputProfile) -> list[Score]:
    small = (
        profile.distinct > 0
        and profile.coverage >= SMALL_SUPPORT.min_coverage
        and profile.distinct * SMALL_SUPPORT.min_draws_per_output <= profile.draws
    )
    if kind != OutputKind.CATEGORICAL and profile.distinct == 1:
        # One value on both sides: the table of whole outputs (that value against any other) is the only test.
        return [JointFrequency()]
    match kind:
        case OutputKind.CATEGORICAL:
            return [FrequencyRatio()]
        case OutputKind.INTEGER:
            return [HistogramRatio()]
        case OutputKind.REAL:
            return [HistogramRatio()] if profile.integral and profile.distinct else [HistogramRatio(), LogisticRatio()]
    if small:
        # the exact table, and a logistic score next to it: with hundreds of outputs (flags without a cutoff) the
        # table's per-output ratios are noisy where a linear score on the flags is not
        return [JointFrequency(), LogisticRatio()] if profile.distinct > _TABLE_ONLY else [JointFrequency()]
    return [LogisticRatio(), BoostedTrees()] if sklearn_available() else [LogisticRatio()]


BITWISE_FLOOR = 20  # pilot draws showing a bit pattern only one side shows, for the bit-pattern table to be tried


def _coordinates(profile: OutputProfile) -> list[Score]:
    """Wide outputs: the strongest screened coordinate and the mean-difference projection, each alone."""
    if not profile.reduction or not profile.reduction.get("kept"):
        return []
    kept, strongest = profile.reduction["kept"], profile.reduction.get("strongest")
    label = f"coordinate {kept[strongest]} alone (the largest mean difference)" if strongest is not None else ""
    alone = [] if strongest is None else [CoordinateScore(index=strongest, label=label)]
    projection = "the mean-difference projection of every coordinate"
    return [*alone, CoordinateScore(index=profile.reduction["projection"], label=projection)]


def _bit_patterns(profile: OutputProfile) -> list[Score]:
    """The bit-pattern table where outputs equal as numbers differ in their bits between the inputs (signed zeros,
    NaN payloads seen on one side only)."""
    return [JointFrequency(bitwise=True)] if profile.bitwise_only >= BITWISE_FLOOR else []


def default_scores(
    kind: str, probe_result: ProbeResult | None, pair: TargetPair, *, profile: OutputProfile | None = None
) -> tuple[Score, ...]:
    """The scores tried by default, chosen from the fitting pilot (``profile``):

    - categories → :class:`FrequencyRatio`; integer scalars → :class:`HistogramRatio` (one bin per integer);
    - real scalars → :class:`HistogramRatio` and :class:`LogisticRatio` (tail and interval events);
    - vectors with a small observed support (flags, bit vectors of few bits, indices) → :class:`JointFrequency`
      (and :class:`LogisticRatio` beside it when there are more than 64 distinct outputs);
    - other vectors (reals, reals with sentinels, long bit vectors) → :class:`LogisticRatio` and
      :class:`BoostedTrees` (when scikit-learn is installed), both on the sentinel-aware features;
    - float reachability for every sampler the probe saw (or the pair states), only on outputs that are
      non-integral floats reachable from their own query value on the pilot (never on integers or flags);
    - wide outputs (reduced, :mod:`dplens.auditing.stages.reduction`) → the strongest screened coordinate and the
      mean-difference projection alone (:class:`~dplens.auditing.blackbox.coordinates.CoordinateScore`) beside the
      learned scores on every kept coordinate;
    - numeric outputs that took one value on the pilot → :class:`JointFrequency` alone (that value against any
      other: outputs that never differ are no evidence, and the counted trials can still show another);
    - numeric outputs equal as numbers but different in their bits (−0.0 and 0.0, NaN payloads) →
      :class:`JointFrequency` with ``bitwise=True`` beside the others (the bit patterns identify the input).

    Example:
        >>> [type(s).__name__ for s in default_scores("integer", None, TargetPair(data=1, neighbour=0))]
        ['HistogramRatio']
    """
    if profile is None:
        profile = OutputProfile(kind=kind, dimension=1 if kind != OutputKind.VECTOR else 2)
    base = _coordinates(profile) + _base_scores(kind, profile) + _bit_patterns(profile)
    if kind in (OutputKind.REAL, OutputKind.VECTOR) and not profile.integral:
        candidates = candidate_models(pair, probe_result)
        for (model, scale), label in zip(candidates, model_labels(candidates), strict=True):
            share = (profile.own_reachable or {}).get(label)
            if share is None or share >= REACH_MIN_SHARE:
                columns = (profile.own_coordinates or {}).get(label)
                base.append(Reachability(sampler=model, scale=scale, coordinates=columns))
    return tuple(base)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    """What fitting a score may read beside the fitting draws."""

    kind: str
    dimension: int
    probe_result: ProbeResult | None
    queries: tuple[Any, Any] | None
    seed: int
    feature_map: Any  # () -> FeatureMap, fitted on first use
    user_fit: dict[str, tuple[np.ndarray, np.ndarray]] | None = None  # wide outputs: user scores' values
    user_dimension: int = 0  # wide outputs: the whole output's dimension (user scores read whole outputs)
    plan: MemoryPlan | None = None


def _learned_bytes(score: LogisticRatio | BoostedTrees, width: int, rows: int) -> float:
    """The working memory of fitting a learned score on ``rows`` draws per side with ``width`` features."""
    if isinstance(score, BoostedTrees):
        return 3.0 * TREE_FEATURE_BYTES
    chunk = min(CHUNK_ROWS, 2 * rows)
    return 8.0 * (3 * chunk * (width + 1) + 4 * (width + 1) ** 2)


def _fit_learned(score: LogisticRatio | BoostedTrees, fit: tuple[Any, Any], ctx: _Context) -> Binner | Skipped:
    if ctx.kind == OutputKind.CATEGORICAL:
        return Skipped(f"{type(score).__name__} needs numeric outputs")
    features = ctx.feature_map()
    if ctx.plan is not None:
        need = _learned_bytes(score, features(np.zeros((1, features.dimension))).shape[1], len(fit[0]))
        if not ctx.plan.fits(need, held_rows=len(fit[0])):
            return Skipped(
                f"{type(score).__name__} skipped: fitting it needs {format_bytes(need)} beside the pilot, over the "
                f"memory budget of {ctx.plan.budget.describe()}"
            )
    return fit_learned(score, fit, kind=ctx.kind, dimension=ctx.dimension, features=features, seed=ctx.seed)


def _fit_one(score: Score, fit: tuple[Any, Any], ctx: _Context) -> Binner | Skipped:
    kind, dimension = ctx.kind, ctx.dimension
    match score:
        case FrequencyRatio():
            return fit_frequency_ratio(score, fit)
        case HistogramRatio():
            return fit_histogram_ratio(score, fit, kind)
        case JointFrequency():
            return _joint_frequency(score, fit, kind, dimension)
        case LogisticRatio() | BoostedTrees():
            return _fit_learned(score, fit, ctx)
        case CoordinateScore():
            return fit_coordinate(score, fit, dimension=dimension)
        case UserScore() if ctx.user_fit is not None:
            return fit_user_score(
                score, fit, OutputKind.VECTOR, ctx.user_dimension, values=ctx.user_fit.get(score.name)
            )
        case UserScore():
            return fit_user_score(score, fit, kind, dimension)
        case Reachability():
            return fit_reachability(
                score,
                kind=kind,
                dimension=dimension,
                queries=ctx.queries,
                probe_result=ctx.probe_result,
                atoms=lambda: ctx.feature_map().atoms,
            )
    raise ValueError(f"score must be a score option or a 'module:name' path; got {score!r}")


def fit_candidates(
    scores: tuple[Score, ...],
    fit: tuple[Any, Any],
    kind: str,
    dimension: int,
    probe_result: ProbeResult | None,
    pair: TargetPair,
    *,
    seed: int = 0,
    features: FeatureMap | None = None,
    **context: Any,
) -> tuple[list[Binner], list[str]]:
    """Freeze every score on the fitting half of the pilot; returns the binners and notes on skipped scores.
    ``features`` is the pooled pilot's feature map when the caller has it (the profile's), else fitted here once;
    ``context`` may give ``queries`` (default: the pair's or the probe's), the memory ``plan`` and, for wide
    outputs, ``user_fit`` and ``user_dimension``."""
    cached: list[FeatureMap] = [features] if features is not None else []

    def feature_map() -> FeatureMap:
        if not cached:
            cached.append(pooled_features(fit, kind, dimension))
        return cached[0]

    context.setdefault("queries", queries_of(pair, probe_result))
    ctx = _Context(
        kind=kind, dimension=dimension, probe_result=probe_result, seed=seed, feature_map=feature_map, **context
    )
    binners: list[Binner] = []
    notes: list[str] = []
    for score in scores:
        fitted = _fit_one(score, fit, ctx)
        if isinstance(fitted, Skipped):
            notes.append(fitted.note)
        else:
            binners.append(fitted)
    return binners, notes


def _joint_frequency(score: JointFrequency, fit: tuple[Any, Any], kind: str, dimension: int) -> Binner | Skipped:
    if kind == OutputKind.CATEGORICAL:
        return Skipped("JointFrequency needs numeric outputs; FrequencyRatio handles categories")
    n_fit = len(fit[0])
    values = [numeric(side, kind, dimension, n_fit) for side in fit]
    return fit_joint_frequency(score, (values[0], values[1]), kind, dimension)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidates:
    """Stage 2's answer: the fitted scores (binners with at least two ranks), the notes on the scores left out, and
    the table scores' raw counts on the fitting half (``None`` for the other families).

    Example:
        >>> Candidates(binners=(), notes=(), fit_raw=()).count
        0
    """

    binners: tuple[Binner, ...]
    notes: tuple[str, ...]
    fit_raw: tuple[np.ndarray | None, ...]

    @property
    def count(self) -> int:
        """How many scores share the significance."""
        return len(self.binners)


def user_scores_of(scores: Any) -> tuple[UserScore, ...]:
    """The user scores among the scores asked for (a ``"module:name"`` string is one).

    Example:
        >>> [s.path for s in user_scores_of("mechanisms:distance_score")]
        ['mechanisms:distance_score']
    """
    if isinstance(scores, str):
        return (UserScore(path=scores),)
    if isinstance(scores, UserScore):
        return (scores,)
    if isinstance(scores, tuple | list):
        return tuple(s for s in scores if isinstance(s, UserScore))
    return ()


def requested_scores(scores: Any, profiled: Profiled, *, float_checks: bool) -> tuple[Score, ...]:
    """The scores to fit: the default ones (with a user score ``"module:name"`` or :class:`UserScore` beside them),
    or exactly the ones given; only the user scores where wide outputs could not be screened."""
    if not profiled.screened:
        return user_scores_of(scores)
    user: list[Score] = []
    if isinstance(scores, str):
        load_score(scores)  # fail early, in one line, if it is not there
        user, scores = [UserScore(path=scores)], None
    elif isinstance(scores, UserScore):
        user, scores = [scores], None
    if scores is not None:
        return tuple(scores) if isinstance(scores, tuple | list) else (scores,)
    kind = profiled.kind
    chosen = (*default_scores(kind, profiled.probe, profiled.pair, profile=profiled.profile), *user)
    if not float_checks:
        chosen = tuple(s for s in chosen if not isinstance(s, Reachability))
    return chosen


_CONSTANT = (
    "the pilot's outputs were all equal on both inputs: outputs that never differ are no evidence of leakage (the "
    "lower bound stays 0 unless the counted trials show another output)"
)
_BITWISE = (
    "the pilot's outputs were equal as numbers on both inputs but not in their bits (signed zeros or NaN payloads "
    "that follow the input): their bit patterns are tested"
)


def _notes(profiled: Profiled, binners: list[Binner]) -> list[str]:
    """Stage 1's notes, and what the pilot showed about outputs that do not differ (as numbers, or at all)."""
    notes = list(profiled.notes)
    profile = profiled.profile
    one_category = any(isinstance(b, CategoryBinner) and len(b.table) == 1 for b in binners)
    if profiled.screened and (one_category or (profiled.kind != OutputKind.CATEGORICAL and profile.distinct == 1)):
        notes.append(_BITWISE if profile.bitwise_only >= BITWISE_FLOOR else _CONSTANT)
    elif profile.bitwise_only >= BITWISE_FLOOR:
        notes.append(_BITWISE.replace("were equal as numbers", "had values that are equal as numbers"))
    return notes


def choose_candidates(
    scores: Any, profiled: Profiled, fit: tuple[Any, Any], setting: AuditSetting, plan: MemoryPlan | None = None
) -> Candidates:
    """Stage 2 (see the module docstring). Raises ``ValueError`` when no score can be applied to the outputs."""
    chosen = requested_scores(scores, profiled, float_checks=setting.float_checks)
    workers = setting.workers
    if workers > 1 and any(isinstance(s, UserScore) and s.path is None for s in chosen):
        raise ValueError(f"workers={workers} needs user scores given by path ('module:name'), not as functions")
    kind, dimension = profiled.kind, profiled.scored_dimension
    wide = {} if profiled.reduction is None and profiled.screened else {"user_fit": profiled.user_fit}
    if wide:
        wide["user_dimension"] = profiled.dimension
    binners, notes = fit_candidates(
        chosen, fit, kind, dimension, profiled.probe, profiled.pair, seed=setting.seed,
        features=profiled.profile.features, queries=profiled.queries, plan=plan, **wide,
    )  # fmt: skip
    notes = [*_notes(profiled, binners), *notes]
    binners = [b for b in binners if b.ranks >= 2]
    if not binners:
        raise ValueError(f"no score can be applied to these outputs ({kind}): {'; '.join(notes) or 'none given'}")
    n_fit = len(fit[0])
    fit_raw = tuple(
        np.stack([np.bincount(b.raw_bins(side, n_fit), minlength=b.raw_size) for side in fit])
        if b.kind in RERANKED
        else None
        for b in binners
    )
    return Candidates(binners=tuple(binners), notes=tuple(notes), fit_raw=fit_raw)
