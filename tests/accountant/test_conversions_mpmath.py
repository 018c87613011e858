"""zCDP and tCDP → (ε, δ) against mpmath minimisations, to 1e-9 (issue 2: "closed forms (GDP, zCDP, tCDP) to 1e-9").

The tables of accounting-anchors.md §5.6 print 6 decimals (tested in test_conversions.py); here the optimal
conversions are checked at 1e-9 relative against a 40-digit minimisation of the CKS 2020 Prop. 12 objective
ε(α) = ρα + log(1 − 1/α) − (log δ + log α)/(α − 1) over α ∈ (1, ∞) (zCDP) or α ∈ (1, ω] (tCDP).
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dplens.accountant.curves import Tcdp, Zcdp


def _objective(rho, delta):
    rho, log_delta = mpmath.mpf(rho), mpmath.log(mpmath.mpf(delta))
    return lambda a: rho * a + mpmath.log1p(-1 / a) - (log_delta + mpmath.log(a)) / (a - 1)


def _mp_optimal(rho: float, delta: float, omega: float = math.inf) -> float:
    """min over α ∈ (1, ω] of the CKS objective, in 40-digit arithmetic.

    ε′(α) = ρ + (log δ + log α)/(α − 1)², so the minimiser solves g(α) = ρ(α − 1)² + log α + log δ = 0; g is
    increasing on (1, ∞) with g(1) = log δ < 0 and g(1 + √(log(1/δ)/ρ)) > 0, so bisection finds the unique root.
    If it lies beyond ω the minimum over (1, ω] is at α = ω.
    """
    with mpmath.workdps(40):
        r, log_delta = mpmath.mpf(rho), mpmath.log(mpmath.mpf(delta))
        lo, hi = mpmath.mpf(1), 1 + mpmath.sqrt(-log_delta / r)
        for _ in range(200):
            mid = (lo + hi) / 2
            if r * (mid - 1) ** 2 + mpmath.log(mid) + log_delta < 0:
                lo = mid
            else:
                hi = mid
        a_star = min((lo + hi) / 2, mpmath.mpf(omega))
        return float(_objective(rho, delta)(a_star))


ZCDP = [(0.5, 1e-5), (0.5, 1e-6), (0.1, 1e-5), (0.1, 1e-6), (1.0, 1e-5), (0.005, 1e-5), (2.0, 1e-10), (1e-4, 1e-3)]


@pytest.mark.parametrize(("rho", "delta"), ZCDP)
def test_zcdp_optimal_conversion_to_1e_9(rho, delta):
    exact = _mp_optimal(rho, delta)
    got = Zcdp(rho=rho).epsilon(delta)
    assert got == pytest.approx(exact, rel=1e-9)
    assert got >= exact  # an upper bound: never rounded down


# §5.6 tCDP rows (boundary and interior), plus a few more.
TCDP = [(0.1, 10, 1e-5), (0.1, 20, 1e-5), (0.5, 3, 1e-5), (0.01, 50, 1e-6), (1.0, 1.5, 1e-8), (0.02, 200, 1e-9)]


@pytest.mark.parametrize(("rho", "omega", "delta"), TCDP)
def test_tcdp_restricted_conversion_to_1e_9(rho, omega, delta):
    exact = _mp_optimal(rho, delta, omega)
    got = Tcdp(rho=rho, omega=omega).epsilon(delta)
    assert got == pytest.approx(exact, rel=1e-9)
    assert got >= exact


@pytest.mark.parametrize(("rho", "omega", "delta"), TCDP)
def test_tcdp_bdrs_lemma_to_1e_10(rho, omega, delta):
    """BDRS 2018 Lemma 6 is min over α ∈ (1, ω] of ρα + log(1/δ)/(α − 1): both branches in mpmath."""
    with mpmath.workdps(40):
        r, log_inv = mpmath.mpf(rho), mpmath.log(1 / mpmath.mpf(delta))
        a_star = 1 + mpmath.sqrt(log_inv / r)
        a = a_star if a_star <= omega else mpmath.mpf(omega)
        exact = float(r * a + log_inv / (a - 1))
    got = Tcdp(rho=rho, omega=omega).epsilon_bdrs(delta)
    assert got == pytest.approx(exact, rel=1e-10)
    assert got >= exact  # rounded up, never down


@settings(max_examples=40, deadline=None)
@given(
    log_rho=st.floats(math.log(1e-4), math.log(5.0)),
    omega=st.floats(1.05, 1e4),
    log_delta=st.floats(math.log(1e-12), math.log(0.1)),
)
@example(log_rho=-7.375, omega=21.0, log_delta=-3.75)  # the CKS minimum is negative: ε = 0
@example(log_rho=-7.5, omega=2.0, log_delta=-3.75)  # at the Bretagnolle–Huber boundary
@example(log_rho=-7.0, omega=2.0, log_delta=-3.0)  # inside it: ε = 0
def test_tcdp_restricted_conversion_property(log_rho, omega, log_delta):
    rho, delta = math.exp(log_rho), math.exp(log_delta)
    got = Tcdp(rho=rho, omega=omega).epsilon(delta)
    if delta**2 >= -math.expm1(-rho) and got == 0.0:
        # KL ≤ ρ, so Bretagnolle–Huber gives TV ≤ √(1 − e^{−ρ}) ≤ δ: (0, δ)-DP, better than any α. (Right at the
        # boundary the accountant's smallest order is just above 1 and it may keep the CKS value instead.)
        return
    exact = max(_mp_optimal(rho, delta, omega), 0.0)  # a negative minimum means ε = 0
    assert got == pytest.approx(exact, rel=1e-9, abs=1e-12)
    assert got >= exact - 1e-15
    assert got <= Tcdp(rho=rho, omega=omega).epsilon_bdrs(delta) * (1 + 1e-12)
