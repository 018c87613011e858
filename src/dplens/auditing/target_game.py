"""The distinguishing game on a user's target: black-box scores, float reachability, a valid lower bound on ε.

A target (:mod:`dplens.auditing.targets`) is run N times on each of D and D′. Its outputs are scored by several
*scores*, each chosen before the counted trials on an independent pilot (its own seed stream, never counted):

- :class:`FrequencyRatio` — categorical outputs: the pilot's log frequency ratio per category (the likelihood
  ratio of a discrete mechanism; unseen categories share one bin);
- :class:`HistogramRatio` — numeric scalars: the pilot's log ratio per histogram bin (one bin per integer for
  integer outputs with a small range, else bins at pooled pilot quantiles);
- :class:`JointFrequency` — discrete vectors with a small observed support (sparse-vector flag patterns, short bit
  vectors): the frequency ratio of whole outputs, unseen outputs pooled (:mod:`dplens.auditing.blackbox.frequency`);
- :class:`LogisticRatio` / :class:`BoostedTrees` — real vectors, reals with sentinels, long bit vectors: ridge
  logistic regression and scikit-learn's gradient-boosted trees on sentinel-aware features
  (:mod:`dplens.auditing.blackbox.learned`, :mod:`dplens.auditing.blackbox.features`; DP-Sniper's learned attack,
  Bichsel et al., S&P 2021);
- :class:`UserScore` — a user function of the outputs (``--score MODULE:NAME``);
- :class:`Reachability` — floating-point reachability from the noise-free query values under a named sampler
  model (:mod:`dplens.auditing.floats`): an output unreachable from q′ but reachable from q points to D. Only on
  non-integral float outputs most of which are reachable from their own query value (never on integers or flags).

Which scores run is decided on the pilot (:func:`default_scores`, :class:`OutputProfile`). The pilot grows with
the budget: ``pilot_fraction`` of the counted trials per side (10 % for real-valued outputs, 100 % for discrete ones,
whose table scores are only as good as the pilot's counts), at least 4 000 (:func:`pilot_sizes`); half
fits the scores (at most 200 000 draws per side in memory), the rest is streamed through them to predict every
threshold's bound (:mod:`dplens.auditing.blackbox.operating`). Every score is a binner
(:mod:`dplens.auditing.blackbox.base`): the counted trials are binned (memory does not grow with N), and every
(score, threshold, direction) is one hypothesis of a single weighted Bonferroni procedure whose weights the pilot
fixes (most of α on the best predicted test; Jagielski, Ullman, Oprea 2020 for fixed-threshold validity). Each
hypothesis is tested with the exact conditional bound on the probability ratio, the trial counts of both sides
being Poisson-drawn (:mod:`dplens.auditing.blackbox.poisson`), so the largest bound is a valid (1 − α) lower
bound on the ε of the audited pair. Every score's result is reported, with the float evidence in words ("k of N
outputs unreachable from the neighbour").

Reproducibility: every chunk draws from a ``numpy.random.Generator`` derived from the root seed
(:func:`dplens.auditing.runner.chunk_seed`); a small batch is drawn twice from the same seeds, and the result says
whether the outputs agreed (``reproducible``). A target that draws from numpy's global RNG, Python's ``random`` or
its own generator (OpenDP) is not reproducible: the bound is still valid (its trials are independent runs), but
the audit cannot be replayed from its seed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from dplens.auditing import bounds as bd
from dplens.auditing import runner
from dplens.auditing.blackbox import operating, poisson
from dplens.auditing.blackbox.base import Binner as _Binner
from dplens.auditing.blackbox.base import OutputKind, edge_binner, quantile_edges
from dplens.auditing.blackbox.base import numeric as _numeric
from dplens.auditing.blackbox.features import FeatureMap, fit_feature_map
from dplens.auditing.blackbox.frequency import JointFrequency, fit_joint_frequency, support_profile
from dplens.auditing.blackbox.learned import (
    MISSING_SKLEARN,
    BoostedTrees,
    LogisticRatio,
    fit_boosted,
    fit_logistic,
    sklearn_available,
)
from dplens.auditing.floats import ProbeResult, SamplerModel, probe, reachable
from dplens.auditing.games import Verdict, verdict_for
from dplens.auditing.targets import Target, TargetPair, as_pair, as_target, load_target

__all__ = [
    "DISCRETE_PILOT_FRACTION",
    "PILOT_FRACTION",
    "BoostedTrees",
    "FrequencyRatio",
    "HistogramRatio",
    "JointFrequency",
    "LogisticRatio",
    "OutputKind",
    "OutputProfile",
    "Reachability",
    "TargetAuditResult",
    "UserScore",
    "audit_target",
    "default_scores",
    "pilot_sizes",
]

RESULT_FORMAT = "dplens-target-audit"
RESULT_FORMAT_VERSION = 1
DEFAULT_PILOT_TRIALS = 4_000
PILOT_FRACTION = 0.1  # pilot draws per side = 10 % of the counted trials (at least DEFAULT_PILOT_TRIALS)
# Discrete outputs (integers, flags, bit vectors, categories) get a pilot as large as the counted run: their scores
# are tables whose order is only as good as the pilot's counts (SVT1's outputs differ in ratio by hundredths), and
# their pilot costs little (the fitting half is small rows, the selection half streamed counts).
DISCRETE_PILOT_FRACTION = 1.0
MAX_FIT_TRIALS = 200_000  # the fitting half is held in memory: at most this many draws per side
MAX_SELECTION_TRIALS = 5_000_000  # the selection half is streamed (counts only)
SEARCH_FRACTION = 0.25  # a query_vector pair search spends 25 % of the trials (per side, in all)
_REPRODUCIBILITY_TRIALS = 8
_FOCUS = 0.5


# --------------------------------------------------------------------------------------------
# Score options (types, not strings)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FrequencyRatio:
    """Categorical outputs: the log frequency ratio per category, estimated on the pilot (at most
    ``max_categories`` categories; the rest share one bin)."""

    max_categories: int = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class HistogramRatio:
    """Numeric scalars: the log frequency ratio per bin (``bins`` pooled-quantile bins, or one bin per integer
    for integer outputs spanning at most ``max_integer_bins`` values)."""

    bins: int = 64
    max_integer_bins: int = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScore:
    """A user score ``function(outputs) -> scores`` (higher = "from D"); ``path`` ``"module:name"`` lets worker
    processes import it."""

    function: Callable[[Any], Any] | None = None
    path: str | None = None

    @property
    def name(self) -> str:
        if self.path:
            return self.path
        return getattr(self.function, "__qualname__", repr(self.function))


@dataclass(frozen=True, slots=True, kw_only=True)
class Reachability:
    """Floating-point reachability under ``sampler`` with ``scale`` (None: the scale the probe saw)."""

    sampler: SamplerModel
    scale: float | None = None
    # Vector outputs: the coordinates to check (None: every coordinate whose query values differ). The default
    # scores pass the coordinates the model describes on the pilot (a prefix sum's first answer, not its later ones).
    coordinates: tuple[int, ...] | None = None


Score = FrequencyRatio | HistogramRatio | JointFrequency | LogisticRatio | BoostedTrees | UserScore | Reachability


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------


def _classify(outputs: Any) -> tuple[str, int]:
    """(kind, dimension) of a pilot batch. Boolean vectors count as integer vectors; an object array of numbers
    with ``None`` (an abort marker) is numeric with NaN for ``None``."""
    try:
        array = np.asarray(outputs)
    except (ValueError, TypeError):
        return OutputKind.CATEGORICAL, 0
    if array.dtype.kind == "O" and array.ndim >= 1 and len(array):
        try:
            array = _numeric(outputs, OutputKind.REAL, 1, array.size).reshape(array.shape)
        except ValueError:
            return OutputKind.CATEGORICAL, 0
    if array.dtype.kind not in "iufb" or array.ndim == 0 or (array.dtype.kind == "b" and array.ndim == 1):
        return OutputKind.CATEGORICAL, 0  # scalar booleans: two categories
    if array.ndim == 1 or (array.ndim == 2 and array.shape[1] == 1):
        return (OutputKind.INTEGER if array.dtype.kind in "iub" else OutputKind.REAL), 1
    if array.ndim == 2:
        return OutputKind.VECTOR, int(array.shape[1])
    return OutputKind.VECTOR, int(np.prod(array.shape[1:]))


def _key(output: Any) -> Any:
    if isinstance(output, np.ndarray):
        return (output.shape, output.dtype.str, output.tobytes())
    if isinstance(output, list):
        return tuple(_key(o) for o in output)
    if isinstance(output, np.generic):
        return output.item()
    try:
        hash(output)
    except TypeError:
        return repr(output)
    return output


# --------------------------------------------------------------------------------------------
# Binners: a score frozen before the counted trials (output → raw bin; raw bins → ordered ranks)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _CategoryBinner(_Binner):
    table: dict[Any, int]  # category → raw bin; unseen → len(table)

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        other = len(self.table)
        return np.fromiter((self.table.get(_key(o), other) for o in outputs), dtype=np.int64, count=n)


@dataclass(frozen=True, slots=True, kw_only=True)
class _EdgeBinner(_Binner):
    edges: np.ndarray
    dimension: int = 1

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        values = _numeric(outputs, OutputKind.REAL, 1, n)
        return np.searchsorted(self.edges, values, side="right").astype(np.int64)


_REACH_COORDINATES = 4  # at most this many differing coordinates of a vector are checked (each decides ~all)
_REACH_CACHE: dict[tuple[Any, float, float], dict[float, bool]] = {}
_REACH_CACHE_LIMIT = 1 << 20  # decided outputs kept per process (memory stays bounded whatever the trials)
_REACH_RANK = np.array([1, 0, 2, 1])  # raw = 2·reach(q) + reach(q′): FF → 0-score, FT → D′, TF → D, TT → 0


@dataclass(frozen=True, slots=True, kw_only=True)
class _ReachBinner(_Binner):
    sampler: SamplerModel
    scale: float
    query_data: np.ndarray
    query_neighbour: np.ndarray
    dimension: int = 1
    numeric_kind: str = OutputKind.REAL
    coordinates: np.ndarray | None = None  # vector outputs: the coordinates checked (queries differ there)
    # Per coordinate, the pilot's atoms (sentinels such as -1000 for "below"): not drawn around a query value, so
    # they decide nothing (counted reachable from both); the real entries beside them are still checked.
    sentinels: tuple[np.ndarray, ...] | None = None

    def _reachable(self, values: np.ndarray, query: np.ndarray) -> np.ndarray:
        if values.ndim != 1:
            return reachable(values, np.broadcast_to(query, values.shape), self.sampler, self.scale)
        # Scalar outputs on a grid repeat across batches: remember each decided output (a bounded cache).
        cache = _REACH_CACHE.setdefault((self.sampler, self.scale, float(query)), {})
        unique, inverse = np.unique(values, return_inverse=True)
        known = np.array([cache.get(v) for v in unique.tolist()], dtype=object)
        missing = np.flatnonzero(known == None)  # noqa: E711 - elementwise test on an object array
        if missing.size:
            decided = reachable(unique[missing], float(query), self.sampler, self.scale)
            if sum(len(c) for c in _REACH_CACHE.values()) + missing.size > _REACH_CACHE_LIMIT:
                _REACH_CACHE.clear()
                cache = _REACH_CACHE.setdefault((self.sampler, self.scale, float(query)), {})
            cache.update(zip(unique[missing].tolist(), decided.tolist(), strict=True))
            known[missing] = decided
        return known.astype(bool)[inverse.reshape(-1)]

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        values = _numeric(outputs, self.numeric_kind, self.dimension, n)
        if values.ndim == 2:
            # Only the coordinates whose query values differ can tell the inputs apart (the others are reachable
            # from both or from neither); a vector counts as reachable from q if its checked coordinates all are,
            # decided coordinate by coordinate on the rows still undecided.
            columns = self.coordinates if self.coordinates is not None else np.arange(values.shape[1])
            query_data = np.broadcast_to(self.query_data, (values.shape[1],))
            query_neighbour = np.broadcast_to(self.query_neighbour, (values.shape[1],))
            from_data = self._rows_reachable(values, columns, query_data)
            from_neighbour = self._rows_reachable(values, columns, query_neighbour)
        else:
            from_data = self._reachable(values, self.query_data)
            from_neighbour = self._reachable(values, self.query_neighbour)
        return 2 * from_data.astype(np.int64) + from_neighbour.astype(np.int64)

    def _rows_reachable(self, values: np.ndarray, columns: np.ndarray, query: np.ndarray) -> np.ndarray:
        alive = np.ones(len(values), dtype=bool)
        for j in columns:
            rows = np.flatnonzero(alive)
            if self.sentinels is not None and self.sentinels[j].size:
                rows = rows[~np.isin(values[rows, j], self.sentinels[j])]
            if rows.size == 0:
                continue
            alive[rows] = reachable(values[rows, j], float(query[j]), self.sampler, self.scale)
        return alive


_USER_FUNCTIONS: dict[str, Callable[[Any], Any]] = {}


def _user_function(score: UserScore) -> Callable[[Any], Any]:
    if score.function is not None:
        return score.function
    if score.path not in _USER_FUNCTIONS:
        _USER_FUNCTIONS[score.path] = load_score(score.path)
    return _USER_FUNCTIONS[score.path]


def load_score(path: str) -> Callable[[Any], Any]:
    """Import a user score ``"module:name"`` (like a target); one-line ``ValueError`` when it is not there."""
    target = load_target(path)
    return target.function


def _log_ratio(positive: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Smoothed log frequency ratio per bin (add-½ to every bin, Krichevsky–Trofimov)."""
    p = (positive + 0.5) / (positive.sum() + 0.5 * positive.size)
    q = (negative + 0.5) / (negative.sum() + 0.5 * negative.size)
    return np.log(p) - np.log(q)


