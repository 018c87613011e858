"""ν-DP-FTRL (seed 001): correlated-noise generators, the matrix mechanism, and DP-FTRL / DP-SGD on linear regression.

Choquette-Choo, Dvijotham, Pillutla, Ganesh, Steinke, Thakurta, "Correlated Noise Provably Beats Independent Noise
for Differentially Private Learning" (ICLR 2024, arXiv 2310.06771); notes in ``research/corrdp-and-dp-ftrl.md``
Part B ("note §B…"). The accounting (coefficients, sensitivity, μ-GDP) lives in
:mod:`dplens.research.dp_ftrl.accounting`.

The noise of ν-DP-FTRL at step t is z_t = Σ_{τ≤t} β_τ w_{t−τ}, i.e. z = B w with B the lower-triangular Toeplitz matrix
of the β^ν coefficients (note §B2). Two exact generators:

- :func:`correlate` / :func:`correlated_noise`: the whole stream at once by one FFT Toeplitz product,
  **O(T log T) time**, O(T·d) memory (columns processed in chunks).
- :class:`CorrelatedNoiseStream`: **streaming**, blocks of steps on demand without knowing T in advance
  ("anytime"), O(T·d) memory (the past white noise) and O(T log² T) time: the product z = β * w is split into
  dyadic blocks (β_{[2^k, 2^{k+1})} × a completed w block of length 2^k), each done by one FFT as soon as its w
  block is complete and added to the future outputs it touches (a semi-relaxed product; every pair (τ, j) is
  covered exactly once, see the class docstring).

Both draw w in the same order (time-major), so with equal seeds they produce the same stream (up to ~1e-12).
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import fft, integrate, signal

from dplens.accountant import events as ev
from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng
from dplens.research.dp_ftrl import accounting as mx

__all__ = [
    "CorrelatedNoiseStream",
    "LinearRegressionData",
    "MatrixMechanism",
    "Sampling",
    "TrainResult",
    "correlate",
    "correlated_noise",
    "decorrelate",
    "excess_risk",
    "make_linear_regression",
    "simulate_quadratic",
    "stationary_autocovariance",
    "stationary_variance",
    "stationary_variance_standard_error",
    "train_linear_regression",
]

_COLUMN_CHUNK = 64  # columns per FFT batch in :func:`correlate` (bounds the complex work arrays)
_DIRECT_BLOCK = 256  # base block of the stream: contributions with τ < 256 are done by a dense product


def _noising(nu: float | None, coefficients: Any, steps: int) -> np.ndarray:
    if (nu is None) == (coefficients is None):
        raise ValueError(f"give exactly one of nu or coefficients; got nu={nu!r}, coefficients={coefficients!r}")
    if nu is not None:
        return mx.noising_coefficients(nu, steps)
    beta = np.asarray(coefficients, dtype=float)
    if beta.ndim != 1 or beta.size == 0 or not np.all(np.isfinite(beta)):
        raise ValueError(f"coefficients must be a non-empty finite 1-D array; got {coefficients!r}")
    out = np.zeros(steps)
    out[: min(steps, beta.size)] = beta[:steps]
    return out


def _toeplitz_apply(first_column: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Lower-triangular Toeplitz (first column ``first_column``) times ``values`` (T, d) by FFT, O(T log T)."""
    steps = values.shape[0]
    size = fft.next_fast_len(2 * steps - 1, real=True)
    kernel = fft.rfft(first_column[:steps], size)
    out = np.empty_like(values)
    for start in range(0, values.shape[1], _COLUMN_CHUNK):
        block = values[:, start : start + _COLUMN_CHUNK]
        spectrum = fft.rfft(block, size, axis=0) * kernel[:, None]
        out[:, start : start + _COLUMN_CHUNK] = fft.irfft(spectrum, size, axis=0)[:steps]
    return out


