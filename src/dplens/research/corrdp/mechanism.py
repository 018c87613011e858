"""CorrDP mechanisms (seed 000): the CorrDP Laplace mechanism and CorrDP-SGD (numpy, linear / logistic models).

Wang, Zhang, Cummings, "Integrating Feature Correlation in Differential Privacy with Applications in DP-ERM":
Definition 2.8 / Theorem 2.9 (Laplace) and Algorithm 1 with eq. (3) (CorrDP-SGD); notes and errata in
``research/corrdp-and-dp-ftrl.md`` Part A. The accounting maths lives in :mod:`dplens.research.corrdp.accounting`.

CorrDP-SGD's noise follows eq. (3), a calibration with universal constants dropped (note §A3, §A7.4): use it as the
paper's algorithm, not as an audited (ε, δ) guarantee. Plain DP-SGD here is the same algorithm with all weights 1
(the [BST14] / Abadi-style baseline of the paper, same constants dropped).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.mechanisms import dpsgd
from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng
from dplens.mechanisms.dpsgd import LossModel, check_data, link_residual, project_to_ball
from dplens.research.corrdp import accounting as acc

__all__ = [
    "CorrDpLaplaceMechanism",
    "CorrelatedData",
    "LossModel",
    "SgdResult",
    "corrdp_sgd",
    "dp_sgd",
    "empirical_loss",
    "make_correlated_data",
    "minimise_loss",
]


# --------------------------------------------------------------------------------------------
# CorrDP Laplace mechanism


class CorrDpLaplaceMechanism:
    """CorrDP Laplace mechanism (Definition 2.8) on the column sums of a data set with bounded features.

    f(D) = Σ_rows x (a coordinate-separable query: coordinate j only reads feature j). Feature j must lie in
    [0, bound_j], so Δf_j = bound_j under replace-one neighbours. Output f(D) + Lap(Δ_C f/ε)^m, i.i.d.
    (Theorem 2.9: (ε, 0)-CorrDP, with the d(D, D′) ≤ TV(j) caveat of note §A3).

    Args:
        bounds: per-feature bound Δf_j > 0.
        sensitive: sensitive feature indices S.
        tv: TV(j) for each insensitive j (mapping or vector).
        epsilon: CorrDP ε > 0.
        convention: Δf convention capping Δ_C f (see :class:`~dplens.research.corrdp.accounting.NeighbourConvention`).
    """

    def __init__(
        self,
        *,
        bounds: Sequence[float] | np.ndarray,
        sensitive: Collection[int],
        tv: Mapping[int, float] | Sequence[float] | np.ndarray,
        epsilon: float,
        convention: acc.NeighbourConvention = acc.NeighbourConvention.STANDARD,
    ) -> None:
        b = np.asarray(bounds, dtype=float)
        if b.ndim != 1 or b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
            raise ValueError(f"bounds must be a non-empty vector of finite values > 0; got {bounds!r}")
        self.bounds = b
        self.correlated_sensitivity = acc.correlated_sensitivity(b, sensitive, tv, convention=convention)
        self.sensitive = tuple(sorted({int(j) for j in sensitive}))
        self.epsilon = float(epsilon)
        self.scale = acc.laplace_scale(self.correlated_sensitivity, self.epsilon)
        self._event = acc.CorrDpLaplace(epsilon=self.epsilon)

    @property
    def event(self) -> acc.CorrDpLaplace:
        """The accountant event (ε-CorrDP, Theorem 2.9)."""
        return self._event

    @property
    def dimension(self) -> int:
        return int(self.bounds.size)

    def query(self, data: Any) -> np.ndarray:
        """f(D): column sums of ``data`` (n, m) after checking 0 ≤ x_j ≤ bound_j."""
        arr = np.asarray(data, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != self.dimension:
            raise ValueError(f"data must be an array (n, {self.dimension}); got shape {arr.shape!r}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > self.bounds):
            raise ValueError(f"data must lie in [0, bounds] feature-wise; got {data!r}")
        return arr.sum(axis=0)

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """One output f(D) + Lap(Δ_C f/ε)^m."""
        return self.sample(data, 1, rng)[0]

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n independent outputs, shape (n, m)."""
        rng = check_rng(rng)
        n = check_count(n)
        return self.query(data)[None, :] + rng.laplace(0.0, self.scale, size=(n, self.dimension))

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        """log p_D(o) − log p_D′(o) = Σ_k (|o_k − f_k(D′)| − |o_k − f_k(D)|)/b, exact for Laplace."""
        out = np.asarray(outputs, dtype=float)
        if out.ndim == 1:
            out = out[None, :]
        if out.ndim != 2 or out.shape[1] != self.dimension:
            raise ValueError(f"outputs must have shape (n, {self.dimension}); got {np.shape(outputs)!r}")
        f0, f1 = self.query(data), self.query(neighbour)
        return (np.abs(out - f1).sum(axis=1) - np.abs(out - f0).sum(axis=1)) / self.scale

    def worst_case_pair(self) -> NeighbouringPair:
        """One record whose sensitive features move from 0 to their bounds (d = 1; privacy loss ≤ ε)."""
        data = np.zeros((1, self.dimension))
        neighbour = data.copy()
        neighbour[0, list(self.sensitive)] = self.bounds[list(self.sensitive)]
        return NeighbouringPair(data, neighbour, "one record's sensitive features changed from 0 to their bounds")

    def accuracy_bound(self, *, beta: float) -> float:
        """Theorem 2.9's ℓ∞ error bound Δ_C f log(m/β)/ε (holds with probability (1 − β/m)^m ≥ 1 − β)."""
        return acc.laplace_accuracy_bound(
            self.correlated_sensitivity, self.epsilon, dimension=self.dimension, beta=beta
        )


