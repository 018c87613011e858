"""Stage 3 — pick the operating point on the pilot: where the audit spends its significance.

The selection half of the pilot (its own seed streams, spawn keys (0, 22, chunk)) is streamed through the frozen
scores in chunks, counts only, the even and odd chunks kept apart as two independent parts A and B. Table scores
are re-ranked on more of the pilot (:func:`~dplens.auditing.blackbox.tables.rerank`): small tables on the whole
pilot, large ones (SVT6's 1 024 flag patterns) on the fitting half and part A, predicted on part B alone, so that
their predictions stay honest. The counts then predict every (score, threshold, direction)'s bound at the counted
trials and fix the weights of one weighted Bonferroni procedure
(:func:`~dplens.auditing.blackbox.operating.allocate`). Nothing here sees the counted trials, so every bound the
counting stage computes with these weights is valid.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox import operating
from dplens.auditing.blackbox.base import Binner
from dplens.auditing.blackbox.tables import RERANK_MAX_BINS, rerank
from dplens.auditing.stages.candidates import Candidates
from dplens.auditing.stages.chunks import TargetCountTask
from dplens.auditing.stages.profile import Profiled
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import Target, TargetPair

__all__ = ["OperatingPoint", "pick_operating_point", "selection_counts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatingPoint:
    """Stage 3's answer: the scores as the counted trials use them (tables re-ranked) and the allocation of the
    significance over every (score, threshold, direction).

    Example:
        >>> OperatingPoint(binners=(), allocation=None).binners
        ()
    """

    binners: tuple[Binner, ...]
    allocation: operating.Allocation | None


def selection_counts(
    target: Target,
    pair: TargetPair,
    binners: tuple[Binner, ...],
    *,
    seed: int,
    selection_trials: int,
    batch: int | None = None,
    reduction: Any = None,
) -> np.ndarray:
    """Raw counts of the selection half, shape (2 parts, 2 sides, Σ raw sizes): chunk i goes to part i mod 2."""
    task = TargetCountTask(target, pair.data, pair.neighbour, binners, os.getpid(), batch=batch, reduction=reduction)
    parts = np.zeros((2, 2, sum(b.raw_size for b in binners)), dtype=np.int64)
    step = max(1, min(selection_trials, 200_000, math.ceil(selection_trials / 2)))
    for index, begin in enumerate(range(0, selection_trials, step)):
        n = min(step, selection_trials - begin)
        chunk_seed = np.random.SeedSequence(seed, spawn_key=(0, 22, index))
        parts[index % 2] += task(index, n, chunk_seed).reshape(2, -1)
    return parts


def pick_operating_point(
    target: Target, profiled: Profiled, candidates: Candidates, setting: AuditSetting, *, batch: int | None = None
) -> OperatingPoint:
    """Stage 3 (see the module docstring); ``batch``: outputs per draw (the memory plan's)."""
    binners = list(candidates.binners)
    parts = selection_counts(
        target, profiled.pair, candidates.binners, seed=setting.seed, selection_trials=profiled.selection_trials,
        batch=batch, reduction=profiled.reduction,
    )  # fmt: skip
    selection = parts[0] + parts[1]
    offsets = np.concatenate([[0], np.cumsum([b.raw_size for b in binners])])
    predicting = []
    for i, (b, fit_raw) in enumerate(zip(candidates.binners, candidates.fit_raw, strict=True)):
        own = slice(offsets[i], offsets[i + 1])
        if fit_raw is not None and b.raw_size <= RERANK_MAX_BINS:
            # Small tables: re-ranked on the whole pilot; their in-sample predictions are only mildly optimistic.
            binners[i] = rerank(b, fit_raw + selection[:, own])
            predicting.append(selection[:, own])
        elif fit_raw is not None and parts[1][:, own].sum() > 0:
            # Large tables: re-ranked on the fitting half and part A, predicted on part B alone.
            binners[i] = rerank(b, fit_raw + parts[0][:, own])
            predicting.append(parts[1][:, own])
        else:
            predicting.append(selection[:, own])
    pilot_counts = [b.rate_counts(raw) for b, raw in zip(binners, predicting, strict=True)]
    allocation = operating.allocate(
        pilot_counts, trials=setting.trials, delta=setting.delta, significance=setting.significance
    )
    return OperatingPoint(binners=tuple(binners), allocation=allocation)
