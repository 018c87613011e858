"""RDP of standard mechanisms, vectorised over α and computed in log space.

:func:`rdp_curve` interprets an event as an :class:`~dplens.accountant.curves.RdpCurve`. It is a
``functools.singledispatch`` function: research modules register their own event types on it.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant._numerics import gammaln, log_ndtr, logsumexp
from dplens.accountant.curves import RdpConvergenceWarning, RdpCurve, check_alpha

__all__ = [
    "UnsupportedEventError",
    "gaussian_rdp",
    "laplace_rdp",
    "mixture_of_gaussians_rdp",
    "randomized_response_rdp",
    "randomized_response_zero_out_rdp",
    "rdp_curve",
    "subsampled_gaussian_rdp",
    "subsampled_without_replacement_gaussian_rdp",
]


class UnsupportedEventError(ValueError):
    """An interpreter cannot handle an event (raised before any state changes)."""


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _check_positive(name: str, value: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}") from None
    if not (math.isfinite(out) and out > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return out


def _check_rate(sampling_rate: float, *, allow_zero: bool = False) -> float:
    interval = "[0, 1]" if allow_zero else "(0, 1]"
    try:
        q = float(sampling_rate)
    except (TypeError, ValueError):
        raise ValueError(f"sampling_rate must be in {interval}; got {sampling_rate!r}") from None
    if not ((q >= 0 if allow_zero else q > 0) and q <= 1):
        raise ValueError(f"sampling_rate must be in {interval}; got {sampling_rate!r}")
    return q


# --------------------------------------------------------------------------------------------
# Mechanisms without sampling
# --------------------------------------------------------------------------------------------


def gaussian_rdp(alpha: np.ndarray, *, noise_multiplier: float) -> np.ndarray:
    """α / (2σ²): the Gaussian mechanism with σ = noise_multiplier × sensitivity.

    Mironov 2017 (arXiv 1702.07476), Proposition 7.
    """
    sigma = _check_positive("noise_multiplier", noise_multiplier)
    return check_alpha(alpha) / (2.0 * sigma**2)


def laplace_rdp(alpha: np.ndarray, *, noise_multiplier: float) -> np.ndarray:
    """RDP of the Laplace mechanism with scale b = noise_multiplier × ℓ1-sensitivity (ε₀ = 1/b).

    Mironov 2017 (arXiv 1702.07476), Proposition 6:
    ε₀ + log(1 + (α − 1)(e^{ε₀(1 − 2α)} − 1)/(2α − 1)) / (α − 1), written as ε₀ + c·log1p(x)/x with
    x = (α − 1)c so that α → 1 (the KL limit ε₀ + e^{−ε₀} − 1) is computed without cancellation. At α = ∞ the
    max-divergence is ε₀ (the mechanism is ε₀-DP).
    """
    eps0 = 1.0 / _check_positive("noise_multiplier", noise_multiplier)
    alpha = check_alpha(alpha)
    finite = np.where(np.isinf(alpha), 2.0, alpha)
    c = np.expm1(eps0 * (1.0 - 2.0 * finite)) / (2.0 * finite - 1.0)
    x = (finite - 1.0) * c
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.abs(x) < 1e-8, 1.0 - x / 2.0, np.log1p(x) / x)
    return np.where(np.isinf(alpha), eps0, eps0 + c * ratio)


def _rr_probabilities(epsilon: float, num_values: int) -> tuple[float, float, float, float]:
    """(log p_hi, log p_lo, p_hi, p_lo) of k-ary randomized response: p_hi/p_lo = e^ε, p_hi + (k − 1)p_lo = 1."""
    log_p_lo = -float(np.logaddexp(epsilon, math.log(num_values - 1)))
    return epsilon + log_p_lo, log_p_lo, math.exp(epsilon + log_p_lo), math.exp(log_p_lo)


def _check_rr(epsilon: float, num_values: int) -> tuple[float, int]:
    eps = _check_positive("epsilon", epsilon)
    if not isinstance(num_values, int | np.integer) or isinstance(num_values, bool) or num_values < 2:
        raise ValueError(f"num_values must be an integer >= 2; got {num_values!r}")
    return eps, int(num_values)


def randomized_response_rdp(alpha: np.ndarray, *, epsilon: float, num_values: int) -> np.ndarray:
    """Exact RDP of k-ary randomized response under replace-one.

    The worst pair of output distributions is P = (p_hi, p_lo, …, p_lo), Q = (p_lo, p_hi, p_lo, …)
    with p_hi/p_lo = e^ε, p_hi + (k − 1)p_lo = 1, so (Rényi 1961; Mironov 2017 Definition 3)
    D_α = log(p_hi e^{ε(α−1)} + p_lo e^{−ε(α−1)} + (k − 2)p_lo) / (α − 1). Computed as
    log1p(p_hi·expm1(ε(α−1)) + p_lo·expm1(−ε(α−1)))/(α − 1) where that cannot overflow. D_∞ = ε.
    """
    eps, k = _check_rr(epsilon, num_values)
    alpha = check_alpha(alpha)
    log_p_hi, log_p_lo, p_hi, p_lo = _rr_probabilities(eps, k)
    finite = np.where(np.isinf(alpha), 2.0, alpha)
    t = eps * (finite - 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        small = np.log1p(p_hi * np.expm1(t) + p_lo * np.expm1(-t))
        terms = np.stack(
            [log_p_hi + t, log_p_lo - t, np.full_like(t, math.log(k - 2) + log_p_lo if k > 2 else -np.inf)]
        )
        large = logsumexp(terms, axis=0)
    return np.where(np.isinf(alpha), eps, np.where(t < 30.0, small, large) / (finite - 1.0))


def randomized_response_zero_out_rdp(alpha: np.ndarray, *, epsilon: float, num_values: int) -> np.ndarray:
    """Exact RDP of k-ary randomized response under the zero-out relation (one record replaced by a special one).

    The special record's response is uniform (dp-accounting's convention for REPLACE_SPECIAL), so the pair is
    P = (p_hi, p_lo, …, p_lo) against U = (1/k, …, 1/k), in both orders:
    D_α(P‖U) = log(k^{α−1}(p_hi^α + (k − 1)p_lo^α))/(α − 1) and D_α(U‖P) = log(k^{−α}(p_hi^{1−α} + (k − 1)
    p_lo^{1−α}))/(α − 1); the curve is the larger. D_∞ = max(log(k p_hi), −log(k p_lo)), below ε. Using the
    replace-one curve here (as dplens did before) overstated the loss: the special record is only half as far.
    """
    eps, k = _check_rr(epsilon, num_values)
    alpha = check_alpha(alpha)
    log_p_hi, log_p_lo, _, _ = _rr_probabilities(eps, k)
    log_k = math.log(k)
    finite = np.where(np.isinf(alpha), 2.0, alpha)
    log_km1 = math.log(k - 1)
    forward = (finite - 1.0) * log_k + np.logaddexp(finite * log_p_hi, log_km1 + finite * log_p_lo)
    backward = -finite * log_k + np.logaddexp((1.0 - finite) * log_p_hi, log_km1 + (1.0 - finite) * log_p_lo)
    value = np.maximum(forward, backward) / (finite - 1.0)
    d_inf = max(log_k + log_p_hi, -(log_k + log_p_lo))
    return np.where(np.isinf(alpha), d_inf, np.maximum(value, 0.0))


# --------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019, arXiv 1908.10530)
# --------------------------------------------------------------------------------------------

_MAX_INTEGER_ORDER_EXACT = 4096  # integer and fractional orders up to here are computed exactly


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log |C(n, k)| via log-gamma (|·| for fractional n)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def _log_a_integer(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """log A_α for integer α, A_α = Σ_{i=0}^{α} C(α,i) qⁱ (1−q)^{α−i} exp((i² − i)/(2σ²)).

    Mironov, Talwar, Zhang 2019 (arXiv 1908.10530), Section 3.3, exact finite sum. Because the binomial
    weights sum to one, A_α − 1 = Σ_{i≥2} C(α,i) qⁱ (1−q)^{α−i} expm1((i² − i)/(2σ²)), a sum of positive terms;
    log A_α = log1p(A_α − 1) then keeps full relative precision even when A_α − 1 ~ 1e-15 (tiny q).
    """
    unique, inverse = np.unique(alphas, return_inverse=True)
    a_max = int(unique.max())
    log_gamma = gammaln(np.arange(a_max + 2, dtype=float))  # log Γ(n) for n = 0..a_max+1; log n! = [n+1]
    i_int = np.arange(2, a_max + 1)
    a_int = unique.astype(int)[:, None]
    i = i_int.astype(float)[None, :]
    c = (i * i - i) / (2 * sigma**2)
    with np.errstate(divide="ignore"):
        log_expm1 = np.where(c > 30.0, c + np.log1p(-np.exp(-c)), np.log(np.expm1(np.minimum(c, 30.0))))
    valid = i_int[None, :] <= a_int
    diff = np.where(valid, a_int - i_int[None, :], 0)
    log_comb = log_gamma[a_int + 1] - log_gamma[i_int + 1][None, :] - log_gamma[diff + 1]
    log_terms = log_comb + i * math.log(q) + (a_int - i) * math.log1p(-q) + log_expm1
    log_terms = np.where(valid, log_terms, -np.inf)
    return np.logaddexp(0.0, logsumexp(log_terms, axis=1))[inverse]


_INTEGER_LOG_A_CACHE: dict[tuple[float, float, float], float] = {}
_INTEGER_LOG_A_CACHE_SIZE = 4096


def _cached_log_a_integer(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """:func:`_log_a_integer` with a small cache: the searches over α revisit the same integer orders."""
    unique = np.unique(alphas)
    missing = [a for a in unique.tolist() if (q, sigma, a) not in _INTEGER_LOG_A_CACHE]
    if missing:
        if len(_INTEGER_LOG_A_CACHE) + len(missing) > _INTEGER_LOG_A_CACHE_SIZE:
            _INTEGER_LOG_A_CACHE.clear()
            missing = unique.tolist()  # everything requested must be (re)computed after a clear
        values = _log_a_integer(q, sigma, np.asarray(missing, dtype=float))
        _INTEGER_LOG_A_CACHE.update({(q, sigma, a): v for a, v in zip(missing, values.tolist(), strict=True)})
    lookup = {a: _INTEGER_LOG_A_CACHE[(q, sigma, a)] for a in unique.tolist()}
    return np.array([lookup[a] for a in alphas.tolist()])


_QUAD_SIGMAS = 38.0  # the integration range extends this many σ beyond the mass of the integrand (Φ(−38) ≈ 1e-316)
_QUAD_LOG_WINDOW = 60.0  # integrand values below max·e^{−60} are outside the fine grid (relative mass < 1e-24)
_QUAD_MAX_POINTS = 400_000  # per order; beyond this the order falls back to the interpolation bound
_QUAD_REL_TOL = 1e-9  # fine and half grids must agree to this (relative); the difference is added as a margin
_QUAD_REL_MARGIN = 1e-12  # extra relative margin on the integral for float rounding


def _log_excess_integrand(z: np.ndarray, q: float, sigma: float, alpha: float) -> np.ndarray:
    """log of φ_σ(z)·g(z), g = (1 + qX)^α − 1 − αqX ≥ 0, X = exp((2z − 1)/(2σ²)) − 1.

    g ≥ 0 because t ↦ (1 + t)^α is convex (α > 1) and 1 + qX > 0; g has a double zero at X = 0, where the
    binomial series Σ_{j≥2} C(α, j)(qX)^j is summed instead of the cancelling difference.
    """
    u = (2.0 * z - 1.0) / (2.0 * sigma**2)
    log_weight = -0.5 * (z / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2.0 * math.pi)
    out = np.empty_like(z)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = q * np.expm1(np.minimum(u, 700.0))  # qX; only used where it is small or negative
        series = (np.abs(t) <= 0.05) & (alpha * np.abs(t) <= 0.5)
        ts = t[series]
        term = 0.5 * alpha * (alpha - 1.0) * ts * ts
        total = term.copy()
        for j in range(3, 24):  # |C(α, j) t^j| ≤ (α|t| + |t|j)^j/j!: ratio ≤ 0.5/j + 0.05, 1e-25 relative by j = 23
            term = term * ((alpha - j + 1.0) / j) * ts
            total = total + term
        out[series] = np.log(total)
        rest = ~series
        ur = u[rest]
        # log(1 + qX) = log((1 − q) + q e^u) without overflow.
        log_power = alpha * np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + ur)
        # log|1 + αqX|: for u > 0, 1 + αq(e^u − 1) = 1 + αq·e^u(1 − e^{−u}) > 0.
        up = ur > 0
        log_linear = np.empty(ur.shape)
        log_linear[up] = np.logaddexp(0.0, math.log(alpha * q) + ur[up] + np.log(-np.expm1(-ur[up])))
        linear_down = 1.0 + alpha * t[rest][~up]
        positive = np.ones(ur.shape, dtype=bool)
        positive[~up] = linear_down > 0
        log_linear[~up] = np.log(np.abs(linear_down))
        value = np.empty(ur.shape)
        value[positive] = log_power[positive] + np.log(-np.expm1(log_linear[positive] - log_power[positive]))
        value[~positive] = np.logaddexp(log_power[~positive], log_linear[~positive])
        out[rest] = value
    return log_weight + out


def _log_a_minus_one_quadrature(q: float, sigma: float, alpha: float) -> float:
    """log(A_α − 1) of the Poisson-subsampled Gaussian at any real α > 1, or NaN where the quadrature fails.

    A_α = E_{z∼N(0,σ²)}[((1 − q) + q·e^{(2z−1)/(2σ²)})^α] (Mironov, Talwar, Zhang 2019, arXiv 1908.10530, §3.1,
    the integral whose closed forms at integer α give §3.3's sum). Since E[e^{(2z−1)/(2σ²)}] = 1,
    A_α − 1 = E[g(z)] with g ≥ 0 (see :func:`_log_excess_integrand`), an integral of a non-negative function that
    is computed to full relative precision even when A_α − 1 ~ 1e-20.

    The integrand is analytic in the strip |Im z| < πσ² (the first zero of (1 − q) + q·e^u is at Im u = π), so the
    trapezoidal rule converges geometrically (Trefethen & Weideman 2014, SIAM Review 56(3), Thm 5.1): with step
    h = min(σ/10, π²σ²/40) its error is of order e^{−2π·πσ²/h} ≤ e^{−80} relative. A coarse pass locates the
    mass; the fine grid covers it. The
    returned value is pessimistic: the trapezoidal sum plus its difference from the half-step sum plus 1e-12
    relative; if the two sums differ by more than 1e-9 relative (never seen), NaN asks the caller for the
    interpolation bound instead.
    """
    lo, hi = -_QUAD_SIGMAS * sigma, alpha + _QUAD_SIGMAS * sigma
    coarse_step = sigma / 2.0
    coarse = np.linspace(lo, hi, math.ceil((hi - lo) / coarse_step) + 1)
    # The log-integrand has curvature at most 1/σ² + α/(4σ⁴), so between coarse points (σ/2 apart) it exceeds the
    # window by little; padding by 4σ on each side covers the whole region of non-negligible mass.
    return _log_trapezoid(
        lambda z: _log_excess_integrand(z, q, sigma, alpha),
        coarse,
        sigma,
        step=min(sigma / 10.0, math.pi**2 * sigma**2 / 40.0),
        lo=lo,
        hi=hi,
    )


def _log_trapezoid(
    log_integrand: Callable[[np.ndarray], np.ndarray],
    coarse: np.ndarray,
    sigma: float,
    *,
    step: float,
    lo: float = -math.inf,
    hi: float = math.inf,
    cost: int = 1,
    budget: int | None = None,
) -> float:
    """log ∫ exp(log_integrand) by the trapezoidal rule, pessimistic; NaN where the quadrature fails.

    The coarse grid locates the mass (values within e^{−_QUAD_LOG_WINDOW} of the largest); the fine grid of about
    ``step`` covers it, padded by 4σ on each side and clipped to [``lo``, ``hi``]; more than ``budget`` points
    (each costing ``cost``; default _QUAD_MAX_POINTS, read when called) is a failure. The value is the sum plus its
    difference from the half-step sum plus _QUAD_REL_MARGIN relative; sums differing by more than _QUAD_REL_TOL
    relative are a failure.
    """
    log_coarse = log_integrand(coarse)
    top = float(np.max(log_coarse))
    if not math.isfinite(top):
        return -math.inf if top == -math.inf else math.nan
    inside = np.flatnonzero(log_coarse > top - _QUAD_LOG_WINDOW)
    start = max(coarse[inside[0]] - 4.0 * sigma, lo)
    stop = min(coarse[inside[-1]] + 4.0 * sigma, hi)
    n = math.ceil((stop - start) / step)
    if n * cost > (_QUAD_MAX_POINTS if budget is None else budget):
        return math.nan
    n += n % 2  # even, so the half-step sum uses every other point
    grid = start + (stop - start) * np.arange(n + 1) / n
    h = (stop - start) / n
    log_f = log_integrand(grid)
    peak = float(np.max(log_f))
    weights = np.exp(log_f - peak)
    full = float(np.sum(weights)) * h
    half = float(np.sum(weights[::2])) * 2.0 * h
    if not (full > 0 and abs(full - half) <= _QUAD_REL_TOL * full):
        return math.nan
    return peak + math.log(full + abs(full - half) + _QUAD_REL_MARGIN * full)


def _log_excess_integrand_batch(z: np.ndarray, q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """:func:`_log_excess_integrand` for several orders at once: shape (orders, points), every branch computed and
    the right one selected (the same formulas)."""
    a = np.asarray(alphas, dtype=float)[:, None]
    u = ((2.0 * z - 1.0) / (2.0 * sigma**2))[None, :]
    log_weight = (-0.5 * (z / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2.0 * math.pi))[None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = q * np.expm1(np.minimum(u, 700.0))
        series = (np.abs(t) <= 0.05) & (a * np.abs(t) <= 0.5)
        ts = np.where(series, t, 0.0)
        term = 0.5 * a * (a - 1.0) * ts * ts
        total = term.copy()
        for j in range(3, 24):
            term = term * ((a - j + 1.0) / j) * ts
            total = total + term
        log_series = np.log(total)
        log_power = a * np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + u)
        up = u > 0
        log_linear_up = np.logaddexp(0.0, np.log(a * q) + u + np.log(-np.expm1(-np.where(up, u, 1.0))))
        linear_down = 1.0 + a * t
        log_linear = np.where(up, log_linear_up, np.log(np.abs(linear_down)))
        positive = up | (linear_down > 0)
        direct = np.where(
            positive,
            log_power + np.log(-np.expm1(log_linear - log_power)),
            np.logaddexp(log_power, log_linear),
        )
        out = np.where(series, log_series, direct)
    return log_weight + out


def _log_a_minus_one_quadrature_batch(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """:func:`_log_a_minus_one_quadrature` for orders of similar size on one shared grid (one vectorised pass);
    the same rule, error check and margins per order. NaN where it fails."""
    alphas = np.asarray(alphas, dtype=float)
    lo, hi = -_QUAD_SIGMAS * sigma, float(np.max(alphas)) + _QUAD_SIGMAS * sigma
    coarse = np.linspace(lo, hi, math.ceil((hi - lo) / (sigma / 2.0)) + 1)
    log_coarse = _log_excess_integrand_batch(coarse, q, sigma, alphas)
    top = np.max(log_coarse, axis=1, keepdims=True)
    inside = log_coarse > top - _QUAD_LOG_WINDOW
    if not np.all(np.isfinite(top)) or not inside.any():
        return np.array([_log_a_minus_one_quadrature(q, sigma, float(a)) for a in alphas])
    columns = np.flatnonzero(inside.any(axis=0))
    start = max(coarse[columns[0]] - 4.0 * sigma, lo)
    stop = min(coarse[columns[-1]] + 4.0 * sigma, hi)
    h = min(sigma / 10.0, math.pi**2 * sigma**2 / 40.0)
    n = math.ceil((stop - start) / h)
    if n * alphas.size > 4 * _QUAD_MAX_POINTS:
        return np.array([_log_a_minus_one_quadrature(q, sigma, float(a)) for a in alphas])
    n += n % 2
    grid = start + (stop - start) * np.arange(n + 1) / n
    h = (stop - start) / n
    log_f = _log_excess_integrand_batch(grid, q, sigma, alphas)
    peak = np.max(log_f, axis=1, keepdims=True)
    weights = np.exp(log_f - peak)
    full = np.sum(weights, axis=1) * h
    half = np.sum(weights[:, ::2], axis=1) * 2.0 * h
    good = (full > 0) & (np.abs(full - half) <= _QUAD_REL_TOL * full)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = peak[:, 0] + np.log(full + np.abs(full - half) + _QUAD_REL_MARGIN * full)
    return np.where(good, value, np.nan)


_MAX_SERIES_TERMS = 256


def _log_series_tail(
    alphas: np.ndarray, n_terms: int | np.ndarray, log_coef_last: np.ndarray, *, z0: float, q: float, sigma: float
) -> np.ndarray:
    """log of an upper bound on Σ_{i ≥ N} (|s0ᵢ| + |s1ᵢ|) of the MTZ fractional series, N = n_terms (∞ if none).

    With Φ(−x) ≤ φ(x)/x and (2z0 − 1)/(2σ²) = log((1 − q)/q), each term is at most
    K·|C(α,i)|/(i − z0) (first half-line) or K·|C(α,i)|/(i + z0 − α) (second), K = (1 − q)^α e^{−z0²/(2σ²)} σ/√(2π).
    For i > α + 1, |C(α,i)| ≤ |C(α,N)|((N + 1)/(i + 1))^{1+α}, so the tail is at most
    K|C(α,N)|(1 + (N + 1)/(1 + α))(1/(N − z0) + 1/(N + z0 − α)). Needs N ≥ α + 1, N > z0 and N > α − z0.
    """
    n = np.asarray(n_terms, dtype=float)
    a = np.asarray(alphas, dtype=float)
    log_coef_n = log_coef_last + np.log(np.abs(a - n + 1.0)) - np.log(n)
    valid = (n >= a + 1.0) & (n > z0) & (n > a - z0)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_k = a * math.log1p(-q) - z0**2 / (2 * sigma**2) + math.log(sigma) - 0.5 * math.log(2 * math.pi)
        log_tail = log_k + log_coef_n + np.log1p((n + 1.0) / (1.0 + a)) + np.log(1.0 / (n - z0) + 1.0 / (n + z0 - a))
    return np.where(valid, log_tail, np.inf)


def _log_a_fractional_series(q: float, sigma: float, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log A_α at fractional α by MTZ19's two-sided series (§3.3), summed *with signs*, vectorised over α.

    A_α = Σᵢ uᵢ, uᵢ = C(α,i)[qⁱ(1−q)^{α−i} e^{(i²−i)/(2σ²)} Φ((z0 − i)/σ) + q^{α−i}(1−q)ⁱ e^{(j²−j)/(2σ²)}
    Φ((j − z0)/σ)], j = α − i, z0 = σ² log(1/q − 1) + ½. For i > ⌈α⌉ the sign of C(α, i) alternates, and for
    i > max(z0, α − z0) both brackets decrease in i (the ratio of consecutive terms is |α − i|/(i + 1) times a
    ratio of Mills ratios, which decrease), so the tail from n on alternates with decreasing magnitude and lies
    between 0 and uₙ (Leibniz): the partial sum plus max(uₙ, 0) is an upper bound. 8n ulps of Σ|uᵢ| cover the
    rounding of the signed sum. An order is accepted where |uₙ| and the rounding are below 1e-9 of A_α − 1, so the
    bound is also tight (else the order goes to the quadrature). dp-accounting sums |uᵢ| instead: an upper bound
    several % loose near α = 1.
    """
    z0 = sigma**2 * math.log(1.0 / q - 1.0) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    out = np.full(alphas.shape, np.nan)
    ok = np.zeros(alphas.shape, dtype=bool)
    pending = np.arange(alphas.size)
    n_terms = 64
    eps = np.finfo(float).eps
    while pending.size:
        a = alphas[pending][:, None]
        i = np.arange(n_terms, dtype=float)[None, :]
        j = a - i
        with np.errstate(divide="ignore", invalid="ignore"):
            steps = np.log(np.abs(a - i[:, 1:] + 1.0)) - np.log(i[:, 1:])
        log_coef = np.concatenate([np.zeros_like(a), np.cumsum(steps, axis=1)], axis=1)
        sign = np.where(np.maximum(i - np.ceil(a), 0.0) % 2 == 1, -1.0, 1.0)  # sign of C(α, i)
        log_s0 = log_coef + i * log_q + j * log_1mq + (i * i - i) / (2 * sigma**2) + log_ndtr((z0 - i) / sigma)
        log_s1 = log_coef + j * log_q + i * log_1mq + (j * j - j) / (2 * sigma**2) + log_ndtr((j - z0) / sigma)
        log_abs = np.logaddexp(log_s0, log_s1)
        scale = np.max(log_abs, axis=1, keepdims=True)
        terms = sign * np.exp(log_abs - scale)  # uᵢ / e^scale
        partial = np.cumsum(terms, axis=1) - terms  # Σ_{k<n} u_k (n = column index: the first omitted term)
        magnitude = np.cumsum(np.abs(terms), axis=1) - np.abs(terms)
        rounding = 8.0 * (i + 1.0) * eps * magnitude
        margin = np.maximum(terms, 0.0) + rounding  # added: the tail lies between 0 and uₙ
        slack = np.abs(terms) + rounding  # how far the bound may be above A_α
        leibniz = (i > np.ceil(a)) & (i > z0) & (i > a - z0)
        big = scale > 30.0  # A_α ≫ 1: A − 1 ≈ A, compare relative to A
        with np.errstate(over="ignore", invalid="ignore"):
            factor = np.exp(np.minimum(scale, 700.0))
            excess = np.where(big, partial, partial * factor - 1.0)
            allowed = np.where(big, slack, slack * factor)
            accept = leibniz & (excess > 0) & (allowed <= 1e-9 * excess)
        found = accept.any(axis=1)
        col = np.argmax(accept, axis=1)
        rows = np.flatnonzero(found)
        if rows.size:
            c = col[rows]
            s = scale[rows, 0]
            upper = partial[rows, c] + margin[rows, c]
            with np.errstate(over="ignore", invalid="ignore"):
                value = np.where(s > 30.0, s + np.log(upper), np.log1p(upper * np.exp(np.minimum(s, 700.0)) - 1.0))
            out[pending[rows]] = value
            ok[pending[rows]] = True
        if n_terms >= _MAX_SERIES_TERMS:
            break
        pending = pending[~found]
        n_terms = min(4 * n_terms, _MAX_SERIES_TERMS)
    return out, ok


_FRACTIONAL_LOG_A_CACHE: dict[tuple[float, float, float], float] = {}


def _log_a_fractional(q: float, sigma: float, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log A_α at fractional α: the signed series where its error margins are negligible (fast, vectorised), the
    quadrature (:func:`_log_a_minus_one_quadrature`) elsewhere; returns (log A, mask of orders with a value)."""
    out = np.full(alphas.shape, np.nan)
    keys = [(q, sigma, alpha) for alpha in alphas.tolist()]
    cached = np.array([key in _FRACTIONAL_LOG_A_CACHE for key in keys], dtype=bool)
    for index in np.flatnonzero(cached):
        out[index] = _FRACTIONAL_LOG_A_CACHE[keys[index]]
    todo = np.flatnonzero(~cached)
    if todo.size:
        series, series_ok = _log_a_fractional_series(q, sigma, alphas[todo])
        # The rest by quadrature, in batches of orders of similar size (they share a grid).
        rest = todo[~series_ok]
        if rest.size:
            bins = np.floor(np.log2(alphas[rest]))
            for b in np.unique(bins):
                members = np.flatnonzero(bins == b)
                log_excess = _log_a_minus_one_quadrature_batch(q, sigma, alphas[rest[members]])
                with np.errstate(invalid="ignore"):
                    series[np.searchsorted(todo, rest[members])] = np.where(
                        np.isnan(log_excess), np.nan, np.logaddexp(0.0, log_excess)
                    )
        for index, value in zip(todo.tolist(), series.tolist(), strict=True):
            if len(_FRACTIONAL_LOG_A_CACHE) >= _INTEGER_LOG_A_CACHE_SIZE:
                _FRACTIONAL_LOG_A_CACHE.clear()
            _FRACTIONAL_LOG_A_CACHE[keys[index]] = value
            out[index] = value
    return out, ~np.isnan(out)


def subsampled_gaussian_rdp(alpha: np.ndarray, *, sampling_rate: float, noise_multiplier: float) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian mechanism (add/remove or zero-out adjacency), exact at every α.

    Mironov, Talwar, Zhang 2019 (arXiv 1908.10530): RDP(α) = log A_α/(α − 1), with the exact finite sum of §3.3
    at integer α and, at fractional α, §3.3's two-sided series summed with signs (:func:`_log_a_fractional_series`)
    or, where its margins are not negligible, the defining integral of §3.1 (:func:`_log_a_minus_one_quadrature`). The
    remove direction dominates for RDP (MTZ19 Theorem 5), so one direction suffices.

    dp-accounting evaluates fractional orders by MTZ's two-sided series with |terms| (an upper bound several %
    loose near α = 1, and ∞ where it stops converging); earlier versions of this function also capped them by the
    value at ⌈α⌉, e.g. 0.011297 for q = 0.2, σ = 2, α = 1.25 where the exact value is 0.0068248 (pinned against
    mpmath in the tests). Where the quadrature cannot be completed (more than 400 000 points, i.e. σ ≲ 0.05 at
    large α) the order is *reported* with an :class:`RdpConvergenceWarning` and the convex interpolation of log
    A_α between the neighbouring integer orders is used (an upper bound, WBK19 Corollary 10's argument). Orders
    above 4096 use the unsubsampled bound α/(2σ²) (subsampling never increases the divergence); q = 0 gives 0.

    Example:
        >>> round(float(subsampled_gaussian_rdp(np.array([1.25]), sampling_rate=0.2, noise_multiplier=2.0)[0]), 7)
        0.0068248
    """
    q = _check_rate(sampling_rate, allow_zero=True)
    sigma = _check_positive("noise_multiplier", noise_multiplier)
    alpha = check_alpha(alpha)
    flat = np.atleast_1d(alpha).astype(float).ravel()
    if q == 0.0:
        return np.zeros(alpha.shape)
    if q == 1.0:
        return (flat / (2 * sigma**2)).reshape(alpha.shape)
    out = flat / (2 * sigma**2)  # the unsubsampled curve: an upper bound where nothing better is computed
    is_int = flat == np.floor(flat)
    exact_int = is_int & (flat <= _MAX_INTEGER_ORDER_EXACT)
    if exact_int.any():
        out[exact_int] = _cached_log_a_integer(q, sigma, flat[exact_int]) / (flat[exact_int] - 1.0)
    frac_idx = np.flatnonzero(~is_int & (flat < _MAX_INTEGER_ORDER_EXACT))
    if frac_idx.size:
        frac = flat[frac_idx]
        log_a, ok = _log_a_fractional(q, sigma, frac)
        # + 1e-13 relative: the final log and division may round down by an ulp or two (seen: 4e-16 vs mpmath).
        out[frac_idx[ok]] = log_a[ok] / (frac[ok] - 1.0) * (1.0 + 1e-13)
        if not ok.all():
            # log A_α is convex in α (a log-moment), so interpolating it linearly between ⌊α⌋ and ⌈α⌉
            # is an upper bound; log A_1 = 0.
            bad = frac[~ok]
            lo, hi = np.floor(bad), np.ceil(bad)
            log_lo = np.where(lo >= 2, _cached_log_a_integer(q, sigma, np.maximum(lo, 2.0)), 0.0)
            log_hi = _cached_log_a_integer(q, sigma, hi)
            t = bad - lo
            out[frac_idx[~ok]] = ((1 - t) * log_lo + t * log_hi) / (bad - 1.0)
            warnings.warn(
                f"subsampled Gaussian RDP quadrature did not converge at alpha={bad[:5].tolist()} "
                f"(sampling_rate={q!r}, noise_multiplier={sigma!r}); used the convex interpolation of log A "
                "between integer orders (an upper bound)",
                RdpConvergenceWarning,
                stacklevel=2,
            )
    # Subsampling never hurts: min with the unsubsampled curve is still an upper bound.
    out = np.minimum(out, flat / (2 * sigma**2))
    return out.reshape(alpha.shape)


# --------------------------------------------------------------------------------------------
# Mixtures of Gaussians (MixtureOfGaussians events; sampling with replacement)
# --------------------------------------------------------------------------------------------


def _log_moment_excess_terms(log_y: np.ndarray, beta: float) -> np.ndarray:
    """log(Y^β − 1 − β(Y − 1)) elementwise (≥ 0 for β > 1 or β < 0: y ↦ y^β is convex), from log Y."""
    out = np.empty_like(log_y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = np.expm1(np.minimum(log_y, 700.0))
        series = (np.abs(t) <= 0.05) & (abs(beta) * np.abs(t) <= 0.5)
        ts = t[series]
        term = 0.5 * beta * (beta - 1.0) * ts * ts
        total = term.copy()
        for j in range(3, 40):
            term = term * ((beta - j + 1.0) / j) * ts
            total = total + term
        out[series] = np.log(total)
        rest = ~series
        log_power = beta * log_y[rest]
        linear = 1.0 + beta * t[rest]
        big = np.isinf(t[rest]) | (np.abs(linear) > 1e300)
        log_linear = np.where(big, math.log(abs(beta)) + log_y[rest], np.log(np.abs(linear)))
        positive = np.where(big, beta > 0, linear > 0)
        value = np.empty(log_power.shape)
        value[positive] = log_power[positive] + np.log(-np.expm1(log_linear[positive] - log_power[positive]))
        value[~positive] = np.logaddexp(log_power[~positive], log_linear[~positive])
        out[rest] = value
    return out


def _mixture_log_ratio(z: np.ndarray, sigma: float, shifts: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    """log Y(z), Y = Σ wᵢ N(cᵢ, σ²)(z) / N(0, σ²)(z) = Σ wᵢ exp((2cᵢz − cᵢ²)/(2σ²))."""
    exponents = log_weights[None, :] + (2.0 * z[:, None] * shifts[None, :] - shifts[None, :] ** 2) / (2.0 * sigma**2)
    return logsumexp(exponents, axis=1)


def _log_mixture_moment_minus_one(sigma: float, shifts: np.ndarray, log_weights: np.ndarray, beta: float) -> float:
    """log(E_{z∼N(0,σ²)}[Y^β] − 1) by the trapezoidal rule on the non-negative excess (as
    :func:`_log_a_minus_one_quadrature`, whose integrand is the two-component case); NaN if it fails."""
    reach = max(abs(beta), 1.0) * float(np.max(np.abs(shifts))) + _QUAD_SIGMAS * sigma
    coarse = np.linspace(-reach, reach, math.ceil(2 * reach / (sigma / 4.0)) + 1)
    log_weight = lambda z: -0.5 * (z / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2.0 * math.pi)  # noqa: E731

    def log_integrand(z: np.ndarray) -> np.ndarray:
        return log_weight(z) + _log_moment_excess_terms(_mixture_log_ratio(z, sigma, shifts, log_weights), beta)

    return _log_trapezoid(
        log_integrand,
        coarse,
        sigma,
        step=min(sigma / 20.0, math.pi**2 * sigma**2 / 40.0),
        cost=shifts.size,
        budget=40 * _QUAD_MAX_POINTS,
    )


def mixture_of_gaussians_rdp(
    alpha: np.ndarray,
    *,
    standard_deviation: float,
    sensitivities: tuple[float, ...],
    sampling_probs: tuple[float, ...],
    tail: tuple[float, float] | None = None,
) -> np.ndarray:
    """RDP of the pair N(0, σ²) vs Σ pᵢ N(cᵢ, σ²), both orders (the larger), at any real α.

    D_α(P‖N₀) = log E_{N₀}[Y^α]/(α − 1) and D_α(N₀‖P) = log E_{N₀}[Y^{1−α}]/(α − 1) with Y = dP/dN₀ (Mironov 2017,
    Definition 3); both moments are 1 + E[Y^β − 1 − β(Y − 1)] (E[Y] = 1) with a non-negative integrand, integrated
    by the trapezoidal rule as for the subsampled Gaussian (MTZ19's pair is the case c = (0, 1), p = (1 − q, q)).
    ``tail`` = (τ, c_max): the mixture omits components of total weight τ with shifts ≤ c_max; by convexity of
    P ↦ ∫P^αQ^{1−α} and P ↦ ∫Q^αP^{1−α} the moments grow by at most τ·exp(α(α − 1)c_max²/(2σ²)), added here.
    Orders where the quadrature fails are ∞ (reported with :class:`RdpConvergenceWarning`).
    """
    sigma = _check_positive("standard_deviation", standard_deviation)
    alpha = check_alpha(alpha)
    shifts = np.asarray(sensitivities, dtype=float)
    probs = np.asarray(sampling_probs, dtype=float)
    keep = probs > 0
    shifts, log_weights = shifts[keep], np.log(probs[keep])
    flat = np.atleast_1d(alpha).astype(float).ravel()
    out = np.empty_like(flat)
    failed = []
    for index, a in enumerate(flat.tolist()):
        if math.isinf(a):
            out[index] = 0.0 if np.all(shifts == 0) and tail is None else math.inf
            continue
        logs = [_log_mixture_moment_minus_one(sigma, shifts, log_weights, beta) for beta in (a, 1.0 - a)]
        if any(math.isnan(v) for v in logs):
            failed.append(a)
            out[index] = math.inf
            continue
        moments = [float(np.logaddexp(0.0, v)) for v in logs]
        if tail is not None and tail[0] > 0:
            log_tail = math.log(tail[0]) + a * (a - 1.0) * tail[1] ** 2 / (2.0 * sigma**2)
            moments = [float(np.logaddexp(m, log_tail)) for m in moments]
        out[index] = max(moments) / (a - 1.0) * (1.0 + 1e-13)
    if failed:
        warnings.warn(
            f"mixture-of-Gaussians RDP quadrature did not converge at alpha={failed[:5]}; those orders are inf",
            RdpConvergenceWarning,
            stacklevel=2,
        )
    return np.maximum(out, 0.0).reshape(alpha.shape)


# --------------------------------------------------------------------------------------------
# Sampling without replacement (Wang, Balle, Kasiviswanathan 2019, arXiv 1808.00087)
# --------------------------------------------------------------------------------------------

_WOR_EXACT_MAX_ORDER = 256


@functools.lru_cache(maxsize=64)
def _log_forward_differences(sigma: float, max_order: int) -> np.ndarray:
    """log |Δᵐ g(0)| for m = 0..max_order, g(x) = exp((x − 1)·x/(2σ²)) = exp((x − 1) ε_G(x)).

    WBK19 Theorem 27 needs forward differences of exp((α − 1)ε(α)) of the Gaussian; they are computed
    exactly with mpmath (Δᵐg(0) = Σ_k (−1)^{m−k} C(m,k) g(k)) at enough precision that the
    alternating sum does not cancel, then returned as float logs.
    """
    out = np.empty(max_order + 1)
    import mpmath  # exact forward differences only here (sampling without replacement)

    with mpmath.workdps(60 + max_order // 2):
        two_var = 2 * mpmath.mpf(sigma) ** 2
        row = [mpmath.exp(mpmath.mpf(k - 1) * k / two_var) for k in range(max_order + 1)]
        for m in range(max_order + 1):  # row[0] is Δᵐ g(0); difference once more
            out[m] = float(mpmath.log(abs(row[0]))) if row[0] != 0 else -np.inf
            row = [row[k + 1] - row[k] for k in range(len(row) - 1)]
    return out


def _wor_log_a_integer(q: float, sigma: float, alpha: int) -> float:
    """log of the WBK19 Theorem 27 bound on E[(p/q)^α] for integer α ≥ 2 (Gaussian base mechanism).

    Term j = 2: γ² C(α,2) min{4(e^{ε(2)} − 1), 2e^{ε(2)}}; terms j ≥ 3: γʲ C(α,j) min{4·√(Δ^{2⌊j/2⌋}
    Δ^{2⌈j/2⌉}), 2e^{(j−1)ε(j)}} for α ≤ 256, and the second argument alone (WBK19 Theorem 9) above.
    """
    eps2 = 1.0 / sigma**2
    log_q = math.log(q)
    js = np.arange(2, alpha + 1, dtype=float)
    log_comb = _log_comb(np.float64(alpha), js)
    cgf_prev = (js - 1.0) * js / (2.0 * sigma**2)  # (j − 1)ε(j)
    log_s = np.log(2.0) + cgf_prev
    if alpha <= _WOR_EXACT_MAX_ORDER:
        deltas = _log_forward_differences(float(sigma), _WOR_EXACT_MAX_ORDER + 2)
        lo = deltas[(2 * np.floor(js / 2)).astype(int)]
        hi = deltas[(2 * np.ceil(js / 2)).astype(int)]
        log_s = np.minimum(log_s, math.log(4.0) + 0.5 * (lo + hi))
    log_s[0] = min(math.log(4.0) + eps2 + math.log(-math.expm1(-eps2)), eps2 + math.log(2.0))
    log_s = log_s + js * log_q + log_comb
    return float(np.logaddexp(0.0, logsumexp(log_s)))


def subsampled_without_replacement_gaussian_rdp(
    alpha: np.ndarray, *, sampling_rate: float, noise_multiplier: float
) -> np.ndarray:
    """RDP bound of the Gaussian on a uniformly random subset of size qn, replace-one adjacency.

    Wang, Balle, Kasiviswanathan 2019 (arXiv 1808.00087): Theorem 27 at integer α ≤ 256 (Theorem 9
    above), and Corollary 10 (the CGF (α − 1)·RDP(α) is convex, so interpolating it linearly between
    ⌊α⌋ and ⌈α⌉ gives an upper bound) at fractional α.
    """
    q = _check_rate(sampling_rate)
    sigma = _check_positive("noise_multiplier", noise_multiplier)
    alpha = check_alpha(alpha)
    flat = np.atleast_1d(alpha).astype(float).ravel()
    if q == 1.0:
        return (flat / (2 * sigma**2)).reshape(alpha.shape)

    @functools.cache
    def log_a(order: int) -> float:
        if order <= 1:
            return 0.0
        return _wor_log_a_integer(q, sigma, order)

    out = np.empty_like(flat)
    for idx, a in enumerate(flat):
        if not math.isfinite(a) or a > 1e5:
            out[idx] = math.inf
            continue
        lo, hi = math.floor(a), math.ceil(a)
        if lo == hi:
            out[idx] = log_a(lo) / (a - 1.0)
        else:
            t = a - lo
            out[idx] = ((1 - t) * log_a(lo) + t * log_a(hi)) / (a - 1.0)
    return out.reshape(alpha.shape)


# --------------------------------------------------------------------------------------------
# Interpreter: event → RdpCurve
# --------------------------------------------------------------------------------------------


def _effective_noise_multiplier(event: ev.Event) -> float | None:
    """σ_eff of a nest of Composed/SelfComposed Gaussians: (Σ σᵢ⁻²)^{−1/2} (arXiv 1812.06210 §3)."""
    match event:
        case ev.Gaussian():
            return event.noise_multiplier
        case ev.SelfComposed():
            inner = _effective_noise_multiplier(event.event)
            if inner is None:
                return None
            return math.inf if event.count == 0 else inner / math.sqrt(event.count)
        case ev.Composed():
            inner = [_effective_noise_multiplier(e) for e in event.events]
            if any(s is None for s in inner):
                return None
            precision = sum(0.0 if math.isinf(s) else s**-2 for s in inner)
            return math.inf if precision == 0 else precision**-0.5
    return None


@functools.singledispatch
def rdp_curve(event: ev.Event) -> RdpCurve:
    """The RDP curve of an event. Raises :class:`UnsupportedEventError` for events it cannot interpret."""
    raise UnsupportedEventError(f"RDP accounting does not support event {event!r}")


@rdp_curve.register
def _(event: ev.NoOp) -> RdpCurve:
    return RdpCurve.zero()


@rdp_curve.register
def _(event: ev.NonPrivate) -> RdpCurve:
    return RdpCurve.infinite()


def _additive_noise_curve(function: Callable[..., Any], name: str, noise_multiplier: float) -> RdpCurve:
    """The RDP curve of an additive-noise mechanism whose RDP ``function`` takes only the noise multiplier."""
    return RdpCurve.from_function(
        functools.partial(function, noise_multiplier=noise_multiplier),
        description=f"{name}(noise_multiplier={noise_multiplier:g})",
    )


@rdp_curve.register
def _(event: ev.Gaussian) -> RdpCurve:
    return _additive_noise_curve(gaussian_rdp, "Gaussian", event.noise_multiplier)


@rdp_curve.register
def _(event: ev.Laplace) -> RdpCurve:
    return _additive_noise_curve(laplace_rdp, "Laplace", event.noise_multiplier)


@rdp_curve.register
def _(event: ev.RandomizedResponse) -> RdpCurve:
    if event.neighboring is ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(
            "randomized response is analysed under replace-one or zero-out adjacency; got neighboring=add_remove"
        )
    function = (
        randomized_response_zero_out_rdp
        if event.neighboring is ev.NeighboringRelation.REPLACE_SPECIAL
        else randomized_response_rdp
    )
    return RdpCurve.from_function(
        functools.partial(function, epsilon=event.epsilon, num_values=event.num_values),
        description=f"RandomizedResponse(epsilon={event.epsilon:g}, k={event.num_values}, {event.neighboring.value})",
    )


@rdp_curve.register
def _(event: ev.PoissonSampled) -> RdpCurve:
    if event.neighboring is ev.NeighboringRelation.REPLACE_ONE:
        raise UnsupportedEventError(
            "Poisson-subsampled RDP is analysed under add/remove adjacency; got neighboring=replace_one "
            "(for fixed-size batches use SampledWithoutReplacement)"
        )
    sigma = _effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(
            f"RDP of Poisson sampling supports only (compositions of) Gaussian inner events; got {event.event!r}"
        )
    if math.isinf(sigma) or event.sampling_rate == 0:
        return RdpCurve.zero()
    return RdpCurve.from_function(
        functools.partial(subsampled_gaussian_rdp, sampling_rate=event.sampling_rate, noise_multiplier=sigma),
        description=f"PoissonSampled(q={event.sampling_rate:g}, Gaussian(noise_multiplier={sigma:g}))",
    )


@rdp_curve.register
def _(event: ev.SampledWithoutReplacement) -> RdpCurve:
    if event.neighboring is not ev.NeighboringRelation.REPLACE_ONE:
        raise UnsupportedEventError(
            f"sampling without replacement is analysed under replace-one adjacency; got {event.neighboring.value}"
        )
    sigma = _effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(
            f"RDP of sampling without replacement supports only Gaussian inner events; got {event.event!r}"
        )
    if math.isinf(sigma):
        return RdpCurve.zero()
    return RdpCurve.from_function(
        functools.partial(
            subsampled_without_replacement_gaussian_rdp, sampling_rate=event.sampling_rate, noise_multiplier=sigma
        ),
        description=(
            f"SampledWithoutReplacement({event.sample_size}/{event.dataset_size}, Gaussian(noise_multiplier={sigma:g}))"
        ),
    )


@rdp_curve.register
def _(event: ev.ZcdpMechanism) -> RdpCurve:
    """ξ + ρα (Bun & Steinke 2016, Definition 1.1); the max-divergence (α = ∞) is ξ if ρ = 0, else ∞."""
    from dplens.accountant.curves import Zcdp

    return Zcdp(rho=event.rho, xi=event.xi).rdp_curve()


@rdp_curve.register
def _(event: ev.SingleEpochTreeAggregation) -> RdpCurve:
    """α·depth/(2σ²): a Gaussian mechanism of ℓ2-sensitivity √depth (Kairouz et al. 2021, arXiv 2103.00039, App. D;
    dp-accounting's ``_compute_rdp_single_epoch_tree_aggregation``)."""
    if event.depth == 0:
        return RdpCurve.zero()
    return RdpCurve.from_function(
        functools.partial(gaussian_rdp, noise_multiplier=event.noise_multiplier / math.sqrt(event.depth)),
        description=f"SingleEpochTreeAggregation(noise_multiplier={event.noise_multiplier:g}, depth={event.depth})",
    )


@rdp_curve.register
def _(event: ev.MixtureOfGaussians) -> RdpCurve:
    """Both orders of N(0, σ²) vs Σ pᵢ N(cᵢ, σ²) (:func:`mixture_of_gaussians_rdp`)."""
    if all(c == 0 for c in event.sensitivities):
        return RdpCurve.zero()
    return RdpCurve.from_function(
        functools.partial(
            mixture_of_gaussians_rdp,
            standard_deviation=event.standard_deviation,
            sensitivities=event.sensitivities,
            sampling_probs=event.sampling_probs,
        ),
        description=f"MixtureOfGaussians(sigma={event.standard_deviation:g}, {len(event.sensitivities)} components)",
    )


@rdp_curve.register
def _(event: ev.SelfComposed) -> RdpCurve:
    return rdp_curve(event.event) * event.count


@rdp_curve.register
def _(event: ev.Composed) -> RdpCurve:
    total = RdpCurve.zero()
    for inner in event.events:
        total = total + rdp_curve(inner)
    return total
