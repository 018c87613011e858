"""Stage 4 — run the counted trials: the target on both inputs, every output binned by every frozen score.

The trial counts of the two sides are Poisson draws, N_D, N_D′ ~ Poisson(trials) (:mod:`dplens.auditing.blackbox.
poisson`: the exact conditional bound needs them), split into a fixed plan of chunks that depends only on the
counts and the chunk size; chunk i draws from the runner's seed (1, i), so the merged counts are bit-identical
whatever the backend or the number of workers (:mod:`dplens.auditing.runner`). Only raw bin counts come back:
memory does not grow with the trials.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing import runner
from dplens.auditing.blackbox import poisson
from dplens.auditing.blackbox.base import Binner
from dplens.auditing.stages.chunks import TargetCountTask
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import Target, TargetPair

__all__ = ["Counted", "count_trials"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Counted:
    """Stage 4's answer: the counted raw bins of every score (shape (2, Σ raw sizes)), the Poissonised trial counts
    of the two sides, the number of chunks and the backend that ran them.

    Example:
        >>> import numpy as np
        >>> Counted(raw=np.zeros((2, 4), dtype=np.int64), side_trials=(10, 12), chunks=1, backend="in-process").chunks
        1
    """

    raw: np.ndarray
    side_trials: tuple[int, int]
    chunks: int
    backend: str


def count_trials(
    target: Target,
    pair: TargetPair,
    binners: tuple[Binner, ...],
    setting: AuditSetting,
    *,
    batch: int | None = None,
    reduction: Any = None,
) -> Counted:
    """Stage 4 (see the module docstring); ``batch``: outputs per draw (the memory plan's); ``reduction``: what
    the scores of wide outputs see."""
    trials, seed, workers, chunk_size = setting.trials, setting.seed, setting.workers, setting.chunk_size
    side_trials = poisson.poisson_trials(trials, seed)
    longest = max(side_trials)
    size = chunk_size if chunk_size is not None else max(1, min(max(math.ceil(longest / 8), 4096), 50_000, longest))
    plan = runner.ChunkPlan(longest, size)
    task = TargetCountTask(
        target, pair.data, pair.neighbour, binners, os.getpid(), limits=side_trials, chunk_size=size, batch=batch,
        reduction=reduction,
    )  # fmt: skip
    done = runner.run_chunks(
        task, plan, seed=seed, workers=workers, progress=setting.progress, description="target audit"
    )
    total = np.sum([done[i] for i in range(plan.chunks)], axis=0).reshape(2, -1)
    return Counted(
        raw=total,
        side_trials=side_trials,
        chunks=plan.chunks,
        backend=runner.backend_name(workers=workers, scheduler=None),
    )
