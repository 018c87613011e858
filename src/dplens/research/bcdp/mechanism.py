"""BCDP mechanisms (seed 002): the ℓ2-ball LDP channel, mean estimation (Mechanism 1) and regression (Algorithm 2).

Aliakbarpour, Fallah, Chaudhuri, Courtade, Jordan, "Enhancing Feature-Specific Data Protection via Bayesian
Coordinate Differential Privacy" (seed ``002_3f0980ffdd6d6591.txt``); notes and errata in ``research/bcdp.md``
("note §…"). The privacy maths (Proposition 4, the Theorem-2 budget, exact BCDP) lives in
:mod:`dplens.research.bcdp.accounting`.

- :func:`duchi_l2_channel`: Duchi et al.'s ℓ2-ball ε-LDP channel (App. B.1, Mechanism 3) with the **corrected**
  radius (:func:`duchi_radius`; the printed one is twice too large and makes the channel biased, E[Z] = 2v).
- :class:`BcdpMeanMechanism`: Mechanism 1 (M_mean), vectorised over users; the LDP baseline is the same class
  with c = α·1 (:meth:`BcdpMeanMechanism.ldp_baseline`).
- :func:`bcdp_least_squares`: Algorithm 2 (two independent M_mean copies at c/2), minimised *globally* over a
  ball: the plug-in objective is generally non-convex (note §6.9), so :func:`minimize_quadratic_on_ball` solves
  the trust-region subproblem exactly.

Randomness is always a ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special

from dplens.accountant import events as ev
from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng
from dplens.research.bcdp import accounting as acc

__all__ = [
    "BcdpMeanMechanism",
    "RegressionResult",
    "bcdp_least_squares",
    "duchi_l2_channel",
    "duchi_radius",
    "least_squares_loss",
    "minimize_quadratic_on_ball",
    "regression_allocation",
    "theorem2_bound_expression",
    "tune_zeta",
]

#: Increments c_k − c_{k−1} at or below this fraction of c_d are treated as zero (skipping a query is private).
_ZERO_INCREMENT = 1e-12


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a number; got {value!r}")
    x = float(value)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return x


def _dim(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


# --------------------------------------------------------------------------------------------
# Mechanism 3: Duchi et al.'s ℓ2-ball channel


def duchi_radius(alpha: float, dim: int, radius: float) -> float:
    """Radius B of the output sphere of the ℓ2-ball channel that makes it unbiased (App. B.1, corrected).

    **Erratum** (note §4.1, L668): the paper prints B = √π·d·r·(e^α+1)/(e^α−1)·Γ((d+1)/2)/Γ(d/2+1), which is
    twice the unbiased value (Monte Carlo gives E[Z] = 2v with it). The corrected radius is

        B = r·(e^α+1)/(e^α−1)·√π·Γ((d+1)/2)/Γ(d/2),

    from E|U₁| = Γ(d/2)/(√π Γ((d+1)/2)) for U uniform on S^{d−1} and E[Z] = ((e^α−1)/(e^α+1))·B·E|U₁|·v/r
    (Duchi, Jordan, Wainwright, JASA 2018, §4.2.3). Test vector: α = 1, d = 1, r = 1 gives (e+1)/(e−1).

    Args:
        alpha: LDP level α > 0 (B = ∞ at α = 0, so zero-budget queries must be skipped).
        dim: dimension d ≥ 1 of the input vector.
        radius: r > 0, the ℓ2 bound of the input.
    """
    alpha = _positive("alpha", alpha)
    dim = _dim("dim", dim)
    radius = _positive("radius", radius)
    return radius / math.tanh(alpha / 2) * math.sqrt(math.pi) * math.exp(special.gammaln((dim + 1) / 2)
                                                                         - special.gammaln(dim / 2))  # fmt: skip


def duchi_l2_channel(values: Any, *, alpha: float, radius: float, rng: np.random.Generator) -> np.ndarray:
    """Duchi et al.'s α-LDP ℓ2-ball channel (Mechanism 3, App. B.1), one independent run per row, unbiased.

    For v with ‖v‖₂ ≤ r: draw S ~ Bern(½ + ‖v‖/(2r)) and set ṽ = (2S − 1)·v/‖v‖ (a uniform direction if v = 0);
    draw K ~ Bern(e^α/(e^α + 1)); return Z uniform on {z : ‖z‖ = B, (2K − 1) zᵀṽ > 0} (sampled as a uniform point
    on the sphere, reflected across the hyperplane ⟂ ṽ when on the wrong side), with the corrected B of
    :func:`duchi_radius`. Then E[Z] = v, E[Z_j²] = B²/d for every j, and the output density ratio between any two
    inputs is at most e^α.

    Args:
        values: array (n, d) of rows with ℓ2 norm ≤ ``radius`` (a 1-D array is one row).
        alpha: LDP level α > 0.
        radius: r > 0.
        rng: the random generator.

    Returns:
        Array of the shape of ``values``.
    """
    rng = check_rng(rng)
    v = np.asarray(values, dtype=float)
    single = v.ndim == 1
    v = np.atleast_2d(v)
    if v.ndim != 2 or v.shape[1] < 1 or not np.all(np.isfinite(v)):
        raise ValueError(f"values must be a finite array (n, d); got shape {np.shape(values)!r}")
    radius = _positive("radius", radius)
    n, dim = v.shape
    big_b = duchi_radius(alpha, dim, radius)
    norms = np.linalg.norm(v, axis=1)
    if np.any(norms > radius * (1 + 1e-9)):
        raise ValueError(f"values must have l2 norm <= radius {radius!r}; got max norm {norms.max()!r}")
    norms = np.minimum(norms, radius)
    direction = np.empty_like(v)
    nonzero = norms > 0
    direction[nonzero] = v[nonzero] / norms[nonzero, None]
    if not np.all(nonzero):
        g = rng.standard_normal((int((~nonzero).sum()), dim))
        direction[~nonzero] = g / np.linalg.norm(g, axis=1, keepdims=True)
    keep_sign = np.where(rng.random(n) < 0.5 + norms / (2 * radius), 1.0, -1.0)
    direction *= keep_sign[:, None]
    # P(K = 1) = e^α/(e^α + 1) = expit(α)
    wanted = np.where(rng.random(n) < special.expit(alpha), 1.0, -1.0)
    z = rng.standard_normal((n, dim))
    z *= big_b / np.linalg.norm(z, axis=1, keepdims=True)
    proj = np.einsum("ij,ij->i", z, direction)
    flip = np.sign(proj) != wanted
    z[flip] -= 2 * proj[flip, None] * direction[flip]
    return z[0] if single else z


# --------------------------------------------------------------------------------------------
# Mechanism 1: M_mean


def _check_data(data: Any, dim: int, name: str = "data") -> np.ndarray:
    x = np.asarray(data, dtype=float)
    if x.ndim != 2 or x.shape[1] != dim or x.shape[0] < 1:
        raise ValueError(f"{name} must be an array (n, {dim}); got shape {np.shape(data)!r}")
    if not np.all(np.isfinite(x)) or np.any(np.abs(x) > 1 + 1e-12):
        raise ValueError(f"{name} must lie in [-1, 1]^{dim} (Assumption 2); got max |x| {np.abs(x).max()!r}")
    return np.clip(x, -1.0, 1.0)


class BcdpMeanMechanism:
    """Mechanism 1 (M_mean, L281–291): per-user unbiased estimates with per-coordinate budgets c.

    Coordinates are processed in ``order`` (most sensitive first; δ sorted non-decreasing). With c non-decreasing
    in that order and c₀ = 0, query k (k = 1 … d) runs the ℓ2-ball channel on the block x_{k:d} with
    α = c_k − c_{k−1} and r = √(d−k+1), and coordinate i is estimated by the w-weighted average of its entries in
    queries 1 … i, w_k = (c_k − c_{k−1})²/(d−k+1):

        ν̂ᵢ = (Σ_{k≤i} w_k Y^k_{i+1−k}) / (Σ_{k≤i} w_k).

    The release is c-coordinate-DP and c_d-LDP (Theorem 2's proof, L743–759), hence δ-BCDP for the Theorem-2
    allocation (:func:`dplens.research.bcdp.accounting.theorem2_allocation`) under Assumption 1. Queries with a zero
    increment are skipped (the channel's radius is infinite at α = 0; note §4.3). If c₁ = 0 (ζ = 1), the leading
    coordinates with Σw = 0 get the estimate 0 (a biased guard, note §4.3).

    Args:
        c_sorted: c in processing order, non-decreasing, with c_d > 0.
        order: ``order[k]`` is the original index of the k-th processed coordinate (default: identity).
    """

    def __init__(self, *, c_sorted: Sequence[float] | np.ndarray, order: Sequence[int] | None = None) -> None:
        c = np.asarray(c_sorted, dtype=float)
        if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError(f"c_sorted must be a non-empty vector of finite values >= 0; got {c_sorted!r}")
        if np.any(np.diff(c) < 0) or c[-1] <= 0:
            raise ValueError(f"c_sorted must be non-decreasing with a positive last entry; got {c_sorted!r}")
        d = c.size
        perm = np.arange(d) if order is None else np.asarray(order)
        if perm.shape != (d,) or not np.array_equal(np.sort(perm), np.arange(d)):
            raise ValueError(f"order must be a permutation of range({d}); got {order!r}")
        self.c_sorted = c
        self.order = perm.astype(int)
        inc = np.diff(np.concatenate([[0.0], c]))
        inc[inc <= _ZERO_INCREMENT * c[-1]] = 0.0
        self.increments = inc
        self.block_sizes = d - np.arange(d)
        self.weights = inc**2 / self.block_sizes
        self._event = acc.CoordinateDpRelease(coordinate_dp=self.coordinate_dp, ldp_epsilon=float(c[-1]))

    @classmethod
    def from_allocation(cls, allocation: acc.BudgetAllocation) -> BcdpMeanMechanism:
        """Mechanism 1 with a Theorem-2 allocation (its c and coordinate order)."""
        if not isinstance(allocation, acc.BudgetAllocation):
            raise ValueError(f"allocation must be a BudgetAllocation; got {allocation!r}")
        return cls(c_sorted=allocation.c_sorted, order=allocation.order)

    @classmethod
    def ldp_baseline(cls, *, epsilon: float, dimension: int) -> BcdpMeanMechanism:
        """The paper's baseline: the ℓ2-ball channel at ε on the whole vector (= Mechanism 1 with c = ε·1).

        With ε = min δ it is δ-BCDP for every prior (Prop. 3).
        """
        return cls(c_sorted=np.full(_dim("dimension", dimension), _positive("epsilon", epsilon)))

    @property
    def dimension(self) -> int:
        return self.c_sorted.size

    @property
    def coordinate_dp(self) -> tuple[float, ...]:
        """c in the original coordinate order."""
        out = np.empty(self.dimension)
        out[self.order] = self.c_sorted
        return tuple(float(v) for v in out)

    @property
    def event(self) -> acc.CoordinateDpRelease:
        """One user's release: c-coordinate-DP and c_d-LDP (the Accountant sees the LDP level)."""
        return self._event

    def privatize(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """One independent run per user: ν̂ for each row of ``data`` (n, d) ∈ [−1, 1], original coordinate order."""
        rng = check_rng(rng)
        x = _check_data(data, self.dimension)[:, self.order]
        num = np.zeros_like(x)
        den = np.zeros(self.dimension)
        for k in np.flatnonzero(self.increments > 0):
            m = int(self.block_sizes[k])
            y = duchi_l2_channel(x[:, k:], alpha=float(self.increments[k]), radius=math.sqrt(m), rng=rng)
            num[:, k:] += self.weights[k] * y
            den[k:] += self.weights[k]
        est = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
        out = np.empty_like(est)
        out[:, self.order] = est
        return out

    def estimate_mean(self, data: Any, rng: np.random.Generator, *, clip: bool = True) -> np.ndarray:
        """The server's estimate of the empirical mean: Π((1/n) Σ_j M_mean(x^{(j)})), Π = clipping to [−1, 1]^d.

        Theorem 2's bound (17) is for the clipped estimate; ``clip=False`` gives the unbiased one.
        """
        mean = self.privatize(data, rng).mean(axis=0)
        return np.clip(mean, -1.0, 1.0) if clip else mean

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """One user's release ν̂ ∈ ℝ^d for ``data`` = x ∈ [−1, 1]^d."""
        return self.privatize(np.asarray(data, dtype=float)[None, :], rng)[0]

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n independent releases for the same user x (leading axis n)."""
        n = check_count(n)
        x = np.asarray(data, dtype=float)
        if x.shape != (self.dimension,):
            raise ValueError(f"data must be a vector of length {self.dimension}; got shape {x.shape!r}")
        return self.privatize(np.broadcast_to(x, (n, self.dimension)), rng)

    def worst_case_pair(self) -> NeighbouringPair:
        """x = 1 and x′ = −1: every query's input is on its sphere at opposite points, so the density ratio of the
        raw query outputs reaches e^{Σ_k (c_k − c_{k−1})} = e^{c_d}, the LDP level."""
        d = self.dimension
        return NeighbouringPair(np.ones(d), -np.ones(d), "one user's record replaced: all +1 vs all -1 (LDP)")

    def coordinate_variance(self, data: Any) -> np.ndarray:
        """Exact per-coordinate variance of ν̂ (unclipped) for each row of ``data``: shape (n, d), original order.

        Var ν̂ᵢ = Σ_{k≤i} w_k² (B_k²/(d−k+1) − xᵢ²)/(Σ_{k≤i} w_k)², because the queries are independent and the
        channel has E[Z_j²] = B²/dim (note §4.1, §5.2(d)). Coordinates with Σw = 0 have variance 0 (and bias −xᵢ).
        """
        x = _check_data(np.atleast_2d(data), self.dimension)[:, self.order]
        num = np.zeros_like(x)
        den = np.zeros(self.dimension)
        for k in np.flatnonzero(self.increments > 0):
            m = int(self.block_sizes[k])
            second = duchi_radius(float(self.increments[k]), m, math.sqrt(m)) ** 2 / m
            num[:, k:] += self.weights[k] ** 2 * (second - x[:, k:] ** 2)
            den[k:] += self.weights[k]
        var = np.divide(num, den**2, out=np.zeros_like(num), where=den > 0)
        out = np.empty_like(var)
        out[:, self.order] = var
        return out

    def unclipped_mse(self, data: Any) -> float:
        """Exact E‖x̄ − (1/n)Σ_j ν̂^{(j)}‖² of the unclipped estimate for the data set ``data`` (n, d)."""
        x = _check_data(data, self.dimension)
        n = x.shape[0]
        unestimated = np.zeros(self.dimension, dtype=bool)
        unestimated[self.order] = np.cumsum(self.weights) == 0
        bias = np.where(unestimated, x.mean(axis=0), 0.0)
        return float(self.coordinate_variance(x).sum() / n**2 + (bias**2).sum())


def theorem2_bound_expression(c_sorted: Sequence[float] | np.ndarray) -> float:
    """Σᵢ 1/Wᵢ with Wᵢ = Σ_{k≤i} (c_k − c_{k−1})²/(d−k+1): the bracket of Theorem 2's MSE bound (eq. 17), also
    Theorem 3's r² (up to the factor 4 of the c/2 copies).

    The bound itself is (1/n)·Σᵢ 1/Wᵢ ∧ d up to unstated constants, and it understates the error for large
    increments (the channel's per-coordinate variance stays ≥ ≈ (π/2)·dim − 1; note §4.4, §6.10), so this is
    the paper's rate expression, not a guarantee. ∞ if some Wᵢ = 0 (c₁ = 0).
    """
    c = np.asarray(c_sorted, dtype=float)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(np.diff(c) < 0):
        raise ValueError(f"c_sorted must be a non-empty non-decreasing vector of finite values >= 0; got {c_sorted!r}")
    inc = np.diff(np.concatenate([[0.0], c]))
    w = np.cumsum(inc**2 / (c.size - np.arange(c.size)))
    return math.inf if np.any(w <= 0) else float((1.0 / w).sum())


def tune_zeta(
    delta: Sequence[float] | np.ndarray,
    *,
    epsilon: float,
    q: float,
    second_moment: float = 1.0,
    grid_size: int = 400,
) -> float:
    """The ζ ∈ (0, 1) minimising Mechanism 1's exact unclipped variance Σᵢ Var ν̂ᵢ (note §5.3, §6.11).

    ζ depends only on public quantities (δ, ε, q, d), so tuning it costs no privacy. The variance is evaluated at
    xᵢ² = ``second_moment`` for every coordinate (1 for ±1 data; 0 for the worst case). Grid search over
    ``grid_size`` points of (0, 1) refined by a bounded scalar search around the best grid point. If no ζ < 1
    estimates every coordinate, returns the heuristic (1 + q)/2.
    """
    if not 0 <= second_moment <= 1:
        raise ValueError(f"second_moment must be in [0, 1]; got {second_moment!r}")
    grid_size = _dim("grid_size", grid_size)
    d = len(delta)
    x = np.full((1, d), math.sqrt(second_moment))

    def objective(zeta: float) -> float:
        alloc = acc.theorem2_allocation(delta, epsilon=epsilon, q=q, zeta=zeta)
        if alloc.c_sorted[0] <= 0:
            return math.inf
        return float(BcdpMeanMechanism.from_allocation(alloc).coordinate_variance(x).sum())

    grid = (np.arange(grid_size) + 0.5) / grid_size
    values = np.array([objective(float(z)) for z in grid])
    if not np.any(np.isfinite(values)):
        return acc.heuristic_zeta(q)
    best = int(np.argmin(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid_size - 1)]
    res = optimize.minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    return float(res.x) if res.fun <= values[best] else float(grid[best])


# --------------------------------------------------------------------------------------------
# Algorithm 2: least squares


def minimize_quadratic_on_ball(hessian: Any, linear: Any, radius: float) -> np.ndarray:
    """Global minimiser of ½θᵀHθ − gᵀθ over ‖θ‖₂ ≤ R for any symmetric H (the trust-region subproblem).

    Exact via the eigendecomposition H = QΛQᵀ (Moré and Sorensen 1983): θ(μ) = (H + μI)⁻¹g with the smallest
    μ ≥ max(0, −λ_min) such that ‖θ(μ)‖ ≤ R and μ(‖θ(μ)‖ − R) = 0; the secular equation 1/‖θ(μ)‖ = 1/R is solved
    with Brent's method. In the "hard case" (g orthogonal to the bottom eigenspace) the solution is completed
    with a bottom eigenvector to reach the boundary. Needed because Algorithm 2's plug-in objective is generally
    indefinite (note §6.9), so a local convex solver is not enough.
    """
    h = np.asarray(hessian, dtype=float)
    g = np.asarray(linear, dtype=float)
    radius = _positive("radius", radius)
    if h.ndim != 2 or h.shape[0] != h.shape[1] or g.shape != (h.shape[0],):
        raise ValueError(f"hessian must be (p, p) and linear (p,); got {h.shape!r} and {g.shape!r}")
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(g))):
        raise ValueError("hessian and linear must be finite")
    lam, q = np.linalg.eigh(0.5 * (h + h.T))
    gt = q.T @ g
    tiny_lam = 1e-13 * max(float(np.abs(lam).max()), float(np.linalg.norm(g)) / radius, 1e-300)
    tiny_g = 1e-13 * max(float(np.linalg.norm(g)), 1e-300)
    lo = max(0.0, -float(lam[0]))

    def theta_and_norm(mu: float) -> tuple[np.ndarray, float]:
        den = lam + mu
        singular = np.abs(den) <= tiny_lam
        if np.any(singular & (np.abs(gt) > tiny_g)):
            return np.full_like(g, np.nan), math.inf
        coef = np.divide(gt, den, out=np.zeros_like(gt), where=~singular)
        return q @ coef, float(np.linalg.norm(coef))

    def secular(mu: float) -> float:  # 1/‖θ(μ)‖ − 1/R, increasing in μ on (−λ_min, ∞)
        norm = theta_and_norm(mu)[1]
        return (0.0 if math.isinf(norm) else 1.0 / max(norm, 1e-300)) - 1.0 / radius

    if secular(lo) >= 0:  # ‖θ(lo)‖ ≤ R: interior solution, or the hard case
        theta = theta_and_norm(lo)[0]
        if lo > 0:  # hard case: complete along a bottom eigenvector up to the boundary
            theta = theta + math.sqrt(max(radius**2 - float(theta @ theta), 0.0)) * q[:, 0]
        return theta
    hi = lo + float(np.linalg.norm(g)) / radius + tiny_lam
    while secular(hi) < 0:
        hi = 2 * hi + tiny_lam
    mu = optimize.brentq(secular, lo, hi, xtol=1e-15 * max(hi, 1.0), rtol=4 * np.finfo(float).eps, maxiter=500)
    theta = theta_and_norm(mu)[0]
    norm = float(np.linalg.norm(theta))
    return theta * (radius / norm) if norm > radius else theta


def least_squares_loss(theta: Any, features: Any, labels: Any) -> float:
    """f(θ) = (1/n) Σᵢ ½(θᵀzᵢ − lᵢ)² (Section 5, L320)."""
    z = np.asarray(features, dtype=float)
    r = z @ np.asarray(theta, dtype=float) - np.asarray(labels, dtype=float)
    return float(0.5 * np.mean(r**2))


def regression_allocation(
    feature_delta: Sequence[float] | np.ndarray,
    *,
    label_delta: float,
    epsilon: float,
    q: float,
    zeta: float | None = None,
) -> acc.BudgetAllocation:
    """Theorem-2 allocation for Algorithm 2 with the label as the last coordinate (processed last).

    The label is exempt from Assumption 1 only if it is processed last (L261, note §6.5), so
    ``label_delta`` must be ≥ every feature δ (ties keep the label last: the sort is stable).
    """
    fd = np.asarray(feature_delta, dtype=float)
    label_delta = float(label_delta)
    if fd.ndim != 1 or fd.size == 0 or not np.all(label_delta >= fd):
        raise ValueError(f"label_delta must be >= every feature delta {feature_delta!r}; got {label_delta!r}")
    return acc.theorem2_allocation(np.append(fd, label_delta), epsilon=epsilon, q=q, zeta=zeta)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegressionResult:
    """Algorithm 2's output θ̂ with the plug-in objective ½θᵀHθ − gᵀθ it minimised.

    ``hessian`` is the symmetrised (1/n)Σ ẑ¹ẑ²ᵀ (not PSD in general: ``min_eigenvalue`` < 0 is common);
    ``event`` is the privacy of the whole release: two c/2 runs, i.e. c-coordinate-DP and c_d-LDP per user.
    """

    theta: np.ndarray
    hessian: np.ndarray
    linear: np.ndarray
    min_eigenvalue: float
    event: ev.Event

    def to_dict(self) -> dict[str, Any]:
        return {
            "theta": self.theta.tolist(),
            "min_eigenvalue": self.min_eigenvalue,
            "event": ev.event_to_dict(self.event),
        }


def bcdp_least_squares(
    features: Any,
    labels: Any,
    *,
    allocation: acc.BudgetAllocation,
    theta_radius: float,
    rng: np.random.Generator,
) -> RegressionResult:
    """Algorithm 2 (L320–334): BCDP least squares from two independent M_mean copies at c/2.

    Each user sends x̂¹ = M_mean(x, c/2) and x̂² = M_mean(x, c/2), x = [z; l]; the server minimises the unbiased
    plug-in f̂(θ) = (1/2n) Σᵢ (θᵀẑ¹ẑ²ᵀθ − 2θᵀ l̂¹ ẑ²) over Θ = {‖θ‖ ≤ R}. The copies compose to c-coordinate-DP and
    c_d-LDP (LDP and coordinate DP compose; BCDP does not — L831), so the Theorem-2 argument gives δ-BCDP and
    ε-LDP. M_mean is not clipped here (clipping would bias f̂; L905). f̂ is generally indefinite, so the
    minimiser is the exact global one of :func:`minimize_quadratic_on_ball` (the paper's "any convex
    optimisation algorithm", L334, is not enough; note §6.9).

    Args:
        features: z, array (n, p) with entries in [−1, 1].
        labels: l, array (n,) in [−1, 1].
        allocation: a Theorem-2 allocation over p + 1 coordinates with the label (index p) processed last
            (see :func:`regression_allocation`).
        theta_radius: R > 0.
        rng: the random generator.
    """
    rng = check_rng(rng)
    z = np.asarray(features, dtype=float)
    lab = np.asarray(labels, dtype=float)
    if z.ndim != 2 or lab.shape != (z.shape[0],):
        raise ValueError(f"features must be (n, p) and labels (n,); got {z.shape!r} and {lab.shape!r}")
    if not isinstance(allocation, acc.BudgetAllocation) or len(allocation.order) != z.shape[1] + 1:
        raise ValueError(f"allocation must be a BudgetAllocation over {z.shape[1] + 1} coordinates; got {allocation!r}")
    if allocation.order[-1] != z.shape[1]:
        raise ValueError(f"allocation must process the label (index {z.shape[1]}) last; got order {allocation.order!r}")
    half = BcdpMeanMechanism(c_sorted=np.asarray(allocation.c_sorted) / 2, order=allocation.order)
    data = np.column_stack([z, lab])
    x1 = half.privatize(data, rng)
    x2 = half.privatize(data, rng)
    n = z.shape[0]
    a = x1[:, :-1].T @ x2[:, :-1] / n
    h = 0.5 * (a + a.T)
    g = x2[:, :-1].T @ x1[:, -1] / n
    theta = minimize_quadratic_on_ball(h, g, theta_radius)
    return RegressionResult(
        theta=theta,
        hessian=h,
        linear=g,
        min_eigenvalue=float(np.linalg.eigvalsh(h)[0]),
        event=ev.SelfComposed(event=half.event, count=2),
    )