_RERANKED = ("frequency-ratio", "histogram-ratio", "joint-frequency")
_RERANK_MAX_BINS = 64  # larger tables are re-ranked on part of the pilot and predicted on the rest (in-sample
# predictions over many bins are too optimistic)


def _rerank(binner: _Binner, raw: np.ndarray) -> _Binner:
    """The same table ordered by the log frequency ratio of the whole pilot (fit + selection halves): a table's
    order is only a function of pilot counts, so re-estimating it on more pilot draws keeps every bound valid and
    halves the variance of the order. The selection half's predictions become in-sample, an optimism that can
    only cost power and stays mild for tables of at most 64 bins (larger ones are not re-ranked)."""
    estimate = _log_ratio(raw[0].astype(float), raw[1].astype(float))
    estimate[(raw[0] + raw[1]) == 0] = 0.0  # bins the pilot never saw (pooled or empty): no evidence either way
    ordered = _ordered(binner.name, binner.kind, estimate)
    return dataclasses.replace(binner, rank=ordered["rank"], cut_scores=ordered["cut_scores"])


def _ordered(name: str, kind: str, scores: np.ndarray, **extra: Any) -> dict[str, Any]:
    """rank and cut scores of raw bins with estimated ``scores`` (ascending; ties kept in raw order)."""
    order = np.argsort(scores, kind="stable")
    rank = np.empty(scores.size, dtype=np.int64)
    rank[order] = np.arange(scores.size)
    return {"name": name, "kind": kind, "rank": rank, "cut_scores": scores[order][1:].astype(float), **extra}


