"""Tests for dplens.research.dp_ftrl.accounting (seed 001, ν-DP-FTRL; note research/corrdp-and-dp-ftrl.md §B5 F1–F8)."""

from __future__ import annotations

import itertools
import json
import math
import time
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from dplens.accountant import conversions, pld, rdp
from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method
from dplens.cli import main
from dplens.research.dp_ftrl import accounting as mx
from dplens.spec import parse_spec

ZERO_OUT = ev.NeighboringRelation.REPLACE_SPECIAL
REPLACE_ONE = ev.NeighboringRelation.REPLACE_ONE
ADD_REMOVE = ev.NeighboringRelation.ADD_OR_REMOVE_ONE


# ------------------------------------------------------------------------------------------------
# F1: coefficients


def test_f1_nu0_coefficients_exact_fractions():
    beta = [Fraction(1), Fraction(-1, 2), Fraction(-1, 8), Fraction(-1, 16)]
    beta += [Fraction(-5, 128), Fraction(-7, 256), Fraction(-21, 1024), Fraction(-33, 2048)]
    c = [Fraction(1), Fraction(1, 2), Fraction(3, 8), Fraction(5, 16)]
    c += [Fraction(35, 128), Fraction(63, 256), Fraction(231, 1024), Fraction(429, 2048)]
    np.testing.assert_allclose(mx.noising_coefficients(0.0, 8), [float(b) for b in beta], rtol=1e-14, atol=0)
    np.testing.assert_allclose(mx.strategy_coefficients(0.0, 8), [float(x) for x in c], rtol=1e-14, atol=0)
    # The closed forms themselves: β_t = (−1)^t binom(1/2, t), c_k = binom(2k, k)/4^k (exact rationals).
    for t in range(8):
        binom_half = math.prod(Fraction(1, 2) - j for j in range(t)) / math.factorial(t)
        assert (-1) ** t * binom_half == beta[t]
        assert Fraction(math.comb(2 * t, t), 4**t) == c[t]


@pytest.mark.parametrize("nu", [0.0, 0.01, 0.1, 0.5, 0.9, 1.0])
def test_beta_times_c_is_identity(nu):
    beta, c = mx.noising_coefficients(nu, 400), mx.strategy_coefficients(nu, 400)
    product = np.convolve(beta, c)[:400]
    expected = np.zeros(400)
    expected[0] = 1.0
    np.testing.assert_allclose(product, expected, atol=1e-15)


@pytest.mark.parametrize("nu", [0.0, 1e-4, 0.05, 0.3])
@pytest.mark.parametrize("k", [1, 7, 1000, 123_457, 1_000_000])
def test_log_coefficients_against_mpmath(nu, k):
    mpmath.mp.dps = 40
    exact_c = (
        mpmath.loggamma(k + mpmath.mpf(1) / 2) - mpmath.loggamma(k + 1) - mpmath.log(mpmath.pi) / 2
    ) + k * mpmath.log1p(-mpmath.mpf(nu))
    got = mx.log_strategy_coefficients(nu, k + 1)[k]
    assert abs(got - float(exact_c)) <= 1e-12 * max(1.0, abs(float(exact_c)))
    log_beta = mx.log_noising_coefficients(nu, k + 1)
    assert log_beta.sign[k] == -1.0
    assert abs(log_beta.log_abs[k] - float(exact_c - mpmath.log(2 * k - 1))) <= 1e-12 * max(1.0, abs(float(exact_c)))


def test_log_space_keeps_tiny_coefficients():
    # ν close to 1: c_k underflows as a float but its log is exact.
    log_c = mx.log_strategy_coefficients(0.999, 300)
    assert np.all(np.isfinite(log_c)) and log_c[-1] < -2000
    expected = float(mpmath.log(mpmath.binomial(598, 299) / mpmath.mpf(4) ** 299) + 299 * mpmath.log(0.001))
    assert log_c[-1] == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------------------------------------
# F2: γ_T table and closed forms

