"""Which float model describes the pilot: the sampler, its scale, and the query values the outputs are drawn around.

A float reachability check (:mod:`dplens.auditing.blackbox.reachability`) only has power where its sampler model
describes the target: the target's own outputs must be reachable from their own query value. This module judges
each candidate model (the pair's stated noise, else every (sampler, scale) the probe saw) on a small sample of the
fitting pilot: the share of each side's outputs reachable from that side's own query value, and for vectors the
coordinates the model describes (a prefix sum's first answer is q₁ + noise, its later ones sums of several draws).
The probe's zero-noise output is a sentinel wherever a sparse vector answers "below", so the pair's inputs are
also tried as the query values; whichever describes the pilot better is used. Everything here is a pilot-only
choice: the bound stays valid whatever it picks (a poor choice costs power).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from dplens.auditing.blackbox.base import OutputKind, numeric
from dplens.auditing.blackbox.reachability import model_labels, queries_of
from dplens.auditing.floats import ProbeResult, SamplerModel, reachable
from dplens.auditing.targets import TargetPair

__all__ = ["REACH_MIN_SHARE", "FloatModels", "candidate_models", "judge_float_models"]

REACH_SAMPLE = 256  # pilot outputs per side checked against their own query value
REACH_MIN_SHARE = 0.5  # a model describing less than this share of the pilot's outputs is not tried


class _ModelFit(NamedTuple):
    """How a float model describes the pilot: its share of reachable outputs, the vector coordinates it describes,
    and how many real entries of D's pilot sample lie there (what its check would judge)."""

    share: float
    coordinates: tuple[int, ...]
    checked: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FloatModels:
    """The judgement of the candidate float models on the pilot (per model label), and the pair to audit (with the
    inputs as its query values when they describe the pilot better than the probe's).

    Example:
        >>> FloatModels(pair=TargetPair(data=1, neighbour=0)).own_reachable
        {}
    """

    pair: TargetPair
    queries: tuple[Any, Any] | None = None  # the query values the float checks use (of the scored outputs)
    own_reachable: dict[str, float] = dataclasses.field(default_factory=dict)
    own_coordinates: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()


def candidate_models(pair: TargetPair, probe_result: ProbeResult | None) -> list[tuple[SamplerModel, Any]]:
    """The float models to consider: the pair's stated noise, else every (sampler, scale) the probe saw.

    Example:
        >>> candidate_models(TargetPair(data=1, neighbour=0, noise=("numpy-laplace", 2.0)), None)
        [(<SamplerModel.NUMPY_LAPLACE: 'numpy-laplace'>, 2.0)]
    """
    if pair.noise is not None:
        return [(SamplerModel(pair.noise[0]), pair.noise[1])]
    if probe_result is not None and probe_result.available:
        return list(probe_result.samplers)
    return []


def _judged_entries(values: np.ndarray, query: np.ndarray, model: SamplerModel, scale: float, sentinels: Any):
    """Per entry of a vector sample: 1 reachable from its own query value, 0 not, NaN a sentinel or non-finite."""
    # Sentinels (-1000 for "below", abort markers) are not noisy answers: judge the real entries only, and per
    # coordinate: a model may describe some coordinates and not others, and only those it describes are checked.
    real = ~np.stack([np.isin(values[:, j], sentinels[j]) for j in range(values.shape[1])], axis=1)
    real &= np.isfinite(values)
    ok = np.zeros(values.shape, dtype=bool)
    ok[real] = reachable(values[real], np.broadcast_to(query, values.shape)[real], model, scale)
    return np.where(real, ok, np.nan)


def own_reachable(
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
    n = min(len(fit[0]), len(fit[1]), REACH_SAMPLE)
    judged = []
    scalar = False
    for side in (0, 1):
        values = numeric(fit[side][:n], kind, dimension, n)
        query = np.asarray(queries[side], dtype=float).reshape(-1)
        if values.ndim == 2 and query.size not in (1, values.shape[1]):
            return _ModelFit(0.0, (), 0)
        scalar = values.ndim == 1
        if scalar:
            judged.append(reachable(values, np.broadcast_to(query.reshape(()), values.shape), model, scale)[:, None])
        else:
            judged.append(_judged_entries(values, query, model, scale, sentinels))
    entries = [np.sum(~np.isnan(j), axis=0) for j in judged]
    hits = [np.nansum(j, axis=0) for j in judged]
    if all(e.sum() == 0 for e in entries):
        return _ModelFit(0.0, (), 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.minimum(*(h / e for h, e in zip(hits, entries, strict=True)))
    described = np.flatnonzero((entries[0] > 0) & (entries[1] > 0) & (shares >= REACH_MIN_SHARE))
    columns = described if described.size else np.arange(shares.size)
    share = min(h[columns].sum() / max(e[columns].sum(), 1) for h, e in zip(hits, entries, strict=True))
    coordinates = () if scalar else tuple(int(j) for j in described)
    return _ModelFit(float(share), coordinates, int(entries[0][columns].sum()))


def _described(fits: dict[str, _ModelFit]) -> tuple[float, int]:
    """How well a choice of query values describes the pilot: the best model's share while below the threshold,
    else the threshold and the real entries its check would judge (more checked answers, more power)."""
    return max((min(f.share, REACH_MIN_SHARE), f.checked if f.share >= REACH_MIN_SHARE else 0) for f in fits.values())


def inputs_as_queries(
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


def judge_float_models(
    fit: tuple[Any, Any],
    *,
    kind: str,
    dimension: int,
    integral: bool,
    atoms: tuple[np.ndarray, ...],
    pair: TargetPair,
    probe_result: ProbeResult | None,
    reduction: Any = None,
) -> FloatModels:
    """Judge every candidate float model on the fitting pilot (only for non-integral real or vector outputs with
    query values), and choose between the probe's query values and the inputs (see the module docstring).
    ``reduction`` (wide outputs, :class:`~dplens.auditing.stages.reduction.Reduction`): the fitting draws are
    reduced, and so are the query values they are judged against."""

    def scored(values: tuple[Any, Any] | None) -> tuple[Any, Any] | None:
        if values is None or reduction is None:
            return values
        return reduction.reduce_query(values[0]), reduction.reduce_query(values[1])

    full = queries_of(pair, probe_result)
    queries = scored(full)
    if queries is None or kind not in (OutputKind.REAL, OutputKind.VECTOR) or integral:
        return FloatModels(pair=pair, queries=queries)
    models = candidate_models(pair, probe_result)
    labels = model_labels(models)

    def judge(values: tuple[Any, Any]) -> dict[str, _ModelFit]:
        return {
            label: own_reachable(fit, kind, dimension, m, float(sc), values, atoms)
            for label, (m, sc) in zip(labels, models, strict=True)
        }

    judged, notes = judge(queries), ()
    full_dimension = dimension if reduction is None else reduction.dimension
    inputs = inputs_as_queries(pair, kind, full_dimension, full)
    if models and inputs is not None and pair.query is None:
        # The probe's zero-noise run gives the output, which is a sentinel wherever a sparse vector answers
        # "below": the inputs themselves may be the query values (noisy answers x_j + noise).
        tried = judge(scored(inputs))
        if _described(tried) > _described(judged):
            judged, queries = tried, scored(inputs)
            pair = dataclasses.replace(pair, query=inputs)
            notes = ("float check: the inputs are the query values (the zero-noise output has sentinels)",)
    return FloatModels(
        pair=pair,
        queries=queries,
        own_reachable={label: f.share for label, f in judged.items()},
        own_coordinates={label: f.coordinates for label, f in judged.items() if f.coordinates},
        notes=notes,
    )
