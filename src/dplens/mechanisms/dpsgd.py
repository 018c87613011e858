"""DP-SGD (Abadi et al. 2016) with Poisson sampling for linear and logistic models, in numpy.

The baseline of seed 003's experiments and the mechanism of the training audits; feature-DP SGD (seed 003,
Algorithm 1) builds on the loop here (:mod:`dplens.research.feature_dp.mechanism`).

Models are generalised linear models on z = θᵀx: ℓ(z; y) = A(z) − yz (+ a term free of θ), with A(z) = z²/2
(LINEAR, squared loss ½(z − y)²) or A(z) = log(1 + e^z) (LOGISTIC, y ∈ {0, 1}). The per-example gradient is
(A′(z) − y)·x.

Also here (shared with :mod:`dplens.research.corrdp.mechanism`): the loss models, the empirical loss, projection
onto a ball and a non-private reference minimiser.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dplens.accountant import events as ev
from dplens.mechanisms.base import check_count, check_positive, check_rng

__all__ = [
    "LearningRateSchedule",
    "LossModel",
    "NoisySgdResult",
    "SgdVariant",
    "check_data",
    "common_checks",
    "dp_sgd",
    "empirical_loss",
    "link_residual",
    "minimise_loss",
    "noisy_sgd",
    "predict",
    "project_to_ball",
    "test_error",
]


# --------------------------------------------------------------------------------------------
# Models and losses (shared with CorrDP-SGD)


class LossModel(enum.Enum):
    """GLM losses ℓ(z; y) = A(z) − yz on z = θᵀx.

    LINEAR: ½(θᵀx − y)² (A(z) = z²/2); Lipschitz on the ball ‖θ‖ ≤ D with L = D + label bound when ‖x‖ ≤ 1.
    LOGISTIC: log(1 + e^{θᵀx}) − y θᵀx with y ∈ {0, 1}; L = 1 when ‖x‖ ≤ 1.
    """

    LINEAR = "linear"
    LOGISTIC = "logistic"


def check_data(
    features: Any, labels: Any, model: LossModel, *, max_feature_norm: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate (features (n, d), labels (n,)) for ``model``; optionally ‖x‖₂ ≤ ``max_feature_norm`` per row."""
    x = np.asarray(features, dtype=float)
    y = np.asarray(labels, dtype=float)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1 or not np.all(np.isfinite(x)):
        raise ValueError(f"features must be a finite 2-D array (n, m); got shape {x.shape!r}")
    if y.shape != (x.shape[0],) or not np.all(np.isfinite(y)):
        raise ValueError(f"labels must be a finite vector of length {x.shape[0]}; got shape {y.shape!r}")
    if max_feature_norm is not None:
        norms = np.linalg.norm(x, axis=1)
        if np.any(norms > max_feature_norm + 1e-9):
            raise ValueError(
                f"features must satisfy ||x||_2 <= {max_feature_norm:g} (Assumption 3.3); got max norm {norms.max()!r}"
            )
    if not isinstance(model, LossModel):
        raise ValueError(f"model must be a LossModel; got {model!r}")
    if model is LossModel.LOGISTIC and not np.all((y == 0) | (y == 1)):
        raise ValueError(f"labels must be 0/1 for the logistic model; got {np.unique(y)!r}")
    return x, y


def _mean_link(z: np.ndarray, model: LossModel) -> np.ndarray:
    """A′(z): z (linear) or sigmoid(z) (logistic), overflow-free."""
    if model is LossModel.LINEAR:
        return z
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def link_residual(theta: np.ndarray, x: np.ndarray, y: np.ndarray, model: LossModel) -> np.ndarray:
    """dℓ/dz = A′(θᵀx) − y for each row: the per-example gradient is this times x."""
    return _mean_link(x @ theta, model) - y


def empirical_loss(theta: Any, features: Any, labels: Any, *, model: LossModel) -> float:
    """F(θ) = (1/n) Σ ℓ(θ; (x_i, y_i))."""
    x, y = check_data(features, labels, model)
    z = x @ np.asarray(theta, dtype=float)
    if model is LossModel.LINEAR:
        return float(0.5 * np.mean((z - y) ** 2))
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def project_to_ball(theta: np.ndarray, radius: float | None) -> np.ndarray:
    """Euclidean projection onto {‖θ‖ ≤ radius} (identity for radius None)."""
    if radius is None:
        return theta
    norm = float(np.linalg.norm(theta))
    return theta if norm <= radius else theta * (radius / norm)