F2 = {
    0.0: [1, 1.118034, 1.179248, 1.338411, 1.591022, 1.806932, 1.999503],
    0.01: [1, 1.115807, 1.174780, 1.319312, 1.456483, 1.461807, 1.461807],
    0.05: [1, 1.107079, 1.157655, 1.255926, 1.284076, 1.284076, 1.284076],
    0.1: [1, 1.096586, 1.137877, 1.198618, 1.204924, 1.204924, 1.204924],
    0.5: [1, 1.030776, 1.035031, 1.035945, 1.035945, 1.035945, 1.035945],
    1.0: [1, 1, 1, 1, 1, 1, 1],
}
F2_STEPS = [1, 2, 3, 10, 100, 1000, 10000]
F2_INF = {0.01: 1.461807, 0.05: 1.284076, 0.1: 1.204924, 0.5: 1.035945, 1.0: 1.0}


@pytest.mark.parametrize("nu", sorted(F2))
def test_f2_gamma_table(nu):
    for steps, expected in zip(F2_STEPS, F2[nu], strict=True):
        assert mx.nu_ftrl_gamma(nu, steps) == pytest.approx(expected, abs=1e-6)
    np.testing.assert_allclose(mx.nu_ftrl_gamma_curve(nu, F2_STEPS), F2[nu], atol=1e-6)
    if nu in F2_INF:
        assert mx.gamma_infinity(nu) == pytest.approx(F2_INF[nu], abs=1e-6)
        assert mx.nu_ftrl_gamma(nu, math.inf) == mx.gamma_infinity(nu)


def test_f2_nu0_squares_exact():
    assert mx.nu_ftrl_gamma(0.0, 2) ** 2 == pytest.approx(5 / 4, rel=1e-15)
    assert mx.nu_ftrl_gamma(0.0, 3) ** 2 == pytest.approx(89 / 64, rel=1e-15)
    assert mx.nu_ftrl_gamma(0.0, 4) ** 2 == pytest.approx(381 / 256, rel=1e-15)


def test_f2_brute_force_inverse_column_norms():
    # ν = 0.1, T = 16: all column norms of inv(B) from a dense inverse; the max is column 0 = 1.2037119.
    beta = mx.noising_coefficients(0.1, 16)
    b = np.array([[beta[i - j] if i >= j else 0.0 for j in range(16)] for i in range(16)])
    norms = np.linalg.norm(np.linalg.inv(b), axis=0)
    assert np.all(np.diff(norms) <= 1e-15)
    assert norms.max() == pytest.approx(1.2037119, abs=1e-7)
    assert mx.nu_ftrl_gamma(0.1, 16) == pytest.approx(norms.max(), rel=1e-13)
    assert mx.matrix_sensitivity(b) == pytest.approx(norms.max(), rel=1e-13)
    assert mx.matrix_sensitivity(np.linalg.inv(b), kind=mx.FactorKind.STRATEGY) == pytest.approx(norms.max(), rel=1e-13)
    assert mx.matrix_sensitivity(b, neighboring=REPLACE_ONE) == pytest.approx(2 * norms.max(), rel=1e-13)


@pytest.mark.parametrize("nu", [1e-3, 0.01, 0.2, 0.7, 0.99])
def test_gamma_infinity_is_the_hypergeometric_series(nu):
    mpmath.mp.dps = 30
    x = (1 - mpmath.mpf(nu)) ** 2
    assert mx.gamma_infinity(nu) ** 2 == pytest.approx(float(mpmath.hyp2f1(0.5, 0.5, 1, x)), rel=1e-13)
    # and the finite sums converge to it (the early-stopped sum adds a rigorous tail bound)
    assert mx.nu_ftrl_gamma(nu, 10**8) == pytest.approx(mx.gamma_infinity(nu), rel=1e-12)
    assert mx.nu_ftrl_gamma(nu, 10**8) >= mx.gamma_infinity(nu) * (1 - 1e-14)


