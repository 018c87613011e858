"""What the accountant was told: the declared DP-SGD mechanism a training audit compares the step that ran against.

σ (noise multiplier), C (clipping norm), B (expected batch size), N (data set size), T (steps), δ, the declared
sampler (the names of ``dplens dp-sgd --sampling``), the normalisation (``expected``: the noisy sum divided by B;
``sum``: not divided) and the neighbouring relation. The claimed ε is the accountant's upper bound for it
(:func:`dplens.accountant.dp_sgd.dp_sgd_epsilon`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dplens.accountant import dp_sgd

__all__ = ["NORMALISATIONS", "Declaration", "steps_of"]

NORMALISATIONS = ("expected", "sum")
# Samplers a check can form itself and test a loader against (truncated Poisson needs a maximum batch size, which
# the check's contract does not carry).
SUPPORTED = tuple(s.value for s in dp_sgd.Sampler if s is not dp_sgd.Sampler.TRUNCATED_POISSON)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"check_dp_sgd: {name} must be an integer >= 1; got {value!r}")
    return int(value)


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"check_dp_sgd: {name} must be a finite number > 0; got {value!r}")
    return float(value)


def steps_of(*, steps: Any, epochs: Any, dataset_size: int, batch_size: int) -> int:
    """T from exactly one of ``steps`` and ``epochs`` (T = ⌈E·N/B⌉, as ``dplens dp-sgd`` counts)."""
    if (steps is None) == (epochs is None):
        raise ValueError(f"check_dp_sgd: give exactly one of steps and epochs; got steps={steps!r}, epochs={epochs!r}")
    if steps is not None:
        return _positive_int("steps", steps)
    epochs = _positive("epochs", epochs)
    return dp_sgd.dp_sgd_steps(dataset_size=dataset_size, batch_size=batch_size, epochs=epochs)


@dataclass(frozen=True, slots=True, kw_only=True)
class Declaration:
    """The declared mechanism (what the accountant's ε assumes)."""

    noise_multiplier: float
    max_grad_norm: float
    batch_size: int
    dataset_size: int
    steps: int
    delta: float
    sampler: str = "poisson"
    normalise: str = "expected"
    neighboring: str | None = None

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier)
        _positive("max_grad_norm", self.max_grad_norm)
        _positive_int("batch_size", self.batch_size)
        _positive_int("dataset_size", self.dataset_size)
        _positive_int("steps", self.steps)
        if self.batch_size > self.dataset_size:
            raise ValueError(
                f"check_dp_sgd: batch_size must be <= dataset_size; got {self.batch_size} > {self.dataset_size}"
            )
        if isinstance(self.delta, bool) or not isinstance(self.delta, int | float) or not 0 < self.delta < 1:
            raise ValueError(f"check_dp_sgd: delta must be in (0, 1); got {self.delta!r}")
        sampler = dp_sgd.as_sampler(self.sampler).value if isinstance(self.sampler, str) else None
        if sampler not in SUPPORTED:
            raise ValueError(f"check_dp_sgd: sampler must be one of {list(SUPPORTED)}; got {self.sampler!r}")
        object.__setattr__(self, "sampler", sampler)
        if self.normalise not in NORMALISATIONS:
            raise ValueError(f"check_dp_sgd: normalise must be one of {list(NORMALISATIONS)}; got {self.normalise!r}")
        relation = dp_sgd._as_relation(dp_sgd.Sampler(sampler), self.neighboring)
        object.__setattr__(self, "neighboring", relation.value)

    @property
    def sampling_rate(self) -> float:
        return self.batch_size / self.dataset_size

    @property
    def normaliser(self) -> float:
        """What the noisy sum is divided by: B (expected) or 1 (sum)."""
        return float(self.batch_size) if self.normalise == "expected" else 1.0

    @property
    def epochs(self) -> float:
        return self.steps * self.batch_size / self.dataset_size

    def run(self, noise_multiplier: float | None = None) -> dp_sgd.DpSgdRun:
        """The accountant's event of the declared training (at another σ when given)."""
        run = dp_sgd.DpSgdRun(
            noise_multiplier=self.noise_multiplier if noise_multiplier is None else noise_multiplier,
            dataset_size=self.dataset_size,
            batch_size=self.batch_size,
            epochs=self.epochs,
            sampling=self.sampler,
            neighboring=self.neighboring,
        )
        if run.steps != self.steps:  # ⌈E·N/B⌉ rounding of T·B/N: pin the epochs so the run has exactly T steps
            run = dp_sgd.DpSgdRun(
                **{**_fields(run), "epochs": (self.steps - 0.5) * self.batch_size / self.dataset_size}
            )
        return run

    def claimed(self) -> dp_sgd.DpSgdPrivacy:
        """The accountant's ε (an upper bound) and its certified lower end for the declared training."""
        return dp_sgd.dp_sgd_epsilon(
            dataset_size=self.dataset_size,
            batch_size=self.batch_size,
            epochs=self.run().epochs,
            noise_multiplier=self.noise_multiplier,
            delta=self.delta,
            sampling=self.sampler,
            neighboring=self.neighboring,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "noise_multiplier": self.noise_multiplier,
            "max_grad_norm": self.max_grad_norm,
            "batch_size": self.batch_size,
            "dataset_size": self.dataset_size,
            "steps": self.steps,
            "delta": self.delta,
            "sampler": self.sampler,
            "normalise": self.normalise,
            "neighboring": self.neighboring,
        }


def _fields(run: dp_sgd.DpSgdRun) -> dict[str, Any]:
    return {
        "noise_multiplier": run.noise_multiplier,
        "dataset_size": run.dataset_size,
        "batch_size": run.batch_size,
        "epochs": run.epochs,
        "sampling": run.sampling,
        "neighboring": run.neighboring,
    }