def _build_binners(
    scores: tuple[Score, ...],
    fit: tuple[Any, Any],
    kind: str,
    dimension: int,
    probe_result: ProbeResult | None,
    pair: TargetPair,
    *,
    seed: int = 0,
    features: FeatureMap | None = None,
) -> tuple[list[_Binner], list[str]]:
    """Freeze every score on the fitting half of the pilot; returns the binners and notes on skipped scores.
    ``features`` is the pooled pilot's feature map when the caller has it (:func:`_profile`), else fitted here."""
    n_fit = len(fit[0])
    binners: list[_Binner] = []
    notes: list[str] = []
    for score in scores:
        match score:
            case FrequencyRatio():
                keys = [[_key(o) for o in side] for side in fit]
                counts: dict[Any, list[int]] = {}
                for side, values in enumerate(keys):
                    for k in values:
                        counts.setdefault(k, [0, 0])[side] += 1
                common = sorted(counts, key=lambda k: -(counts[k][0] + counts[k][1]))[: score.max_categories]
                table = {k: i for i, k in enumerate(common)}
                positive = np.array([counts[k][0] for k in common] + [0], dtype=float)
                negative = np.array([counts[k][1] for k in common] + [0], dtype=float)
                estimate = _log_ratio(positive, negative)
                estimate[-1] = 0.0  # unseen categories: no evidence either way
                binners.append(
                    _CategoryBinner(**_ordered("frequency ratio (pilot)", "frequency-ratio", estimate), table=table)
                )
            case HistogramRatio():
                if kind not in (OutputKind.INTEGER, OutputKind.REAL):
                    notes.append(f"HistogramRatio needs scalar numbers; the outputs are {kind}")
                    continue
                values = [_numeric(side, kind, 1, n_fit) for side in fit]
                pooled = np.concatenate(values)
                low, high = float(pooled.min()), float(pooled.max())
                integral = kind == OutputKind.INTEGER or bool(np.all(pooled == np.round(pooled)))
                if integral and high - low <= score.max_integer_bins:
                    # One bin per value the pilot saw (a snapping mechanism's multiples of 16, not every integer
                    # between them): few bins are re-ranked on the whole pilot; unseen values join a neighbour.
                    seen = np.unique(pooled)
                    edges = (seen[:-1] + seen[1:]) / 2.0
                else:
                    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, score.bins + 1)[1:-1]))
                if edges.size == 0:
                    notes.append("HistogramRatio: the pilot outputs are all equal")
                    continue
                positive = np.bincount(np.searchsorted(edges, values[0], side="right"), minlength=edges.size + 1)
                negative = np.bincount(np.searchsorted(edges, values[1], side="right"), minlength=edges.size + 1)
                estimate = _log_ratio(positive.astype(float), negative.astype(float))
                label = "per integer" if integral and high - low <= score.max_integer_bins else "pooled quantiles"
                ordered = _ordered(f"histogram ratio ({label}, pilot)", "histogram-ratio", estimate)
                binners.append(_EdgeBinner(**ordered, edges=edges))
            case JointFrequency():
                if kind == OutputKind.CATEGORICAL:
                    notes.append("JointFrequency needs numeric outputs; FrequencyRatio handles categories")
                    continue
                values = [_numeric(side, kind, dimension, n_fit) for side in fit]
                binners.append(fit_joint_frequency(score, (values[0], values[1]), kind, dimension))
            case LogisticRatio() | BoostedTrees():
                if kind == OutputKind.CATEGORICAL:
                    notes.append(f"{type(score).__name__} needs numeric outputs")
                    continue
                if isinstance(score, BoostedTrees) and not sklearn_available():
                    notes.append(MISSING_SKLEARN)
                    continue
                values = [_numeric(side, kind, dimension, n_fit).reshape(n_fit, -1) for side in fit]
                if features is None:
                    features = _pooled_features(fit, kind, dimension)
                described = "values, squares" + (", atom indicators" if features.has_atoms else "")
                described += ", neighbouring differences" if features.pairs.size else ""
                if isinstance(score, LogisticRatio):
                    fitted: Any = fit_logistic(score, features, (values[0], values[1]))
                    name, family = f"logistic density ratio on ({described}), pilot", "logistic-ratio"
                else:
                    fitted = fit_boosted(score, features, (values[0], values[1]), seed=seed)
                    name, family = "gradient-boosted trees (scikit-learn HistGradientBoosting), pilot", "boosted-trees"
                fit_scores = np.concatenate([fitted(v) for v in values])
                binners.append(edge_binner(name, family, fitted, quantile_edges(fit_scores), kind, dimension))
            case UserScore():
                if score.function is None and score.path is None:
                    raise ValueError("UserScore needs a function or a path 'module:name'")
                if score.function is not None and not callable(score.function):
                    raise ValueError(f"score function must be callable; got {score.function!r}")
                numeric_kind = None if kind == OutputKind.CATEGORICAL else kind
                call = _UserCall(score)
                probe_binner = edge_binner(score.name, "user-score", call, np.zeros(0), numeric_kind, dimension)
                fit_scores = np.concatenate([probe_binner.scores(side, n_fit) for side in fit])
                binners.append(
                    edge_binner(
                        f"user score {score.name}",
                        "user-score",
                        call,
                        quantile_edges(fit_scores),
                        numeric_kind,
                        dimension,
                    )
                )
            case Reachability():
                if kind == OutputKind.CATEGORICAL:
                    notes.append("float checks need numeric outputs")
                    continue
                queries = _queries(pair, probe_result)
                if queries is None:
                    notes.append(f"float check {score.sampler.value}: no query values (probe unavailable, none stated)")
                    continue
                scale = score.scale
                if scale is None:
                    seen = dict(probe_result.samplers) if probe_result is not None else {}
                    scale = seen.get(score.sampler)
                if scale is None:
                    notes.append(f"float check {score.sampler.value}: no scale (the probe did not see this sampler)")
                    continue
                qd, qn = (np.asarray(q, dtype=float).reshape(-1) for q in queries)
                size = max(dimension, 1)
                if qd.size not in (1, size) or qn.size not in (1, size):
                    notes.append(f"float check {score.sampler.value}: query values do not match the output shape")
                    continue
                coordinates = None
                sentinels = None
                if size > 1:
                    differ = np.flatnonzero(np.broadcast_to(qd, (size,)) != np.broadcast_to(qn, (size,)))
                    if differ.size == 0:
                        notes.append(f"float check {score.sampler.value}: the query values of D and D' are equal")
                        continue
                    if score.coordinates is not None:
                        differ = np.intersect1d(differ, np.asarray(score.coordinates, dtype=np.int64))
                        if differ.size == 0:
                            notes.append(f"float check {score.sampler.value}: its coordinates have equal query values")
                            continue
                    if features is None:
                        features = _pooled_features(fit, kind, dimension)
                    sentinels = features.atoms
                    if any(a.size for a in sentinels):
                        # Rows whose checked entries are sentinels decide nothing: check every differing
                        # coordinate (only the real entries cost a reachability search).
                        coordinates = differ
                    else:
                        coordinates, sentinels = differ[:_REACH_COORDINATES], None
                binners.append(
                    _ReachBinner(
                        coordinates=coordinates,
                        name=f"float reachability ({score.sampler.value}, {score.sampler.parameter_name}={scale:.6g})",
                        kind="reachability",
                        rank=_REACH_RANK.copy(),
                        cut_scores=np.array([-0.5, 0.5]),
                        sampler=score.sampler,
                        scale=float(scale),
                        query_data=qd if size > 1 else qd.reshape(()),
                        query_neighbour=qn if size > 1 else qn.reshape(()),
                        dimension=size,
                        numeric_kind=kind,
                        sentinels=sentinels,
                    )
                )
            case _:
                raise ValueError(f"score must be a score option or a 'module:name' path; got {score!r}")
    return binners, notes


@dataclass(frozen=True, slots=True)
class _UserCall:
    """A user score as a picklable callable (a path is imported once per worker process)."""

    score: UserScore

    def __call__(self, values: Any) -> Any:
        return _user_function(self.score)(values)


def _inputs_as_queries(
    pair: TargetPair, kind: str, dimension: int, probed: tuple[Any, Any] | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The pair's inputs as candidate query values of a vector output: the whole output when it has the inputs'
    length, its leading coordinates when it is longer (answers first, then other columns such as flags, whose
    candidates stay the probe's values, else the inputs' last value); ``None`` when the inputs cannot be."""
    if kind != OutputKind.VECTOR:
        return None
    try:
        data = np.asarray(pair.data, dtype=float).reshape(-1)
        neighbour = np.asarray(pair.neighbour, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        return None
    if data.size != neighbour.size or data.size == 0 or data.size > dimension:
        return None
    if data.size == dimension:
        return data, neighbour
    sides = []
    for inputs, probe_side in zip((data, neighbour), probed or (None, None), strict=True):
        rest = np.full(dimension - inputs.size, inputs[-1])
        if probe_side is not None:
            values = np.asarray(probe_side, dtype=float).reshape(-1)
            if values.size == dimension:
                rest = values[inputs.size :]
        sides.append(np.concatenate([inputs, rest]))
    return sides[0], sides[1]


def _model_labels(models: list[tuple[SamplerModel, float]]) -> list[str]:
    """Names of the candidate float models: the sampler's, with the scale when the sampler has several."""
    repeated = {m for m, _ in models if sum(1 for other, _ in models if other is m) > 1}
    return [f"{m.value} (scale {float(sc):.6g})" if m in repeated else m.value for m, sc in models]


def _queries(pair: TargetPair, probe_result: ProbeResult | None) -> tuple[Any, Any] | None:
    if pair.query is not None:
        return pair.query
    if probe_result is not None and probe_result.available:
        return probe_result.query_data, probe_result.query_neighbour
    return None


# --------------------------------------------------------------------------------------------
# The chunk task
# --------------------------------------------------------------------------------------------

_RESEEDED: set[int] = set()


def _side_rng(seed: np.random.SeedSequence, side: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, side)))