# --------------------------------------------------------------------------------------------
# CorrDP-SGD (Algorithm 1)


def _check_xy(features: Any, labels: Any, model: LossModel) -> tuple[np.ndarray, np.ndarray]:
    """Validate the data; CorrDP-SGD needs ‖x‖₂ ≤ 1 (Assumption 3.3)."""
    return check_data(features, labels, model, max_feature_norm=1.0)


def empirical_loss(theta: Any, features: Any, labels: Any, *, model: LossModel) -> float:
    """F(θ, D) = (1/n) Σ ℓ(θ; (x_i, y_i)) (Section 3, eq. (2) uses F(θ^priv) − F(θ̂)); requires ‖x‖ ≤ 1."""
    x, y = _check_xy(features, labels, model)
    return dpsgd.empirical_loss(theta, x, y, model=model)


def minimise_loss(features: Any, labels: Any, *, model: LossModel, radius: float, iterations: int = 3000) -> np.ndarray:
    """θ̂ ≈ argmin_{‖θ‖ ≤ D} F(θ, D) by full-batch projected gradient descent (non-private reference, eq. (2)).

    Step 1/β with β the smoothness bound (1 for linear, ¼ for logistic, since ‖x‖ ≤ 1).
    """
    x, y = _check_xy(features, labels, model)
    d = acc._check_positive("radius", radius)
    its = check_count(iterations, name="iterations")
    step = 1.0 if model is LossModel.LINEAR else 4.0
    return dpsgd.minimise_loss(x, y, model=model, radius=d, iterations=its, step=step)


@dataclass(frozen=True, slots=True)
class SgdResult:
    """Output of (CorrDP-)SGD: the last iterate θ_{T+1} and the noise used (eq. (3) paper formula)."""

    theta: np.ndarray
    noise_std: np.ndarray
    weights: np.ndarray
    lipschitz: float
    steps: int
    batch_size: int
    epsilon: float
    delta: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "theta": self.theta.tolist(),
            "noise_std": self.noise_std.tolist(),
            "weights": self.weights.tolist(),
            "lipschitz": self.lipschitz,
            "steps": self.steps,
            "batch_size": self.batch_size,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "calibration": "eq. (3) paper formula (universal constants dropped; not an audited bound)",
        }