def test_nu0_asymptotics():
    # note §B3.3: γ_T² ≈ (ln T + ln 16 + γ_Euler)/π; exact 3.265003 vs asymptotic 3.265083 at T = 1000.
    assert mx.nu_ftrl_gamma(0.0, 1000) ** 2 == pytest.approx(3.265003, abs=1e-6)
    asymptotic = (math.log(1000) + math.log(16) + np.euler_gamma) / math.pi
    assert asymptotic == pytest.approx(3.265083, abs=1e-6)
    big = mx.nu_ftrl_gamma(0.0, 10**6) ** 2
    assert big == pytest.approx((math.log(10**6) + math.log(16) + np.euler_gamma) / math.pi, rel=1e-6)
    # ν → 0: γ_∞² ≈ (1/π) ln(8/ν)
    assert mx.gamma_infinity(1e-7) ** 2 == pytest.approx(math.log(8e7) / math.pi, rel=1e-5)


def test_nu0_tail_bound_beyond_exact_terms():
    steps = mx._EXACT_TERMS + 1_000_000
    exact = mx.nu_ftrl_gamma_curve(0.0, [steps])[0]  # one cumulative sum over all terms
    bound = mx.nu_ftrl_gamma(0.0, steps)
    assert exact <= bound <= exact * (1 + 1e-9)
    huge = mx.nu_ftrl_gamma(0.0, 10**12) ** 2
    assert huge == pytest.approx((math.log(1e12) + math.log(16) + np.euler_gamma) / math.pi, rel=1e-9)


def test_chunked_sum_equals_single_cumsum_beyond_one_chunk():
    steps = (1 << 20) + 12_345
    assert mx.nu_ftrl_gamma(0.0, steps) == pytest.approx(mx.nu_ftrl_gamma_curve(0.0, [steps])[0], rel=1e-12)


def test_gamma_is_fast_for_a_million_steps():
    mx._nu_gamma_cached.cache_clear()
    start = time.process_time()  # CPU time: a neighbour on the machine does not count against it
    value = mx.nu_ftrl_gamma(0.0, 10**6)
    elapsed = time.process_time() - start
    assert value == pytest.approx(2.3374963886, rel=1e-9)  # cross-checked above against the ν = 0 asymptotics
    assert elapsed < 5.0  # ~0.1 s measured; generous for a shared machine