def _as_stream(values: Any, name: str) -> tuple[np.ndarray, bool]:
    arr = np.asarray(values, dtype=float)
    if arr.ndim not in (1, 2) or arr.shape[0] == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a finite (T,) or (T, d) array with T >= 1; got shape {arr.shape!r}")
    return (arr[:, None], True) if arr.ndim == 1 else (arr, False)


def correlate(white: Any, *, nu: float | None = None, coefficients: Any = None) -> np.ndarray:
    """z = B w along the time axis (axis 0): z_t = Σ_{τ≤t} β_τ w_{t−τ}, by one FFT product (O(T log T)).

    ``nu`` selects the ν-DP-FTRL coefficients β^ν (note §B2); ``coefficients`` any β (e.g. truncated: then the
    sensitivity is that of its inverse, :func:`dplens.research.dp_ftrl.accounting.inverse_toeplitz_coefficients`).
    """
    w, flat = _as_stream(white, "white")
    beta = _noising(nu, coefficients, w.shape[0])
    z = _toeplitz_apply(beta, w)
    return z[:, 0] if flat else z


def decorrelate(values: Any, *, nu: float) -> np.ndarray:
    """C v = B⁻¹ v along axis 0 (the inverse of :func:`correlate` for ν-DP-FTRL; c^ν coefficients, O(T log T))."""
    v, flat = _as_stream(values, "values")
    out = _toeplitz_apply(mx.strategy_coefficients(nu, v.shape[0]), v)
    return out[:, 0] if flat else out


def correlated_noise(
    nu: float, steps: int, *, dim: int = 1, noise_std: float = 1.0, rng: np.random.Generator
) -> np.ndarray:
    """The ν-DP-FTRL noise stream z = B w for ``steps`` steps, w_t ~ N(0, noise_std² I_dim), shape (steps, dim).

    O(T log T) time (one FFT Toeplitz product), O(T·dim) memory.
    """
    rng = check_rng(rng)
    steps = check_count(steps, name="steps")
    dim = check_count(dim, name="dim")
    std = _check_positive("noise_std", noise_std)
    white = rng.standard_normal((steps, dim)) * std
    return correlate(white, nu=nu)


def _check_positive(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | np.floating)
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