def minimise_loss(
    features: Any,
    labels: Any,
    *,
    model: LossModel,
    radius: float,
    iterations: int = 3000,
    step: float | None = None,
) -> np.ndarray:
    """θ̂ ≈ argmin_{‖θ‖ ≤ D} F(θ) by full-batch projected gradient descent (a non-private reference).

    Default step 1/β with β = s·max(1, max‖x‖²) the smoothness bound (s = 1 linear, ¼ logistic), i.e. step 1 and 4
    when ‖x‖ ≤ 1.
    """
    x, y = check_data(features, labels, model)
    d = check_positive("radius", radius)
    its = check_count(iterations, name="iterations")
    if step is None:
        scale = max(1.0, float(np.max(np.sum(x * x, axis=1))))
        step = (1.0 if model is LossModel.LINEAR else 4.0) / scale
    else:
        step = check_positive("step", step)
    theta = np.zeros(x.shape[1])
    for _ in range(its):
        grad = x.T @ link_residual(theta, x, y, model) / x.shape[0]
        theta = project_to_ball(theta - step * grad, d)
    return theta


def predict(theta: Any, features: Any, *, model: LossModel) -> np.ndarray:
    """Predictions: θᵀx (linear) or P(y = 1 | x) = sigmoid(θᵀx) (logistic)."""
    if not isinstance(model, LossModel):
        raise ValueError(f"model must be a LossModel; got {model!r}")
    x = np.asarray(features, dtype=float)
    return _mean_link(x @ np.asarray(theta, dtype=float), model)


def test_error(theta: Any, features: Any, labels: Any, *, model: LossModel) -> float:
    """Held-out error: misclassification rate (logistic, threshold ½) or mean squared error (linear)."""
    x, y = check_data(features, labels, model)
    pred = predict(theta, x, model=model)
    if model is LossModel.LOGISTIC:
        return float(np.mean((pred >= 0.5) != (y == 1)))
    return float(np.mean((pred - y) ** 2))


test_error.__test__ = False  # a metric, not a pytest test


# --------------------------------------------------------------------------------------------
# Noisy SGD


class LearningRateSchedule(enum.Enum):
    """η(t): CONSTANT = c, INVERSE_SQRT = c/√t (Theorem 6)."""

    CONSTANT = "constant"
    INVERSE_SQRT = "inverse_sqrt"


class SgdVariant(enum.Enum):
    """Which algorithm produced a result (variants defined elsewhere add their own enum)."""

    DP_SGD = "dp_sgd"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoisySgdResult:
    """The last iterate of a (feature-)DP-SGD run and what the accountant needs to know about it.

    ``event`` is the run's privacy event: ``FeatureDpSgd`` (feature DP, Theorem 5) or the standard
    ``SelfComposed(PoissonSampled(Gaussian))`` (DP-SGD, add/remove DP). Account it with
    :class:`dplens.accountant.compose.Accountant`.
    """

    theta: np.ndarray
    variant: enum.Enum
    model: LossModel
    noise_multiplier: float
    sampling_rate: float
    clip_norm: float
    steps: int
    expected_batch_size: float
    public_batch_size: int | None
    mean_batch_size: float
    clipped_fraction: float
    event: ev.Event
    public: Any = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "theta": self.theta.tolist(),
            "variant": self.variant.value,
            "model": self.model.value,
            "noise_multiplier": self.noise_multiplier,
            "sampling_rate": self.sampling_rate,
            "clip_norm": self.clip_norm,
            "steps": self.steps,
            "expected_batch_size": self.expected_batch_size,
            "public_batch_size": self.public_batch_size,
            "mean_batch_size": self.mean_batch_size,
            "clipped_fraction": self.clipped_fraction,
            "event": ev.event_to_dict(self.event),
            "public": None if self.public is None else self.public.to_dict(),
        }


