"""Closed-form conversions against mpmath and the reference tables of accounting-anchors.md §5.4–5.7."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import conversions
from dplens.accountant.curves import Gdp, Tcdp, Zcdp


def mp_gdp_delta_exact(mu: float, eps: float) -> mpmath.mpf:
    """δ_μ(ε) at 50 digits, not rounded to a float (so that "≤ δ" is decided on the exact value)."""
    with mpmath.workdps(50):
        mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
        return +(mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2))


def mp_gdp_delta(mu: float, eps: float) -> float:
    return float(mp_gdp_delta_exact(mu, eps))


@pytest.mark.parametrize(
    ("mu", "eps_1e5", "eps_1e6", "delta_0", "delta_1"),
    [
        (0.5, 1.993091, 2.254085, 0.197413, 0.006830),
        (1.0, 4.377178, 4.886554, 0.382925, 0.126937),
        (2.0, 9.997256, 10.997151, 0.682689, 0.509862),
        (3.0, 16.675494, 18.163446, 0.866386, 0.787601),
    ],
)
def test_gdp_table(mu, eps_1e5, eps_1e6, delta_0, delta_1):
    # Table values are printed to 6 decimals.
    assert conversions.gdp_epsilon(mu, 1e-5) == pytest.approx(eps_1e5, abs=6e-7)
    assert conversions.gdp_epsilon(mu, 1e-6) == pytest.approx(eps_1e6, abs=6e-7)
    assert conversions.gdp_delta(mu, 0.0) == pytest.approx(delta_0, abs=6e-7)
    assert conversions.gdp_delta(mu, 1.0) == pytest.approx(delta_1, abs=6e-7)


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 4.0, 10.0])
def test_gdp_delta_matches_mpmath(mu, eps):
    expected = mp_gdp_delta(mu, eps)
    assert conversions.gdp_delta(mu, eps) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("mu", [0.2, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_gdp_epsilon_is_tight_upper_bound(mu, delta):
    eps = conversions.gdp_epsilon(mu, delta)
    # δ(ε) at the reported ε is within the target (upper bound on ε) and ε is within 1e-9 of the root.
    assert mp_gdp_delta(mu, eps) <= delta * (1 + 1e-12)
    assert mp_gdp_delta(mu, eps * (1 - 1e-9)) > delta


@pytest.mark.parametrize(
    ("eps", "delta", "sigma"),
    [(1, 1e-5, 3.730632), (0.5, 1e-5, 7.031827), (1, 1e-6, 4.224679), (2, 1e-5, 1.993812)],
)
def test_analytic_gaussian_sigma_table(eps, delta, sigma):
    mu = conversions.gdp_mu(eps, delta)
    assert 1 / mu == pytest.approx(sigma, abs=6e-7)
    assert conversions.gdp_delta(mu, eps) <= delta


@pytest.mark.parametrize(
    ("rho", "delta", "bun_steinke", "optimal", "order"),
    [
        (0.5, 1e-5, 5.298526, 4.728387, 5.432),
        (0.5, 1e-6, 5.756522, 5.221534, 5.907),
        (0.1, 1e-5, 2.245966, 1.914239, 10.568),
        (0.1, 1e-6, 2.450788, 2.141939, 11.658),
        (1.0, 1e-5, 7.786140, 7.077197, 4.175),
        (0.005, 1e-5, 0.484853, 0.375261, 40.5),
    ],
)
def test_zcdp_table(rho, delta, bun_steinke, optimal, order):
    z = Zcdp(rho=rho)
    assert z.epsilon_bun_steinke(delta) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)), rel=1e-9)
    assert z.epsilon_bun_steinke(delta) == pytest.approx(bun_steinke, abs=6e-7)
    eps, alpha = z.rdp_curve().epsilon_and_order(delta)
    assert eps == pytest.approx(optimal, abs=6e-7)
    assert alpha == pytest.approx(order, abs=0.06)


def test_zcdp_optimal_matches_mpmath_minimum():
    rho, delta = 0.5, 1e-5
    with mpmath.workdps(40):
        f = lambda a: rho * a + mpmath.log1p(-1 / a) - (mpmath.log(delta) + mpmath.log(a)) / (a - 1)  # noqa: E731
        a_star = mpmath.findroot(lambda a: mpmath.diff(f, a), 5.4)
        exact = float(f(a_star))
    assert Zcdp(rho=rho).epsilon(delta) == pytest.approx(exact, rel=1e-9)
    assert Zcdp(rho=rho).epsilon(delta) >= exact


@pytest.mark.parametrize(
    ("rho", "omega", "delta", "bdrs", "optimal"),
    [
        (0.1, 10, 1e-5, 2.279214, 1.918011),
        (0.1, 20, 1e-5, 2.245966, 1.914239),
        (0.5, 3, 1e-5, 7.256463, 6.301692),
        (0.01, 50, 1e-6, 0.753384, 0.621693),
    ],
)
def test_tcdp_table(rho, omega, delta, bdrs, optimal):
    t = Tcdp(rho=rho, omega=omega)
    assert t.epsilon_bdrs(delta) == pytest.approx(bdrs, abs=6e-7)
    assert t.epsilon(delta) == pytest.approx(optimal, abs=6e-7)
    assert t.epsilon(delta) <= t.epsilon_bdrs(delta)


def test_tcdp_lemma_closed_form_branches():
    # Interior branch: log(1/δ) ≤ (ω − 1)²ρ; boundary branch otherwise (BDRS18 Lemma 6).
    rho, delta = 0.1, 1e-5
    log_inv = math.log(1 / delta)
    assert Tcdp(rho=rho, omega=20).epsilon_bdrs(delta) == pytest.approx(rho + 2 * math.sqrt(rho * log_inv), rel=1e-12)
    assert Tcdp(rho=rho, omega=10).epsilon_bdrs(delta) == pytest.approx(rho * 10 + log_inv / 9, rel=1e-12)


@pytest.mark.parametrize(
    ("mu", "values"),
    [
        (0.5, [0.995204, 0.966101, 0.873865, 0.782761, 0.569260]),
        (1.0, [0.981702, 0.907638, 0.740489, 0.610856, 0.372397]),
        (2.0, [0.862195, 0.627919, 0.361240, 0.236240, 0.092501]),
    ],
)
def test_gaussian_trade_off_table(mu, values):
    alphas = np.array([0.001, 0.01, 0.05, 0.1, 0.25])
    assert Gdp(mu=mu).trade_off()(alphas) == pytest.approx(values, abs=6e-7)
    # The envelope of the GDP profile (DRS Prop. 2.12) reproduces G_μ and never lies above it.
    envelope = Gdp(mu=mu).profile().trade_off()(alphas)
    assert envelope == pytest.approx(values, abs=1e-5)
    assert np.all(envelope <= np.asarray(Gdp(mu=mu).trade_off()(alphas)) + 1e-12)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_trade_off_to_profile_is_pessimistic(mu):
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    exact = np.array([mp_gdp_delta(mu, e) for e in eps])
    back = Gdp(mu=mu).trade_off().delta(eps)
    assert np.all(back >= exact - 1e-12)
    assert back == pytest.approx(exact, abs=2e-3)


def test_dp_trade_off_closed_form():
    eps, delta = 1.0, 0.01
    alpha = np.array([0.0, 0.1, 0.5, 1.0])
    expected = np.maximum.reduce([np.zeros(4), 1 - delta - math.e * alpha, (1 - delta - alpha) / math.e])
    assert conversions.dp_trade_off(eps, delta, alpha) == pytest.approx(expected, abs=1e-15)


def test_dp_trade_off_beyond_float_exponent_is_the_limit_curve():
    # ε = 1000 (an audit claim for a nearly noiseless mechanism): e^ε overflows; the curve is 1 − δ at α = 0 and
    # e^{-ε}(1 − δ − α) ≈ 0 elsewhere, with no OverflowError and no nan from inf · 0.
    delta = 1e-5
    alpha = np.array([0.0, 1e-300, 0.5, 1.0])
    curve = conversions.dp_trade_off(1000.0, delta, alpha)
    assert curve[0] == 1 - delta
    assert np.all(np.isfinite(curve)) and np.all(curve[1:] == 0.0)
    assert conversions.dp_trade_off(math.inf, delta, 0.25) == 0.0


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.05, 5.0), delta=st.floats(1e-10, 0.2))
def test_gdp_round_trip(mu, delta):
    eps = conversions.gdp_epsilon(mu, delta)
    # The guarantee itself, with no tolerance: at the returned ε the exact δ (mpmath, not dplens's float δ, which is
    # what the solver inverted) is within δ. A relative 1e-9 here would hide an ε that is too small.
    assert mp_gdp_delta_exact(mu, eps) <= delta
    if eps > 0:
        assert conversions.gdp_mu(eps, delta) == pytest.approx(mu, rel=1e-6)


@pytest.mark.parametrize("bad", [1.0, -0.1, 1.5, float("nan"), "x", None])
def test_bad_delta_is_value_error(bad):
    with pytest.raises(ValueError, match="delta"):
        conversions.gdp_epsilon(1.0, bad)


def test_delta_zero_means_pure_dp():
    # δ(ε) > 0 at every ε for μ > 0, so no finite ε gives δ = 0; μ = 0 reveals nothing.
    assert conversions.gdp_epsilon(1.0, 0.0) == float("inf")
    assert conversions.gdp_epsilon(0.0, 0.0) == 0.0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_mu_rho_is_value_error(bad):
    with pytest.raises(ValueError, match="mu"):
        conversions.gdp_delta(bad, 1.0)
    with pytest.raises(ValueError, match="rho"):
        Zcdp(rho=bad)
    with pytest.raises(ValueError, match="rho"):
        Tcdp(rho=bad, omega=5)


def test_bad_omega_is_value_error():
    with pytest.raises(ValueError, match="omega"):
        Tcdp(rho=0.1, omega=1.0)