class CorrelatedNoiseStream:
    """Streaming ν-DP-FTRL noise: ``next(n)`` returns the next n steps of z = B w, shape (n, dim).

    No horizon is needed (the β coefficients are extended on demand). Exactness: z_t = β_0 w_t + Σ_{τ≥1} β_τ w_{t−τ}.
    Pairs with τ < L (L = 256, the base block) are computed densely for each base block from the current and previous
    w blocks. Pairs with τ ∈ [2^k, 2^{k+1}) for 2^k ≥ L are grouped with w in aligned blocks J = [m 2^k, (m+1) 2^k):
    their outputs t = τ + j lie in [(m+1) 2^k, (m+3) 2^k − 1), all at or after the end of J, so when block J completes
    (a multiple of L, hence a base-block boundary) one FFT product of β_{[2^k, 2^{k+1})} with w_J is added to a buffer
    of future outputs. Each (τ, j) falls in exactly one group. Cost per level O(T log 2^k): O(T log² T) in all;
    memory O(T·dim) for the past w and the future buffer.

    Args:
        nu: ν ∈ [0, 1].
        dim: noise dimension.
        noise_std: std of w (σ G in DP-FTRL).
        rng: the generator w is drawn from (time-major, like :func:`correlated_noise`).
    """

    def __init__(self, nu: float, *, dim: int = 1, noise_std: float = 1.0, rng: np.random.Generator) -> None:
        self.nu = mx._check_nu(nu)
        self.dim = check_count(dim, name="dim")
        self.noise_std = _check_positive("noise_std", noise_std)
        self._rng = check_rng(rng)
        self._beta = mx.noising_coefficients(self.nu, 4 * _DIRECT_BLOCK)
        self._white = np.zeros((4 * _DIRECT_BLOCK, self.dim))
        self._future = np.zeros((4 * _DIRECT_BLOCK, self.dim))
        self._produced = 0  # steps whose w has been drawn (a multiple of the base block)
        self._pending = np.zeros((0, self.dim))  # computed but not yet returned
        # Dense L x 2L block of the Toeplitz product for τ < L: row i, column j ↦ β_{i + L − j} (0 outside [0, L)).
        rows = np.arange(_DIRECT_BLOCK)[:, None]
        cols = np.arange(2 * _DIRECT_BLOCK)[None, :]
        lag = rows + _DIRECT_BLOCK - cols
        self._near = np.where((lag >= 0) & (lag < _DIRECT_BLOCK), self._beta[np.clip(lag, 0, _DIRECT_BLOCK - 1)], 0.0)

    @property
    def steps_returned(self) -> int:
        """How many steps :meth:`next` has returned so far."""
        return self._produced - self._pending.shape[0]

    def _ensure(self, end: int) -> None:
        # β up to index 2·end, past w up to `end`, future outputs up to 3·end (the largest dyadic block ends at `end`).
        if self._beta.size < 2 * end:
            self._beta = mx.noising_coefficients(self.nu, max(2 * end, 2 * self._beta.size))
        for name, length in (("_white", end), ("_future", 3 * end)):
            buffer = getattr(self, name)
            if buffer.shape[0] < length:
                grown = np.zeros((max(length, 2 * buffer.shape[0]), self.dim))
                grown[: buffer.shape[0]] = buffer
                setattr(self, name, grown)

    def _next_block(self) -> np.ndarray:
        size = _DIRECT_BLOCK
        start = self._produced
        end = start + size
        self._ensure(end)
        w = self._rng.standard_normal((size, self.dim)) * self.noise_std
        self._white[start:end] = w
        previous = self._white[start - size : start] if start else np.zeros((size, self.dim))
        z = self._future[start:end] + self._near @ np.vstack([previous, w])
        # Every dyadic block that completes at `end` feeds the future outputs [end, end + 2^{k+1} − 1).
        length = size
        while end % length == 0:
            beta_block = self._beta[length : 2 * length]
            white_block = self._white[end - length : end]
            product = signal.fftconvolve(beta_block[:, None], white_block, axes=0)
            self._future[end : end + product.shape[0]] += product
            length *= 2
        self._future[start:end] = 0.0
        self._produced = end
        return z

    def next(self, n: int = 1) -> np.ndarray:
        """The next ``n`` steps of the stream, shape (n, dim)."""
        n = check_count(n)
        parts = [self._pending]
        have = self._pending.shape[0]
        while have < n:
            block = self._next_block()
            parts.append(block)
            have += block.shape[0]
        stacked = np.vstack(parts)
        self._pending = stacked[n:]
        return stacked[:n]


# --------------------------------------------------------------------------------------------
# The matrix mechanism on a gradient stream (for audits)
# --------------------------------------------------------------------------------------------