def _check_rate(sampling_rate: Any) -> float:
    ok = isinstance(sampling_rate, int | float | np.integer | np.floating) and not isinstance(sampling_rate, bool)
    if not ok or not (0 < float(sampling_rate) <= 1):
        raise ValueError(f"sampling_rate must be in (0, 1]; got {sampling_rate!r}")
    return float(sampling_rate)


def _clip_rows(grads: np.ndarray, clip_norm: float) -> tuple[np.ndarray, int]:
    norms = np.linalg.norm(grads, axis=1)
    factor = np.minimum(1.0, clip_norm / np.maximum(norms, 1e-300))
    return grads * factor[:, None], int(np.count_nonzero(norms > clip_norm))


def noisy_sgd(
    x: np.ndarray,
    y: np.ndarray,
    *,
    model: LossModel,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    clip_norm: float,
    learning_rate: float,
    rng: np.random.Generator,
    private_weight: float,
    schedule: LearningRateSchedule,
    momentum: float,
    radius: float | None,
    theta0: Any,
    expected_batch_size: float,
    per_example_gradients: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None,
    public_step: Callable[[np.ndarray, np.ndarray, np.ndarray, np.random.Generator], np.ndarray] | None = None,
) -> tuple[np.ndarray, float, float]:
    """The noisy SGD loop shared by DP-SGD and its variants; returns (θ_T, mean batch size, clipped fraction).

    Each step: a Poisson batch (each record with probability p), per-example gradients (``per_example_gradients(θ,
    x_B, y_B)``, default ∇ℓ) clipped to C, noise of std z·C on the sum, divided by the *expected* batch size
    (never the realised one); ``public_step(θ, x_B, y_B, rng)`` adds an un-noised term computed from public data
    only (feature DP's g_pub), after the noise is drawn.
    """
    n, d = x.shape
    theta = np.zeros(d) if theta0 is None else np.asarray(theta0, dtype=float).copy()
    if theta.shape != (d,) or not np.all(np.isfinite(theta)):
        raise ValueError(f"theta0 must be a finite vector of length {d}; got {theta0!r}")
    velocity = np.zeros(d)
    noise_std_on_sum = noise_multiplier * clip_norm
    batch_total, clipped, seen = 0, 0, 0
    for t in range(1, steps + 1):
        idx = np.flatnonzero(rng.random(n) < sampling_rate)
        xb, yb = x[idx], y[idx]
        if per_example_gradients is None:
            grads = link_residual(theta, xb, yb, model)[:, None] * xb
        else:
            grads = per_example_gradients(theta, xb, yb)
        grads, n_clipped = _clip_rows(grads, clip_norm)
        g_priv = (grads.sum(axis=0) + noise_std_on_sum * rng.standard_normal(d)) / expected_batch_size
        g = private_weight * g_priv
        if public_step is not None:
            g = g + public_step(theta, xb, yb, rng)
        eta = learning_rate if schedule is LearningRateSchedule.CONSTANT else learning_rate / math.sqrt(t)
        velocity = momentum * velocity + g
        theta = project_to_ball(theta - eta * velocity, radius)
        batch_total += idx.size
        clipped += n_clipped
        seen += idx.size
    mean_batch = batch_total / steps if steps else 0.0
    return theta, mean_batch, (clipped / seen if seen else 0.0)