def corrdp_sgd(
    features: Any,
    labels: Any,
    *,
    model: LossModel,
    weights: Sequence[float] | np.ndarray,
    epsilon: float,
    delta: float,
    steps: int,
    batch_size: int,
    radius: float,
    rng: np.random.Generator,
    label_bound: float | None = None,
) -> SgdResult:
    """CorrDP-SGD, Algorithm 1: projected SGD with diagonal Gaussian noise of variances σ_0² w_i (eq. (3)).

    Step sizes α_t = D/√((L² + Σ_i σ_i²) t) (Theorem 3.6). Each step samples ``batch_size`` distinct records
    uniformly (the paper leaves the sampling scheme open, note §A4 [U]); the noise is added to the averaged
    minibatch gradient; no clipping (the loss is L-Lipschitz on the ball, Assumption 3.2); output is the last
    iterate. The noise follows eq. (3), which drops universal constants: a paper formula, not an audited bound.

    Args:
        features: (n, m) with ‖x‖₂ ≤ 1 (Assumption 3.3).
        labels: (n,) (0/1 for logistic; |y| ≤ label_bound for linear).
        model: the loss.
        weights: eq. (3) weights w ∈ (0, 1]^m (:func:`dplens.research.corrdp.accounting.noise_weights`; all 1 = DP-SGD).
        epsilon: ε > 0.
        delta: δ ∈ (0, 1).
        steps: T.
        batch_size: n_q ∈ [1, n].
        radius: D, the parameter-ball radius.
        rng: the randomness.
        label_bound: bound on |y| (linear model; default max |y|, the labels being public by Assumption 3.1).

    Returns:
        An :class:`SgdResult`.
    """
    x, y = _check_xy(features, labels, model)
    rng = check_rng(rng)
    n, m = x.shape
    w = np.asarray(weights, dtype=float)
    if w.shape != (m,) or not np.all((w > 0) & (w <= 1)):
        raise ValueError(f"weights must be a length-{m} vector in (0, 1]; got {weights!r}")
    d = acc._check_positive("radius", radius)
    t_steps = check_count(steps, name="steps")
    nq = check_count(batch_size, name="batch_size")
    if nq > n:
        raise ValueError(f"batch_size must be <= n = {n}; got {batch_size!r}")
    if model is LossModel.LINEAR:
        yb = float(np.max(np.abs(y))) if label_bound is None else acc._check_positive("label_bound", label_bound)
        if np.any(np.abs(y) > yb):
            raise ValueError(f"labels must satisfy |y| <= label_bound; got label_bound={label_bound!r}")
        lip = d + yb
    else:
        lip = 1.0
    var = acc.noise_variances(epsilon=epsilon, delta=delta, lipschitz=lip, steps=t_steps, n=n, weights=w)
    std = np.sqrt(var)
    denom = lip**2 + float(var.sum())
    theta = np.zeros(m)
    for t in range(1, t_steps + 1):
        idx = rng.choice(n, size=nq, replace=False) if nq < n else np.arange(n)
        xb = x[idx]
        grad = xb.T @ link_residual(theta, xb, y[idx], model) / nq
        alpha = d / math.sqrt(denom * t)
        theta = project_to_ball(theta - alpha * (grad + std * rng.standard_normal(m)), d)
    return SgdResult(
        theta=theta,
        noise_std=std,
        weights=w,
        lipschitz=lip,
        steps=t_steps,
        batch_size=nq,
        epsilon=float(epsilon),
        delta=float(delta),
    )


def dp_sgd(features: Any, labels: Any, **kwargs: Any) -> SgdResult:
    """Plain DP-SGD baseline: :func:`corrdp_sgd` with all weights 1 (every coordinate treated as sensitive)."""
    x = np.asarray(features)
    if x.ndim != 2:
        raise ValueError(f"features must be a 2-D array (n, m); got shape {x.shape!r}")
    return corrdp_sgd(features, labels, weights=np.ones(x.shape[1]), **kwargs)


