"""Conversions between privacy notions: one function per theorem, each citing it.

Everything here works on plain floats / numpy arrays so that the value types in
:mod:`dplens.accountant.curves` and the research modules can share it. Every function that
returns an ε meant as a guarantee returns an upper bound (see :func:`round_up`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dplens.accountant._numerics import log_ndtr

__all__ = [
    "check_delta",
    "check_epsilon",
    "dp_trade_off",
    "gaussian_trade_off",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "profile_to_trade_off",
    "rdp_to_epsilon_classic",
    "rdp_to_epsilon_optimal",
    "rdp_to_log_delta_optimal",
    "rdp_tv_shortcut",
    "round_up",
    "solve_epsilon_for_delta",
    "tcdp_to_epsilon_bdrs",
    "trade_off_to_delta",
    "zcdp_to_epsilon_bun_steinke",
]

# Relative margin added to every reported ε so that floating-point error in the formulas can
# never make a reported guarantee smaller than the exact value of the bound it evaluates.
_ROUNDING_MARGIN = 1e-12


def round_up(value: float) -> float:
    """Round an ε (or δ) up by a relative 1e-12 so float error is always on the pessimistic side (0 stays 0: an
    exact zero, e.g. nothing private composed, needs no margin)."""
    if not math.isfinite(value) or value == 0:
        return float(value)
    return float(value + abs(value) * _ROUNDING_MARGIN + 1e-300)


def check_delta(delta: float, *, name: str = "delta", allow_zero: bool = False) -> float:
    """Validate δ ∈ (0, 1) (or [0, 1) with ``allow_zero``) and return it as a float."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1); got {delta!r}") from None
    low_ok = value >= 0 if allow_zero else value > 0
    if not (math.isfinite(value) and low_ok and value < 1):
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"{name} must be in {interval}; got {delta!r}")
    return value


