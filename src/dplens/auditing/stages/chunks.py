"""The chunk task: run the target on both inputs and count every score's raw bins (memory flat in the trials).

Used twice: by the operating-point stage on the selection half of the pilot (spawn keys (0, 22, chunk)) and by
the counting stage on the counted trials (the runner's chunk seeds, spawn keys (1, chunk)). Each chunk returns an
integer array of shape (2 · Σ raw sizes,), so results merge exactly whatever the backend or the worker count
(:mod:`dplens.auditing.runner`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import Binner
from dplens.auditing.runner import side_rng
from dplens.auditing.targets import Target

__all__ = ["TargetCountTask", "batch_size"]

_RESEEDED: set[int] = set()


def batch_size(target: Target) -> int:
    """Outputs drawn per call of the target: 16 384 for vectorised targets, 1 024 for one-at-a-time ones.

    Example:
        >>> from dplens.auditing.targets import as_target
        >>> batch_size(as_target(lambda data, rng: 0.0))
        1024
    """
    vectorised = target.kind.name == "BATCHED" or callable(getattr(target.function, "release_batch", None))
    return 16_384 if vectorised else 1024


@dataclass(frozen=True, slots=True)
class TargetCountTask:
    """Raw bin counts of one chunk for every score: shape (2, Σ raw sizes), fixed whatever the trial count."""

    target: Target
    data: Any
    neighbour: Any
    binners: tuple[Binner, ...]
    parent: int
    limits: tuple[int, int] | None = None  # Poissonised trial counts per side (chunk i covers i·chunk_size …)
    chunk_size: int = 0
    batch: int | None = None  # outputs per draw (the memory plan's; None: :func:`batch_size`)
    reduction: Any = None  # wide outputs: the reduction the scores see (user scores read whole outputs)

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        if os.getpid() != self.parent and os.getpid() not in _RESEEDED:
            # A forked worker inherits numpy's global RNG state: reseed it from fresh entropy so targets that draw
            # from it do not repeat the parent's (or a sibling's) draws.
            np.random.seed()
            _RESEEDED.add(os.getpid())
        sizes = [b.raw_size for b in self.binners]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        counts = np.zeros((2, int(offsets[-1])), dtype=np.int64)
        batch = self.batch if self.batch is not None else batch_size(self.target)
        for side, data in enumerate((self.data, self.neighbour)):
            rng = side_rng(seed, side)
            label = "D" if side == 0 else "D'"
            side_trials = trials
            if self.limits is not None:
                side_trials = min(max(self.limits[side] - index * self.chunk_size, 0), trials)
            for start in range(0, side_trials, batch):
                n = min(batch, side_trials - start)
                outputs = self.target.draw(data, n, rng, where=f"input {label}, chunk {index}, trials from {start + 1}")
                reduced = outputs if self.reduction is None else self.reduction(outputs, n)
                for b, binner in enumerate(self.binners):
                    raw = binner.raw_bins(outputs if binner.kind == "user-score" else reduced, n)
                    counts[side, offsets[b] : offsets[b + 1]] += np.bincount(raw, minlength=sizes[b])
                del outputs, reduced  # before the next draw: one batch in memory, not two
        return counts.reshape(-1)