def test_f8_degenerate_cases():
    np.testing.assert_array_equal(mx.noising_coefficients(1.0, 5), [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(mx.strategy_coefficients(1.0, 5), [1, 0, 0, 0, 0])
    assert mx.nu_ftrl_gamma(1.0, 10**6) == 1.0
    for nu in (0.0, 0.3, 1.0):
        assert mx.nu_ftrl_gamma(nu, 1) == 1.0


@settings(max_examples=40, deadline=None)
@given(
    nu=st.floats(0.0, 1.0),
    nu2=st.floats(0.0, 1.0),
    steps=st.integers(1, 3000),
    more=st.integers(0, 3000),
)
def test_gamma_monotone_and_bounded(nu, nu2, steps, more):
    low, high = sorted((nu, nu2))
    g = mx.nu_ftrl_gamma(nu, steps)
    assert 1.0 <= g <= mx.nu_ftrl_gamma(nu, steps + more) * (1 + 1e-15)
    assert mx.nu_ftrl_gamma(high, steps) <= mx.nu_ftrl_gamma(low, steps) * (1 + 1e-15)
    if nu > 0:
        assert g <= mx.gamma_infinity(nu) * (1 + 1e-12)


# ------------------------------------------------------------------------------------------------
# F5, F6: several participations; truncated β


def test_f5_minsep_sensitivity():
    assert mx.minsep_sensitivity(mx.strategy_coefficients(0.0, 1000), min_separation=100, participations=10) == (
        pytest.approx(9.154043, abs=1e-6)
    )
    assert mx.minsep_sensitivity(mx.strategy_coefficients(0.05, 1000), min_separation=100, participations=10) == (
        pytest.approx(4.062933, abs=1e-6)
    )
    assert mx.nu_ftrl_sensitivity(0.0, 1000, epochs=10, min_separation=100) == pytest.approx(9.154043, abs=1e-6)
    assert mx.nu_ftrl_sensitivity(0.0, 1000, min_separation=100) == pytest.approx(9.154043, abs=1e-6)  # k = ⌈T/b⌉
    # DP-SGD (ν = 1): k orthogonal columns, √k.
    assert mx.nu_ftrl_sensitivity(1.0, 1000, epochs=10, min_separation=100) == pytest.approx(math.sqrt(10), rel=1e-14)


def _brute_force_minsep(c: np.ndarray, b: int, k: int) -> float:
    """max of ‖Σ_j u_j C_{:,p_j}‖ over patterns (≤ k steps, pairwise ≥ b apart) and signs u_j ∈ {±1}."""
    steps = c.size
    matrix = np.array([[c[i - j] if i >= j else 0.0 for j in range(steps)] for i in range(steps)])
    best = 0.0
    for size in range(1, k + 1):
        for pattern in itertools.combinations(range(steps), size):
            if any(q - p < b for p, q in itertools.pairwise(pattern)):
                continue
            columns = matrix[:, pattern]
            for signs in itertools.product((1.0, -1.0), repeat=size - 1):
                best = max(best, float(np.linalg.norm(columns @ np.array((1.0, *signs)))))
    return best


@settings(max_examples=25, deadline=None)
@given(nu=st.floats(0.0, 1.0), steps=st.integers(1, 11), b=st.integers(1, 5), k=st.integers(1, 4))
def test_minsep_formula_is_the_brute_force_worst_case(nu, steps, b, k):
    c = mx.strategy_coefficients(nu, steps)
    assert mx.minsep_sensitivity(c, min_separation=b, participations=k) == pytest.approx(
        _brute_force_minsep(c, b, k), rel=1e-12
    )


@settings(max_examples=30, deadline=None)
@given(nu=st.floats(0.0, 1.0), steps=st.integers(1, 2000), b=st.integers(1, 400), k=st.integers(1, 30))
def test_minsep_bounds(nu, steps, b, k):
    c = mx.strategy_coefficients(nu, steps)
    single = mx.nu_ftrl_gamma(nu, steps)
    value = mx.minsep_sensitivity(c, min_separation=b, participations=k)
    most = -(-steps // b)
    assert single * (1 - 1e-12) <= value <= min(k, most) * single * (1 + 1e-12)
    if b >= steps or k == 1:
        assert value == pytest.approx(single, rel=1e-12)


def test_f6_truncated_beta_changes_gamma():
    beta = mx.noising_coefficients(0.0, 1000)
    for taps, expected in ((2, 1.154701), (5, 1.306364), (10, 1.397417), (50, 1.576300)):
        truncated = np.zeros(1000)
        truncated[:taps] = beta[:taps]
        c = mx.inverse_toeplitz_coefficients(truncated)
        assert mx.toeplitz_sensitivity(c) == pytest.approx(expected, abs=1e-6)
        assert np.convolve(truncated, c)[:1000] == pytest.approx(np.eye(1000)[0], abs=1e-12)
    assert mx.toeplitz_sensitivity(mx.inverse_toeplitz_coefficients(beta)) == pytest.approx(1.806932, abs=1e-6)


def test_minsep_refuses_coefficients_outside_the_theorem():
    with pytest.raises(ValueError, match="strategy must be non-negative and non-increasing"):
        mx.minsep_sensitivity([1.0, -0.5, 0.2], min_separation=1)
    with pytest.raises(ValueError, match="strategy must be non-negative and non-increasing"):
        mx.minsep_sensitivity([1.0, 0.5, 0.7], min_separation=1)


def test_participation_schedule():
    assert mx.participation_schedule(1000) == (1, 1000)
    assert mx.participation_schedule(1000, min_separation=300) == (4, 300)
    assert mx.participation_schedule(1000, epochs=3) == (3, 1)
    assert mx.participation_schedule(1000, epochs=30, min_separation=100) == (10, 100)


# ------------------------------------------------------------------------------------------------
# Adjacency, the event, and the exact GDP guarantee


def _exact_gdp_epsilon(mu: float, delta: float) -> float:
    """The note's Appendix formula, independently of dplens: solve Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ."""
    return optimize.brentq(
        lambda e: stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta,
        0,
        500,
        xtol=1e-14,
        rtol=1e-14,
    )


def test_f3_f4_sigma_and_epsilon():
    # F3: σ = γ_T/√(2ρ)
    assert mx.nu_ftrl_gamma(0.0, 100) / math.sqrt(0.2) == pytest.approx(3.557634, abs=1e-6)
    # F4: ε at δ = 1e-5, exact GDP and Bun–Steinke, for ρ = 0.5, 0.1, 0.01 (μ = √(2ρ)).
    for rho, exact, bun_steinke in ((0.5, 4.377178, 5.298526), (0.1, 1.760057, 2.245966), (0.01, 0.496975, 0.688614)):
        gamma = mx.nu_ftrl_gamma(0.0, 1000)
        event = mx.DpFtrl(nu=0.0, noise_multiplier=gamma / math.sqrt(2 * rho), steps=1000)
        result = mx.dp_ftrl_accounting(event, 1e-5)
        assert result.mu == pytest.approx(math.sqrt(2 * rho), rel=1e-9)
        assert result.rho == pytest.approx(rho, rel=1e-9)
        assert result.epsilon == pytest.approx(exact, abs=1e-6)
        assert result.epsilon_zcdp_bun_steinke == pytest.approx(bun_steinke, abs=1e-6)
        assert result.to_dict()["is_estimate"] is False


@pytest.mark.parametrize("relation, factor", [(ZERO_OUT, 1), (ADD_REMOVE, 1), (REPLACE_ONE, 2)])
@pytest.mark.parametrize("nu, steps, epochs, sep", [(0.05, 1000, None, None), (0.0, 1000, 10, 100), (0.2, 700, 4, 1)])
def test_accountant_epsilon_is_the_exact_gdp_epsilon(relation, factor, nu, steps, epochs, sep):
    sigma = 3.0
    event = mx.DpFtrl(
        nu=nu, noise_multiplier=sigma, steps=steps, epochs=epochs, min_separation=sep, neighboring=relation
    )
    base = mx.nu_ftrl_sensitivity(nu, steps, epochs=epochs, min_separation=sep)
    assert event.sensitivity() == pytest.approx(factor * base, rel=1e-15)
    mu = event.gdp_mu()
    assert mu == pytest.approx(factor * base / sigma, rel=2e-10)
    acc = Accountant().compose(event)
    delta = 1e-6
    exact = acc.epsilon(delta, method=Method.EXACT)
    assert exact == conversions.gdp_epsilon(mu, delta)
    assert exact == pytest.approx(_exact_gdp_epsilon(factor * base / sigma, delta), rel=1e-9)
    best = acc.epsilon_result(delta)
    assert best.method is Method.EXACT and best.epsilon == exact
    assert acc.epsilon(delta, method=Method.RDP) >= exact
    pld_eps = acc.epsilon(delta, method=Method.PLD)
    assert exact * (1 - 1e-9) <= pld_eps <= exact + 2e-3
    assert acc.delta(exact, method=Method.EXACT) == pytest.approx(delta, rel=1e-8)
    assert acc.neighboring is relation


def test_replace_one_doubles_the_sensitivity_and_quadruples_rho():
    zero = mx.DpFtrl(nu=0.1, noise_multiplier=2.0, steps=500)
    replace = mx.DpFtrl(nu=0.1, noise_multiplier=2.0, steps=500, neighboring=REPLACE_ONE)
    assert replace.sensitivity() == 2 * zero.sensitivity()
    assert mx.dp_ftrl_accounting(replace, 1e-5).rho == pytest.approx(4 * mx.dp_ftrl_accounting(zero, 1e-5).rho)
    assert mx.adjacency_factor(REPLACE_ONE) == 2 and mx.adjacency_factor(ZERO_OUT) == 1


def test_rdp_curve_is_gaussian():
    event = mx.DpFtrl(nu=0.0, noise_multiplier=2.5, steps=300)
    curve = rdp.rdp_curve(event)
    alphas = np.array([1.5, 2.0, 10.0, 1e4])
    np.testing.assert_allclose(curve(alphas), alphas * event.gdp_mu() ** 2 / 2, rtol=1e-15)


def test_composition_stays_exact():
    a = mx.DpFtrl(nu=0.0, noise_multiplier=4.0, steps=1000)
    b = mx.DpFtrl(nu=0.1, noise_multiplier=2.0, steps=200, epochs=2)
    acc = Accountant().compose(a, 3).compose(b).compose(ev.Gaussian(noise_multiplier=5.0, neighboring=ZERO_OUT))
    mu = math.sqrt(3 * a.gdp_mu() ** 2 + b.gdp_mu() ** 2 + 1 / 25)
    assert acc.epsilon(1e-5, method=Method.EXACT) == conversions.gdp_epsilon(mu, 1e-5)
    assert acc.epsilon(1e-5) == conversions.gdp_epsilon(mu, 1e-5)
    assert pld.gaussian_mu(ev.SelfComposed(event=a, count=4)) == pytest.approx(2 * a.gdp_mu(), rel=1e-15)
    with pytest.raises(ValueError, match="neighbouring relation"):
        acc.compose(mx.DpFtrl(nu=0.1, noise_multiplier=1.0, steps=10, neighboring=REPLACE_ONE))


def test_noise_multiplier_for_epsilon_never_overshoots():
    for kwargs in ({"nu": 0.05, "steps": 1000}, {"nu": 0.0, "steps": 1000, "epochs": 10, "min_separation": 100}):
        for relation in (ZERO_OUT, REPLACE_ONE):
            sigma = mx.noise_multiplier_for_epsilon(2.0, 1e-5, neighboring=relation, **kwargs)
            event = mx.DpFtrl(noise_multiplier=sigma, neighboring=relation, **kwargs)
            assert conversions.gdp_epsilon(event.gdp_mu(), 1e-5) <= 2.0
            tighter = mx.DpFtrl(noise_multiplier=sigma * (1 - 1e-7), neighboring=relation, **kwargs)
            assert conversions.gdp_epsilon(tighter.gdp_mu(), 1e-5) > 2.0


def test_event_json_round_trip_and_ledger():
    event = mx.DpFtrl(nu=0.05, noise_multiplier=4.0, steps=1000, epochs=10, min_separation=100, neighboring=REPLACE_ONE)
    data = ev.event_to_dict(event)
    assert data["type"] == "DpFtrl" and data["neighboring"] == "replace_one"
    assert ev.event_from_dict(json.loads(json.dumps(data))) == event
    acc = Accountant().compose(event, 2)
    restored = Accountant.from_json(acc.to_json())
    assert restored.ledger == acc.ledger
    assert restored.epsilon(1e-5) == acc.epsilon(1e-5)
    dpa_event = ev.to_dp_accounting(event)
    assert dpa_event.noise_multiplier == pytest.approx(1 / (event.gdp_mu() / 2), rel=1e-15)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"nu": -0.1}, "nu"),
        ({"nu": 1.5}, "nu"),
        ({"nu": True}, "nu"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"noise_multiplier": math.inf}, "noise_multiplier"),
        ({"steps": 0}, "steps"),
        ({"steps": 10.5}, "steps"),
        ({"epochs": 0}, "epochs"),
        ({"epochs": 2000}, "epochs"),
        ({"min_separation": 0}, "min_separation"),
        ({"neighboring": "zero_out"}, "neighboring"),
    ],
)
def test_event_bad_input_names_the_argument(kwargs, name):
    args = {"nu": 0.1, "noise_multiplier": 1.0, "steps": 1000} | kwargs
    with pytest.raises(ValueError, match=name):
        mx.DpFtrl(**args)