def common_checks(
    features: Any,
    labels: Any,
    model: LossModel,
    noise_multiplier: Any,
    sampling_rate: Any,
    steps: Any,
    clip_norm: Any,
    learning_rate: Any,
    rng: Any,
    schedule: Any,
    momentum: Any,
    radius: Any,
    private_weight: Any = 1.0,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Validate the arguments shared by the DP-SGD trainers (``ValueError`` naming the argument and echoing the
    value); returns the checked features, labels and a dict of the checked scalar options."""
    x, y = check_data(features, labels, model)
    rng = check_rng(rng)
    if not isinstance(schedule, LearningRateSchedule):
        raise ValueError(f"schedule must be a LearningRateSchedule; got {schedule!r}")
    if isinstance(momentum, bool) or not isinstance(momentum, int | float) or not (0 <= momentum < 1):
        raise ValueError(f"momentum must be in [0, 1); got {momentum!r}")
    checked = {
        "noise_multiplier": check_positive("noise_multiplier", noise_multiplier),
        "sampling_rate": _check_rate(sampling_rate),
        "steps": check_count(steps, name="steps"),
        "clip_norm": check_positive("clip_norm", clip_norm),
        "learning_rate": check_positive("learning_rate", learning_rate),
        "rng": rng,
        "schedule": schedule,
        "momentum": float(momentum),
        "radius": None if radius is None else check_positive("radius", radius),
        "private_weight": check_positive("private_weight", private_weight),
    }
    return x, y, checked


def run_noisy_sgd(
    x: np.ndarray,
    y: np.ndarray,
    kw: dict[str, Any],
    *,
    model: LossModel,
    theta0: Any,
    expected_batch_size: float,
    variant: enum.Enum,
    event: ev.Event,
    public_batch_size: int | None = None,
    public: Any = None,
    per_example_gradients: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None,
    public_step: Callable[[np.ndarray, np.ndarray, np.ndarray, np.random.Generator], np.ndarray] | None = None,
) -> NoisySgdResult:
    """Run :func:`noisy_sgd` on the data and options checked by :func:`common_checks` (``kw``) and wrap its last
    iterate with what the accountant needs: the trainers' common tail (DP-SGD and feature-DP SGD)."""
    theta, mean_batch, clipped = noisy_sgd(
        x,
        y,
        model=model,
        theta0=theta0,
        expected_batch_size=expected_batch_size,
        per_example_gradients=per_example_gradients,
        public_step=public_step,
        **kw,
    )
    return NoisySgdResult(
        theta=theta,
        variant=variant,
        model=model,
        noise_multiplier=kw["noise_multiplier"],
        sampling_rate=kw["sampling_rate"],
        clip_norm=kw["clip_norm"],
        steps=kw["steps"],
        expected_batch_size=expected_batch_size,
        public_batch_size=public_batch_size,
        mean_batch_size=mean_batch,
        clipped_fraction=clipped,
        event=event,
        public=public,
    )


def dp_sgd(
    features: Any,
    labels: Any,
    *,
    model: LossModel,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    clip_norm: float,
    learning_rate: float,
    rng: np.random.Generator,
    schedule: LearningRateSchedule = LearningRateSchedule.CONSTANT,
    momentum: float = 0.0,
    radius: float | None = None,
    theta0: Any = None,
) -> NoisySgdResult:
    """DP-SGD (Abadi et al. 2016) with Poisson sampling: the baseline of the paper's experiments (Section 6).

    Each step: Poisson batch with rate p, per-example gradients ∇ℓ(x) clipped to C, Gaussian noise of std z·C on
    the sum, divided by the expected batch size m = p·n; projected (or plain) SGD, optional momentum
    (post-processing). Add/remove (ε, δ)-DP with the event ``SelfComposed(PoissonSampled(p, Gaussian(z)), T)``,
    which by Proposition 2 is also feature-DP for every Ψ at the same ε.

    Args:
        features: (n, d) array.
        labels: (n,) array (0/1 for logistic).
        model: the loss.
        noise_multiplier: z = noise std on the sum ÷ C.
        sampling_rate: p ∈ (0, 1].
        steps: T.
        clip_norm: C.
        learning_rate: c in η(t) = c or c/√t.
        rng: the randomness.
        schedule: the learning-rate schedule.
        momentum: heavy-ball momentum in [0, 1).
        radius: projection radius (None: no projection).
        theta0: the starting point (default 0).
    """
    x, y, kw = common_checks(
        features,
        labels,
        model,
        noise_multiplier,
        sampling_rate,
        steps,
        clip_norm,
        learning_rate,
        rng,
        schedule,
        momentum,
        radius,
    )
    step_event = ev.PoissonSampled(
        sampling_rate=kw["sampling_rate"], event=ev.Gaussian(noise_multiplier=kw["noise_multiplier"])
    )
    return run_noisy_sgd(
        x,
        y,
        kw,
        model=model,
        theta0=theta0,
        expected_batch_size=kw["sampling_rate"] * x.shape[0],
        variant=SgdVariant.DP_SGD,
        event=ev.SelfComposed(event=step_event, count=kw["steps"]),
    )
