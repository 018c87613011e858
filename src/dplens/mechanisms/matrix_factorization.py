"""A runnable BandMF training under cyclic Poisson sampling, on a Dirac canary: the white-box game of issue 48.

The canary's clipped gradient is a unit vector in a coordinate no other example touches (a Dirac canary), so that
coordinate alone carries its signal: the training releases there the noisy gradients g̃ = x + C⁻¹z (noise correlated
across steps through the noising matrix B = C⁻¹, z ~ N(0, σ²I_T)), with x_t = 1 at the canary's steps where it was
sampled (its group's steps j, j + b, j + 2b, …, each with probability q) and 0 elsewhere. Data is the canary's
contribution c ∈ [0, 1] (1: present; 0: absent, D′). The exact log-likelihood ratio of the pair is that of the
accountant's dominating pair (Choquette-Choo et al. 2023, Thm 4): with y = C g̃ = Cx + z, the blocks of y on the
columns' disjoint supports are independent, so log p₁/p₀ = Σ_k log((1 − q) + q·exp((⟨y, c_k⟩ − ‖c_k‖²/2)/σ²)),
c_k = C_{:, j + kb}. Auditing it with dplens's distinguishing game checks the accounting of the simulated mechanism
(and, run on an implementation's own noise, the implementation) like DP-SGD's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng

__all__ = ["BandMfCanaryMechanism"]

#: Largest T simulated (dense triangular solves: O(T²) per trial).
MAX_STEPS = 2048


@dataclass(frozen=True, slots=True)
class BandMfCanaryMechanism:
    """The Dirac-canary game on an :class:`~dplens.accountant.mf_accounting.MfTraining` under cyclic Poisson."""

    training: Any
    _c: np.ndarray = field(init=False, repr=False)
    _columns: np.ndarray = field(init=False, repr=False)
    _group: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        run = self.training.run()
        if run.sampling != "cyclic-poisson" or run.max_batch_size is not None:
            raise ValueError(
                f"the canary game runs cyclic-poisson (untruncated) MF trainings only; got sampling={run.sampling!r}"
            )
        if run.strategy is None:
            raise ValueError("the canary game needs the strategy's coefficients (coefficients = [...])")
        if run.steps > MAX_STEPS:
            raise ValueError(f"steps must be <= {MAX_STEPS} for the canary game; got {run.steps}")
        c = np.asarray(run.strategy.dense(), dtype=float)
        norms = np.linalg.norm(c, axis=0)
        bands = run.bands
        groups = [norms[j::bands] for j in range(bands)]
        group = int(np.argmax([float(g @ g) for g in groups]))  # the dominating group where one exists
        object.__setattr__(self, "_c", c)
        object.__setattr__(self, "_columns", c[:, group::bands].T.copy())  # R × T: the canary's columns
        object.__setattr__(self, "_group", group)

    @property
    def event(self) -> Any:
        return self.training

    @property
    def _q(self) -> float:
        run = self.training.run()
        return run.batch_size * run.bands / run.dataset_size

    @staticmethod
    def _contribution(data: Any, name: str) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float) or not 0 <= data <= 1:
            raise ValueError(f"{name} must be the canary's contribution in [0, 1]; got {data!r}")
        return float(data)

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        return self.sample(data, 1, rng)[0]

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, T) noisy gradients in the canary's coordinate: g̃ = x + C⁻¹z."""
        from scipy.linalg import solve_triangular

        c, n, rng = self._contribution(data, "data"), check_count(n), check_rng(rng)
        sigma = self.training.noise_multiplier
        y = rng.standard_normal((n, self._c.shape[0])) * sigma  # z; then y = Cx + z
        if c > 0:
            y += (c * (rng.random((n, self._columns.shape[0])) < self._q)) @ self._columns
        return solve_triangular(self._c, y.T, lower=True).T  # C⁻¹(Cx + z) = x + C⁻¹z

    def _log_ratio_to_absent(self, g: np.ndarray, a: float) -> np.ndarray:
        if a == 0:
            return np.zeros(g.shape[0])
        sigma2 = self.training.noise_multiplier**2
        y = g @ self._c.T  # C g̃
        half = 0.5 * a * a * (self._columns * self._columns).sum(axis=1)
        z = (a * (y @ self._columns.T) - half) / sigma2
        q = self._q
        if q == 1.0:
            return z.sum(axis=1)
        return np.logaddexp(math.log1p(-q), math.log(q) + z).sum(axis=1)

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        a, b = self._contribution(data, "data"), self._contribution(neighbour, "neighbour")
        g = np.asarray(outputs, dtype=float)
        steps = self._c.shape[0]
        if g.ndim == 1 and g.size == steps:
            g = g[None, :]
        if g.ndim != 2 or g.shape[1] != steps:
            raise ValueError(f"outputs must have shape (n, {steps}); got {np.shape(outputs)!r}")
        return self._log_ratio_to_absent(g, a) - self._log_ratio_to_absent(g, b)

    def worst_case_pair(self) -> NeighbouringPair:
        return NeighbouringPair(
            data=1.0,
            neighbour=0.0,
            description=f"a Dirac canary in group {self._group} of {self.training.run().bands}, present vs absent",
        )

    def output_size(self) -> int:
        return int(self._c.shape[0])