def _batch_size(target: Target) -> int:
    vectorised = target.kind.name == "BATCHED" or callable(getattr(target.function, "release_batch", None))
    return 16_384 if vectorised else 1024


@dataclass(frozen=True, slots=True)
class _TargetCountTask:
    """Raw bin counts of one chunk for every score: shape (2, Σ raw sizes), fixed whatever the trial count."""

    target: Target
    data: Any
    neighbour: Any
    binners: tuple[_Binner, ...]
    parent: int
    limits: tuple[int, int] | None = None  # Poissonised trial counts per side (chunk i covers i·chunk_size …)
    chunk_size: int = 0

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        if os.getpid() != self.parent and os.getpid() not in _RESEEDED:
            # A forked worker inherits numpy's global RNG state: reseed it from fresh entropy so targets that draw
            # from it do not repeat the parent's (or a sibling's) draws.
            np.random.seed()
            _RESEEDED.add(os.getpid())
        sizes = [b.raw_size for b in self.binners]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        counts = np.zeros((2, int(offsets[-1])), dtype=np.int64)
        batch = _batch_size(self.target)
        for side, data in enumerate((self.data, self.neighbour)):
            rng = _side_rng(seed, side)
            label = "D" if side == 0 else "D'"
            side_trials = trials
            if self.limits is not None:
                side_trials = min(max(self.limits[side] - index * self.chunk_size, 0), trials)
            for start in range(0, side_trials, batch):
                n = min(batch, side_trials - start)
                outputs = self.target.draw(data, n, rng, where=f"input {label}, chunk {index}, trials from {start + 1}")
                for b, binner in enumerate(self.binners):
                    raw = binner.raw_bins(outputs, n)
                    counts[side, offsets[b] : offsets[b + 1]] += np.bincount(raw, minlength=sizes[b])
        return counts.reshape(-1)


# --------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAuditResult:
    """The audit of a user's target: a valid lower bound on ε at ``delta``, every score tried, the float evidence,
    the verdict and whether the run can be replayed (``reproducible``).

    ``epsilon_lower_bound`` is a valid (``confidence``) lower bound on the ε of the audited pair (the largest of
    the per-score bounds, each at significance α/S); nothing here is an estimate unless labelled so.

    Example:
        >>> def geometric(data, rng):  # exact two-sided geometric noise on an integer count: ε = 1
        ...     return int(sum(data)) + int(rng.geometric(1 - 2.718281828459045**-1)) - int(
        ...         rng.geometric(1 - 2.718281828459045**-1))
        >>> result = audit_target(geometric, ([1, 1, 0], [1, 1]), claim_epsilon=1.0, trials=5_000, seed=0)
        >>> result.verdict.value, result.reproducible, result.epsilon_lower_bound <= 1.0
        ('CONSISTENT', True, True)
        >>> TargetAuditResult.from_dict(result.to_dict()) == result
        True
    """

    epsilon_lower_bound: float
    bound_direction: str
    best_score: str
    epsilon_claimed: float
    delta: float
    confidence: float
    trials: int
    target: dict[str, Any]
    pair: dict[str, Any]
    output_kind: str
    scores: tuple[dict[str, Any], ...]
    float_evidence: tuple[dict[str, Any], ...]
    probe: dict[str, Any]
    notes: tuple[str, ...]
    ceiling: float
    reproducible: bool
    reproducibility_note: str
    verdict: Verdict
    verdict_reason: str
    seed: int
    chunks: int
    backend: str
    pilot_trials: int
    elapsed_seconds: float
    pairs_tried: tuple[dict[str, Any], ...] = ()
    pilot_fraction: float = 0.0
    side_trials: tuple[int, int] = (0, 0)
    fit_trials: int = 0
    selection_trials: int = 0
    output_profile: dict[str, Any] = dataclasses.field(default_factory=dict)
    method: str = ""
    format_version: int = RESULT_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, stable keys (read by :mod:`dplens.reports.target_audit`)."""
        return {
            "format": RESULT_FORMAT,
            "format_version": self.format_version,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "is_estimate": False,
            "bound_direction": self.bound_direction,
            "best_score": self.best_score,
            "epsilon_claimed": self.epsilon_claimed,
            "delta": self.delta,
            "confidence": self.confidence,
            "trials": self.trials,
            "target": dict(self.target),
            "pair": dict(self.pair),
            "output_kind": self.output_kind,
            "scores": [dict(s) for s in self.scores],
            "float_evidence": [dict(e) for e in self.float_evidence],
            "probe": dict(self.probe),
            "notes": list(self.notes),
            "ceiling": _finite(self.ceiling),
            "reproducible": self.reproducible,
            "reproducibility_note": self.reproducibility_note,
            "verdict": self.verdict.value,
            "verdict_reason": self.verdict_reason,
            "seed": self.seed,
            "chunks": self.chunks,
            "backend": self.backend,
            "pilot_trials": self.pilot_trials,
            "elapsed_seconds": self.elapsed_seconds,
            "pairs_tried": [dict(p) for p in self.pairs_tried],
            "pilot_fraction": self.pilot_fraction,
            "side_trials": list(self.side_trials),
            "fit_trials": self.fit_trials,
            "selection_trials": self.selection_trials,
            "output_profile": dict(self.output_profile),
            "method": self.method,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TargetAuditResult:
        """Inverse of :meth:`to_dict` (a missing field raises ``ValueError`` naming it)."""
        if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
            raise ValueError(f"not a dplens target audit result (format {RESULT_FORMAT!r})")
        if data.get("format_version") != RESULT_FORMAT_VERSION:
            raise ValueError(f"unsupported target audit format_version {data.get('format_version')!r}")
        optional = ("format_version", "pairs_tried", "method", "pilot_fraction", "fit_trials", "selection_trials")
        names = [n for n in cls.__dataclass_fields__ if n not in (*optional, "output_profile", "side_trials")]
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"target audit result is missing required field {missing[0]!r}")
        kwargs = {n: data[n] for n in names}
        kwargs["verdict"] = Verdict(data["verdict"])
        kwargs["ceiling"] = math.inf if data["ceiling"] is None else data["ceiling"]
        for name in ("scores", "float_evidence", "notes"):
            kwargs[name] = tuple(data[name])
        return cls(
            **kwargs,
            pairs_tried=tuple(data.get("pairs_tried", ())),
            pilot_fraction=float(data.get("pilot_fraction", 0.0)),
            side_trials=tuple(data.get("side_trials", (0, 0))),
            fit_trials=int(data.get("fit_trials", 0)),
            selection_trials=int(data.get("selection_trials", 0)),
            output_profile=dict(data.get("output_profile", {})),
            method=data.get("method", ""),
        )

    def __repr__(self) -> str:
        return (
            f"TargetAuditResult(target={self.target.get('name')!r}, verdict={self.verdict.value}, "
            f"epsilon_lower_bound={self.epsilon_lower_bound:.4g} (valid {self.confidence:.0%} bound, "
            f"{self.best_score}), claimed={self.epsilon_claimed:g}, delta={self.delta:g}, trials={self.trials}, "
            f"scores={len(self.scores)}, reproducible={self.reproducible})"
        )


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _same(first: Any, second: Any) -> bool:
    try:
        a, b = np.asarray(first), np.asarray(second)
        if a.dtype.kind in "iufb" and b.dtype.kind in "iufb":
            return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    except (ValueError, TypeError):
        pass
    return [_key(o) for o in first] == [_key(o) for o in second]


def _reproducibility(target: Target, pair: TargetPair, seed: int) -> tuple[bool, str]:
    if not target.seedable:
        return False, (
            "not reproducible: the target samples from its own generator (e.g. OpenDP), which dplens cannot seed. "
            "The bound is valid (every trial is an independent run), but the audit cannot be replayed from its seed."
        )
    agree = True
    for side, data in enumerate((pair.data, pair.neighbour)):
        runs = []
        for _ in range(2):
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 20, side)))
            runs.append(target.draw(data, _REPRODUCIBILITY_TRIALS, rng, where="reproducibility check"))
        agree &= _same(runs[0], runs[1])
    if agree:
        return True, "reproducible: the same seeds gave the same outputs, so the audit replays from its seed"
    return False, (
        "not reproducible: two runs from the same seeds gave different outputs, so the target draws randomness "
        "dplens does not control (numpy's global RNG, Python's random, or its own generator). The bound is still "
        "valid (every trial is an independent run), but the audit cannot be replayed from its seed; pass the "
        "generator dplens hands the target to every draw."
    )


def _joined(first: Any, second: Any) -> Any:
    """Two batches of one side's outputs as one (arrays joined along the draws, anything else as lists)."""
    if isinstance(first, np.ndarray) and isinstance(second, np.ndarray) and first.shape[1:] == second.shape[1:]:
        return np.concatenate([first, second])
    return [*first, *second]


