"""Tests for the DP-FTRL mechanisms (seed 001): noise generators, the 1-D quadratic oracle (note §B4, F7), the matrix
mechanism's exact likelihood ratio, and DP-FTRL vs DP-SGD on linear regression."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant
from dplens.mechanisms.base import Mechanism
from dplens.research.dp_ftrl import accounting as mx
from dplens.research.dp_ftrl import mechanism as f


def _dense_noising(beta: np.ndarray) -> np.ndarray:
    steps = beta.size
    return np.array([[beta[i - j] if i >= j else 0.0 for j in range(steps)] for i in range(steps)])


# ------------------------------------------------------------------------------------------------
# Generators


@pytest.mark.parametrize("nu", [0.0, 0.05, 0.5, 1.0])
def test_fft_generator_is_the_toeplitz_product(nu):
    rng = np.random.default_rng(11)
    white = rng.standard_normal((300, 3))
    dense = _dense_noising(mx.noising_coefficients(nu, 300))
    np.testing.assert_allclose(f.correlate(white, nu=nu), dense @ white, atol=1e-12)
    np.testing.assert_allclose(f.correlate(white[:, 0], nu=nu), dense @ white[:, 0], atol=1e-12)
    np.testing.assert_allclose(f.decorrelate(f.correlate(white, nu=nu), nu=nu), white, atol=1e-12)
    z = f.correlated_noise(nu, 300, dim=3, noise_std=2.0, rng=np.random.default_rng(5))
    np.testing.assert_allclose(z, dense @ (2.0 * np.random.default_rng(5).standard_normal((300, 3))), atol=1e-12)


def test_custom_coefficients():
    beta = np.array([1.0, -0.5, 0.25])
    white = np.random.default_rng(0).standard_normal(50)
    padded = np.zeros(50)
    padded[:3] = beta
    np.testing.assert_allclose(f.correlate(white, coefficients=beta), _dense_noising(padded) @ white, atol=1e-13)
    with pytest.raises(ValueError, match="exactly one of nu or coefficients"):
        f.correlate(white, nu=0.1, coefficients=beta)


@pytest.mark.parametrize("nu, dim", [(0.0, 2), (0.3, 1)])
def test_stream_equals_batch(nu, dim):
    steps = 3001  # crosses the dyadic levels 256 … 2048
    batch = f.correlated_noise(nu, steps, dim=dim, noise_std=1.5, rng=np.random.default_rng(7))
    stream = f.CorrelatedNoiseStream(nu, dim=dim, noise_std=1.5, rng=np.random.default_rng(7))
    sizes = [1, 5, 300, 1, 1024, 700]
    parts = [stream.next(s) for s in sizes]
    parts.append(stream.next(steps - sum(sizes)))
    assert stream.steps_returned == steps
    np.testing.assert_allclose(np.vstack(parts), batch, atol=1e-11)


def test_generator_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="rng"):
        f.correlated_noise(0.1, 10, rng=None)
    with pytest.raises(ValueError, match="steps"):
        f.correlated_noise(0.1, 0, rng=rng)
    with pytest.raises(ValueError, match="noise_std"):
        f.correlated_noise(0.1, 10, noise_std=-1.0, rng=rng)
    with pytest.raises(ValueError, match="nu"):
        f.CorrelatedNoiseStream(1.2, rng=rng)
    with pytest.raises(ValueError, match="white"):
        f.correlate(np.zeros((0, 2)), nu=0.1)


# ------------------------------------------------------------------------------------------------
# 1-D quadratic: stationary variance η²σ²γ_∞² (acceptance), F7


def test_f7_reference_values():
    eta = 0.1
    v_ftrl = f.stationary_variance(nu=0.1, curvature=1.0, learning_rate=eta)
    v_sgd = f.stationary_variance(nu=1.0, curvature=1.0, learning_rate=eta)
    assert v_ftrl == pytest.approx(0.01451843, abs=1e-8)
    assert v_sgd == pytest.approx(0.05263158, abs=1e-8)
    gamma = mx.gamma_infinity(0.1)
    # ρ-calibrated ratio (σ_FTRL = γ_∞ σ_SGD): η(2 − η)γ_∞⁴
    assert v_ftrl * gamma**2 / v_sgd == pytest.approx(0.400491, abs=1e-6)
    assert eta * (2 - eta) * gamma**4 == pytest.approx(0.400491, abs=1e-6)


@pytest.mark.parametrize("nu, lam, eta", [(0.1, 1.0, 0.1), (0.02, 0.5, 0.04), (0.3, 2.0, 0.3), (0.0, 1.0, 0.1)])
def test_stationary_variance_integral_matches_closed_forms_and_autocovariance(nu, lam, eta):
    numeric = f.stationary_variance(nu=nu * (1 + 1e-9) if nu else 0.0, curvature=lam, learning_rate=eta)
    if nu == eta * lam:
        assert numeric == pytest.approx(eta**2 * mx.gamma_infinity(nu) ** 2, rel=1e-7)
    auto = f.stationary_autocovariance(nu=nu, curvature=lam, learning_rate=eta)
    assert auto[0] == pytest.approx(f.stationary_variance(nu=nu, curvature=lam, learning_rate=eta), rel=1e-5)
    sgd = f.stationary_variance(nu=1.0, curvature=lam, learning_rate=eta)
    assert sgd == pytest.approx(eta / (lam * (2 - eta * lam)), rel=1e-14)
    assert f.stationary_autocovariance(nu=1.0, curvature=lam, learning_rate=eta)[0] == pytest.approx(sgd, rel=1e-12)


@pytest.mark.parametrize("nu", [0.1, 1.0])
def test_simulated_stationary_variance_matches_eta2_gamma_inf2(nu):
    """Acceptance: θ_{t+1} = (1 − ηλ)θ_t − η z_t with z = B w, w ~ N(0, 1), and ν = ηλ = 0.1.

    B(z)/(1 − (1 − ν)z) = (1 − (1 − ν)z)^{−1/2}, so θ_{t+1} = −η Σ_k c^ν_k w_{t−k} and the stationary variance is
    η² Σ_k (c^ν_k)² = η² γ_∞² = η² (2/π) K((1 − ν)²) (for ν = 1, DP-SGD: η/(λ(2 − ηλ))). The time average of θ_t²
    over N = 10⁶ stationary steps has standard error √((2/N) Σ_h (1 − |h|/N) r(h)²) (Isserlis), r the exact
    autocovariance; we require agreement within 4 standard errors, and the standard error itself is < 1 %.
    """
    eta, lam, burn, n = 0.1, 1.0, 2_000, 1_000_000
    theta = f.simulate_quadratic(
        nu=nu, curvature=lam, learning_rate=eta, steps=burn + n, rng=np.random.default_rng(2024)
    )
    estimate = float(np.mean(theta[burn:] ** 2))
    expected = eta**2 * mx.gamma_infinity(0.1) ** 2 if nu == 0.1 else eta / (lam * (2 - eta * lam))
    se = f.stationary_variance_standard_error(nu=nu, curvature=lam, learning_rate=eta, samples=n)
    assert se < 0.01 * expected
    assert abs(estimate - expected) <= 4 * se
    # Discriminating: the independent-noise variance (or the correlated one) lies many standard errors away.
    other = eta / (lam * (2 - eta * lam)) if nu == 0.1 else eta**2 * mx.gamma_infinity(0.1) ** 2
    assert abs(estimate - other) > 50 * se


def test_quadratic_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="learning_rate \\* curvature"):
        f.simulate_quadratic(nu=0.1, curvature=10.0, learning_rate=0.5, steps=10, rng=rng)
    with pytest.raises(ValueError, match="curvature"):
        f.stationary_variance(nu=0.1, curvature=0.0, learning_rate=0.1)


# ------------------------------------------------------------------------------------------------
# The matrix mechanism: exact LLR is N(μ²/2, μ²) with the accountant's μ


@pytest.mark.parametrize(
    "relation, epochs, sep",
    [(ev.NeighboringRelation.REPLACE_SPECIAL, 4, 50), (ev.NeighboringRelation.REPLACE_ONE, None, None)],
)
def test_matrix_mechanism_llr_matches_the_accountant(relation, epochs, sep):
    mech = f.MatrixMechanism(
        nu=0.0, noise_multiplier=3.0, steps=200, epochs=epochs, min_separation=sep, neighboring=relation, clip_norm=0.5
    )
    assert isinstance(mech, Mechanism)
    pair = mech.worst_case_pair()
    # The worst-case pair attains the accountant's sensitivity exactly.
    shift = np.linalg.norm(f.decorrelate(pair.data - pair.neighbour, nu=0.0)) / mech.noise_std
    mu = mech.event.gdp_mu()
    assert shift == pytest.approx(mu, rel=1e-9)
    n = 20_000
    llr = mech.log_likelihood_ratio(mech.sample(pair.data, n, np.random.default_rng(3)), pair.data, pair.neighbour)
    assert abs(llr.mean() - mu**2 / 2) <= 4 * mu / math.sqrt(n)
    assert abs(llr.var() - mu**2) <= 4 * mu**2 * math.sqrt(2 / n)
    assert mech.release(pair.data, np.random.default_rng(0)).shape == (200, 1)


def test_matrix_mechanism_bad_input():
    mech = f.MatrixMechanism(nu=0.1, noise_multiplier=1.0, steps=10)
    with pytest.raises(ValueError, match="data"):
        mech.sample(np.zeros(11), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="outputs"):
        mech.log_likelihood_ratio(np.zeros((2, 9, 1)), np.zeros(10), np.zeros(10))


# ------------------------------------------------------------------------------------------------
# Linear regression: DP-FTRL vs DP-SGD at equal ε


def test_train_linear_regression_events_and_utility():
    data = f.make_linear_regression(1000, 16, rng=np.random.default_rng(0))
    delta, epsilon, epochs, batch = 1e-5, 2.0, 5, 10
    steps = epochs * (1000 // batch)
    sep = 1000 // batch
    risks = {}
    for nu in (1.0, 0.02):
        sigma = mx.noise_multiplier_for_epsilon(epsilon, delta, nu=nu, steps=steps, epochs=epochs, min_separation=sep)
        runs = [
            f.train_linear_regression(
                data,
                nu=nu,
                noise_multiplier=sigma,
                clip_norm=1.0,
                learning_rate=0.05,
                batch_size=batch,
                epochs=epochs,
                rng=np.random.default_rng(seed),
            )
            for seed in range(4)
        ]
        event = runs[0].event
        assert event == mx.DpFtrl(nu=nu, noise_multiplier=sigma, steps=steps, epochs=epochs, min_separation=sep)
        eps = Accountant().compose(event).epsilon(delta)
        assert epsilon * (1 - 1e-6) <= eps <= epsilon
        risks[nu] = np.mean([f.excess_risk(r.theta, data) for r in runs])
    # The paper's claim at equal privacy: correlated noise gives lower error (here by more than 2x).
    assert risks[0.02] < 0.5 * risks[1.0]


def test_poisson_dp_sgd_event():
    data = f.make_linear_regression(200, 4, rng=np.random.default_rng(1))
    result = f.train_linear_regression(
        data,
        nu=1.0,
        noise_multiplier=1.0,
        clip_norm=1.0,
        learning_rate=0.1,
        batch_size=20,
        epochs=2,
        rng=np.random.default_rng(0),
        sampling=f.Sampling.POISSON,
        neighboring=ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    )
    assert result.count == 20 and result.event == ev.PoissonSampled(
        sampling_rate=0.1, event=ev.Gaussian(noise_multiplier=1.0)
    )
    assert result.to_dict()["event"]["type"] == "PoissonSampled"
    with pytest.raises(ValueError, match="nu must be 1 with POISSON"):
        f.train_linear_regression(
            data,
            nu=0.5,
            noise_multiplier=1.0,
            clip_norm=1.0,
            learning_rate=0.1,
            batch_size=20,
            epochs=1,
            rng=np.random.default_rng(0),
            sampling=f.Sampling.POISSON,
        )


def test_excess_risk_and_data():
    data = f.make_linear_regression(500, 8, rng=np.random.default_rng(3), eigenvalue_decay=1.0, label_noise=0.0)
    np.testing.assert_allclose(data.minimiser, data.theta_star, atol=1e-10)  # noiseless labels
    assert f.excess_risk(data.theta_star, data) == pytest.approx(0.0, abs=1e-20)
    # F(0) − F(θ*) = ½ θ*ᵀ Ĥ θ* with the empirical second moment Ĥ
    h_hat = data.features.T @ data.features / data.n
    assert f.excess_risk(np.zeros(8), data) == pytest.approx(0.5 * data.theta_star @ h_hat @ data.theta_star, rel=1e-12)
    with pytest.raises(ValueError, match="theta"):
        f.excess_risk(np.zeros(3), data)
    with pytest.raises(ValueError, match="batch_size"):
        f.train_linear_regression(
            data,
            nu=0.1,
            noise_multiplier=1.0,
            clip_norm=1.0,
            learning_rate=0.1,
            batch_size=600,
            epochs=1,
            rng=np.random.default_rng(0),
        )


def test_matrix_mechanism_repr_is_stable_for_checkpoints():
    # Audits fingerprint checkpoints with repr(mechanism): it must not carry a memory address.
    first = f.MatrixMechanism(nu=0.05, noise_multiplier=4.0, steps=100, epochs=2, min_separation=50)
    second = f.MatrixMechanism(nu=0.05, noise_multiplier=4.0, steps=100, epochs=2, min_separation=50)
    assert repr(first) == repr(second)
    assert "0x" not in repr(first) and "nu=0.05" in repr(first)
