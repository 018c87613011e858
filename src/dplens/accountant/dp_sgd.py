"""The DP-SGD one-liners: ε of a training run, and the noise multiplier for a target ε.

What Opacus (``get_noise_multiplier``, its accountants) and TF Privacy (``compute_dp_sgd_privacy``) users reach for,
stated in their terms: data set size N, (expected) batch size B, epochs E, noise multiplier σ (noise std ÷ clipping
norm), δ. The run is accounted as E·N/B steps of the Poisson-subsampled Gaussian with q = B/N under add/remove
adjacency (Abadi et al. 2016; Mironov, Talwar, Zhang 2019), the steps rounded up, ⌈E·N/B⌉, as TF Privacy does
(Opacus rounds down, int(E/q): one step fewer at most, never more private). Shuffled fixed-size batches are *not*
Poisson sampling; the Poisson figure is the conventional one, not a guarantee for shuffling (Chua et al. 2024).

Every ε is an upper bound (BEST: the smallest of the RDP and PLD routes); the calibrated σ satisfies ε(σ) ≤ target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method
from dplens.accountant.routes import as_method

__all__ = ["DpSgdPrivacy", "dp_sgd_epsilon", "dp_sgd_noise_multiplier", "dp_sgd_steps"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DpSgdPrivacy:
    """The privacy of a DP-SGD run: (ε, δ) with everything it was computed from.

    Example:
        >>> run = dp_sgd_epsilon(dataset_size=60000, batch_size=256, epochs=60, noise_multiplier=1.1, delta=1e-5,
        ...                      method="rdp")
        >>> run.steps, round(run.epsilon, 4), run.method
        (14063, 2.5966, 'rdp')
        >>> sorted(run.to_dict())[:4]
        ['batch_size', 'dataset_size', 'delta', 'details']
    """

    epsilon: float
    delta: float
    noise_multiplier: float
    dataset_size: int
    batch_size: int
    epochs: float
    steps: int
    sampling_rate: float
    method: str
    details: str
    target_epsilon: float | None = None
    neighboring: str = ev.NeighboringRelation.ADD_OR_REMOVE_ONE.value
    sampling: str = "poisson"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "noise_multiplier": self.noise_multiplier,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "steps": self.steps,
            "sampling_rate": self.sampling_rate,
            "method": self.method,
            "details": self.details,
            "neighboring": self.neighboring,
            "sampling": self.sampling,
        }
        if self.target_epsilon is not None:
            out["target_epsilon"] = self.target_epsilon
        return out


def _check_run(dataset_size: int, batch_size: int, epochs: float) -> None:
    for name, value in (("dataset_size", dataset_size), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    if batch_size > dataset_size:
        raise ValueError(
            f"batch_size must be <= dataset_size; got batch_size={batch_size!r}, dataset_size={dataset_size!r}"
        )
    if isinstance(epochs, bool) or not isinstance(epochs, int | float) or not (math.isfinite(epochs) and epochs > 0):
        raise ValueError(f"epochs must be a finite number > 0; got {epochs!r}")


def dp_sgd_steps(*, dataset_size: int, batch_size: int, epochs: float) -> int:
    """⌈epochs·N/B⌉ steps (TF Privacy's ``compute_dp_sgd_privacy`` convention).

    Example (the MNIST tutorial: 60 epochs of 256 out of 60 000):
        >>> dp_sgd_steps(dataset_size=60000, batch_size=256, epochs=60)
        14063
    """
    _check_run(dataset_size, batch_size, epochs)
    return math.ceil(epochs * dataset_size / batch_size - 1e-9)


def dp_sgd_epsilon(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    noise_multiplier: float,
    delta: float,
    method: Method | str = Method.BEST,
) -> DpSgdPrivacy:
    """ε of a DP-SGD run (Poisson sampling at q = B/N, ⌈E·N/B⌉ steps, add/remove adjacency), an upper bound.

    Example (MNIST: σ = 1.1, 60 epochs; the anchors' PLD value is 2.3818):
        >>> run = dp_sgd_epsilon(dataset_size=60000, batch_size=256, epochs=60, noise_multiplier=1.1, delta=1e-5,
        ...                      method="pld")
        >>> run.steps, round(run.epsilon, 3)
        (14063, 2.382)
    """
    steps = dp_sgd_steps(dataset_size=dataset_size, batch_size=batch_size, epochs=epochs)
    method = as_method(method)
    step = ev.PoissonSampled(
        sampling_rate=batch_size / dataset_size, event=ev.Gaussian(noise_multiplier=noise_multiplier)
    )
    result = Accountant().compose(step, steps).epsilon_result(delta, method=method)
    return DpSgdPrivacy(
        epsilon=result.epsilon,
        delta=result.delta,
        noise_multiplier=float(noise_multiplier),
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=float(epochs),
        steps=steps,
        sampling_rate=batch_size / dataset_size,
        method=result.method.value,
        details=result.details,
    )


def dp_sgd_noise_multiplier(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    target_epsilon: float,
    delta: float,
    method: Method | str = Method.PLD,
) -> DpSgdPrivacy:
    """The smallest noise multiplier whose DP-SGD run meets (target ε, δ); its ε is ≤ the target (checked).

    Brent's method with the safe-side guarantee of :func:`dplens.accountant.calibrate.calibrate`.

    Example (MNIST, ε = 3: dp-accounting's RDP calibration on its order grid gives 1.01412; α optimised
    continuously needs a little less noise):
        >>> run = dp_sgd_noise_multiplier(dataset_size=60000, batch_size=256, epochs=60, target_epsilon=3.0,
        ...                               delta=1e-5, method="rdp")
        >>> round(run.noise_multiplier, 3), run.epsilon <= 3.0
        (1.014, True)
    """
    from dplens.accountant.calibrate import calibrate_dp_sgd_noise

    steps = dp_sgd_steps(dataset_size=dataset_size, batch_size=batch_size, epochs=epochs)
    method = as_method(method)
    if method is Method.BEST:
        method = Method.PLD  # the tightest route for this mechanism
    result = calibrate_dp_sgd_noise(
        sampling_rate=batch_size / dataset_size,
        steps=steps,
        target_epsilon=target_epsilon,
        target_delta=delta,
        method=method,
        lower=0.05,
        upper=1000.0,
    )
    return DpSgdPrivacy(
        epsilon=result.epsilon,
        delta=result.delta,
        noise_multiplier=float(result.value),
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=float(epochs),
        steps=steps,
        sampling_rate=batch_size / dataset_size,
        method=result.method.value,
        details=result.details,
        target_epsilon=float(target_epsilon),
    )