# --------------------------------------------------------------------------------------------
# A data set with known correlation


@dataclass(frozen=True, slots=True)
class CorrelatedData:
    """Synthetic binary features with exactly known TV(j), their ±1/√m encoding and labels."""

    codes: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    sensitive: tuple[int, ...]
    tv: dict[int, float]
    theta_star: np.ndarray


def make_correlated_data(
    *,
    n: int,
    num_features: int,
    num_sensitive: int,
    proxy_strength: Sequence[float],
    model: LossModel,
    rng: np.random.Generator,
    signal: float = 4.0,
) -> CorrelatedData:
    """Binary data where insensitive feature m_s + k copies sensitive feature k with probability ρ_k.

    Sensitive features X_1 … X_{m_s} are i.i.d. Bernoulli(½). Insensitive feature m_s + k (k < len(ρ) ≤ m_s)
    equals X_k with probability ρ_k and is an independent Bernoulli(½) otherwise; the remaining insensitive features
    are independent Bernoulli(½). Then P(X_k = 1 | X_{m_s+k} = 1) = (1 + ρ_k)/2 and = (1 − ρ_k)/2 given 0, and the
    other sensitive features are independent of X_{m_s+k}, so TV(m_s + k) = ρ_k exactly (joint X^S); TV(j) = 0 for
    the others. With at most one proxy per sensitive feature, conditioning on more features does not increase the
    distance (TV*(j) = TV(j); the tests check it), so no :class:`CorrelationWarning` applies.

    Features are encoded x_j = (2b_j − 1)/√m (|x_j| = 1/√m, ‖x‖ = 1; Assumption 3.3). Labels come from θ* with
    i.i.d. N(0, 1) entries rescaled to norm ``signal``: logistic y ~ Bernoulli(sigmoid(θ*ᵀx)); linear y = θ*ᵀx +
    N(0, 0.1²).
    """
    rng = check_rng(rng)
    nn = check_count(n, name="n")
    m = check_count(num_features, name="num_features")
    ms = check_count(num_sensitive, name="num_sensitive")
    if ms >= m:
        raise ValueError(f"num_sensitive must be < num_features = {m}; got {num_sensitive!r}")
    rho = np.asarray(proxy_strength, dtype=float)
    if rho.ndim != 1 or rho.size > min(ms, m - ms) or np.any(~((rho >= 0) & (rho <= 1))):
        raise ValueError(f"proxy_strength must be at most min(m_s, m_u) values in [0, 1]; got {proxy_strength!r}")
    codes = rng.integers(0, 2, size=(nn, m))
    for k, r in enumerate(rho):
        copy = rng.random(nn) < r
        codes[copy, ms + k] = codes[copy, k]
    x = (2.0 * codes - 1.0) / math.sqrt(m)
    theta_star = rng.standard_normal(m)
    theta_star *= signal / np.linalg.norm(theta_star)
    z = x @ theta_star
    if model is LossModel.LOGISTIC:
        y = (rng.random(nn) < 0.5 * (1.0 + np.tanh(0.5 * z))).astype(float)
    elif model is LossModel.LINEAR:
        y = z + 0.1 * rng.standard_normal(nn)
    else:
        raise ValueError(f"model must be a LossModel; got {model!r}")
    tv = {j: (float(rho[j - ms]) if j - ms < rho.size else 0.0) for j in range(ms, m)}
    return CorrelatedData(codes=codes, features=x, labels=y, sensitive=tuple(range(ms)), tv=tv, theta_star=theta_star)


def audit_mechanism(event: Any, count: int) -> Any:
    """The runnable mechanism of ``count`` runs of a :class:`~dplens.research.corrdp.accounting.CorrDpLaplace`.

    The worst-case pair of Theorem 2.9 (d(D, D′) = 1) is a Laplace mechanism with loss ε.
    """
    from dplens.mechanisms.additive import LaplaceMechanism
    from dplens.mechanisms.registry import repeat

    return repeat(LaplaceMechanism(scale=1.0 / event.epsilon), count)
