"""Runnable GaussMix mechanisms (seed 004): GaussMix, ModifiedGaussMix (Alg. 1), LinearMixing (Alg. 2), logistic.

Lev et al., "The Gaussian Mixing Mechanism" (arXiv 2505.24603); implementation notes
``research/gaussmix.md`` ("the notes"). The sketch matrix S is fresh, internal randomness: it is
never returned or stored. ``sample`` uses that the rows of M(X) = S X + σ ξ are i.i.d.
N(0, XᵀX + σ²I) (paper App. B), so n outputs cost O(n k d²) without forming any k×n matrix S.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng
from dplens.research.gaussmix import accounting as acc

__all__ = [
    "GaussMix",
    "LinearMixing",
    "LogisticMixing",
    "ModifiedGaussMix",
    "quadratic_logistic_surrogate",
]

# Rows of S are generated this many data rows at a time (memory O(k · block)).
_BLOCK_ROWS = 4096


def _check_matrix(data: Any, name: str = "data") -> np.ndarray:
    x = np.asarray(data, dtype=float)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1 or not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be a finite non-empty 2-D array (n x d); got shape {np.shape(data)!r}")
    return x


def _check_positive(name: str, value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        out = math.nan
    if isinstance(value, bool) or not (math.isfinite(out) and out > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return out


def _bound_rows(x: np.ndarray, bound: float, *, clip: bool, name: str = "data") -> np.ndarray:
    """Rows with norm above ``bound`` are an error, or are scaled onto the ball when ``clip``."""
    norms = np.linalg.norm(x, axis=1)
    over = norms > bound * (1 + 1e-12)
    if over.any():
        if not clip:
            i = int(np.argmax(norms))
            raise ValueError(
                f"{name} row {i} has norm {norms[i]!r} > row_bound {bound!r} (pass clip=True to clip rows)"
            )
        x = x.copy()
        x[over] *= (bound / norms[over])[:, None]
    return x


def _sketch(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """S X with S ~ N(0, I_{k×n}), accumulated in blocks of rows; S is discarded."""
    out = np.zeros((k, x.shape[1]))
    for start in range(0, x.shape[0], _BLOCK_ROWS):
        block = x[start : start + _BLOCK_ROWS]
        out += rng.standard_normal((k, block.shape[0])) @ block
    return out


def _lambda_min(x: np.ndarray) -> float:
    """λ_min(XᵀX) by a symmetric eigensolver, clipped at 0 (notes §5 item 7)."""
    return max(float(np.linalg.eigvalsh(x.T @ x)[0]), 0.0)


def _gaussian_log_density_rows(outputs: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Σ over rows of log N(row; 0, cov) for outputs of shape (..., k, d)."""
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError("the output covariance X^T X + sigma^2 I is singular; use sigma > 0") from None
    d = cov.shape[0]
    flat = outputs.reshape(-1, d).T
    whitened = np.linalg.solve(chol, flat)
    quad = (whitened**2).sum(axis=0).reshape(outputs.shape[:-1]).sum(axis=-1)
    k = outputs.shape[-2]
    log_det = 2.0 * np.log(np.diag(chol)).sum()
    return -0.5 * quad - 0.5 * k * (log_det + d * math.log(2 * math.pi))


