"""The exact privacy profile of the allocation of one of two steps (a closed form by one quadrature), shared by the
allocation tests (tests/accountant/test_samplers.py, test_allocation_tail.py)."""

from __future__ import annotations

import math

from scipy import integrate, stats


def two_step_delta(eps: float, sigma: float, direction: str) -> float:
    """The exact hockey stick of the allocation of 1 of 2 steps: R = (Y₁ + Y₂)/2 with Y log-normal (log-sd s = 1/σ,
    mean 1); conditioning on Y₁ leaves a call (remove: E[(R − e^ε)₊]) or put (add: E[(1 − e^ε R)₊]) on Y₂."""
    s = 1.0 / sigma

    def call(strike: float) -> float:  # E[(Y − K)₊]
        if strike <= 0:
            return 1.0 - strike
        d1 = (-math.log(strike) + 0.5 * s * s) / s
        return stats.norm.cdf(d1) - strike * stats.norm.cdf(d1 - s)

    def put(strike: float) -> float:  # E[(K − Y)₊]
        if strike <= 0:
            return 0.0
        d1 = (-math.log(strike) + 0.5 * s * s) / s
        return strike * stats.norm.cdf(-(d1 - s)) - stats.norm.cdf(-d1)

    def integrand(z: float) -> float:
        y1 = math.exp(z)
        if direction == "remove":
            inner = 0.5 * call(2.0 * math.exp(eps) - y1)
        else:
            inner = 0.5 * math.exp(eps) * put(2.0 * math.exp(-eps) - y1)
        return stats.norm.pdf(z, loc=-0.5 * s * s, scale=s) * inner

    centre = -0.5 * s * s
    value, _ = integrate.quad(integrand, centre - 12 * s, centre + 12 * s, limit=400, epsabs=1e-14, epsrel=1e-11)
    return value