def check_nonnegative(value: float, *, name: str) -> float:
    """Validate a finite number ≥ 0 named ``name`` (ε, μ, ρ, a count) and return it as a float."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}") from None
    if not (math.isfinite(out) and out >= 0):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return out


def check_epsilon(epsilon: float, *, name: str = "epsilon") -> float:
    """Validate ε ≥ 0 (finite) and return it as a float."""
    return check_nonnegative(epsilon, name=name)


# --------------------------------------------------------------------------------------------
# RDP → (ε, δ)
# --------------------------------------------------------------------------------------------


def rdp_to_epsilon_optimal(rdp: np.ndarray, alpha: np.ndarray, delta: float) -> np.ndarray:
    """ε(α) = r(α) + log(1 − 1/α) − (log δ + log α)/(α − 1), elementwise.

    Canonne, Kamath, Steinke 2020 (arXiv 2004.00010v4), Proposition 12; identical to Balle et al.
    2020 (arXiv 1905.09982) Theorem 21 and Asoodeh et al. 2020 (arXiv 2001.05990v1) Eq. (20).
    Every α > 1 gives a valid ε; the accountant minimises over α.
    """
    rdp = np.asarray(rdp, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        eps = rdp + np.log1p(-1.0 / alpha) - (math.log(delta) + np.log(alpha)) / (alpha - 1.0)
    return np.where(np.isnan(eps), np.inf, eps)


def rdp_to_epsilon_classic(rdp: np.ndarray, alpha: np.ndarray, delta: float) -> np.ndarray:
    """ε(α) = r(α) + log(1/δ)/(α − 1), elementwise: Mironov 2017 (arXiv 1702.07476) Proposition 3.

    Looser than :func:`rdp_to_epsilon_optimal`; kept because it reproduces legacy numbers
    (Abadi et al. 2016's 1.26, TF Privacy's 2.92).
    """
    rdp = np.asarray(rdp, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        eps = rdp - math.log(delta) / (alpha - 1.0)
    return np.where(np.isnan(eps), np.inf, eps)


def rdp_to_log_delta_optimal(rdp: np.ndarray, alpha: np.ndarray, epsilon: float) -> np.ndarray:
    """log δ(α) = (α − 1)(r(α) − ε + log(1 − 1/α)) − log α, elementwise.

    Canonne, Kamath, Steinke 2020 (arXiv 2004.00010v4), Proposition 12, solved for δ.
    """
    rdp = np.asarray(rdp, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_delta = (alpha - 1.0) * (rdp - epsilon + np.log1p(-1.0 / alpha)) - np.log(alpha)
    return np.where(np.isnan(log_delta), np.inf, log_delta)


def rdp_tv_shortcut(rdp: np.ndarray, delta: float) -> bool:
    """True when (0, δ)-DP already follows from the RDP curve.

    RDP is non-decreasing in α, so KL ≤ r(α) for every α; the Bretagnolle–Huber inequality gives
    TV ≤ √(1 − e^{−KL}), and (0, δ)-DP holds iff TV ≤ δ. So δ² ≥ 1 − e^{−r(α)} for any α implies
    ε = 0 is valid (the branch dp-accounting takes too; TF Privacy issue #166).
    """
    rdp = np.asarray(rdp, dtype=float)
    finite = rdp[np.isfinite(rdp)]
    if finite.size == 0:
        return False
    return bool(delta**2 + np.expm1(-np.maximum(finite.min(), 0.0)) >= 0)


# --------------------------------------------------------------------------------------------
# zCDP / tCDP closed forms
# --------------------------------------------------------------------------------------------


def zcdp_to_epsilon_bun_steinke(rho: float, delta: float) -> float:
    """ε = ρ + 2√(ρ log(1/δ)): Bun & Steinke 2016 (arXiv 1605.02065) Proposition 1.3."""
    delta = check_delta(delta)
    if not (rho >= 0 and math.isfinite(rho)):
        raise ValueError(f"rho must be a finite number >= 0; got {rho!r}")
    return round_up(rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))


def tcdp_to_epsilon_bdrs(rho: float, omega: float, delta: float) -> float:
    """(ρ, ω)-tCDP → (ε, δ): Bun, Dwork, Rothblum, Steinke 2018 (STOC) Lemma 6.

    ε = ρ + 2√(ρ log(1/δ)) if log(1/δ) ≤ (ω − 1)²ρ, else ρω + log(1/δ)/(ω − 1): the minimiser of
    ρα + log(1/δ)/(α − 1) over α ∈ (1, ω].
    """
    delta = check_delta(delta)
    if not (rho >= 0 and math.isfinite(rho)):
        raise ValueError(f"rho must be a finite number >= 0; got {rho!r}")
    if not omega > 1:
        raise ValueError(f"omega must be > 1; got {omega!r}")
    log_inv_delta = math.log(1.0 / delta)
    if log_inv_delta <= (omega - 1.0) ** 2 * rho:
        return round_up(rho + 2.0 * math.sqrt(rho * log_inv_delta))
    return round_up(rho * omega + log_inv_delta / (omega - 1.0))


# --------------------------------------------------------------------------------------------
# Gaussian DP (f-DP with G_μ)
# --------------------------------------------------------------------------------------------


def _check_mu(mu: float) -> float:
    """Validate μ ≥ 0 (finite) and return it as a float."""
    return check_nonnegative(mu, name="mu")


def gdp_delta(mu: float, epsilon: float | np.ndarray) -> float | np.ndarray:
    """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) of μ-GDP.

    Dong, Roth, Su 2022 (JRSS-B; arXiv 1905.02383) Corollary 2.13; equal to the analytic Gaussian
    mechanism of Balle & Wang 2018 (arXiv 1805.06530) Theorem 8 with μ = Δ/σ. Computed in log space.
    """
    mu = _check_mu(mu)
    eps = np.asarray(epsilon, dtype=float)
    if mu == 0:
        out = np.zeros_like(eps)
    else:
        log_a = log_ndtr(-eps / mu + mu / 2)
        log_b = eps + log_ndtr(-eps / mu - mu / 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(log_b < log_a, np.exp(log_a) * -np.expm1(log_b - log_a), 0.0)
        out = np.maximum(out, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with δ_μ(ε) ≤ δ for μ-GDP (Dong, Roth, Su 2022 Corollary 2.13), rounded up."""
    mu = _check_mu(mu)
    delta = check_delta(delta, allow_zero=True)
    if delta == 0:  # δ_μ(ε) > 0 at every ε for μ > 0 (it underflows near ε = 39 for μ = 1, which is no zero)
        return 0.0 if mu == 0 else math.inf
    return solve_epsilon_for_delta(lambda e: gdp_delta(mu, e), delta)


def gdp_mu(epsilon: float, delta: float) -> float:
    """Largest μ such that μ-GDP implies (ε, δ)-DP (inverse of Dong, Roth, Su 2022 Cor. 2.13).

    Rounded down so that the returned μ is never larger than the exact one.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)

    def excess(mu: float) -> float:
        return float(gdp_delta(mu, epsilon)) - delta

    hi = 1.0
    while excess(hi) < 0:
        hi *= 2.0
        if hi > 1e6:
            raise ValueError(f"no finite mu found for epsilon={epsilon!r}, delta={delta!r}")
    from scipy import optimize

    mu = optimize.brentq(excess, 0.0, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    # Step down until the guarantee holds; doubling steps, since rounding noise in δ_μ(ε) can span many floats.
    step = max(mu * 1e-15, 1e-300)
    while mu > 0 and excess(mu) > 0:
        mu = max(mu - step, 0.0)
        step *= 2.0
    return mu


def gaussian_trade_off(mu: float, alpha: float | np.ndarray) -> float | np.ndarray:
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ): Dong, Roth, Su 2022 Definition 2.7."""
    mu = _check_mu(mu)
    alpha = np.asarray(alpha, dtype=float)
    from scipy import stats

    out = stats.norm.cdf(stats.norm.isf(alpha) - mu)
    return float(out) if np.ndim(out) == 0 else out


