"""The training harness: whole trainings of the subject's step on crafted per-sample gradients, fast.

The canaries are **records of the data set**, so the sampler that runs decides in which batches they appear. Every
record's per-sample gradient is a Dirac vector (one coordinate, value in units of C); the coordinates are

- 0: the target canary's (gradient +C in D, zero in D′: the zero-out pair, which for Poisson sampling has the same
  ε as add/remove);
- 1..m: m canaries always present (+C each on its own coordinate), for the model-based sampling-rate bound;
- m+1..m+f: coordinates no record touches (pure noise), for the model-based noise bound.

The construction and the statistic are decided from pilot runs that are not counted, from what the sampler does:

- **variable-size batches** (batch sizes differ across pilot runs): the other records are zero; the score is the
  Poisson likelihood ratio Σ_t log(1 − q + q·exp((x_t − ½)/σ²)) of the target coordinate x_t (in units of C/B), or
  its sum Σ_t x_t when only the final model is observed (Nasr et al., USENIX Security 2023; Steinke et al., ICLR 2025
  for the last iterate);
- **fixed-size batches** (the same batch-size sequence in every pilot run): the other records sit at −C on the
  target coordinate (Chua et al., ICML 2024, "How private are DP-SGD implementations?"), so the target's batch
  stands out by +2 (D) or +1 (D′) once centred by the public batch sizes; the score is the exact log-sum-exp
  likelihood ratio over the positions of each epoch when every pilot epoch holds each record once (epoch length L),
  else the per-step mixture at q = B/N. No m canaries there: they would break the construction.

Scores use only the released updates and public constants (N, B, T, C, the pilot's batch-size sequence of a
fixed-size sampler), never the realised batch contents of a variable-size sampler. Before each training the global
numpy, ``random`` and torch generators are re-seeded independently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dplens.auditing.training.batches import BatchSource
from dplens.auditing.training.declared import Declaration
from dplens.auditing.training.framework_free import StepSubject, reseed_globals

__all__ = ["COLUMNS", "Layout", "Statistic", "TrainingTask", "decide"]

COLUMNS = ("score_every", "score_final", "canary_sum", "free_squares", "fingerprint_0", "fingerprint_1")
_SIDES = ("D", "D'")
VARIABLE, FIXED = "variable-size (Poisson likelihood ratio)", "fixed-size (Chua et al., others at -C)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Which record carries which gradient (``col[i]``: its coordinate, ``value[i]``: its entry in units of C)."""

    construction: str
    target: int
    canaries: np.ndarray
    free: int
    col: np.ndarray
    value: np.ndarray

    @property
    def m(self) -> int:
        return int(self.canaries.size)

    @property
    def dim(self) -> int:
        return 1 + self.m + self.free

    def values(self, side: int) -> np.ndarray:
        """The entries of side 0 (D: target +1) or 1 (D′: target zeroed)."""
        if side == 0:
            return self.value
        out = self.value.copy()
        out[self.target] = 0.0
        return out


