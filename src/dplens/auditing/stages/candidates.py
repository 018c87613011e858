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
from dplens.auditing.blackbox.features import FeatureMap
from dplens.auditing.blackbox.frequency import JointFrequency, fit_joint_frequency
from dplens.auditing.blackbox.learned import BoostedTrees, LogisticRatio, fit_learned, sklearn_available
from dplens.auditing.blackbox.reachability import Reachability, fit_reachability, model_labels, queries_of
from dplens.auditing.blackbox.tables import (
    RERANKED,
    FrequencyRatio,
    HistogramRatio,
    fit_frequency_ratio,
    fit_histogram_ratio,
)
from dplens.auditing.blackbox.user import UserScore, fit_user_score, load_score
from dplens.auditing.floats import ProbeResult
from dplens.auditing.stages.float_models import REACH_MIN_SHARE, candidate_models
from dplens.auditing.stages.profile import SMALL_SUPPORT, OutputProfile, Profiled, pooled_features
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import TargetPair

__all__ = ["Candidates", "Score", "choose_candidates", "default_scores", "fit_candidates"]

Score = FrequencyRatio | HistogramRatio | JointFrequency | LogisticRatio | BoostedTrees | UserScore | Reachability
_TABLE_ONLY = 64  # at most this many distinct outputs: the frequency table alone


def _base_scores(kind: str, profile: OutputProfile) -> list[Score]:
    small = (
        profile.distinct > 0
        and profile.coverage >= SMALL_SUPPORT.min_coverage
        and profile.distinct * SMALL_SUPPORT.min_draws_per_output <= profile.draws
    )
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
      non-integral floats reachable from their own query value on the pilot (never on integers or flags).

    Example:
        >>> [type(s).__name__ for s in default_scores("integer", None, TargetPair(data=1, neighbour=0))]
        ['HistogramRatio']
    """
    if profile is None:
        profile = OutputProfile(kind=kind, dimension=1 if kind != OutputKind.VECTOR else 2)
    base = _base_scores(kind, profile)
    if kind in (OutputKind.REAL, OutputKind.VECTOR) and not profile.integral:
        candidates = candidate_models(pair, probe_result)
        for (model, scale), label in zip(candidates, model_labels(candidates), strict=True):
            share = (profile.own_reachable or {}).get(label)
            if share is None or share >= REACH_MIN_SHARE:
                columns = (profile.own_coordinates or {}).get(label)
                base.append(Reachability(sampler=model, scale=scale, coordinates=columns))
    return tuple(base)


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
) -> tuple[list[Binner], list[str]]:
    """Freeze every score on the fitting half of the pilot; returns the binners and notes on skipped scores.
    ``features`` is the pooled pilot's feature map when the caller has it (the profile's), else fitted here once."""
    binners: list[Binner] = []
    notes: list[str] = []
    cached: list[FeatureMap] = [features] if features is not None else []

    def feature_map() -> FeatureMap:
        if not cached:
            cached.append(pooled_features(fit, kind, dimension))
        return cached[0]

    for score in scores:
        match score:
            case FrequencyRatio():
                fitted: Binner | Skipped = fit_frequency_ratio(score, fit)
            case HistogramRatio():
                fitted = fit_histogram_ratio(score, fit, kind)
            case JointFrequency():
                fitted = _joint_frequency(score, fit, kind, dimension)
            case LogisticRatio() | BoostedTrees():
                fitted = Skipped(f"{type(score).__name__} needs numeric outputs")
                if kind != OutputKind.CATEGORICAL:
                    fitted = fit_learned(score, fit, kind=kind, dimension=dimension, features=feature_map(), seed=seed)
            case UserScore():
                fitted = fit_user_score(score, fit, kind, dimension)
            case Reachability():
                fitted = fit_reachability(
                    score,
                    kind=kind,
                    dimension=dimension,
                    queries=queries_of(pair, probe_result),
                    probe_result=probe_result,
                    atoms=lambda: feature_map().atoms,
                )
            case _:
                raise ValueError(f"score must be a score option or a 'module:name' path; got {score!r}")
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


def requested_scores(scores: Any, profiled: Profiled, probe_result: ProbeResult | None, *, float_checks: bool):
    """The scores to fit: the default ones (with a user score ``"module:name"`` or :class:`UserScore` beside them),
    or exactly the ones given."""
    user: list[Score] = []
    if isinstance(scores, str):
        load_score(scores)  # fail early, in one line, if it is not there
        user, scores = [UserScore(path=scores)], None
    elif isinstance(scores, UserScore):
        user, scores = [scores], None
    if scores is not None:
        return tuple(scores) if isinstance(scores, tuple | list) else (scores,)
    chosen = (*default_scores(profiled.kind, probe_result, profiled.pair, profile=profiled.profile), *user)
    if not float_checks:
        chosen = tuple(s for s in chosen if not isinstance(s, Reachability))
    return chosen


def choose_candidates(
    scores: Any,
    profiled: Profiled,
    fit: tuple[Any, Any],
    probe_result: ProbeResult | None,
    setting: AuditSetting,
) -> Candidates:
    """Stage 2 (see the module docstring). Raises ``ValueError`` when no score can be applied to the outputs."""
    chosen = requested_scores(scores, profiled, probe_result, float_checks=setting.float_checks)
    workers = setting.workers
    if workers > 1 and any(isinstance(s, UserScore) and s.path is None for s in chosen):
        raise ValueError(f"workers={workers} needs user scores given by path ('module:name'), not as functions")
    kind, dimension = profiled.kind, profiled.dimension
    binners, notes = fit_candidates(
        chosen, fit, kind, dimension, probe_result, profiled.pair, seed=setting.seed, features=profiled.profile.features
    )
    notes = [*profiled.notes, *notes]
    binners = [b for b in binners if b.ranks >= 2]
    if not binners:
        raise ValueError(f"no score can be applied to these outputs ({kind}): {'; '.join(notes) or 'none given'}")
    n_fit = profiled.fit_trials
    fit_raw = tuple(
        np.stack([np.bincount(b.raw_bins(side, n_fit), minlength=b.raw_size) for side in fit])
        if b.kind in RERANKED
        else None
        for b in binners
    )
    return Candidates(binners=tuple(binners), notes=tuple(notes), fit_raw=fit_raw)