def _pilot(target: Target, pair: TargetPair, seed: int, n: int, part: int) -> tuple[Any, Any]:
    out = []
    for side, data in enumerate((pair.data, pair.neighbour)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 21 + part, side)))
        label = "D" if side == 0 else "D'"
        out.append(target.draw(data, n, rng, where=f"pilot on input {label}"))
    return out[0], out[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputProfile:
    """What the fitting pilot showed about the outputs (chooses the default scores)."""

    kind: str
    dimension: int
    distinct: int = 0  # distinct whole outputs (numeric kinds)
    draws: int = 0  # pilot draws the profile was taken on (both sides)
    coverage: float = 0.0  # share of the draws covered by the JointFrequency table
    integral: bool = False  # every finite output value is an integer
    has_atoms: bool = False  # some value repeats (sentinels, flags) or is non-finite
    # The pooled pilot's feature map (atoms per coordinate), fitted once and shared by the scores that need it.
    features: FeatureMap | None = dataclasses.field(default=None, compare=False, repr=False)
    own_reachable: dict[str, float] | None = None  # per float model: share of D's outputs reachable from q
    own_coordinates: dict[str, tuple[int, ...]] | None = None  # per float model: the coordinates it describes

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "dimension": self.dimension,
            "distinct_outputs": self.distinct,
            "pilot_draws": self.draws,
            "frequency_table_coverage": self.coverage,
            "integral": self.integral,
            "atoms": self.has_atoms,
            "own_side_reachable": dict(self.own_reachable or {}),
            "own_side_coordinates": {k: list(v) for k, v in (self.own_coordinates or {}).items()},
        }


_SMALL_SUPPORT = JointFrequency()
_TABLE_ONLY = 64  # at most this many distinct outputs: the frequency table alone
_REACH_SAMPLE = 256  # pilot outputs per side checked against their own query value
_REACH_MIN_SHARE = 0.5


def _profile(fit: tuple[Any, Any], kind: str, dimension: int) -> OutputProfile:
    if kind == OutputKind.CATEGORICAL:
        return OutputProfile(kind=kind, dimension=dimension)
    n = len(fit[0])
    values = np.concatenate([_numeric(side, kind, dimension, n) for side in fit])
    distinct, coverage = support_profile(values, _SMALL_SUPPORT.max_categories)
    finite = values[np.isfinite(values)]
    integral = bool(np.all(finite == np.round(finite)))
    features = fit_feature_map(values.reshape(len(values), -1))
    return OutputProfile(
        kind=kind,
        dimension=dimension,
        distinct=distinct,
        draws=len(values),
        coverage=coverage,
        integral=integral,
        has_atoms=bool(features.has_atoms),
        features=features,
    )


class _ModelFit(NamedTuple):
    """How a float model describes the pilot: its share of reachable outputs, the vector coordinates it describes,
    and how many real entries of D's pilot sample lie there (what its check would judge)."""

    share: float
    coordinates: tuple[int, ...]
    checked: int