def _split_pair_rows(total: float, bound: float) -> list[float]:
    """Non-negative values of size ≤ bound whose squares sum to ``total``."""
    rows = []
    remaining = total
    while remaining > 1e-15 * max(total, 1.0):
        piece = min(bound * bound, remaining)
        rows.append(math.sqrt(piece))
        remaining -= piece
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussMix:
    """GaussMix M(X) = S X + σ ξ (seed 004, eq. (GaussMix)); (α, φ(α; k, γ))-RDP by Lemma 1.

    Args:
        k: sketch size.
        sigma: noise standard deviation σ ≥ 0 (data scale).
        row_bound: public C_X; rows with larger norm raise ``ValueError`` unless ``clip``.
        lambda_min_bound: public λ̄_min ≤ λ_min(XᵀX); data violating it raise ``ValueError``.
        clip: scale rows onto the C_X-ball instead of rejecting them.
    """

    k: int
    sigma: float
    row_bound: float
    lambda_min_bound: float = 0.0
    clip: bool = False
    _event: acc.GaussMix = field(init=False, repr=False)

    def __post_init__(self) -> None:
        event = acc.GaussMix.from_noise(
            k=self.k, sigma=self.sigma, row_bound=self.row_bound, lambda_min_bound=self.lambda_min_bound
        )
        object.__setattr__(self, "_event", event)

    @property
    def event(self) -> acc.GaussMix:
        """The accountant's event ``GaussMix(k, γ)``."""
        return self._event

    def prepare(self, data: Any) -> np.ndarray:
        """Validate X (finite, rows ≤ C_X or clipped, λ_min(XᵀX) ≥ λ̄_min); returns the matrix used."""
        x = _bound_rows(_check_matrix(data), self.row_bound, clip=self.clip)
        if self.lambda_min_bound > 0:
            lam = _lambda_min(x)
            if lam < self.lambda_min_bound * (1 - 1e-9):
                raise ValueError(
                    f"lambda_min(X^T X) = {lam!r} is below lambda_min_bound {self.lambda_min_bound!r}: "
                    "the public scale bound does not hold for this data"
                )
        return x

    def covariance(self, data: Any) -> np.ndarray:
        """XᵀX + σ²I: the covariance of each row of the output."""
        x = self.prepare(data)
        return x.T @ x + self.sigma**2 * np.eye(x.shape[1])

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """One output S X + σ ξ (k×d). S is drawn in blocks and discarded.

        Args:
            data: X (n×d), rows of norm ≤ C_X (or clipped when ``clip``).
            rng: the randomness source.

        Returns:
            The k×d release.

        Raises:
            ValueError: on invalid data (see :meth:`prepare`) or a non-Generator rng.
        """
        rng = check_rng(rng)
        x = self.prepare(data)
        return _sketch(x, self.k, rng) + self.sigma * rng.standard_normal((self.k, x.shape[1]))

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n outputs, shape (n, k, d): rows i.i.d. N(0, XᵀX + σ²I) (paper App. B).

        Args:
            data: X (n×d).
            n: number of outputs ≥ 1.
            rng: the randomness source.

        Returns:
            Array of shape (n, k, d), distributed as n independent :meth:`release` outputs.

        Raises:
            ValueError: on invalid data, n < 1 or a non-Generator rng.
        """
        rng = check_rng(rng)
        n = check_count(n)
        cov = self.covariance(data)
        chol = np.linalg.cholesky(cov + 1e-300 * np.eye(cov.shape[0]))
        z = rng.standard_normal((n, self.k, cov.shape[0]))
        return z @ chol.T

    def log_likelihood_ratio(self, outputs: np.ndarray, data: Any, neighbour: Any) -> np.ndarray:
        """log p_X(o) − log p_X′(o) from the two Gaussian densities (rows i.i.d. N(0, XᵀX + σ²I)).

        Args:
            outputs: shape (k, d) or (n, k, d).
            data: X.
            neighbour: X′.

        Returns:
            One value per output (shape () or (n,)).

        Raises:
            ValueError: on shape mismatch or a singular covariance.
        """
        out = np.asarray(outputs, dtype=float)
        d = self.covariance(data).shape[0]
        if out.ndim not in (2, 3) or out.shape[-2:] != (self.k, d):
            raise ValueError(f"outputs must have shape (k, d) or (n, k, d) with k={self.k}, d={d}; got {out.shape!r}")
        cov_x = self.covariance(data)
        cov_n = self.covariance(neighbour)
        if cov_n.shape != cov_x.shape:
            raise ValueError(f"neighbour must have d={d} columns; got shape {np.shape(neighbour)!r}")
        return _gaussian_log_density_rows(out, cov_x) - _gaussian_log_density_rows(out, cov_n)

    def worst_case_pair(self) -> NeighbouringPair:
        """A one-column pair attaining the largest leverage both data sets allow (notes §1.4, §2.2).

        X′ has Gram λ̄_min (rows of norm ≤ C_X), X adds one row C_X. Both satisfy the scale bound.
        Removal leverage t = 1/(γ+1), addition leverage s = 1/γ (the sharp worst case for adding;
        Lemma 1's t = 1/γ for removal would need X′ to violate the bound).
        """
        c = self.row_bound
        base = _split_pair_rows(self.lambda_min_bound, c)
        data = np.array([[c], *[[v] for v in base]])
        neighbour = data.copy()
        neighbour[0, 0] = 0.0
        return NeighbouringPair(
            data=data,
            neighbour=neighbour,
            description="row 0 (norm C_X) zeroed; X'^T X' = lambda_min_bound, one column",
        )


def _modified_variances(lam: float, z: np.ndarray, *, gamma: float, eta: float, tau: float, c2: float) -> np.ndarray:
    """Noise variances of Algorithm 1 (with the notes' unit fixes) for draws z ~ N(0, 1)."""
    if gamma <= tau:
        return np.full(np.shape(z), gamma * c2)  # line 2: std √γ·C (paper prints γ C: notes §3 (a))
    lam_tilde = np.maximum(lam - eta * c2 * (tau - z), 0.0)  # line 4
    return c2 * np.maximum(gamma - lam_tilde / c2, 0.0)  # line 5 in units of C² (notes §3 (b))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModifiedGaussMix:
    """Algorithm 1 of seed 004 (ModifiedGaussMix) with the notes' unit fixes; (ε̃(η, γ, k, δ), δ)-DP by Theorem 1.

    λ̃ = max{λ_min(XᵀX) − η C²(τ − z), 0} with z ~ N(0, 1), τ = √(2 log(3/δ)); then
    S X + √(max{γ C² − λ̃, 0}) ξ. When γ ≤ τ the output is S X + √γ C ξ.
    Errata applied (notes §3): line 2 noise std √γ C (paper prints γ C), line 5 γ − λ̃/C² (paper
    prints γ − λ̃). The public code's under-noised λ_min release (notes §6) is not reproduced.

    Args:
        k: sketch size.
        gamma: target γ > 5/2.
        eta: noise multiplier of the λ_min release (std η C²), > 0.
        delta: the δ of Theorem 1 (sets τ).
        row_bound: C (for LinearMixing √(C_X² + C_Y²)).
        clip: clip rows instead of rejecting them.
    """

    k: int
    gamma: float
    eta: float
    delta: float
    row_bound: float
    clip: bool = False
    _event: acc.ModifiedGaussMix = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_event", acc.ModifiedGaussMix(k=self.k, gamma=self.gamma, eta=self.eta))
        if not (isinstance(self.delta, int | float) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1); got {self.delta!r}")
        _check_positive("row_bound", self.row_bound)

    @property
    def event(self) -> acc.ModifiedGaussMix:
        """The accountant's event ``ModifiedGaussMix(k, γ, η)``."""
        return self._event

    @property
    def tau(self) -> float:
        """τ = √(2 log(3/δ)) (Theorem 1)."""
        return math.sqrt(2.0 * math.log(3.0 / self.delta))

    def epsilon(self, *, route: acc.AccountingRoute = acc.AccountingRoute.RDP) -> float:
        """Theorem 1's ε̃ at this mechanism's δ (an upper bound)."""
        return acc.theorem1_epsilon(eta=self.eta, gamma=self.gamma, k=self.k, delta=self.delta, route=route).epsilon

    def prepare(self, data: Any) -> np.ndarray:
        """Validate the matrix (finite; rows ≤ C or clipped)."""
        return _bound_rows(_check_matrix(data), self.row_bound, clip=self.clip)

    def _variances(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        return _modified_variances(
            _lambda_min(x), z, gamma=self.gamma, eta=self.eta, tau=self.tau, c2=self.row_bound**2
        )

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """One output (k×d); S, z and ξ are drawn here and discarded."""
        rng = check_rng(rng)
        x = self.prepare(data)
        variance = float(self._variances(x, rng.standard_normal(())))
        return _sketch(x, self.k, rng) + math.sqrt(variance) * rng.standard_normal((self.k, x.shape[1]))

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n outputs (n, k, d): given z, rows are i.i.d. N(0, XᵀX + v(z) I) (v from Algorithm 1)."""
        rng = check_rng(rng)
        n = check_count(n)
        x = self.prepare(data)
        variances = self._variances(x, rng.standard_normal(n))
        eigval, eigvec = np.linalg.eigh(x.T @ x)
        scale = np.sqrt(np.maximum(eigval[None, :], 0.0) + variances[:, None])  # (n, d)
        z = rng.standard_normal((n, self.k, x.shape[1]))
        return (z * scale[:, None, :]) @ eigvec.T

    def worst_case_pair(self) -> NeighbouringPair:
        """One column; X′ has Gram γC² (so λ̃ ≈ λ_min) and X adds one row of norm C."""
        c = self.row_bound
        base = _split_pair_rows(self.gamma * c * c, c)
        data = np.array([[c], *[[v] for v in base]])
        neighbour = data.copy()
        neighbour[0, 0] = 0.0
        return NeighbouringPair(data=data, neighbour=neighbour, description="row 0 (norm C) zeroed; one column")


def _solve_sketched(sketch: np.ndarray, d: int) -> np.ndarray:
    """θ = argmin ‖X̃θ − ỹ‖ for sketches [X̃, ỹ] of shape (..., k, d+1) (batched normal equations)."""
    xs, ys = sketch[..., :d], sketch[..., d]
    if sketch.ndim == 2:
        return np.linalg.lstsq(xs, ys, rcond=None)[0]
    gram = np.swapaxes(xs, -1, -2) @ xs
    rhs = np.einsum("nkd,nk->nd", xs, ys)
    return np.linalg.solve(gram, rhs[..., None])[..., 0]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearMixing:
    """LinearMixing DP-OLS, Algorithm 2 of seed 004: (ε, δ)-DP by Theorem 2.

    Line 1 calibrates the smallest γ > 5/2 with ε̃(γ/√k, γ, k, δ) ≤ ε (``route=EXACT`` uses the exact
    chi-square profile for the sketch part: less noise for the same ε). Line 2 runs
    ModifiedGaussMix on [X, y] with the same S for both blocks and C = √(C_X² + C_Y²). Line 3 returns
    the least-squares solution of the sketched system.

    Args:
        epsilon, delta: the target guarantee.
        k: sketch size (the paper's experiments use k = max(2.5 d, 57)).
        x_bound: C_X; y_bound: C_Y.
        route: accounting route for the calibration.
        clip: clip rows / responses instead of rejecting them.
    """

    epsilon: float
    delta: float
    k: int
    x_bound: float
    y_bound: float
    route: acc.AccountingRoute = acc.AccountingRoute.RDP
    clip: bool = False
    _inner: ModifiedGaussMix = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_positive("x_bound", self.x_bound)
        _check_positive("y_bound", self.y_bound)
        gamma = acc.calibrate_gamma_linear_mixing(self.epsilon, self.delta, k=self.k, route=self.route)
        inner = ModifiedGaussMix(
            k=self.k,
            gamma=gamma,
            eta=gamma / math.sqrt(self.k),
            delta=self.delta,
            row_bound=math.hypot(self.x_bound, self.y_bound),
            clip=False,
        )
        object.__setattr__(self, "_inner", inner)

    @property
    def gamma(self) -> float:
        """The calibrated γ (Algorithm 2, line 1)."""
        return self._inner.gamma

    @property
    def event(self) -> acc.ModifiedGaussMix:
        """The accountant's event (post-processing of ModifiedGaussMix)."""
        return self._inner.event

    def concatenate(self, data: Any) -> np.ndarray:
        """[X, y] after validation: rows ‖x‖ ≤ C_X, |y| ≤ C_Y (or clipped), n ≥ d."""
        if not (isinstance(data, tuple | list) and len(data) == 2):
            raise ValueError(f"data must be a pair (X, y); got {type(data).__name__}")
        x = _bound_rows(_check_matrix(data[0], "X"), self.x_bound, clip=self.clip, name="X")
        y = np.asarray(data[1], dtype=float)
        if y.shape != (x.shape[0],) or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be a finite vector of length {x.shape[0]}; got shape {y.shape!r}")
        if np.any(np.abs(y) > self.y_bound * (1 + 1e-12)):
            if not self.clip:
                raise ValueError(f"|y| must be <= y_bound {self.y_bound!r}; got max {float(np.abs(y).max())!r}")
            y = np.clip(y, -self.y_bound, self.y_bound)
        if x.shape[0] < x.shape[1]:
            raise ValueError(f"need n >= d (Algorithm 2); got n={x.shape[0]}, d={x.shape[1]}")
        return np.column_stack([x, y])

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """θ_Lin (length d) for data (X, y).

        Args:
            data: the pair (X, y).
            rng: the randomness source.

        Returns:
            θ_Lin, shape (d,).

        Raises:
            ValueError: on invalid data (see :meth:`concatenate`).
        """
        a = self.concatenate(data)
        return _solve_sketched(self._inner.release(a, rng), a.shape[1] - 1)

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n independent θ_Lin, shape (n, d)."""
        a = self.concatenate(data)
        return _solve_sketched(self._inner.sample(a, n, rng), a.shape[1] - 1)

    def worst_case_pair(self) -> NeighbouringPair:
        """One feature column; the differing record (x, y) = (C_X, C_Y) is zeroed in the neighbour."""
        c = math.hypot(self.x_bound, self.y_bound)
        base = _split_pair_rows(self.gamma * c * c, self.x_bound)
        x = np.array([[self.x_bound], *[[v] for v in base]])
        y = np.zeros(x.shape[0])
        y[0] = self.y_bound
        x_n, y_n = x.copy(), y.copy()
        x_n[0, 0], y_n[0] = 0.0, 0.0
        return NeighbouringPair(data=(x, y), neighbour=(x_n, y_n), description="record 0 = (C_X, C_Y) zeroed")


def quadratic_logistic_surrogate(q: float = 6.0) -> tuple[float, float, float]:
    """(b0, b1, b2) of the degree-2 Chebyshev interpolant of −log(1 + e^{−s}) on [−Q, Q] (seed 004 §5.2).

    Nodes 0, ±Q√3/2. b1 = 1/2 exactly (−log(1+e^{−s}) = s/2 − log(2cosh(s/2))); Q = 6 gives
    b2 = −0.0707574661, −b1/(2b2) = 3.5331960549 (notes §3).

    Args:
        q: half-width Q > 0 of the interpolation interval.

    Returns:
        (b0, b1, b2).

    Raises:
        ValueError: Q ≤ 0.
    """
    q = _check_positive("q", q)
    h = q * math.sqrt(3.0) / 2.0

    def f(s: float) -> float:
        return -math.log1p(math.exp(-s)) if s >= 0 else s - math.log1p(math.exp(s))

    b0 = f(0.0)
    b1 = (f(h) - f(-h)) / (2 * h)
    b2 = (f(h) + f(-h) - 2 * b0) / (2 * h * h)
    return b0, b1, b2


@dataclass(frozen=True, slots=True, kw_only=True)
class LogisticMixing:
    """Private logistic regression via the quadratic surrogate (seed 004 §5.2, App. G).

    Maximising Σ q(yᵢ θᵀxᵢ) with q(s) = b0 + b1 s + b2 s² is least squares with response
    −(b1/(2b2)) y; so run LinearMixing on (X, y), y ∈ {−1, +1}, C_Y = 1, and scale θ by −b1/(2b2).
    (The notes' sign-convention flag: we minimise the logistic loss, i.e. maximise Σ q.) Map labels
    {0, 1} with :meth:`labels_from_binary`; a zeroed-out record has label 0.
    """

    epsilon: float
    delta: float
    k: int
    x_bound: float
    q: float = 6.0
    route: acc.AccountingRoute = acc.AccountingRoute.RDP
    clip: bool = False
    _linear: LinearMixing = field(init=False, repr=False)
    _scale: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        linear = LinearMixing(
            epsilon=self.epsilon,
            delta=self.delta,
            k=self.k,
            x_bound=self.x_bound,
            y_bound=1.0,
            route=self.route,
            clip=self.clip,
        )
        _, b1, b2 = quadratic_logistic_surrogate(self.q)
        object.__setattr__(self, "_linear", linear)
        object.__setattr__(self, "_scale", -b1 / (2.0 * b2))

    @property
    def event(self) -> acc.ModifiedGaussMix:
        return self._linear.event

    def _labels(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        if not (isinstance(data, tuple | list) and len(data) == 2):
            raise ValueError(f"data must be a pair (X, y); got {type(data).__name__}")
        y = np.asarray(data[1], dtype=float)
        values = set(np.unique(y).tolist())
        if not values <= {-1.0, 0.0, 1.0}:
            raise ValueError(
                f"labels must be in {{-1, +1}} (0 only for a zeroed-out record); got values {sorted(values)!r}"
            )
        return np.asarray(data[0], dtype=float), y

    @staticmethod
    def labels_from_binary(y: Any) -> np.ndarray:
        """Map labels {0, 1} to {−1, +1} (2y − 1), as the public code does."""
        arr = np.asarray(y, dtype=float)
        if not set(np.unique(arr).tolist()) <= {0.0, 1.0}:
            raise ValueError(f"y must contain only 0 and 1; got values {sorted(set(arr.tolist()))[:5]!r}")
        return 2.0 * arr - 1.0

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """θ̂ = −(b1/(2b2)) θ_Lin."""
        return self._scale * self._linear.release(self._labels(data), rng)

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        return self._scale * self._linear.sample(self._labels(data), n, rng)

    def worst_case_pair(self) -> NeighbouringPair:
        """LinearMixing's pair with labels −1 on the base records and +1 on the zeroed one."""
        pair = self._linear.worst_case_pair()
        x, y = pair.data
        y = np.where(np.arange(y.size) == 0, 1.0, -1.0)
        y_n = y.copy()
        y_n[0] = 0.0
        return NeighbouringPair(data=(x, y), neighbour=(pair.neighbour[0], y_n), description=pair.description)


def audit_mechanism(event: Any, count: int) -> Any:
    """The runnable mechanism of ``count`` runs of a :class:`~dplens.research.gaussmix.accounting.GaussMix` event.

    γ = (σ² + λ̄_min)/C_X²: with C_X = 1 and λ̄_min = 0 the mechanism has exactly the event's γ.
    """
    from dplens.mechanisms.registry import repeat

    return repeat(GaussMix(k=event.k, sigma=math.sqrt(event.gamma), row_bound=1.0), count)
