"""RDP of standard mechanisms, vectorised over α and computed in log space.

:func:`rdp_curve` interprets an event as an :class:`~dplens.accountant.curves.RdpCurve`. It is a
``functools.singledispatch`` function: research modules register their own event types on it.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant._numerics import gammaln, log_ndtr, logsumexp
from dplens.accountant.curves import RdpConvergenceWarning, RdpCurve, check_alpha

__all__ = [
    "UnsupportedEventError",
    "gaussian_rdp",
    "laplace_rdp",
    "randomized_response_rdp",
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


def _check_rate(sampling_rate: float) -> float:
    try:
        q = float(sampling_rate)
    except (TypeError, ValueError):
        raise ValueError(f"sampling_rate must be in (0, 1]; got {sampling_rate!r}") from None
    if not (0 < q <= 1):
        raise ValueError(f"sampling_rate must be in (0, 1]; got {sampling_rate!r}")
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
    x = (α − 1)c so that α → 1 (the KL limit ε₀ + e^{−ε₀} − 1) is computed without cancellation.
    """
    eps0 = 1.0 / _check_positive("noise_multiplier", noise_multiplier)
    alpha = check_alpha(alpha)
    c = np.expm1(eps0 * (1.0 - 2.0 * alpha)) / (2.0 * alpha - 1.0)
    x = (alpha - 1.0) * c
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.abs(x) < 1e-8, 1.0 - x / 2.0, np.log1p(x) / x)
    return eps0 + c * ratio