class MatrixMechanism:
    """ν-DP-FTRL's release of a stream of gradient sums: x + σ G B w, x of shape (T, dim) (Mechanism protocol).

    Equivalent to the Gaussian mechanism on C x (post-processed by B), so the exact log-likelihood ratio uses the
    decorrelated output y = C o: log p_D(o) − log p_D′(o) = (‖y − C x′‖² − ‖y − C x‖²)/(2σ²G²). Under
    :meth:`worst_case_pair` it is N(μ²/2, μ²) with μ = the accountant's sensitivity/σ — so audits of this mechanism
    check the sensitivity (including the min-separation worst case), not only the noise.

    Args:
        nu, noise_multiplier, steps, epochs, min_separation, neighboring: as in
            :class:`~dplens.research.dp_ftrl.accounting.DpFtrl`.
        clip_norm: G, the bound on one record's gradient per step.
        dim: the gradient dimension.
    """

    def __init__(
        self,
        *,
        nu: float,
        noise_multiplier: float,
        steps: int,
        epochs: int | None = None,
        min_separation: int | None = None,
        neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_SPECIAL,
        clip_norm: float = 1.0,
        dim: int = 1,
    ) -> None:
        self._event = mx.DpFtrl(
            nu=nu,
            noise_multiplier=noise_multiplier,
            steps=steps,
            epochs=epochs,
            min_separation=min_separation,
            neighboring=neighboring,
        )
        self.clip_norm = _check_positive("clip_norm", clip_norm)
        self.dim = check_count(dim, name="dim")

    def __repr__(self) -> str:
        # Stable across processes (no memory address): audits fingerprint their checkpoints with it.
        return f"MatrixMechanism(event={self._event!r}, clip_norm={self.clip_norm!r}, dim={self.dim!r})"

    @property
    def event(self) -> mx.DpFtrl:
        return self._event

    @property
    def noise_std(self) -> float:
        return self._event.noise_multiplier * self.clip_norm

    def _data(self, data: Any) -> np.ndarray:
        arr = np.asarray(data, dtype=float)
        if arr.ndim == 1 and self.dim == 1:
            arr = arr[:, None]
        if arr.shape != (self._event.steps, self.dim) or not np.all(np.isfinite(arr)):
            raise ValueError(
                f"data must be a finite array of shape ({self._event.steps}, {self.dim}); got {arr.shape!r}"
            )
        return arr

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        """One output stream, shape (T, dim)."""
        return self.sample(data, 1, rng)[0]

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n independent output streams, shape (n, T, dim); the noise of each is z = B w along time."""
        rng = check_rng(rng)
        n = check_count(n)
        x = self._data(data)
        steps = self._event.steps
        white = rng.standard_normal((steps, n * self.dim)) * self.noise_std
        noise = correlate(white, nu=self._event.nu).reshape(steps, n, self.dim).transpose(1, 0, 2)
        return x[None] + noise

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        """log p_D(o) − log p_D′(o) per output (exact; Gaussian after decorrelation by C)."""
        out = np.asarray(outputs, dtype=float)
        steps = self._event.steps
        if out.ndim == 2 and self.dim == 1 and out.shape[1] == steps:
            out = out[:, :, None]
        if out.ndim == 2:
            out = out[None]
        if out.ndim != 3 or out.shape[1:] != (steps, self.dim):
            raise ValueError(f"outputs must have shape (n, {steps}, {self.dim}); got {np.shape(outputs)!r}")
        n = out.shape[0]
        y = decorrelate(out.transpose(1, 0, 2).reshape(steps, n * self.dim), nu=self._event.nu)
        y = y.reshape(steps, n, self.dim)
        m0 = decorrelate(self._data(data), nu=self._event.nu)[:, None, :]
        m1 = decorrelate(self._data(neighbour), nu=self._event.nu)[:, None, :]
        num = np.sum((y - m1) ** 2, axis=(0, 2)) - np.sum((y - m0) ** 2, axis=(0, 2))
        return num / (2.0 * self.noise_std**2)

    def worst_case_pair(self) -> NeighbouringPair:
        """D: one record with gradient G·e₁ at steps 0, b, …, (k − 1)b; D′: that record zeroed (zero-out / add-remove)
        or replaced by one with gradient −G·e₁ (replace-one). The worst case of the min-separation theorem."""
        steps = self._event.steps
        k, b = mx.participation_schedule(steps, epochs=self._event.epochs, min_separation=self._event.min_separation)
        data = np.zeros((steps, self.dim))
        data[np.arange(k) * b, 0] = self.clip_norm
        if self._event.neighboring is ev.NeighboringRelation.REPLACE_ONE:
            neighbour, how = -data, "replaced by one with the opposite gradient"
        else:
            neighbour, how = np.zeros_like(data), "zeroed out"
        return NeighbouringPair(data, neighbour, f"one record (gradient G e1 at {k} steps, {b} apart) {how}")


# --------------------------------------------------------------------------------------------
# The 1-D quadratic: exact stationary variance (the LTI model of note §B4)
# --------------------------------------------------------------------------------------------


def _check_quadratic(nu: float, curvature: float, learning_rate: float) -> tuple[float, float, float]:
    nu = mx._check_nu(nu)
    lam = _check_positive("curvature", curvature)
    eta = _check_positive("learning_rate", learning_rate)
    if not eta * lam < 2:
        raise ValueError(f"learning_rate * curvature must be < 2 for stable dynamics; got {eta * lam!r}")
    return nu, lam, eta


def simulate_quadratic(
    *,
    nu: float,
    curvature: float,
    learning_rate: float,
    steps: int,
    noise_std: float = 1.0,
    rng: np.random.Generator,
    initial: float = 0.0,
) -> np.ndarray:
    """Noisy (FTRL/SGD) gradient descent on f(θ) = λθ²/2 in one dimension: θ_{t+1} = θ_t − η(λθ_t + z_t).

    z = B w with w ~ N(0, noise_std²) (ν = 1: independent noise, DP-SGD). Returns θ_1 … θ_T. The linear recursion
    is run by ``scipy.signal.lfilter`` and the noise by one FFT, so T = 10⁶ takes a fraction of a second.
    """
    nu, lam, eta = _check_quadratic(nu, curvature, learning_rate)
    steps = check_count(steps, name="steps")
    z = correlated_noise(nu, steps, noise_std=noise_std, rng=rng)[:, 0]
    a = 1.0 - eta * lam
    theta = signal.lfilter([-eta], [1.0, -a], z)
    if initial:
        theta = theta + float(initial) * a ** np.arange(1, steps + 1)
    return theta


def _impulse_response(nu: float, a: float, length: int) -> np.ndarray:
    """h_k, k < length: the coefficients of B(z)/(1 − a z), i.e. θ_{t+1} = −η σ Σ_k h_k w_{t−k}."""
    return signal.lfilter([1.0], [1.0, -a], mx.noising_coefficients(nu, length))  # β filtered by 1/(1 − az), O(L)


def stationary_variance(*, nu: float, curvature: float, learning_rate: float, noise_std: float = 1.0) -> float:
    """Stationary Var(θ_t) of :func:`simulate_quadratic`: η²σ²‖h‖², h the impulse response of B(z)/(1 − (1 − ηλ)z).

    Derivation (note §B4 [D,V]): θ_{t+1} = aθ_t − ησ(Bw)_t with a = 1 − ηλ, so θ = −ησ z B(z)/(1 − az) · w and the
    stationary variance is η²σ² Σ_k h_k² = (η²σ²/2π) ∫ |B(e^{iω})|²/|1 − a e^{iω}|² dω, |B(e^{iω})|² =
    |1 − (1 − ν)e^{iω}|. Closed forms:

    - ν = ηλ (the matched ν-DP-FTRL): B(z)/(1 − az) = (1 − az)^{−1/2}, so h = c^ν and the variance is
      **η²σ²γ_∞² = η²σ²(2/π)K((1 − ν)²)**;
    - ν = 1 (DP-SGD): η²σ²/(1 − a²) = ησ²/(λ(2 − ηλ)).

    Otherwise the integral is evaluated numerically (``scipy.integrate.quad``).
    """
    nu, lam, eta = _check_quadratic(nu, curvature, learning_rate)
    sigma = _check_positive("noise_std", noise_std)
    a = 1.0 - eta * lam
    scale = (eta * sigma) ** 2
    if nu == 1:
        return scale / (1.0 - a * a)
    if math.isclose(nu, eta * lam, rel_tol=1e-15, abs_tol=0.0):
        return scale * mx.gamma_infinity(nu) ** 2

    def density(omega: float) -> float:
        # |1 − r e^{iω}|² = (1 − r)² + 4 r sin²(ω/2): no cancellation when r → 1 and ω → 0.
        half = math.sin(0.5 * omega) ** 2
        numerator = math.sqrt(nu * nu + 4.0 * (1.0 - nu) * half)
        return numerator / ((1.0 - a) ** 2 + 4.0 * a * half)

    # The integrand peaks at ω = 0 with width ~ 1 − a (at ω = π when a < 0): integrate over geometric pieces.
    width = max(min(abs(1.0 - abs(a)), 1.0), 1e-12)
    pieces = np.geomspace(width, math.pi, max(2, int(math.log(math.pi / width) / math.log(4.0)) + 2))
    nodes = np.unique(np.concatenate([[0.0], pieces, math.pi - pieces, [math.pi]]))
    value = sum(
        integrate.quad(density, lo, hi, limit=200, epsabs=0.0, epsrel=1e-11)[0] for lo, hi in itertools.pairwise(nodes)
    )
    return scale * value / math.pi


def stationary_autocovariance(
    *, nu: float, curvature: float, learning_rate: float, noise_std: float = 1.0, tolerance: float = 1e-16
) -> np.ndarray:
    """r(h) = Cov(θ_t, θ_{t+h}) = η²σ² Σ_k h_k h_{k+h} of the stationary process, for h = 0 … until negligible.

    h is truncated where its remaining energy is below ``tolerance`` relative (the tail decays like
    max(|a|, 1 − ν)^k); for ν = 0 the tail is a power law and 2^20 terms are kept (relative error ~1e-6).
    """
    nu, lam, eta = _check_quadratic(nu, curvature, learning_rate)
    sigma = _check_positive("noise_std", noise_std)
    a = 1.0 - eta * lam
    decay = max(abs(a), 1.0 - nu)
    if decay >= 1.0:  # ν = 0: β decays like k^{-3/2}, so h's energy tail beyond L is O(1/L): L = 2^20 (≈1e-6)
        length = 1 << 20
    elif decay == 0.0:
        length = 64
    else:
        length = int(min(max(64, math.log(tolerance) / math.log(decay) + 64), 1 << 22))
    h = _impulse_response(nu, a, length)
    size = fft.next_fast_len(2 * length, real=True)
    spectrum = fft.rfft(h, size)
    auto = fft.irfft(spectrum * np.conj(spectrum), size)[:length]
    return (eta * sigma) ** 2 * auto


def stationary_variance_standard_error(
    *, nu: float, curvature: float, learning_rate: float, samples: int, noise_std: float = 1.0
) -> float:
    """Standard error of the time average (1/N) Σ_t θ_t² over N consecutive stationary steps.

    For a stationary Gaussian process Cov(θ_s², θ_t²) = 2 r(s − t)², so Var = (2/N²) Σ_{s,t} r(s − t)²
    = (2/N) Σ_{|h|<N} (1 − |h|/N) r(h)² (Isserlis' theorem), with r from :func:`stationary_autocovariance`.
    """
    n = check_count(samples, name="samples")
    r = stationary_autocovariance(nu=nu, curvature=curvature, learning_rate=learning_rate, noise_std=noise_std)
    r = r[:n]
    weights = 1.0 - np.arange(r.size) / n
    total = r[0] ** 2 + 2.0 * float(np.sum(weights[1:] * r[1:] ** 2))
    return math.sqrt(2.0 * total / n)


# --------------------------------------------------------------------------------------------
# DP-FTRL and DP-SGD on linear regression
# --------------------------------------------------------------------------------------------


class Sampling(enum.Enum):
    """How batches are formed.

    CYCLIC: one random permutation fixed for all epochs, consecutive batches of ``batch_size``: each record takes
        part once per epoch, at steps exactly ``steps_per_epoch`` apart (k = epochs, b = steps_per_epoch).
    POISSON: each record independently with probability batch_size/n per step (independent noise only: ν = 1,
        DP-SGD with amplification by sampling, accounted under add/remove).
    """

    CYCLIC = "cyclic"
    POISSON = "poisson"


@dataclass(frozen=True, slots=True)
class LinearRegressionData:
    """Synthetic linear-regression data: y = xᵀθ* + noise, x ~ N(0, diag(eigenvalues))."""

    features: np.ndarray
    labels: np.ndarray
    theta_star: np.ndarray
    eigenvalues: np.ndarray
    minimiser: np.ndarray = field(repr=False)
    minimum: float = 0.0

    @property
    def n(self) -> int:
        return int(self.features.shape[0])

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])


def _loss(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(0.5 * np.mean((x @ theta - y) ** 2))


def make_linear_regression(
    n: int,
    dim: int,
    *,
    rng: np.random.Generator,
    eigenvalue_decay: float = 1.0,
    label_noise: float = 0.1,
    theta_norm: float = 1.0,
) -> LinearRegressionData:
    """n records with x ~ N(0, H), H = diag(k^{−decay}) (k = 1 … dim; the paper's Fig. 2 uses λ_k = 1/k),
    y = xᵀθ* + N(0, label_noise²), ‖θ*‖ = theta_norm. The least-squares minimiser θ̂ is stored for excess risks."""
    rng = check_rng(rng)
    n = check_count(n, name="n")
    dim = check_count(dim, name="dim")
    if not (isinstance(eigenvalue_decay, int | float) and math.isfinite(eigenvalue_decay) and eigenvalue_decay >= 0):
        raise ValueError(f"eigenvalue_decay must be a finite number >= 0; got {eigenvalue_decay!r}")
    if not (isinstance(label_noise, int | float) and math.isfinite(label_noise) and label_noise >= 0):
        raise ValueError(f"label_noise must be a finite number >= 0; got {label_noise!r}")
    theta_norm = _check_positive("theta_norm", theta_norm)
    eigenvalues = np.arange(1, dim + 1, dtype=float) ** (-float(eigenvalue_decay))
    x = rng.standard_normal((n, dim)) * np.sqrt(eigenvalues)
    direction = rng.standard_normal(dim)
    theta_star = theta_norm * direction / np.linalg.norm(direction)
    y = x @ theta_star + label_noise * rng.standard_normal(n)
    minimiser, *_ = np.linalg.lstsq(x, y, rcond=None)
    return LinearRegressionData(x, y, theta_star, eigenvalues, minimiser, _loss(minimiser, x, y))


def excess_risk(theta: Any, data: LinearRegressionData) -> float:
    """F(θ) − F(θ̂) with F(θ) = (1/2n) Σ (x_iᵀθ − y_i)² (the training objective)."""
    th = np.asarray(theta, dtype=float)
    if th.shape != (data.dim,):
        raise ValueError(f"theta must have shape ({data.dim},); got {th.shape!r}")
    return max(_loss(th, data.features, data.labels) - data.minimum, 0.0)


@dataclass(frozen=True, slots=True)
class TrainResult:
    """The last iterate, the privacy event of the run (and how often it is composed), and the schedule."""

    theta: np.ndarray
    event: ev.Event
    count: int
    steps: int
    noise_multiplier: float
    sampling: Sampling

    def to_dict(self) -> dict[str, Any]:
        return {
            "theta": self.theta.tolist(),
            "event": ev.event_to_dict(self.event),
            "count": self.count,
            "steps": self.steps,
            "noise_multiplier": self.noise_multiplier,
            "sampling": self.sampling.value,
        }


def train_linear_regression(
    data: LinearRegressionData,
    *,
    nu: float,
    noise_multiplier: float,
    clip_norm: float,
    learning_rate: float,
    batch_size: int,
    epochs: int,
    rng: np.random.Generator,
    sampling: Sampling = Sampling.CYCLIC,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_SPECIAL,
) -> TrainResult:
    """ν-DP-FTRL (ν < 1) or DP-SGD (ν = 1) on the least-squares objective, numpy only (Algorithm DP-MF of seed 001).

    Step t: the per-example gradients (x_iᵀθ − y_i)x_i of the batch are clipped to ``clip_norm`` G and summed,
    the correlated noise G σ z_t (z = B w, :func:`correlated_noise`) is added, and θ ← θ − η·(sum + noise)/batch_size.
    T = epochs × ⌊n / batch_size⌋ steps. The returned event is the run's guarantee: for CYCLIC batches a
    :class:`~dplens.research.dp_ftrl.accounting.DpFtrl` with k = epochs participations ``steps_per_epoch`` apart
    (exact μ-GDP); for POISSON (ν = 1 only) a Poisson-sampled Gaussian composed T times (add/remove adjacency).
    """
    if not isinstance(data, LinearRegressionData):
        raise ValueError(f"data must be a LinearRegressionData; got {type(data).__name__}")
    nu = mx._check_nu(nu)
    sigma = _check_positive("noise_multiplier", noise_multiplier)
    clip = _check_positive("clip_norm", clip_norm)
    eta = _check_positive("learning_rate", learning_rate)
    batch = check_count(batch_size, name="batch_size")
    epochs = check_count(epochs, name="epochs")
    rng = check_rng(rng)
    if not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be a Sampling; got {sampling!r}")
    if batch > data.n:
        raise ValueError(f"batch_size must be <= n = {data.n}; got {batch_size!r}")
    per_epoch = data.n // batch
    steps = epochs * per_epoch
    x, y = data.features, data.labels
    if sampling is Sampling.CYCLIC:
        order = rng.permutation(data.n)[: per_epoch * batch].reshape(per_epoch, batch)
        event: ev.Event = mx.DpFtrl(
            nu=nu,
            noise_multiplier=sigma,
            steps=steps,
            epochs=epochs if epochs > 1 else None,
            min_separation=per_epoch if epochs > 1 else None,
            neighboring=neighboring,
        )
        count = 1
    else:
        if nu != 1:
            raise ValueError(
                f"nu must be 1 with POISSON sampling (no amplification analysis for correlated noise); got {nu!r}"
            )
        if neighboring is not ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
            raise ValueError(f"neighboring must be add_remove with POISSON sampling; got {neighboring!r}")
        rate = batch / data.n
        event = ev.PoissonSampled(sampling_rate=rate, event=ev.Gaussian(noise_multiplier=sigma))
        count = steps
    noise = correlated_noise(nu, steps, dim=data.dim, noise_std=sigma * clip, rng=rng)
    theta = np.zeros(data.dim)
    for t in range(steps):
        if sampling is Sampling.CYCLIC:
            idx = order[t % per_epoch]
        else:
            idx = np.flatnonzero(rng.random(data.n) < batch / data.n)
        xb = x[idx]
        grads = (xb @ theta - y[idx])[:, None] * xb
        norms = np.linalg.norm(grads, axis=1)
        grads *= np.minimum(1.0, clip / np.maximum(norms, 1e-300))[:, None]
        theta = theta - eta * (grads.sum(axis=0) + noise[t]) / batch
    return TrainResult(theta, event, count, steps, sigma, sampling)


def audit_mechanism(event: Any, count: int) -> Any:
    """The runnable mechanism of ``count`` runs of a :class:`~dplens.research.dp_ftrl.accounting.DpFtrl` event."""
    from dplens.mechanisms.registry import repeat

    mechanism = MatrixMechanism(
        nu=event.nu,
        noise_multiplier=event.noise_multiplier,
        steps=event.steps,
        epochs=event.epochs,
        min_separation=event.min_separation,
        neighboring=event.neighboring,
    )
    return repeat(mechanism, count)