def test_functions_bad_input():
    with pytest.raises(ValueError, match="steps must be finite for nu = 0"):
        mx.nu_ftrl_gamma(0.0, math.inf)
    with pytest.raises(ValueError, match="steps"):
        mx.nu_ftrl_gamma(0.1, -3)
    with pytest.raises(ValueError, match="matrix must be lower-triangular"):
        mx.matrix_sensitivity(np.ones((3, 3)))
    with pytest.raises(ValueError, match="nonzero diagonal"):
        mx.matrix_sensitivity(np.tril(np.ones((3, 3))) - np.eye(3))
    with pytest.raises(ValueError, match="kind"):
        mx.matrix_sensitivity(np.eye(3), kind="noising")
    with pytest.raises(ValueError, match="coefficients"):
        mx.inverse_toeplitz_coefficients([0.0, 1.0])
    with pytest.raises(ValueError, match="target_epsilon"):
        mx.noise_multiplier_for_epsilon(0.0, 1e-5, nu=0.1, steps=10)
    with pytest.raises(ValueError, match="neighboring"):
        mx.adjacency_factor("replace_one")


# ------------------------------------------------------------------------------------------------
# Spec and CLI


def _write(tmp_path, body: str):
    path = tmp_path / "spec.toml"
    path.write_text(body)
    return str(path)