def randomized_response_rdp(alpha: np.ndarray, *, epsilon: float, num_values: int) -> np.ndarray:
    """Exact RDP of k-ary randomized response under replace-one.

    The worst pair of output distributions is P = (p_hi, p_lo, …, p_lo), Q = (p_lo, p_hi, p_lo, …)
    with p_hi/p_lo = e^ε, p_hi + (k − 1)p_lo = 1, so (Rényi 1961; Mironov 2017 Definition 3)
    D_α = log(p_hi e^{ε(α−1)} + p_lo e^{−ε(α−1)} + (k − 2)p_lo) / (α − 1). Computed as
    log1p(p_hi·expm1(ε(α−1)) + p_lo·expm1(−ε(α−1)))/(α − 1) where that cannot overflow.
    """
    eps = _check_positive("epsilon", epsilon)
    if not isinstance(num_values, int | np.integer) or num_values < 2:
        raise ValueError(f"num_values must be an integer >= 2; got {num_values!r}")
    alpha = check_alpha(alpha)
    k = int(num_values)
    log_p_lo = -np.logaddexp(eps, math.log(k - 1))
    p_lo = math.exp(log_p_lo)
    p_hi = math.exp(eps + log_p_lo)
    t = eps * (alpha - 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        small = np.log1p(p_hi * np.expm1(t) + p_lo * np.expm1(-t))
        terms = np.stack(
            [np.log(p_hi) + t, np.log(p_lo) - t, np.full_like(t, math.log(k - 2) + log_p_lo if k > 2 else -np.inf)]
        )
        large = logsumexp(terms, axis=0)
    return np.where(t < 30.0, small, large) / (alpha - 1.0)


# --------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019, arXiv 1908.10530)
# --------------------------------------------------------------------------------------------

_MAX_INTEGER_ORDER_EXACT = 4096  # integer orders up to here use the exact finite sum
_MAX_SERIES_TERMS = 1000  # as dp-accounting: give up on the fractional series after this many terms


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


def _log_a_fractional(q: float, sigma: float, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log A_α for fractional α by the two-sided series of MTZ 2019 Section 3.3.

    Terms are summed in absolute value (a slight upper bound on A_α, as dp-accounting does since it
    fixed negative log A values); the series is truncated where both partial terms are decreasing and
    below total − 30 in log. Where that rule is not met within 1000 terms, a rigorous bound on the remaining
    terms (:func:`_log_series_tail`) is added instead. Returns (log A, mask of orders with a valid value).
    """
    z0 = sigma**2 * math.log(1.0 / q - 1.0) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    out = np.full(alphas.shape, np.inf)
    converged = np.zeros(alphas.shape, dtype=bool)
    pending = np.arange(alphas.size)
    n_terms = 64
    while pending.size:
        a = alphas[pending][:, None]
        i = np.arange(n_terms, dtype=float)[None, :]
        j = a - i
        # log|C(α, i)| by its recurrence C(α, i) = C(α, i − 1)(α − i + 1)/i: a cumulative sum, no gammas.
        steps = np.log(np.abs(a - i[:, 1:] + 1.0)) - np.log(i[:, 1:])
        log_coef = np.concatenate([np.zeros_like(a), np.cumsum(steps, axis=1)], axis=1)
        log_t0 = log_coef + i * log_q + j * log_1mq
        log_t1 = log_coef + j * log_q + i * log_1mq
        # ½ erfc((i − z0)/(√2σ)) = Φ((z0 − i)/σ), and likewise for the second half-line.
        log_e0 = log_ndtr((z0 - i) / sigma)
        log_e1 = log_ndtr((j - z0) / sigma)
        log_s0 = log_t0 + (i * i - i) / (2 * sigma**2) + log_e0
        log_s1 = log_t1 + (j * j - j) / (2 * sigma**2) + log_e1
        total = np.logaddexp.accumulate(np.logaddexp(log_s0, log_s1), axis=1)
        decreasing = np.zeros_like(log_s0, dtype=bool)
        decreasing[:, 1:] = (log_s0[:, 1:] < log_s0[:, :-1]) & (log_s1[:, 1:] < log_s1[:, :-1])
        stop = decreasing & (np.maximum(log_s0, log_s1) < total - 30.0)
        has_stop = stop.any(axis=1)
        first = np.argmax(stop, axis=1)
        done = pending[has_stop]
        out[done] = total[has_stop, first[has_stop]]
        converged[done] = True
        if n_terms >= _MAX_SERIES_TERMS:
            # Not converged by the stopping rule: add a rigorous bound on the rest of the series instead.
            rest = ~has_stop
            log_tail = _log_series_tail(alphas[pending[rest]], n_terms, log_coef[rest, -1], z0=z0, q=q, sigma=sigma)
            bounded = np.isfinite(log_tail)
            rows = pending[rest][bounded]
            out[rows] = np.logaddexp(total[rest, -1][bounded], log_tail[bounded])
            converged[rows] = True
            break
        pending = pending[~has_stop]
        n_terms = min(4 * n_terms, _MAX_SERIES_TERMS)
    return out, converged


def _log_series_tail(
    alphas: np.ndarray, n_terms: int, log_coef_last: np.ndarray, *, z0: float, q: float, sigma: float
) -> np.ndarray:
    """log of an upper bound on Σ_{i ≥ N} (|s0ᵢ| + |s1ᵢ|) of the MTZ fractional series, N = n_terms (∞ if none).

    With Φ(−x) ≤ φ(x)/x and (2z0 − 1)/(2σ²) = log((1 − q)/q), each term is at most
    K·|C(α,i)|/(i − z0) (first half-line) or K·|C(α,i)|/(i + z0 − α) (second), K = (1 − q)^α e^{−z0²/(2σ²)} σ/√(2π).
    For i > α + 1, |C(α,i)| ≤ |C(α,N)|((N + 1)/(i + 1))^{1+α}, so the tail is at most
    K|C(α,N)|(1 + (N + 1)/(1 + α))(1/(N − z0) + 1/(N + z0 − α)). Needs N ≥ α + 1, N > z0 and N > α − z0.
    """
    n = float(n_terms)
    a = np.asarray(alphas, dtype=float)
    # log|C(α, N)| from log|C(α, N − 1)| by one more step of the recurrence.
    log_coef_n = log_coef_last + np.log(np.abs(a - n + 1.0)) - math.log(n)
    valid = (n >= a + 1.0) & (n > z0) & (n > a - z0)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_k = a * math.log1p(-q) - z0**2 / (2 * sigma**2) + math.log(sigma) - 0.5 * math.log(2 * math.pi)
        log_tail = log_k + log_coef_n + np.log1p((n + 1.0) / (1.0 + a)) + np.log(1.0 / (n - z0) + 1.0 / (n + z0 - a))
    return np.where(valid, log_tail, np.inf)


def subsampled_gaussian_rdp(alpha: np.ndarray, *, sampling_rate: float, noise_multiplier: float) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian mechanism (add/remove adjacency).

    Mironov, Talwar, Zhang 2019 (arXiv 1908.10530) Section 3.3: RDP(α) = log A_α/(α − 1), with the
    exact finite sum at integer α and the convergent two-sided series at fractional α. The remove
    direction dominates for RDP (MTZ19 Theorem 5), so one direction suffices.

    Where the fractional series does not converge within 1000 terms the order is *reported* with an
    :class:`RdpConvergenceWarning` and the convex interpolation of log A_α between the neighbouring
    integer orders is used instead (an upper bound, WBK19 Corollary 10's argument). Orders above 4096
    use the unsubsampled bound α/(2σ²) (subsampling never increases the divergence). Because true RDP is
    non-decreasing in α, a fractional order is also capped by the exact value at ⌈α⌉; this keeps the curve
    monotone where the |terms| series is loose (dp-accounting returns the looser series value there).
    """
    q = _check_rate(sampling_rate)
    sigma = _check_positive("noise_multiplier", noise_multiplier)
    alpha = check_alpha(alpha)
    flat = np.atleast_1d(alpha).astype(float).ravel()
    if q == 1.0:
        return (flat / (2 * sigma**2)).reshape(alpha.shape)
    out = flat / (2 * sigma**2)  # the unsubsampled curve: an upper bound where nothing better is computed
    is_int = flat == np.floor(flat)
    exact_int = is_int & (flat <= _MAX_INTEGER_ORDER_EXACT)
    if exact_int.any():
        out[exact_int] = _log_a_integer(q, sigma, flat[exact_int]) / (flat[exact_int] - 1.0)
    frac_idx = np.flatnonzero(~is_int & (flat < _MAX_INTEGER_ORDER_EXACT))
    if frac_idx.size:
        frac = flat[frac_idx]
        log_a, ok = _log_a_fractional(q, sigma, frac)
        out[frac_idx[ok]] = log_a[ok] / (frac[ok] - 1.0)
        if not ok.all():
            # log A_α is convex in α (a log-moment), so interpolating it linearly between ⌊α⌋ and ⌈α⌉
            # is an upper bound; log A_1 = 0.
            bad = frac[~ok]
            lo, hi = np.floor(bad), np.ceil(bad)
            ints = np.unique(np.concatenate([lo, hi]))
            ints = ints[ints >= 2]
            log_a_int = {}
            if ints.size:
                log_a_int = dict(zip(ints.tolist(), _log_a_integer(q, sigma, ints).tolist(), strict=True))
            log_lo = np.array([log_a_int.get(v, 0.0) for v in lo])
            log_hi = np.array([log_a_int[v] for v in hi])
            t = bad - lo
            out[frac_idx[~ok]] = ((1 - t) * log_lo + t * log_hi) / (bad - 1.0)
            warnings.warn(
                f"subsampled Gaussian RDP series did not converge at alpha={bad[:5].tolist()} "
                f"(sampling_rate={q!r}, noise_multiplier={sigma!r}); used the convex interpolation of log A "
                "between integer orders (an upper bound)",
                RdpConvergenceWarning,
                stacklevel=2,
            )
        # True RDP is non-decreasing in α, so RDP(⌈α⌉) (exact) also bounds RDP(α). The |terms| series can
        # exceed it near α = 1 (e.g. q = 0.25, σ = 3: 0.0142 at α = 1.5 against 0.0073 at α = 2).
        low = frac <= 256  # the loose region is near α = 1; capping above 256 would only cost time
        if low.any():
            ceil = np.ceil(frac[low])
            capped = np.minimum(out[frac_idx[low]], _cached_log_a_integer(q, sigma, ceil) / (ceil - 1.0))
            out[frac_idx[low]] = capped
    # Subsampling never hurts: min with the unsubsampled curve is still an upper bound.
    out = np.minimum(out, flat / (2 * sigma**2))
    return out.reshape(alpha.shape)


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


@rdp_curve.register
def _(event: ev.Gaussian) -> RdpCurve:
    return RdpCurve.from_function(
        functools.partial(gaussian_rdp, noise_multiplier=event.noise_multiplier),
        description=f"Gaussian(noise_multiplier={event.noise_multiplier:g})",
    )


@rdp_curve.register
def _(event: ev.Laplace) -> RdpCurve:
    return RdpCurve.from_function(
        functools.partial(laplace_rdp, noise_multiplier=event.noise_multiplier),
        description=f"Laplace(noise_multiplier={event.noise_multiplier:g})",
    )


@rdp_curve.register
def _(event: ev.RandomizedResponse) -> RdpCurve:
    if event.neighboring is ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(
            "randomized response is analysed under replace-one adjacency; got neighboring=add_remove"
        )
    return RdpCurve.from_function(
        functools.partial(randomized_response_rdp, epsilon=event.epsilon, num_values=event.num_values),
        description=f"RandomizedResponse(epsilon={event.epsilon:g}, k={event.num_values})",
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
    if math.isinf(sigma):
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
def _(event: ev.SelfComposed) -> RdpCurve:
    return rdp_curve(event.event) * event.count


@rdp_curve.register
def _(event: ev.Composed) -> RdpCurve:
    total = RdpCurve.zero()
    for inner in event.events:
        total = total + rdp_curve(inner)
    return total