def _own_reachable(
    fit: tuple[Any, Any],
    kind: str,
    dimension: int,
    model: SamplerModel,
    scale: float,
    queries: tuple[Any, Any],
    sentinels: tuple[np.ndarray, ...],
) -> _ModelFit:
    """Share of a pilot sample of each side's outputs reachable from that side's own query value under the model
    (the smaller of the two; a model that does not describe the outputs, e.g. sentinels or flags, gets a small
    share and is not tried), and for vector outputs the coordinates it describes on both sides (at least half of
    their real entries reachable; the share is theirs)."""
    n = min(len(fit[0]), len(fit[1]), _REACH_SAMPLE)
    judged = []
    scalar = False
    for side in (0, 1):
        values = _numeric(fit[side][:n], kind, dimension, n)
        query = np.asarray(queries[side], dtype=float).reshape(-1)
        if values.ndim == 2 and query.size not in (1, values.shape[1]):
            return _ModelFit(0.0, (), 0)
        scalar = values.ndim == 1
        if scalar:
            judged.append(reachable(values, np.broadcast_to(query.reshape(()), values.shape), model, scale)[:, None])
            continue
        # Sentinels (-1000 for "below", abort markers) are not noisy answers: judge the real entries only, and
        # per coordinate: a model may describe some coordinates and not others (a prefix sum's first answer is
        # q₁ + noise, its later ones sums of several draws), and only those it describes are checked.
        real = ~np.stack([np.isin(values[:, j], sentinels[j]) for j in range(values.shape[1])], axis=1)
        real &= np.isfinite(values)
        ok = np.zeros(values.shape, dtype=bool)
        ok[real] = reachable(values[real], np.broadcast_to(query, values.shape)[real], model, scale)
        judged.append(np.where(real, ok, np.nan))
    entries = [np.sum(~np.isnan(j), axis=0) for j in judged]
    hits = [np.nansum(j, axis=0) for j in judged]
    if all(e.sum() == 0 for e in entries):
        return _ModelFit(0.0, (), 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.minimum(*(h / e for h, e in zip(hits, entries, strict=True)))
    described = np.flatnonzero((entries[0] > 0) & (entries[1] > 0) & (shares >= _REACH_MIN_SHARE))
    columns = described if described.size else np.arange(shares.size)
    share = min(h[columns].sum() / max(e[columns].sum(), 1) for h, e in zip(hits, entries, strict=True))
    coordinates = () if scalar else tuple(int(j) for j in described)
    return _ModelFit(float(share), coordinates, int(entries[0][columns].sum()))


def _described(fits: dict[str, _ModelFit]) -> tuple[float, int]:
    """How well a choice of query values describes the pilot: the best model's share while below the threshold,
    else the threshold and the real entries its check would judge (more checked answers, more power)."""
    return max((min(f.share, _REACH_MIN_SHARE), f.checked if f.share >= _REACH_MIN_SHARE else 0) for f in fits.values())


def _pooled_features(fit: tuple[Any, Any], kind: str, dimension: int) -> FeatureMap:
    """The feature map of the pooled fitting pilot: per coordinate, its atoms (values repeated in at least 0.5 % of
    the draws: sentinels, flags) beside the real values."""
    n = len(fit[0])
    return fit_feature_map(np.concatenate([_numeric(side, kind, dimension, n).reshape(n, -1) for side in fit]))


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
    """
    if profile is None:
        profile = OutputProfile(kind=kind, dimension=1 if kind != OutputKind.VECTOR else 2)
    small = (
        profile.distinct > 0
        and profile.coverage >= _SMALL_SUPPORT.min_coverage
        and profile.distinct * _SMALL_SUPPORT.min_draws_per_output <= profile.draws
    )
    match kind:
        case OutputKind.CATEGORICAL:
            base: list[Score] = [FrequencyRatio()]
        case OutputKind.INTEGER:
            base = [HistogramRatio()]
        case OutputKind.REAL:
            base = [HistogramRatio()] if profile.integral and profile.distinct else [HistogramRatio(), LogisticRatio()]
        case _:
            if small:
                # the exact table, and a logistic score next to it: with hundreds of outputs (flags without a
                # cutoff) the table's per-output ratios are noisy where a linear score on the flags is not
                base = [JointFrequency(), LogisticRatio()] if profile.distinct > _TABLE_ONLY else [JointFrequency()]
            else:
                base = [LogisticRatio(), BoostedTrees()] if sklearn_available() else [LogisticRatio()]
    if kind in (OutputKind.REAL, OutputKind.VECTOR) and not profile.integral:
        candidates: list[tuple[SamplerModel, float | None]] = []
        if pair.noise is not None:
            candidates = [(SamplerModel(pair.noise[0]), pair.noise[1])]
        elif probe_result is not None and probe_result.available:
            candidates = list(probe_result.samplers)
        for (model, scale), label in zip(candidates, _model_labels(candidates), strict=True):
            share = (profile.own_reachable or {}).get(label)
            if share is None or share >= _REACH_MIN_SHARE:
                columns = (profile.own_coordinates or {}).get(label)
                base.append(Reachability(sampler=model, scale=scale, coordinates=columns))
    return tuple(base)


def _conditional_bound(
    counts: bd.RateCounts, delta: float, share: float, allocation: operating.Allocation, b: int, trials: int
) -> tuple[bd.Bound, float]:
    """The best exact conditional bound over a score's thresholds and both directions (threshold j tested at
    significance ``share``·w_j), as a :class:`~dplens.auditing.bounds.Bound` (its rate bounds are the per-rate
    Clopper–Pearson bounds at the same level, for reading the operating point; the ε comes from the ratio)."""
    weights = allocation.weights[b]
    size = counts.thresholds.size
    levels = np.maximum(share * weights, 1e-300)  # a zero weight: "never tested" (its bound is useless, not invalid)
    forward, reverse = poisson.conditional_bounds(
        counts, delta=delta, levels=levels[:size], reverse_levels=levels[size:], lam=float(trials)
    )
    f, r = int(np.argmax(forward)), int(np.argmax(reverse))
    index, direction = (f, bd.FORWARD) if forward[f] >= reverse[r] else (r, bd.REVERSE)
    value = float(forward[f] if direction == bd.FORWARD else reverse[r])
    fn, fp = counts.false_negatives(), counts.false_positives()
    level = float(levels[index] if direction == bd.FORWARD else levels[size + index])
    fnr_u = float(bd.clopper_pearson_upper(int(fn[index]), counts.n_positives, level / 2))
    fpr_u = float(bd.clopper_pearson_upper(int(fp[index]), counts.n_negatives, level / 2))
    bound = bd.Bound(
        epsilon=max(value, 0.0),
        direction=direction,
        threshold=float(counts.thresholds[index]),
        false_positives=int(fp[index]),
        false_negatives=int(fn[index]),
        negatives=counts.n_negatives,
        positives=counts.n_positives,
        fpr_upper=fpr_u,
        fnr_upper=fnr_u,
        hypotheses=int(counts.thresholds.size),
        significance=share,
    )
    return bound, (math.exp(value) if math.isfinite(value) and value < 700 else (0.0 if value < 0 else math.inf))


def _evidence(binner: _ReachBinner, raw: np.ndarray) -> dict[str, Any]:
    positives, negatives = raw[0], raw[1]  # raw bins FF, FT, TF, TT (reach q, reach q′)
    n_d, n_n = int(positives.sum()), int(negatives.sum())
    identify_d = int(positives[2])  # reachable from q only
    identify_n = int(negatives[1])  # reachable from q′ only
    own_d = int(positives[0] + positives[1])  # D's outputs unreachable from D's own query (model mismatch)
    own_n = int(negatives[0] + negatives[2])
    scale = f"{binner.sampler.parameter_name}={binner.scale:.6g}"
    sentence = (
        f"{identify_d} of {n_d} outputs on D are unreachable from the neighbour's query value under "
        f"{binner.sampler.value} ({scale}) and so identify D; {identify_n} of {n_n} outputs on D' are unreachable "
        "from D's query value."
    )
    if own_d or own_n:
        sentence += (
            f" {own_d} + {own_n} outputs were unreachable from their own query value: the sampler model does not "
            "match the target exactly (this costs power, never validity)."
        )
    return {
        "sampler": binner.sampler.value,
        "scale": binner.scale,
        "query_data": np.asarray(binner.query_data).tolist(),
        "query_neighbour": np.asarray(binner.query_neighbour).tolist(),
        "outputs_data": n_d,
        "outputs_neighbour": n_n,
        "unreachable_from_neighbour": identify_d,
        "unreachable_from_data": identify_n,
        "own_side_misses_data": own_d,
        "own_side_misses_neighbour": own_n,
        "sentence": sentence,
    }


def search_strength(first: Any, second: Any, audit_trials: int) -> float:
    """An *estimate* of the bound an audit of ``audit_trials`` per side would reach on this pair: a quick score
    (frequency table, histogram or logistic regression) fitted on the draws, the best threshold's bound predicted
    from them (:func:`dplens.auditing.blackbox.operating.predicted_bounds`). For ranking pair candidates only."""
    n = min(len(first), len(second))
    if n < 40:
        return 0.0
    # Fitted on one half, predicted on the other: an in-sample prediction is biased upwards, and the more so the
    # more outputs a table has and the fewer draws it saw, which favours the candidates a search has drawn least
    # (SVT6's 1024 flag patterns: 1.41 on 12 500 draws, 0.42 on 54 000). The two halves are coupled draws
    # (common random numbers), so the honest prediction is also a precise one.
    half = n // 2
    fit, rest = (first[:half], second[:half]), (first[half:n], second[half:n])
    kind, dimension = _classify(fit[0])
    if (kind, dimension) != _classify(fit[1]):
        kind, dimension = OutputKind.CATEGORICAL, 0
    profile = _profile(fit, kind, dimension)
    scores = [s for s in default_scores(kind, None, TargetPair(data=0, neighbour=0), profile=profile)]
    scores = [s for s in scores if not isinstance(s, BoostedTrees)] or [FrequencyRatio()]
    binners, _ = _build_binners(tuple(scores), fit, kind, dimension, None, TargetPair(data=0, neighbour=0))
    best = -math.inf
    for binner in binners:
        if binner.ranks < 2:
            continue
        raw = np.stack([np.bincount(binner.raw_bins(side, n - half), minlength=binner.raw_size) for side in rest])
        # No winner's-curse penalty: the search draws both samples from one noise stream (common random numbers,
        # :func:`~dplens.auditing.pairs.search_query_vector`), so the estimate's error is far below the
        # independent-sample deviation the penalty assumes; and a negative prediction still ranks.
        predicted = operating.predicted_bounds(
            binner.rate_counts(raw), trials=audit_trials, delta=0.0, significance=0.05, penalty=0.0
        )
        if predicted.size and np.isfinite(predicted).any():
            best = max(best, float(np.max(predicted[np.isfinite(predicted)])))
    return best if math.isfinite(best) else -1e9


def pilot_sizes(trials: int, *, pilot_fraction: float = PILOT_FRACTION, pilot_trials: int | None = None):
    """(pilot, fit, selection) draws per side: the pilot is ``pilot_fraction`` of ``trials`` (at least
    :data:`DEFAULT_PILOT_TRIALS`, at most :data:`MAX_FIT_TRIALS` + :data:`MAX_SELECTION_TRIALS`) unless
    ``pilot_trials`` is given; half of it fits the scores (at most :data:`MAX_FIT_TRIALS`, held in memory) and the
    rest, streamed, selects the operating point."""
    trials = _check_int("trials", trials, 1)
    fraction = pilot_fraction
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
        raise ValueError(f"pilot_fraction must be in (0, 1]; got {pilot_fraction!r}")
    if pilot_trials is None:
        pilot = max(DEFAULT_PILOT_TRIALS, math.ceil(float(fraction) * trials))
        pilot = min(pilot, MAX_FIT_TRIALS + MAX_SELECTION_TRIALS)
    else:
        pilot = _check_int("pilot_trials", pilot_trials, 20)
    fit = min(pilot // 2, MAX_FIT_TRIALS)
    return pilot, fit, pilot - fit


def audit_target(
    target: Any,
    pair: Any,
    *,
    claim_epsilon: float,
    claim_delta: float = 0.0,
    trials: int,
    seed: int = 0,
    workers: int = 1,
    confidence: float = 0.95,
    scores: tuple[Score, ...] | Score | str | None = None,
    pilot_trials: int | None = None,
    pilot_fraction: float | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
    search_budget: int = 24,
    search_trials: int | None = None,
    float_checks: bool = True,
) -> TargetAuditResult:
    """Audit a user's target on a neighbouring pair and bound its ε from below (see the module docstring).

    Args:
        target: a callable ``f(data, rng)``, a :func:`~dplens.auditing.targets.batched` callable, an adapter
            (:func:`~dplens.auditing.targets.randomise`, :func:`~dplens.auditing.targets.opendp`), an object with
            ``release(data, rng)``, or ``"module:name"``.
        pair: a :class:`~dplens.auditing.targets.TargetPair`, a pair file path, a dict, or (data, neighbour). A
            pair with a ``relation`` and no neighbour is searched first (:mod:`dplens.auditing.pairs`).
        claim_epsilon, claim_delta: the (ε, δ) claim under test.
        trials: counted trials per side.
        seed: root seed (chunks, pilot and checks draw from their own streams of it).
        workers: > 1 runs a local process pool (the target must be importable by path).
        confidence: 1 − α of the bound.
        scores: the scores to try (default :func:`default_scores`); a ``"module:name"`` string is a
            :class:`UserScore`, tried alongside the default ones.
        pilot_trials: pilot draws per side (default: ``pilot_fraction`` of ``trials``, at least 4 000, at most
            5.2·10⁶), drawn on their own seed stream and never counted: a fitting half (held in memory, at most
            200 000 draws per side; the rest moves to the selection half) fits the scores, and a streamed
            selection half predicts each threshold's bound and places the significance
            (:mod:`dplens.auditing.blackbox.operating`).
        pilot_fraction: the pilot's size as a fraction of ``trials`` (default: 0.1 for real-valued outputs, i.e.
            a 10⁷-trial audit fits on 2·10⁵ and selects on 8·10⁵ draws per side; 1.0 for discrete ones —
            integers, flags, bit vectors, categories — whose table scores need the counts and whose pilot is
            cheap), so the scores learn from the budget.
        search_budget, search_trials: a pair search's candidates and draws. ``add_remove``/``replace_one``:
            ``search_trials`` draws per side per candidate (default 2 000). ``query_vector``: at most 12
            candidates (10 standard patterns, 2 random) and ``search_trials`` draws per side in all (default 25 %
            of ``trials``, at least 4 000), spent by successive halving
            (:func:`~dplens.auditing.pairs.search_query_vector`).
        float_checks: False leaves the float reachability checks out of the default scores (what the scores
            alone find on a target whose floats leak; the bound stays valid, only weaker).

    Returns:
        A frozen :class:`TargetAuditResult`.

    Example:
        >>> import numpy as np
        >>> def noisy_count(data, rng):
        ...     return float(np.sum(data)) + rng.laplace(0.0, 1.0)
        >>> result = audit_target(noisy_count, ([1, 1, 1], [1, 1]), claim_epsilon=1.0, trials=5000, seed=1)
        >>> result.verdict.value  # the textbook float Laplace: some outputs are impossible from the neighbour
        'VIOLATION'
    """
    start = time.perf_counter()
    trials = _check_int("trials", trials, 1)
    seed = _check_int("seed", seed, 0)
    if not isinstance(float_checks, bool):
        raise ValueError(f"float_checks must be True or False; got {float_checks!r}")
    workers = _check_int("workers", workers, 1)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1); got {confidence!r}")
    if (
        isinstance(claim_epsilon, bool)
        or not isinstance(claim_epsilon, int | float)
        or not (claim_epsilon >= 0 and math.isfinite(claim_epsilon))
    ):
        raise ValueError(f"claim_epsilon must be a finite number >= 0; got {claim_epsilon!r}")
    delta = bd.conversions.check_delta(claim_delta, allow_zero=True)
    target = load_target(target) if isinstance(target, str) else as_target(target)
    if workers > 1 and target.path is None:
        raise ValueError(
            f"workers={workers} needs a target that worker processes can import by path ('module:name'); "
            f"{target.name} is a lambda, a closure or defined in __main__: pass 'module:name' or use workers=1"
        )
    pair = as_pair(pair)
    significance = 1.0 - float(confidence)

    pairs_tried: tuple[dict[str, Any], ...] = ()
    if pair.neighbour is None:
        from dplens.auditing.pairs import search_pair

        if pair.relation == "query_vector":
            from dplens.auditing.pairs import search_query_vector

            total = search_trials if search_trials is not None else max(4_000, math.ceil(SEARCH_FRACTION * trials))
            searched = search_query_vector(
                target,
                pair,
                seed=seed,
                budget=min(search_budget, 12),
                trials=total,
                audit_trials=trials,
                strength=search_strength,
            )
        else:
            per_candidate = search_trials if search_trials is not None else 2_000
            searched = search_pair(target, pair, seed=seed, budget=search_budget, trials=per_candidate)
        pair, pairs_tried = searched.pair, searched.tried

    probe_result = probe(target.call_once, pair.data, pair.neighbour)
    reproducible, reproducibility_note = _reproducibility(target, pair, seed)

    fraction = PILOT_FRACTION if pilot_fraction is None else pilot_fraction
    pilot, fit_trials, selection_trials = pilot_sizes(trials, pilot_fraction=fraction, pilot_trials=pilot_trials)
    fit = _pilot(target, pair, seed, fit_trials, 0)
    kind, dimension = _classify(fit[0])
    kind_neighbour, dimension_neighbour = _classify(fit[1])
    if (kind, dimension) != (kind_neighbour, dimension_neighbour):
        kind, dimension = OutputKind.CATEGORICAL, 0  # the two inputs give different kinds: compare as categories
    profile = _profile(fit, kind, dimension)
    if pilot_fraction is None and pilot_trials is None and (profile.integral or kind == OutputKind.CATEGORICAL):
        # Discrete outputs: the larger pilot (DISCRETE_PILOT_FRACTION), its extra fitting draws on their own stream.
        fraction = DISCRETE_PILOT_FRACTION
        pilot, wanted, selection_trials = pilot_sizes(trials, pilot_fraction=fraction)
        if wanted > fit_trials:
            extra = _pilot(target, pair, seed, wanted - fit_trials, 4)
            fit = tuple(_joined(first, second) for first, second in zip(fit, extra, strict=True))
            fit_trials = wanted
            profile = _profile(fit, kind, dimension)
    query_notes: list[str] = []
    stated_query = pair.query is not None
    queries = _queries(pair, probe_result)
    if queries is not None and kind in (OutputKind.REAL, OutputKind.VECTOR) and not profile.integral:
        models = [(SamplerModel(pair.noise[0]), pair.noise[1])] if pair.noise is not None else []
        if not models and probe_result is not None and probe_result.available:
            models = list(probe_result.samplers)
        atoms = profile.features.atoms if profile.features is not None else ()
        labels = _model_labels(models)
        judged = {
            label: _own_reachable(fit, kind, dimension, m, float(sc), queries, atoms)
            for label, (m, sc) in zip(labels, models, strict=True)
        }
        inputs = _inputs_as_queries(pair, kind, dimension, queries)
        if models and inputs is not None and pair.query is None:
            # The probe's zero-noise run gives the output, which is a sentinel wherever a sparse vector answers
            # "below": the inputs themselves may be the query values (noisy answers x_j + noise). Whichever
            # describes the pilot better is used (a pilot-only choice: the bound stays valid either way).
            tried = {
                label: _own_reachable(fit, kind, dimension, m, float(sc), inputs, atoms)
                for label, (m, sc) in zip(labels, models, strict=True)
            }
            if _described(tried) > _described(judged):
                judged = tried
                pair = dataclasses.replace(pair, query=inputs)
                query_notes.append("float check: the inputs are the query values (the zero-noise output has sentinels)")
        profile = dataclasses.replace(
            profile,
            own_reachable={label: f.share for label, f in judged.items()},
            own_coordinates={label: f.coordinates for label, f in judged.items() if f.coordinates},
        )

    user: list[Score] = []
    if isinstance(scores, str):
        load_score(scores)  # fail early, in one line, if it is not there
        user, scores = [UserScore(path=scores)], None
    elif isinstance(scores, UserScore):
        user, scores = [scores], None
    if scores is None:
        chosen = (*default_scores(kind, probe_result, pair, profile=profile), *user)
        if not float_checks:
            chosen = tuple(s for s in chosen if not isinstance(s, Reachability))
    else:
        chosen = tuple(scores) if isinstance(scores, tuple | list) else (scores,)
    if workers > 1 and any(isinstance(s, UserScore) and s.path is None for s in chosen):
        raise ValueError(f"workers={workers} needs user scores given by path ('module:name'), not as functions")
    binners, notes = _build_binners(
        chosen, fit, kind, dimension, probe_result, pair, seed=seed, features=profile.features
    )
    notes = [*query_notes, *notes]
    binners = [b for b in binners if b.ranks >= 2]
    if not binners:
        raise ValueError(f"no score can be applied to these outputs ({kind}): {'; '.join(notes) or 'none given'}")
    # Ratio-ordered tables (frequency, histogram) are re-ranked on more of the pilot once the selection half is in.
    fit_raw = [
        np.stack([np.bincount(b.raw_bins(side, fit_trials), minlength=b.raw_size) for side in fit])
        if b.kind in _RERANKED
        else None
        for b in binners
    ]
    del fit
    count = len(binners)

    # The selection half: streamed through the frozen scores (counts only), on its own seed stream, in chunks whose
    # even and odd ones are kept apart (two independent parts A and B, for the large tables below).
    selection_task = _TargetCountTask(target, pair.data, pair.neighbour, tuple(binners), os.getpid())
    parts = np.zeros((2, 2, sum(b.raw_size for b in binners)), dtype=np.int64)
    step = max(1, min(selection_trials, 200_000, math.ceil(selection_trials / 2)))
    for index, begin in enumerate(range(0, selection_trials, step)):
        n = min(step, selection_trials - begin)
        chunk_seed = np.random.SeedSequence(seed, spawn_key=(0, 22, index))
        parts[index % 2] += selection_task(index, n, chunk_seed).reshape(2, -1)
    selection = parts[0] + parts[1]
    offsets = np.concatenate([[0], np.cumsum([b.raw_size for b in binners])])
    predicting = []
    for i, b in enumerate(binners):
        own = slice(offsets[i], offsets[i + 1])
        if fit_raw[i] is not None and b.raw_size <= _RERANK_MAX_BINS:
            # Small tables: re-ranked on the whole pilot; their in-sample predictions are only mildly optimistic.
            binners[i] = _rerank(b, fit_raw[i] + selection[:, own])
            predicting.append(selection[:, own])
        elif fit_raw[i] is not None and parts[1][:, own].sum() > 0:
            # Large tables (SVT6's 1024 flag patterns): re-ranked on the fitting half and part A, predicted on part B
            # alone, so the prediction is honest however many bins the table has.
            binners[i] = _rerank(b, fit_raw[i] + parts[0][:, own])
            predicting.append(parts[1][:, own])
        else:
            predicting.append(selection[:, own])
    pilot_counts = [b.rate_counts(raw) for b, raw in zip(binners, predicting, strict=True)]
    allocation = operating.allocate(pilot_counts, trials=trials, delta=delta, significance=significance)

    # Poissonised trial counts (exact conditional bound, :mod:`dplens.auditing.blackbox.poisson`).
    side_trials = poisson.poisson_trials(trials, seed)
    longest = max(side_trials)
    size = chunk_size if chunk_size is not None else max(1, min(max(math.ceil(longest / 8), 4096), 50_000, longest))
    size = _check_int("chunk_size", size, 1)
    plan = runner.ChunkPlan(longest, size)
    task = _TargetCountTask(
        target, pair.data, pair.neighbour, tuple(binners), os.getpid(), limits=side_trials, chunk_size=size
    )
    done = runner.run_chunks(task, plan, seed=seed, workers=workers, progress=progress, description="target audit")
    total = np.sum([done[i] for i in range(plan.chunks)], axis=0).reshape(2, -1)

    offsets = np.concatenate([[0], np.cumsum([b.raw_size for b in binners])])
    results, evidence, best = [], [], None
    ceiling = 0.0
    for b, binner in enumerate(binners):
        raw = total[:, offsets[b] : offsets[b + 1]]
        counts = binner.rate_counts(raw)
        share = significance * allocation.shares[b]
        bound, ratio_lower = _conditional_bound(counts, delta, share, allocation, b, trials)
        score_ceiling = poisson.ceiling(trials, share * float(np.max(allocation.weights[b])), delta)
        ceiling = max(ceiling, score_ceiling)
        entry = {
            "name": binner.name,
            "kind": binner.kind,
            "hypotheses": 2 * int(counts.thresholds.size),  # both directions of every threshold
            "significance": share,
            "epsilon_lower_bound": bound.epsilon,
            "direction": bound.direction,
            "operating_point": bound.operating_point(),
            "ceiling": score_ceiling,
            "ratio_lower_bound": ratio_lower,
            "pilot_predicted_bound": allocation.predicted[b],
            "pilot_predicted_bound_is_estimate": True,
            "focused": b == allocation.focus_score,
        }
        results.append(entry)
        if isinstance(binner, _ReachBinner):
            evidence.append(_evidence(binner, raw))
        if best is None or bound.epsilon > best[0].epsilon:
            best = (bound, binner.name)
    assert best is not None
    bound, best_name = best
    verdict, reason = verdict_for(bound.epsilon, ceiling, float(claim_epsilon), float(confidence))
    if verdict is Verdict.VIOLATION and evidence and best_name.startswith("float reachability"):
        reason += " " + next(e["sentence"] for e in evidence if e["sampler"] in best_name)
    if not reproducible:
        notes.append(reproducibility_note)
    probe_dict = probe_result.to_dict()
    if stated_query:
        probe_dict["note"] += "; query values stated in the pair"
    elif pair.query is not None:
        probe_dict["note"] += "; query values: the inputs (the zero-noise output has sentinels)"
    return TargetAuditResult(
        epsilon_lower_bound=bound.epsilon,
        bound_direction=bound.direction,
        best_score=best_name,
        epsilon_claimed=float(claim_epsilon),
        delta=delta,
        confidence=float(confidence),
        trials=trials,
        target=target.describe(),
        pair=pair.summary(),
        output_kind=kind if kind != OutputKind.VECTOR else f"{kind} (dimension {dimension})",
        scores=tuple(results),
        float_evidence=tuple(evidence),
        probe=probe_dict,
        notes=tuple(notes),
        ceiling=ceiling,
        reproducible=reproducible,
        reproducibility_note=reproducibility_note,
        verdict=verdict,
        verdict_reason=reason,
        seed=seed,
        chunks=plan.chunks,
        backend=runner.backend_name(workers=workers, scheduler=None),
        pilot_trials=pilot,
        elapsed_seconds=round(time.perf_counter() - start, 3),
        pairs_tried=pairs_tried,
        pilot_fraction=float(fraction) if pilot_trials is None else pilot / trials,
        side_trials=side_trials,
        fit_trials=fit_trials,
        selection_trials=selection_trials,
        output_profile=profile.to_dict(),
        method=(
            f"exact conditional bound on the probability ratio per (score, threshold) with Poissonised trial counts "
            f"(N_D, N_D' = {side_trials[0]}, {side_trials[1]} ~ Poisson({trials})), one weighted Bonferroni over "
            f"every score tried ({count}) and all their thresholds, both test directions; the weights fixed on an "
            f"independent pilot of {pilot} draws "
            f"per side ({fit_trials} fit the scores, {selection_trials} predict each threshold's bound at N; "
            f"{operating.FOCUS:.0%} of the significance on the best predicted test)"
        ),
    )
