"""Feature-DP SGD (seed 003, Algorithm 1) and its simulator, on the numpy DP-SGD of :mod:`dplens.mechanisms.dpsgd`.

Mahloujifar, Guo, Suh, Chaudhuri, "Machine Learning with Privacy for Protected Attributes" (IEEE S&P 2025), notes in
``research/feature-dp.md`` (pitfalls P1–P17). The accounting lives in :mod:`dplens.research.feature_dp.accounting`.

Feature DP splits the loss into ℓ = ℓ_priv + ℓ_pub where ℓ_pub depends only on the public feature Ψ(x) (Section 5,
"Challenge 1"). Here Ψ(x) is a set of public columns and, optionally, the label; ℓ_pub(θ; Ψ(x)) = A(θᵀx̃) − ỹ θᵀx̃
with x̃ the record with its private columns replaced by a public constant (zero masking as for Criteo; the paper's
g(Ψ(x)) padding) and ỹ = y if the label is public, else 0 (for a private label this is the paper's log-sum-exp
public loss; the private residual is then −y·x, 1-Lipschitz for ‖x‖ ≤ 1, §4.5).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.mechanisms.base import check_count, check_rng
from dplens.mechanisms.dpsgd import (
    LearningRateSchedule,
    LossModel,
    NoisySgdResult,
    _mean_link,
    check_data,
    common_checks,
    link_residual,
    run_noisy_sgd,
)
from dplens.research.feature_dp.accounting import FeatureDpSgd, PublicBatch

__all__ = [
    "FeatureSgdVariant",
    "FeatureSplitData",
    "PublicFeatures",
    "audit_mechanism",
    "feature_dp_sgd",
    "feature_dp_sgd_simulator",
    "make_feature_split_data",
    "private_residual_gradients",
]


class FeatureSgdVariant(enum.Enum):
    """Which feature-DP algorithm produced a result."""

    FEATURE_DP_SGD = "feature_dp_sgd"
    FEATURE_DP_SGD_SIMULATOR = "feature_dp_sgd_simulator"


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
    The arguments not listed below are those of :func:`dplens.mechanisms.dpsgd.dp_sgd`.

    Args:
        public: which part of each record is public (Ψ).
        public_batch_size: m′ (None: all records).
        public_batch: INDEPENDENT (Algorithm 1) or SHARED (accounted with p = 1).
        private_weight: α > 0 multiplying the noisy private gradient.
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


def _check_public(public: Any, public_batch: Any, public_batch_size: int | None, num_features: int) -> int | None:
    """Validate the public part of a run (Ψ's columns against ``num_features``); returns ``public_batch_size``."""
    if not isinstance(public, PublicFeatures):
        raise ValueError(f"public must be a PublicFeatures; got {public!r}")
    public.mask(num_features)  # validates the columns
    if not isinstance(public_batch, PublicBatch):
        raise ValueError(f"public_batch must be a PublicBatch; got {public_batch!r}")
    if public_batch_size is not None:
        public_batch_size = check_count(public_batch_size, name="public_batch_size")
    return public_batch_size


def _with_public_record(
    x: np.ndarray, y: np.ndarray, record: tuple[Any, Any], model: LossModel, public: PublicFeatures
) -> tuple[np.ndarray, np.ndarray]:
    """The simulator's public pool S ∪ {x′}: the data and x′ reduced to Ψ(x′) (private columns imputed, a private
    label hidden) before it is used."""
    xr = np.asarray(record[0], dtype=float).reshape(1, -1)
    yr = np.asarray([record[1]], dtype=float)
    xr, yr = check_data(xr, yr, model)
    if xr.shape[1] != x.shape[1]:
        raise ValueError(f"public_record must have {x.shape[1]} features; got {xr.shape[1]}")
    xr = public.impute(xr)
    if not public.label_public:
        yr = np.zeros_like(yr)
    return np.vstack([x, xr]), np.concatenate([y, yr])


def _public_step(
    public_x: np.ndarray,
    public_y: np.ndarray,
    model: LossModel,
    public: PublicFeatures,
    public_batch: PublicBatch,
    public_batch_size: int | None,
    expected: float,
) -> Any:
    """Algorithm 1's public gradient g_pub as :func:`~dplens.mechanisms.dpsgd.noisy_sgd`'s
    ``public_step(theta, xb, yb, rng)``."""
    n_pub = public_x.shape[0]

    def public_step(theta: np.ndarray, xb: np.ndarray, yb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if public_batch is PublicBatch.SHARED:
            # The same batch: reveals the sampling coins (Prop. 3), accounted without amplification (P2).
            return _public_gradients(theta, xb, yb, model, public).sum(axis=0) / expected
        # An independent uniform batch of fixed size m′ (Algorithm 1, step 2.3), or all records.
        if public_batch_size is None or public_batch_size >= n_pub:
            pidx = np.arange(n_pub)
        else:
            pidx = rng.choice(n_pub, size=public_batch_size, replace=False)
        return _public_gradients(theta, public_x[pidx], public_y[pidx], model, public).mean(axis=0)

    return public_step


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
    """The body of :func:`feature_dp_sgd` (``public_only_record`` None) and of :func:`feature_dp_sgd_simulator`."""
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
        private_weight,
    )
    public_batch_size = _check_public(public, public_batch, public_batch_size, x.shape[1])
    public_x, public_y = x, y
    n = x.shape[0]
    variant = FeatureSgdVariant.FEATURE_DP_SGD
    if public_only_record is not None:
        public_x, public_y = _with_public_record(x, y, public_only_record, model, public)
        n += 1  # the real run's data set S ∪ {x} has one more record
        variant = FeatureSgdVariant.FEATURE_DP_SGD_SIMULATOR
    expected = kw["sampling_rate"] * n

    def residual(theta: np.ndarray, xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
        # The private residual ∇ℓ − ∇ℓ_pub is what is clipped and noised (P3).
        return link_residual(theta, xb, yb, model)[:, None] * xb - _public_gradients(theta, xb, yb, model, public)

    event = FeatureDpSgd(
        noise_multiplier=kw["noise_multiplier"],
        sampling_rate=kw["sampling_rate"],
        steps=kw["steps"],
        public_batch=public_batch,
    )
    return run_noisy_sgd(
        x,
        y,
        kw,
        model=model,
        theta0=theta0,
        expected_batch_size=expected,
        variant=variant,
        event=event,
        public_batch_size=public_batch_size,
        public=public,
        per_example_gradients=residual,
        public_step=_public_step(public_x, public_y, model, public, public_batch, public_batch_size, expected),
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
    _check_nonnegative("public_signal", public_signal)
    _check_nonnegative("private_signal", private_signal)
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


def audit_mechanism(event: Any, count: int) -> Any:
    """The runnable mechanism of ``count`` runs of a :class:`~dplens.research.feature_dp.accounting.FeatureDpSgd`.

    Theorem 5 of seed 003: each step is exactly the add/remove Poisson-subsampled Gaussian on the private residual
    (real run against the simulator), so its worst case is the DP-SGD worst case.
    """
    from dplens.mechanisms.additive import SubsampledGaussianMechanism

    rate = getattr(event, "effective_sampling_rate", event.sampling_rate)
    rate = rate() if callable(rate) else rate
    return SubsampledGaussianMechanism(
        noise_multiplier=event.noise_multiplier, sampling_rate=rate, steps=event.steps * count
    )
