"""DP-SGD and feature-DP SGD (seed 003, Algorithm 1) for linear and logistic models, in numpy.

Mahloujifar, Guo, Suh, Chaudhuri, "Machine Learning with Privacy for Protected Attributes" (IEEE S&P 2025), notes in
``research/feature-dp.md`` (pitfalls P1–P17). The accounting lives in :mod:`dplens.accountant.feature_dp`.

Models are generalised linear models on z = θᵀx: ℓ(z; y) = A(z) − yz (+ a term free of θ), with A(z) = z²/2
(LINEAR, squared loss ½(z − y)²) or A(z) = log(1 + e^z) (LOGISTIC, y ∈ {0, 1}). The per-example gradient is
(A′(z) − y)·x.

Feature DP splits the loss into ℓ = ℓ_priv + ℓ_pub where ℓ_pub depends only on the public feature Ψ(x) (Section 5,
"Challenge 1"). Here Ψ(x) is a set of public columns and, optionally, the label; ℓ_pub(θ; Ψ(x)) = A(θᵀx̃) − ỹ θᵀx̃
with x̃ the record with its private columns replaced by a public constant (zero masking as for Criteo; the paper's
g(Ψ(x)) padding) and ỹ = y if the label is public, else 0 (for a private label this is the paper's log-sum-exp
public loss; the private residual is then −y·x, 1-Lipschitz for ‖x‖ ≤ 1, §4.5).

Also here (shared with :mod:`dplens.mechanisms.corrdp`): the loss models, the empirical loss, projection onto a ball
and a non-private reference minimiser.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant.feature_dp import FeatureDpSgd, PublicBatch
from dplens.mechanisms.base import check_count, check_rng

__all__ = [
    "FeatureSplitData",
    "LearningRateSchedule",
    "LossModel",
    "NoisySgdResult",
    "PublicFeatures",
    "SgdVariant",
    "check_data",
    "dp_sgd",
    "empirical_loss",
    "feature_dp_sgd",
    "feature_dp_sgd_simulator",
    "link_residual",
    "make_feature_split_data",
    "minimise_loss",
    "predict",
    "private_residual_gradients",
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


def _check_positive(name: str, value: Any) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


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
    d = _check_positive("radius", radius)
    its = check_count(iterations, name="iterations")
    if step is None:
        scale = max(1.0, float(np.max(np.sum(x * x, axis=1))))
        step = (1.0 if model is LossModel.LINEAR else 4.0) / scale
    else:
        step = _check_positive("step", step)
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
# Public features


@dataclass(frozen=True, slots=True)
class PublicFeatures:
    """The public feature Ψ(x): some columns, and the label if ``label_public``.

    Args:
        public_columns: indices of the columns everyone may know (may be empty: then Ψ carries only the label).
        label_public: whether the label is part of Ψ(x) (Purchase100 / Criteo: yes; label DP: Ψ(x, y) = x, no).
        fill: the public constant replacing private columns in ℓ_pub (default 0: zero masking). It must not be
            computed from private data (P15).
    """

    public_columns: tuple[int, ...]
    label_public: bool = True
    fill: float = 0.0

    def __post_init__(self) -> None:
        cols = tuple(int(c) for c in self.public_columns)
        if len(set(cols)) != len(cols) or any(c < 0 for c in cols):
            raise ValueError(f"public_columns must be distinct non-negative indices; got {self.public_columns!r}")
        object.__setattr__(self, "public_columns", cols)
        if not isinstance(self.label_public, bool):
            raise ValueError(f"label_public must be a bool; got {self.label_public!r}")
        if not (isinstance(self.fill, int | float) and not isinstance(self.fill, bool) and math.isfinite(self.fill)):
            raise ValueError(f"fill must be a finite number; got {self.fill!r}")

    def mask(self, num_features: int) -> np.ndarray:
        """Boolean mask of the public columns."""
        if any(c >= num_features for c in self.public_columns):
            raise ValueError(
                f"public_columns must be < the number of features {num_features}; got {self.public_columns!r}"
            )
        out = np.zeros(num_features, dtype=bool)
        out[list(self.public_columns)] = True
        return out

    def impute(self, features: np.ndarray) -> np.ndarray:
        """x̃ = g(Ψ(x)): private columns replaced by ``fill``."""
        x = np.asarray(features, dtype=float)
        return np.where(self.mask(x.shape[-1]), x, self.fill)

    def to_dict(self) -> dict[str, Any]:
        return {"public_columns": list(self.public_columns), "label_public": self.label_public, "fill": self.fill}


def _public_gradients(theta: np.ndarray, x: np.ndarray, y: np.ndarray, model: LossModel, public: PublicFeatures):
    """Per-example ∇ℓ_pub = (A′(θᵀx̃) − ỹ)·x̃; reads only Ψ(x) = (public columns, label if public)."""
    x_tilde = public.impute(x)
    y_tilde = y if public.label_public else np.zeros_like(y)
    return (_mean_link(x_tilde @ theta, model) - y_tilde)[:, None] * x_tilde


def private_residual_gradients(
    theta: Any, features: Any, labels: Any, *, model: LossModel, public: PublicFeatures
) -> np.ndarray:
    """Per-example ∇ℓ_priv = ∇ℓ(x) − ∇ℓ_pub(Ψ(x)), shape (n, d): what Algorithm 1 clips (Remark 1, P3)."""
    x, y = check_data(features, labels, model)
    th = np.asarray(theta, dtype=float)
    full = link_residual(th, x, y, model)[:, None] * x
    return full - _public_gradients(th, x, y, model, public)


# --------------------------------------------------------------------------------------------
# Noisy SGD


class LearningRateSchedule(enum.Enum):
    """η(t): CONSTANT = c, INVERSE_SQRT = c/√t (Theorem 6)."""

    CONSTANT = "constant"
    INVERSE_SQRT = "inverse_sqrt"


class SgdVariant(enum.Enum):
    """Which algorithm produced a result."""

    DP_SGD = "dp_sgd"
    FEATURE_DP_SGD = "feature_dp_sgd"
    FEATURE_DP_SGD_SIMULATOR = "feature_dp_sgd_simulator"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoisySgdResult:
    """The last iterate of a (feature-)DP-SGD run and what the accountant needs to know about it.

    ``event`` is the run's privacy event: ``FeatureDpSgd`` (feature DP, Theorem 5) or the standard
    ``SelfComposed(PoissonSampled(Gaussian))`` (DP-SGD, add/remove DP). Account it with
    :class:`dplens.accountant.compose.Accountant`.
    """

    theta: np.ndarray
    variant: SgdVariant
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
    public: PublicFeatures | None = field(default=None)

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


def _noisy_sgd(
    x: np.ndarray,
    y: np.ndarray,
    *,
    model: LossModel,
    public: PublicFeatures | None,
    public_batch: PublicBatch,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    clip_norm: float,
    learning_rate: float,
    rng: np.random.Generator,
    public_batch_size: int | None,
    private_weight: float,
    schedule: LearningRateSchedule,
    momentum: float,
    radius: float | None,
    theta0: Any,
    expected_batch_size: float,
    public_x: np.ndarray,
    public_y: np.ndarray,
) -> tuple[np.ndarray, float, float]:
    n, d = x.shape
    theta = np.zeros(d) if theta0 is None else np.asarray(theta0, dtype=float).copy()
    if theta.shape != (d,) or not np.all(np.isfinite(theta)):
        raise ValueError(f"theta0 must be a finite vector of length {d}; got {theta0!r}")
    velocity = np.zeros(d)
    noise_std_on_sum = noise_multiplier * clip_norm
    batch_total, clipped, seen = 0, 0, 0
    n_pub = public_x.shape[0]
    for t in range(1, steps + 1):
        # Private batch: Poisson sampling, each record independently with probability p (Algorithm 1, step 2.1).
        idx = np.flatnonzero(rng.random(n) < sampling_rate)
        xb, yb = x[idx], y[idx]
        grads = link_residual(theta, xb, yb, model)[:, None] * xb
        if public is not None:
            grads = grads - _public_gradients(theta, xb, yb, model, public)  # the private residual (P3)
        grads, n_clipped = _clip_rows(grads, clip_norm)
        # Noise on the sum, then divide by the *expected* batch size m = p·n (P1), never the realised one.
        g_priv = (grads.sum(axis=0) + noise_std_on_sum * rng.standard_normal(d)) / expected_batch_size
        g = private_weight * g_priv
        if public is not None:
            if public_batch is PublicBatch.SHARED:
                # The same batch: reveals the sampling coins (Prop. 3), accounted without amplification (P2).
                g_pub = _public_gradients(theta, xb, yb, model, public).sum(axis=0) / expected_batch_size
            else:
                # An independent uniform batch of fixed size m′ (Algorithm 1, step 2.3), or all records.
                if public_batch_size is None or public_batch_size >= n_pub:
                    pidx = np.arange(n_pub)
                else:
                    pidx = rng.choice(n_pub, size=public_batch_size, replace=False)
                g_pub = _public_gradients(theta, public_x[pidx], public_y[pidx], model, public).mean(axis=0)
            g = g + g_pub
        eta = learning_rate if schedule is LearningRateSchedule.CONSTANT else learning_rate / math.sqrt(t)
        velocity = momentum * velocity + g
        theta = project_to_ball(theta - eta * velocity, radius)
        batch_total += idx.size
        clipped += n_clipped
        seen += idx.size
    mean_batch = batch_total / steps if steps else 0.0
    return theta, mean_batch, (clipped / seen if seen else 0.0)


def _common_checks(
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
    x, y = check_data(features, labels, model)
    rng = check_rng(rng)
    if not isinstance(schedule, LearningRateSchedule):
        raise ValueError(f"schedule must be a LearningRateSchedule; got {schedule!r}")
    if isinstance(momentum, bool) or not isinstance(momentum, int | float) or not (0 <= momentum < 1):
        raise ValueError(f"momentum must be in [0, 1); got {momentum!r}")
    checked = {
        "noise_multiplier": _check_positive("noise_multiplier", noise_multiplier),
        "sampling_rate": _check_rate(sampling_rate),
        "steps": check_count(steps, name="steps"),
        "clip_norm": _check_positive("clip_norm", clip_norm),
        "learning_rate": _check_positive("learning_rate", learning_rate),
        "rng": rng,
        "schedule": schedule,
        "momentum": float(momentum),
        "radius": None if radius is None else _check_positive("radius", radius),
        "private_weight": _check_positive("private_weight", private_weight),
    }
    return x, y, checked


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
    x, y, kw = _common_checks(
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
    expected = kw["sampling_rate"] * x.shape[0]
    theta, mean_batch, clipped = _noisy_sgd(
        x,
        y,
        model=model,
        public=None,
        public_batch=PublicBatch.INDEPENDENT,
        public_batch_size=None,
        theta0=theta0,
        expected_batch_size=expected,
        public_x=x[:0],
        public_y=y[:0],
        **kw,
    )
    step_event = ev.PoissonSampled(
        sampling_rate=kw["sampling_rate"], event=ev.Gaussian(noise_multiplier=kw["noise_multiplier"])
    )
    return NoisySgdResult(
        theta=theta,
        variant=SgdVariant.DP_SGD,
        model=model,
        noise_multiplier=kw["noise_multiplier"],
        sampling_rate=kw["sampling_rate"],
        clip_norm=kw["clip_norm"],
        steps=kw["steps"],
        expected_batch_size=expected,
        public_batch_size=None,
        mean_batch_size=mean_batch,
        clipped_fraction=clipped,
        event=ev.SelfComposed(event=step_event, count=kw["steps"]),
    )


def feature_dp_sgd(
    features: Any,
    labels: Any,
    *,
    model: LossModel,
    public: PublicFeatures,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    clip_norm: float,
    learning_rate: float,
    rng: np.random.Generator,
    public_batch_size: int | None = None,
    public_batch: PublicBatch = PublicBatch.INDEPENDENT,
    private_weight: float = 1.0,
    schedule: LearningRateSchedule = LearningRateSchedule.CONSTANT,
    momentum: float = 0.0,
    radius: float | None = None,
    theta0: Any = None,
) -> NoisySgdResult:
    """Algorithm 1, "Noisy SGD with Public Features" (seed 003, Section 5), with clipping (Remark 1).

    Each step t:

    1. B_priv: Poisson sample, each record with probability p.
    2. g_priv = (Σ_{x ∈ B_priv} clip_C(∇ℓ(x) − ∇ℓ_pub(Ψ(x))) + N(0, z²C² I)) / m, m = p·n the *expected* batch size
       (P1; the noise is added once, on the sum).
    3. B_pub: an independent uniform batch of ``public_batch_size`` records without replacement (default: all n,
       as in Theorem 6), g_pub = mean ∇ℓ_pub(Ψ(x)) over it — neither clipped nor noised (Proposition 4).
    4. θ ← Proj(θ − η(t)(g_pub + α·g_priv)) with α = ``private_weight`` (the Purchase100 ratio; post-processing).

    ``public_batch=SHARED`` computes g_pub on B_priv instead (Σ/m); it reveals the sampling coins, so the returned
    event claims no amplification (P2). The run is f-DP_i^Ψ with the event :class:`FeatureDpSgd` (Theorem 5).

    Args:
        public: which part of each record is public (Ψ).
        public_batch_size: m′ (None: all records).
        public_batch: INDEPENDENT (Algorithm 1) or SHARED (accounted with p = 1).
        private_weight: α > 0 multiplying the noisy private gradient.
        Other arguments: as :func:`dp_sgd`.
    """
    return _feature_dp_sgd(
        features,
        labels,
        model=model,
        public=public,
        noise_multiplier=noise_multiplier,
        sampling_rate=sampling_rate,
        steps=steps,
        clip_norm=clip_norm,
        learning_rate=learning_rate,
        rng=rng,
        public_batch_size=public_batch_size,
        public_batch=public_batch,
        private_weight=private_weight,
        schedule=schedule,
        momentum=momentum,
        radius=radius,
        theta0=theta0,
        public_only_record=None,
    )


def feature_dp_sgd_simulator(
    features: Any,
    labels: Any,
    *,
    public_record: tuple[Any, Any],
    model: LossModel,
    public: PublicFeatures,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    clip_norm: float,
    learning_rate: float,
    rng: np.random.Generator,
    public_batch_size: int | None = None,
    private_weight: float = 1.0,
    schedule: LearningRateSchedule = LearningRateSchedule.CONSTANT,
    momentum: float = 0.0,
    radius: float | None = None,
    theta0: Any = None,
) -> NoisySgdResult:
    """The simulator sim(S, u) of Theorem 5's proof (Algorithm 2, appendix): Algorithm 1 on S = ``features``, whose
    public batches are drawn from S ∪ {x′} where x′ = ``public_record`` is any record with Ψ(x′) = u.

    Only Ψ(x′) is read (its private columns, and its label if private, never enter). The private batch is
    Poisson-sampled from S with the given constant rate and the noise is divided by p·(|S| + 1), the expected batch
    size of the real run on S ∪ {x} (P16: p and m do not depend on the presence of x). Def 6 compares this run with
    :func:`feature_dp_sgd` on S ∪ {x}; the pair is dominated by Theorem 5's (both directions).
    """
    return _feature_dp_sgd(
        features,
        labels,
        model=model,
        public=public,
        noise_multiplier=noise_multiplier,
        sampling_rate=sampling_rate,
        steps=steps,
        clip_norm=clip_norm,
        learning_rate=learning_rate,
        rng=rng,
        public_batch_size=public_batch_size,
        public_batch=PublicBatch.INDEPENDENT,
        private_weight=private_weight,
        schedule=schedule,
        momentum=momentum,
        radius=radius,
        theta0=theta0,
        public_only_record=public_record,
    )


def _feature_dp_sgd(
    features: Any,
    labels: Any,
    *,
    model: LossModel,
    public: PublicFeatures,
    public_batch: PublicBatch,
    public_batch_size: int | None,
    public_only_record: tuple[Any, Any] | None,
    theta0: Any,
    noise_multiplier: Any,
    sampling_rate: Any,
    steps: Any,
    clip_norm: Any,
    learning_rate: Any,
    rng: Any,
    schedule: Any,
    momentum: Any,
    radius: Any,
    private_weight: Any,
) -> NoisySgdResult:
    x, y, kw = _common_checks(
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
        private_weight,
    )
    if not isinstance(public, PublicFeatures):
        raise ValueError(f"public must be a PublicFeatures; got {public!r}")
    public.mask(x.shape[1])  # validates the columns
    if not isinstance(public_batch, PublicBatch):
        raise ValueError(f"public_batch must be a PublicBatch; got {public_batch!r}")
    if public_batch_size is not None:
        public_batch_size = check_count(public_batch_size, name="public_batch_size")
    n = x.shape[0]
    public_x, public_y = x, y
    variant = SgdVariant.FEATURE_DP_SGD
    if public_only_record is not None:
        xr = np.asarray(public_only_record[0], dtype=float).reshape(1, -1)
        yr = np.asarray([public_only_record[1]], dtype=float)
        xr, yr = check_data(xr, yr, model)
        if xr.shape[1] != x.shape[1]:
            raise ValueError(f"public_record must have {x.shape[1]} features; got {xr.shape[1]}")
        # Only Ψ(x′) may enter: impute its private columns (and hide a private label) before it is used.
        xr = public.impute(xr)
        if not public.label_public:
            yr = np.zeros_like(yr)
        public_x, public_y = np.vstack([x, xr]), np.concatenate([y, yr])
        n += 1  # the real run's data set S ∪ {x} has one more record
        variant = SgdVariant.FEATURE_DP_SGD_SIMULATOR
    expected = kw["sampling_rate"] * n
    theta, mean_batch, clipped = _noisy_sgd(
        x,
        y,
        model=model,
        public=public,
        public_batch=public_batch,
        public_batch_size=public_batch_size,
        theta0=theta0,
        expected_batch_size=expected,
        public_x=public_x,
        public_y=public_y,
        **kw,
    )
    event = FeatureDpSgd(
        noise_multiplier=kw["noise_multiplier"],
        sampling_rate=kw["sampling_rate"],
        steps=kw["steps"],
        public_batch=public_batch,
    )
    return NoisySgdResult(
        theta=theta,
        variant=variant,
        model=model,
        noise_multiplier=kw["noise_multiplier"],
        sampling_rate=kw["sampling_rate"],
        clip_norm=kw["clip_norm"],
        steps=kw["steps"],
        expected_batch_size=expected,
        public_batch_size=public_batch_size,
        mean_batch_size=mean_batch,
        clipped_fraction=clipped,
        event=event,
        public=public,
    )


# --------------------------------------------------------------------------------------------
# Synthetic data where public features carry signal


@dataclass(frozen=True, slots=True)
class FeatureSplitData:
    """Synthetic records with public and private columns and a known parameter θ*."""

    features: np.ndarray
    labels: np.ndarray
    public: PublicFeatures
    theta_star: np.ndarray


def make_feature_split_data(
    *,
    n: int,
    num_public: int,
    num_private: int,
    model: LossModel,
    rng: np.random.Generator,
    public_signal: float = 3.0,
    private_signal: float = 3.0,
    label_noise: float = 0.1,
) -> FeatureSplitData:
    """x ~ N(0, I/d) (d = num_public + num_private), θ* with ‖θ*_pub‖ = ``public_signal``, ‖θ*_priv‖ =
    ``private_signal``; logistic y ~ Bernoulli(sigmoid(θ*ᵀx)), linear y = θ*ᵀx + N(0, label_noise²).

    The first ``num_public`` columns and the label are public (Ψ), as in the paper's Purchase100 setting.
    """
    rng = check_rng(rng)
    nn = check_count(n, name="n")
    dp_, dq = check_count(num_public, name="num_public"), check_count(num_private, name="num_private")
    d = dp_ + dq
    signals = {"public_signal": public_signal, "private_signal": private_signal}
    for name, value in signals.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    if not isinstance(model, LossModel):
        raise ValueError(f"model must be a LossModel; got {model!r}")
    x = rng.standard_normal((nn, d)) / math.sqrt(d)
    theta = rng.standard_normal(d)
    theta[:dp_] *= public_signal / max(np.linalg.norm(theta[:dp_]), 1e-300)
    theta[dp_:] *= private_signal / max(np.linalg.norm(theta[dp_:]), 1e-300)
    z = x @ theta
    if model is LossModel.LOGISTIC:
        y = (rng.random(nn) < 0.5 * (1.0 + np.tanh(0.5 * z))).astype(float)
    else:
        y = z + _check_nonnegative("label_noise", label_noise) * rng.standard_normal(nn)
    return FeatureSplitData(features=x, labels=y, public=PublicFeatures(tuple(range(dp_))), theta_star=theta)


def _check_nonnegative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return float(value)
