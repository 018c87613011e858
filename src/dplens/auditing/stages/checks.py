"""Stage 0 — before the pilot: the pair to audit, the probe of its query values, and the reproducibility check.

- A pair given only as a data set and a relation is searched first (:mod:`dplens.auditing.pairs`: its own seed
  streams, spawn keys (2, …)); the final audit runs on fresh trials of the chosen pair only.
- The probe (:func:`dplens.auditing.floats.probe`) runs the target once per input with a zero-noise generator and
  reads off the noise-free query values and the samplers it called (what the float checks need).
- A small batch is drawn twice from the same seeds (spawn keys (0, 20, side)): whether the outputs agree says
  whether the audit replays from its seed (``reproducible``). A target drawing from numpy's global RNG, Python's
  ``random`` or its own generator (OpenDP) does not; its bound is still valid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.tables import output_key
from dplens.auditing.floats import ProbeResult, probe
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import Target, TargetPair

__all__ = ["Checked", "check_target", "search_fraction_trials"]

SEARCH_FRACTION = 0.25  # a query_vector pair search spends 25 % of the trials (per side, in all)
_REPRODUCIBILITY_TRIALS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """Stage 0's answer: the pair to audit, every pair tried by a search, the probe, and reproducibility.

    Example:
        >>> Checked(pair=TargetPair(data=1, neighbour=0), probe=ProbeResult(available=False), reproducible=True,
        ...         reproducibility_note="reproducible").stated_query
        False
    """

    pair: TargetPair
    probe: ProbeResult
    reproducible: bool
    reproducibility_note: str
    pairs_tried: tuple[dict[str, Any], ...] = ()
    stated_query: bool = False
    sample: tuple[Any, Any] | None = None  # the reproducibility check's outputs of both sides (None: not drawn)


def search_fraction_trials(trials: int, search_trials: int | None) -> int:
    """A ``query_vector`` search's draws per side in all: ``search_trials``, else 25 % of the counted trials (at
    least 4 000).

    Example:
        >>> search_fraction_trials(1_000_000, None)
        250000
    """
    return search_trials if search_trials is not None else max(4_000, math.ceil(SEARCH_FRACTION * trials))


def _searched(target: Target, pair: TargetPair, setting: AuditSetting, *, strength: Any) -> Any:
    from dplens.auditing import pairs

    seed, budget = setting.seed, setting.search_budget
    if pair.relation == "query_vector":
        return pairs.search_query_vector(
            target,
            pair,
            seed=seed,
            budget=min(budget, 12),
            trials=search_fraction_trials(setting.trials, setting.search_trials),
            audit_trials=setting.trials,
            strength=strength,
        )
    per_candidate = setting.search_trials if setting.search_trials is not None else 2_000
    return pairs.search_pair(target, pair, seed=seed, budget=budget, trials=per_candidate)


def _same(first: Any, second: Any) -> bool:
    try:
        a, b = np.asarray(first), np.asarray(second)
        if a.dtype.kind in "iufb" and b.dtype.kind in "iufb":
            return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    except (ValueError, TypeError):
        pass
    return [output_key(o) for o in first] == [output_key(o) for o in second]


_NOT_SEEDABLE = (
    "not reproducible: the target samples from its own generator (e.g. OpenDP), which dplens cannot seed. The bound "
    "is valid (every trial is an independent run), but the audit cannot be replayed from its seed."
)
_REPRODUCIBLE = "reproducible: the same seeds gave the same outputs, so the audit replays from its seed"
_NOT_REPRODUCIBLE = (
    "not reproducible: two runs from the same seeds gave different outputs, so the target draws randomness "
    "dplens does not control (numpy's global RNG, Python's random, or its own generator). The bound is still "
    "valid (every trial is an independent run), but the audit cannot be replayed from its seed; pass the "
    "generator dplens hands the target to every draw."
)


def _reproducibility(target: Target, pair: TargetPair, seed: int) -> tuple[bool, str, tuple[Any, Any] | None]:
    """Whether two draws from the same seeds agree, the note saying so, and the first draw of each side."""
    if not target.seedable:
        return False, _NOT_SEEDABLE, None
    agree = True
    sample = []
    for side, data in enumerate((pair.data, pair.neighbour)):
        runs = []
        for _ in range(2):
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 20, side)))
            runs.append(target.draw(data, _REPRODUCIBILITY_TRIALS, rng, where="reproducibility check"))
        agree &= _same(runs[0], runs[1])
        sample.append(runs[0])
    return agree, _REPRODUCIBLE if agree else _NOT_REPRODUCIBLE, (sample[0], sample[1])


def check_target(target: Target, pair: TargetPair, setting: AuditSetting, *, strength: Any) -> Checked:
    """Stage 0 (see the module docstring); ``strength`` ranks a ``query_vector`` search's candidates."""
    pairs_tried: tuple[dict[str, Any], ...] = ()
    if pair.neighbour is None:
        searched = _searched(target, pair, setting, strength=strength)
        pair, pairs_tried = searched.pair, searched.tried
    probe_result = probe(target.call_once, pair.data, pair.neighbour)
    reproducible, note, sample = _reproducibility(target, pair, setting.seed)
    return Checked(
        pair=pair,
        probe=probe_result,
        reproducible=reproducible,
        reproducibility_note=note,
        pairs_tried=pairs_tried,
        stated_query=pair.query is not None,
        sample=sample,
    )
