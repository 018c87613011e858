"""The float family: floating-point reachability from the noise-free query values, as a score.

An output that a named sampler model (:class:`~dplens.auditing.floats.SamplerModel`) cannot produce from the
neighbour's query value q′ but can from q points to D with certainty (Mironov, CCS 2012, §3). The score has four
raw bins, (reachable from q, reachable from q′) ∈ {FF, FT, TF, TT}, ranked "points to D′" < "no evidence" <
"points to D"; it is a fixed function of the output chosen before the counted trials, so its bound is valid even
when the model does not match the target (a mismatch only costs power). The evidence is reported in words ("k of
N outputs unreachable from the neighbour", :func:`evidence`).

Vector outputs are checked on the coordinates whose query values differ (at most :data:`REACH_COORDINATES` of
them, or every one beside sentinels); a row counts as reachable from q if every checked real entry is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import Binner, OutputKind, Skipped, numeric
from dplens.auditing.floats import ProbeResult, SamplerModel, reachable

__all__ = ["REACH_RANK", "ReachBinner", "Reachability", "evidence", "fit_reachability", "model_labels", "queries_of"]

REACH_COORDINATES = 4  # at most this many differing coordinates of a vector are checked (each decides ~all)
#: raw = 2·reach(q) + reach(q′): FF → no evidence, FT → D′, TF → D, TT → no evidence
REACH_RANK = np.array([1, 0, 2, 1])


@dataclass(frozen=True, slots=True, kw_only=True)
class Reachability:
    """Floating-point reachability under ``sampler`` with ``scale`` (None: the scale the probe saw).

    Example:
        >>> Reachability(sampler=SamplerModel.NUMPY_LAPLACE, scale=1.0).sampler.value
        'numpy-laplace'
    """

    sampler: SamplerModel
    scale: float | None = None
    # Vector outputs: the coordinates to check (None: every coordinate whose query values differ). The default
    # scores pass the coordinates the model describes on the pilot (a prefix sum's first answer, not its later ones).
    coordinates: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReachBinner(Binner):
    """Raw bin = 2·reachable(q) + reachable(q′) of each output (see the module docstring)."""

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
        return reachable(values, np.broadcast_to(query, values.shape), self.sampler, self.scale)

    def raw_bins(self, outputs: Any, n: int) -> np.ndarray:
        values = numeric(outputs, self.numeric_kind, self.dimension, n)
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


def queries_of(pair: Any, probe_result: ProbeResult | None) -> tuple[Any, Any] | None:
    """The noise-free query values of (D, D′): stated in the pair, else the probe's; ``None`` when neither.

    Example:
        >>> from dplens.auditing.targets import TargetPair
        >>> queries_of(TargetPair(data=[1], neighbour=[0], query=(1.0, 0.0)), None)
        (1.0, 0.0)
    """
    if pair.query is not None:
        return pair.query
    if probe_result is not None and probe_result.available:
        return probe_result.query_data, probe_result.query_neighbour
    return None


def model_labels(models: list[tuple[SamplerModel, Any]]) -> list[str]:
    """Names of the candidate float models: the sampler's, with the scale when the sampler has several.

    Example:
        >>> model_labels([(SamplerModel.NUMPY_LAPLACE, 1.0), (SamplerModel.NUMPY_LAPLACE, 2.0)])
        ['numpy-laplace (scale 1)', 'numpy-laplace (scale 2)']
    """
    repeated = {m for m, _ in models if sum(1 for other, _ in models if other is m) > 1}
    return [f"{m.value} (scale {float(sc):.6g})" if m in repeated else m.value for m, sc in models]


def _checked_coordinates(
    score: Reachability, qd: np.ndarray, qn: np.ndarray, size: int, atoms: Any
) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None] | Skipped:
    """The coordinates a vector check reads, and the sentinels beside them (``atoms()``: the pilot's atoms)."""
    differ = np.flatnonzero(np.broadcast_to(qd, (size,)) != np.broadcast_to(qn, (size,)))
    if differ.size == 0:
        return Skipped(f"float check {score.sampler.value}: the query values of D and D' are equal")
    if score.coordinates is not None:
        differ = np.intersect1d(differ, np.asarray(score.coordinates, dtype=np.int64))
        if differ.size == 0:
            return Skipped(f"float check {score.sampler.value}: its coordinates have equal query values")
    sentinels = atoms()
    if any(a.size for a in sentinels):
        # Rows whose checked entries are sentinels decide nothing: check every differing coordinate (only the
        # real entries cost a reachability search).
        return differ, sentinels
    return differ[:REACH_COORDINATES], None


def fit_reachability(
    score: Reachability,
    *,
    kind: str,
    dimension: int,
    queries: tuple[Any, Any] | None,
    probe_result: ProbeResult | None,
    atoms: Any,
) -> ReachBinner | Skipped:
    """The float check of ``score`` on these outputs (``atoms()`` gives the pilot's atoms per coordinate, asked
    only for vectors), or why it cannot run."""
    if kind == OutputKind.CATEGORICAL:
        return Skipped("float checks need numeric outputs")
    if queries is None:
        return Skipped(f"float check {score.sampler.value}: no query values (probe unavailable, none stated)")
    scale = score.scale
    if scale is None:
        seen = dict(probe_result.samplers) if probe_result is not None else {}
        scale = seen.get(score.sampler)
    if scale is None:
        return Skipped(f"float check {score.sampler.value}: no scale (the probe did not see this sampler)")
    qd, qn = (np.asarray(q, dtype=float).reshape(-1) for q in queries)
    size = max(dimension, 1)
    if qd.size not in (1, size) or qn.size not in (1, size):
        return Skipped(f"float check {score.sampler.value}: query values do not match the output shape")
    coordinates, sentinels = None, None
    if size > 1:
        checked = _checked_coordinates(score, qd, qn, size, atoms)
        if isinstance(checked, Skipped):
            return checked
        coordinates, sentinels = checked
    return ReachBinner(
        coordinates=coordinates,
        name=f"float reachability ({score.sampler.value}, {score.sampler.parameter_name}={scale:.6g})",
        kind="reachability",
        rank=REACH_RANK.copy(),
        cut_scores=np.array([-0.5, 0.5]),
        sampler=score.sampler,
        scale=float(scale),
        query_data=qd if size > 1 else qd.reshape(()),
        query_neighbour=qn if size > 1 else qn.reshape(()),
        dimension=size,
        numeric_kind=kind,
        sentinels=sentinels,
    )


def evidence(binner: ReachBinner, raw: np.ndarray) -> dict[str, Any]:
    """The float evidence of a check's counted raw bins (shape (2, 4)), with a sentence saying what it shows."""
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