def test_spec_builds_the_event():
    spec = parse_spec(
        {"mechanism": [{"type": "dp_ftrl", "nu": 0.05, "noise_multiplier": 4, "steps": 1000, "epochs": 10}]}
    )
    ((event, count),) = spec.entries
    assert event == mx.DpFtrl(nu=0.05, noise_multiplier=4.0, steps=1000, epochs=10) and count == 1
    spec = parse_spec(
        {"neighboring": "replace_one", "mechanism": [{"type": "dp_ftrl", "nu": 0, "noise_multiplier": 4, "steps": 9}]}
    )
    assert spec.entries[0][0].neighboring is REPLACE_ONE


def test_cli_account_gives_the_exact_gdp_epsilon(tmp_path, capsys):
    path = _write(tmp_path, '[[mechanism]]\ntype = "dp_ftrl"\nnu = 0.0\nnoise_multiplier = 1.8\nsteps = 1000\n')
    expected = _exact_gdp_epsilon(mx.nu_ftrl_gamma(0.0, 1000) / 1.8, 1e-5)
    for method in ("best", "exact"):
        assert main(["account", path, "--delta", "1e-5", "--method", method, "--json"]) == 0
        payload = json.loads(capsys.readouterr().out)
        assert payload["method"] == "exact" and payload["neighboring"] == "zero_out"
        assert payload["epsilon"] == pytest.approx(expected, rel=1e-9)
    assert main(["account", path, "--delta", "1e-5", "--method", "rdp", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["epsilon"] > expected
    replace = _write(
        tmp_path,
        '[[mechanism]]\ntype = "dp_ftrl"\nnu = 0.0\nnoise_multiplier = 3.6\nsteps = 1000\n'
        'neighboring = "replace_one"\n',
    )
    assert main(["account", replace, "--delta", "1e-5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["epsilon"] == pytest.approx(expected, rel=1e-9)  # 2γ/3.6 = γ/1.8


def test_cli_calibrate_noise_multiplier(tmp_path, capsys):
    path = _write(tmp_path, '[[mechanism]]\ntype = "dp_ftrl"\nnu = 0.05\nnoise_multiplier = 1.0\nsteps = 1000\n')
    direct = mx.noise_multiplier_for_epsilon(2.0, 1e-5, nu=0.05, steps=1000)
    for method in ("exact", "pld"):
        argv = ["calibrate", path, "--param", "noise_multiplier", "--target-epsilon", "2", "--delta", "1e-5"]
        assert main([*argv, "--method", method, "--json"]) == 0
        payload = json.loads(capsys.readouterr().out)
        assert payload["epsilon"] <= 2.0
        assert payload["value"] == pytest.approx(direct, rel=1e-4 if method == "exact" else 1e-3)


@pytest.mark.parametrize(
    "body, message",
    [
        ("nu = 0.1\nnoise_multiplier = 1\nsteps = 10\nbogus = 1\n", "unknown parameter"),
        ("nu = 0.1\nsteps = 10\n", "noise_multiplier"),
        ("nu = 2\nnoise_multiplier = 1\nsteps = 10\n", "nu must be"),
        ('nu = 0.1\nnoise_multiplier = 1\nsteps = 10\nneighboring = "neighbours"\n', "neighboring"),
        ("nu = 0.1\nnoise_multiplier = 1\nsteps = 10.5\n", "steps must be an integer"),
    ],
)
def test_cli_bad_spec_one_line_exit_2(tmp_path, capsys, body, message):
    path = _write(tmp_path, '[[mechanism]]\ntype = "dp_ftrl"\n' + body)
    assert main(["account", path, "--delta", "1e-5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err
