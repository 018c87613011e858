"""Chunk tasks and an Opacus model importable by worker processes that are spawned or forked from a fork server
(the test modules themselves are not: they are imported by pytest under names no fresh interpreter can resolve)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DrawTask:
    """Counts that identify the chunk: [index, trials, seed fingerprint, histogram of 8 bins of its draws]."""

    fail_after: int | None = None

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        if self.fail_after is not None and index >= self.fail_after:
            raise RuntimeError(f"simulated crash before chunk {index}")
        rng = np.random.default_rng(seed)
        stamp = int(seed.generate_state(1, np.uint32)[0])
        histogram = np.bincount(rng.integers(0, 8, size=trials), minlength=8)
        return np.concatenate([[index, trials, stamp], histogram]).astype(np.int64)


def model():
    """A small classifier for Opacus trainings (8 features, 3 classes)."""
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