def make_layout(n: int, construction: str, rng: np.random.Generator, *, canaries: int = 100, free: int = 100):
    """A layout on ``n`` records: the target and the canaries at random record indices (chosen before the data)."""
    m = 0 if construction == FIXED else max(0, min(canaries, (n - 1) // 2))
    chosen = rng.choice(n, size=1 + m, replace=False)
    col = np.zeros(n, dtype=np.int64)
    value = np.full(n, -1.0 if construction == FIXED else 0.0)
    col[chosen[1:]] = 1 + np.arange(m)
    value[chosen] = 1.0
    return Layout(
        construction=construction, target=int(chosen[0]), canaries=chosen[1:], free=free, col=col, value=value
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Statistic:
    """The audit's score, fixed before the counted trainings."""

    construction: str
    sigma: float
    q: float
    epoch_length: int | None = None
    centre: np.ndarray | None = None  # fixed-size: the public batch-size sequence (others at -C)

    def name(self, observe: str) -> str:
        if observe == "final":
            return "sum of the target coordinate over the steps (final model)"
        if self.construction == VARIABLE:
            return "Poisson likelihood ratio over the steps"
        if self.epoch_length is not None:
            return f"exact log-sum-exp likelihood ratio over positions, epochs of {self.epoch_length} steps"
        return f"per-step mixture likelihood ratio at q = {self.q:.6g}"

    def exact_ratio(self, observe: str) -> bool:
        """Whether the score is the exact log-likelihood ratio log dP_D/dP_D′ of a training that runs as declared
        (the Poisson ratio; the log-sum-exp ratio over the positions of an established epoch), not a proxy (the
        final model's sum, the per-step mixture of a fixed-size sampler without epochs)."""
        return observe == "every" and (self.construction == VARIABLE or self.epoch_length is not None)

    def scores(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(every-step, final) scores of a (trainings, T) array of target-coordinate outputs in units of C."""
        s2 = self.sigma**2
        if self.construction == VARIABLE:
            every = np.sum(np.logaddexp(math.log1p(-self.q), math.log(self.q) + (x - 0.5) / s2), axis=1)
            return every, x.sum(axis=1)
        c = x + self.centre[None, : x.shape[1]]
        l2, l1 = (2 * c - 2.0) / s2, (c - 0.5) / s2  # log-ratios against the null of shifts 2 and 1
        if self.epoch_length is None:
            lq, lp = math.log1p(-self.q), math.log(self.q)
            every = np.sum(np.logaddexp(lq, lp + l2) - np.logaddexp(lq, lp + l1), axis=1)
            return every, c.sum(axis=1)
        every = np.zeros(x.shape[0])
        length = self.epoch_length
        for start in range(0, x.shape[1], length):
            part = slice(start, min(start + length, x.shape[1]))
            absent = length - (part.stop - part.start)
            every += _epoch_log(l2[:, part], absent, length) - _epoch_log(l1[:, part], absent, length)
        return every, c.sum(axis=1)


def _epoch_log(logs: np.ndarray, absent: int, length: int) -> np.ndarray:
    """log((Σ_t exp(logs_t) + absent) / length): the epoch's likelihood ratio against the null."""
    top = np.max(logs, axis=1, keepdims=True)
    total = np.exp(logs - top).sum(axis=1) + absent * np.exp(-top[:, 0])
    return top[:, 0] + np.log(total) - math.log(length)


def _sizes(source: BatchSource, seed: np.random.SeedSequence, runs: int) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    sizes, all_batches = [], []
    for r, child in enumerate(seed.spawn(runs)):
        reseed_globals(child.spawn(1)[0])
        batches = list(source.batches(np.random.default_rng(child), f"pilot sampler run {r}"))
        sizes.append([b.size for b in batches])
        all_batches.append(batches)
    return np.asarray(sizes), all_batches


def epoch_length(runs: list[list[np.ndarray]], n: int) -> int | None:
    """L when, in every run, every window of L consecutive steps holds each record exactly once; else None."""
    first = runs[0]
    total, length = 0, None
    for t, batch in enumerate(first):
        total += batch.size
        if total >= n:
            length = t + 1 if total == n else None
            break
    if length is None:
        return None
    for batches in runs:
        for start in range(0, len(batches) - length + 1, length):
            window = np.concatenate(batches[start : start + length])
            if window.size != n or not np.array_equal(np.sort(window), np.arange(n)):
                return None
    return length


def decide(source: BatchSource, decl: Declaration, seed: np.random.SeedSequence, runs: int = 4) -> Statistic:
    """The construction and statistic, from pilot runs of the sampler that are not counted."""
    sizes, batches = _sizes(source, seed, runs)
    fixed = bool(np.all(sizes == sizes[0]))
    if not fixed:
        return Statistic(construction=VARIABLE, sigma=decl.noise_multiplier, q=decl.sampling_rate)
    return Statistic(
        construction=FIXED,
        sigma=decl.noise_multiplier,
        q=decl.sampling_rate,
        epoch_length=epoch_length(batches, decl.dataset_size),
        centre=sizes[0].astype(float),
    )


class TrainingTask:
    """A chunk task for :func:`dplens.auditing.runner.run_chunks`: ``trials`` trainings of each side.

    Returns a (2, trials, 6) array of the :data:`COLUMNS` per side (0: D, 1: D′)."""

    def __init__(
        self, subject: StepSubject, source: BatchSource, decl: Declaration, layout: Layout, statistic: Statistic
    ) -> None:
        self.subject, self.source, self.decl, self.layout, self.statistic = subject, source, decl, layout, statistic

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        out = np.empty((2, trials, len(COLUMNS)))
        for side in (0, 1):
            values = self.layout.values(side)
            x0 = np.empty((trials, self.decl.steps))
            for j in range(trials):
                child = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, side, j))
                where = f"chunk {index}, training {j} of side {_SIDES[side]}"
                x0[j], out[side, j, 2:] = self.training(values, child, where)
            out[side, :, 0], out[side, :, 1] = self.statistic.scores(x0)
        return out

    def training(self, values: np.ndarray, seed: np.random.SeedSequence, where: str) -> tuple[np.ndarray, list]:
        """One training: the target coordinate per step (units of C) and [canary sum, free squares, fingerprints]."""
        globals_seed, batch_seed, step_seed = seed.spawn(3)
        reseed_globals(globals_seed)
        rng_batches, rng_step = np.random.default_rng(batch_seed), np.random.default_rng(step_seed)
        layout, clip = self.layout, self.decl.max_grad_norm
        scale = self.decl.normaliser / clip
        m, dim = layout.m, layout.dim
        x0 = np.empty(self.decl.steps)
        canary, free, prints = 0.0, 0.0, [0.0, 0.0]
        for t, idx in enumerate(self.source.batches(rng_batches, where)):
            grads = np.zeros((idx.size, dim))
            grads[np.arange(idx.size), layout.col[idx]] = clip * values[idx]
            x = self.subject(grads, rng_step, f"{where}, step {t}") * scale
            x0[t] = x[0]
            canary += float(x[1 : 1 + m].sum())
            tail = x[1 + m :]
            free += float(tail @ tail)
            if t == 0:  # the first step's noise on two untouched coordinates: a pair that never repeats by chance
                prints = [float(tail[0]), float(tail[1 % tail.size])]
        return x0, [canary, free, *prints]