def dp_trade_off(epsilon: float, delta: float, alpha: float | np.ndarray) -> float | np.ndarray:
    """f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)}: Dong, Roth, Su 2022 Eq. (5)."""
    alpha = np.asarray(alpha, dtype=float)
    # e^ε overflows for ε > 709 (an audit of a nearly noiseless mechanism claims that much); e^ε α is then +inf
    # for every α > 0 and the line drops out of the maximum, while α = 0 keeps 1 − δ (no inf · 0 = nan).
    with np.errstate(over="ignore", invalid="ignore"):
        steep = np.where(alpha > 0, np.exp(epsilon) * alpha, 0.0)
    out = np.maximum.reduce(
        [
            np.zeros_like(alpha),
            1 - delta - steep,
            math.exp(-epsilon) * (1 - delta - alpha),
        ]
    )
    return float(out) if np.ndim(out) == 0 else out


def profile_to_trade_off(
    delta_of_epsilon: Callable[[np.ndarray], np.ndarray],
    alpha: float | np.ndarray,
    *,
    epsilons: np.ndarray | None = None,
) -> np.ndarray:
    """f(α) = sup_ε f_{ε,δ(ε)}(α): Dong, Roth, Su 2022 Proposition 2.12 (the envelope).

    The supremum runs over a finite ε grid, so the result is a pointwise *lower* bound on the exact
    trade-off curve: pessimistic (it never claims more privacy than the profile supports). The default grid ends
    at ε = 700 so that f(0) = 1 − δ(700) (a grid ending at 60 gave f(0) = 1 − δ(60) = 0 for a Gaussian with
    σ = 0.05, whose f(0) is 1).
    """
    alpha = np.atleast_1d(np.asarray(alpha, dtype=float))
    if epsilons is None:
        epsilons = np.concatenate([[0.0], np.geomspace(1e-4, 60.0, 2000), np.geomspace(61.0, 700.0, 60)])
    deltas = np.minimum(np.asarray(delta_of_epsilon(epsilons), dtype=float), 1.0)
    exp_eps = np.exp(epsilons)[:, None]
    one_minus = (1.0 - deltas)[:, None]
    a = alpha[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        envelope = np.maximum(one_minus - exp_eps * a, (one_minus - a) / exp_eps)
    envelope = np.where(np.isnan(envelope), 0.0, envelope)
    return np.clip(envelope.max(axis=0), 0.0, 1.0)


def trade_off_to_delta(
    trade_off: Callable[[np.ndarray], np.ndarray], epsilon: float | np.ndarray, *, grid_size: int = 20001
) -> np.ndarray:
    """δ(ε) = 1 + f*(−e^ε) = sup_α (1 − f(α) − e^ε α): Dong, Roth, Su 2022 Proposition 2.12.

    Evaluated pessimistically on a grid: f is non-increasing, so on [α_i, α_{i+1}] we have
    1 − f(α) − e^ε α ≤ 1 − f(α_{i+1}) − e^ε α_i, and the maximum of that over i is an upper bound.
    """
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    grid = np.concatenate([[0.0], np.geomspace(1e-12, 1.0, grid_size - 1)])
    f = np.asarray(trade_off(grid), dtype=float)
    upper = 1.0 - f[1:][None, :] - np.exp(eps)[:, None] * grid[:-1][None, :]
    return np.clip(upper.max(axis=1), 0.0, 1.0)


# --------------------------------------------------------------------------------------------
# Profiles: ε(δ) by root finding, pessimistically
# --------------------------------------------------------------------------------------------


def solve_epsilon_for_delta(
    delta_of_epsilon: Callable[[float], float], delta: float, *, epsilon_max: float = 1e4
) -> float:
    """Smallest ε ≥ 0 with δ(ε) ≤ delta for a non-increasing δ(ε), returned on the safe side.

    Brent's method finds the crossing; the returned ε is then checked and nudged upwards until
    δ(ε) ≤ delta holds, so the result is an upper bound on the exact ε (never below it). At delta = 0 the
    answer is the smallest ε with δ(ε) = 0 (pure DP), found by bisection and returned from above.
    """
    if delta_of_epsilon(0.0) <= delta:
        return 0.0
    hi = 1.0
    while delta_of_epsilon(hi) > delta:
        hi *= 2.0
        if hi > epsilon_max:
            return math.inf
    if delta == 0:
        lo = hi / 2 if hi > 1 else 0.0  # invariant: δ(lo) > 0 = δ(hi)
        while hi - lo > 1e-13 * max(hi, 1.0):
            mid = 0.5 * (lo + hi)
            if delta_of_epsilon(mid) > 0:
                lo = mid
            else:
                hi = mid
        return round_up(hi)

    def log_gap(eps: float) -> float:
        value = delta_of_epsilon(eps)
        return (math.log(value) if value > 0 else -745.0) - math.log(delta)

    from scipy import optimize

    root = optimize.brentq(log_gap, hi / 2 if hi > 1 else 0.0, hi, xtol=1e-13, rtol=1e-13)
    step = max(abs(root) * 1e-12, 1e-15)
    while delta_of_epsilon(root) > delta:
        root += step
        step *= 2.0
    return round_up(root)
