"""Tests for dplens.research.gaussmix.mechanism (seed 004 GaussMix, Algorithm 1, Algorithm 2, logistic surrogate)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dplens.mechanisms.base import Mechanism
from dplens.research.gaussmix import accounting as acc
from dplens.research.gaussmix import mechanism as mech

X_C1 = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])


def _row_covariance_ok(rows: np.ndarray, cov: np.ndarray, z: float = 5.0) -> bool:
    """Empirical second moments of zero-mean rows within z standard errors of cov (Wishart variances)."""
    n = rows.shape[0]
    emp = rows.T @ rows / n
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    return bool(np.all(np.abs(emp - cov) <= z * se))


def test_gaussmix_protocol_and_event():
    g = mech.GaussMix(k=3, sigma=math.sqrt(3.0), row_bound=1.0, lambda_min_bound=1.0)
    assert isinstance(g, Mechanism)
    assert g.event.k == 3 and g.event.gamma == pytest.approx(4.0, rel=1e-15)
    out = g.release(X_C1, np.random.default_rng(0))
    assert out.shape == (3, 2)
    assert not any(name == "S" or "sketch" in name for name in dir(g) if not name.startswith("_"))


def test_release_and_sample_have_the_stated_distribution():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5000, 3))
    x /= np.linalg.norm(x, axis=1).max()
    g = mech.GaussMix(k=20, sigma=1.5, row_bound=1.0)
    cov = x.T @ x + 2.25 * np.eye(3)
    released = np.concatenate([g.release(x, rng) for _ in range(300)])  # S formed in blocks of rows
    assert _row_covariance_ok(released, cov)
    sampled = g.sample(x, 400, rng)
    assert sampled.shape == (400, 20, 3)
    assert _row_covariance_ok(sampled.reshape(-1, 3), cov)


def test_log_likelihood_ratio_matches_scipy_densities():
    g = mech.GaussMix(k=4, sigma=1.2, row_bound=1.0)
    x_n = X_C1.copy()
    x_n[2] = 0.0
    out = g.sample(X_C1, 50, np.random.default_rng(2))
    llr = g.log_likelihood_ratio(out, X_C1, x_n)
    cov, cov_n = X_C1.T @ X_C1 + 1.44 * np.eye(2), x_n.T @ x_n + 1.44 * np.eye(2)
    want = stats.multivariate_normal(np.zeros(2), cov).logpdf(out).sum(axis=1) - stats.multivariate_normal(
        np.zeros(2), cov_n
    ).logpdf(out).sum(axis=1)
    np.testing.assert_allclose(llr, want, rtol=1e-10, atol=1e-10)
    assert g.log_likelihood_ratio(out[0], X_C1, x_n).shape == ()


def test_worst_case_pair_leverages_and_loss_distribution():
    g = mech.GaussMix(k=7, sigma=1.5, row_bound=1.0, lambda_min_bound=2.3)
    gamma = g.event.gamma
    pair = g.worst_case_pair()
    g.prepare(pair.data)
    g.prepare(pair.neighbour)  # both satisfy the public scale bound
    t = acc.ridge_leverage(pair.data, sigma=g.sigma)[0]
    assert t == pytest.approx(1 / (gamma + 1), rel=1e-12)
    x = pair.neighbour
    s = float(pair.data[0] @ np.linalg.solve(x.T @ x + g.sigma**2 * np.eye(1), pair.data[0]))
    assert s == pytest.approx(1 / gamma, rel=1e-12)
    # The LLR is the affine chi-square loss of the exact profile.
    out = g.sample(pair.data, 1000, np.random.default_rng(3))
    w = (out[..., 0] ** 2).sum(axis=1) / (pair.data.T @ pair.data + g.sigma**2)[0, 0]
    np.testing.assert_allclose(
        g.log_likelihood_ratio(out, pair.data, pair.neighbour),
        t / (2 * (1 - t)) * w + 0.5 * g.k * math.log1p(-t),
        rtol=1e-9,
    )


def test_input_validation_and_clipping():
    g = mech.GaussMix(k=2, sigma=1.5, row_bound=1.0)
    rng = np.random.default_rng(4)
    bad = np.array([[3.0, 4.0], [0.1, 0.1]])
    with pytest.raises(ValueError, match="row 0 has norm"):
        g.release(bad, rng)
    clipped = mech.GaussMix(k=2, sigma=1.5, row_bound=1.0, clip=True)
    np.testing.assert_allclose(clipped.prepare(bad)[0], [0.6, 0.8])
    with pytest.raises(ValueError, match="lambda_min"):
        mech.GaussMix(k=2, sigma=1.0, row_bound=1.0, lambda_min_bound=5.0).release(X_C1, rng)
    with pytest.raises(ValueError, match="rng"):
        g.release(X_C1, 0)
    with pytest.raises(ValueError, match="n must be"):
        g.sample(X_C1, 0, rng)
    with pytest.raises(ValueError, match="2-D"):
        g.release(np.ones(3), rng)
    with pytest.raises(ValueError, match="> 1"):
        mech.GaussMix(k=2, sigma=0.5, row_bound=1.0)
    with pytest.raises(ValueError, match="outputs"):
        g.log_likelihood_ratio(np.ones((5, 2)), X_C1, X_C1)


def test_modified_gaussmix_variances_and_guarantee():
    m = mech.ModifiedGaussMix(k=5, gamma=30.0, eta=2.0, delta=1e-5, row_bound=1.0)
    assert m.tau == pytest.approx(math.sqrt(2 * math.log(3e5)))
    assert m.event == acc.ModifiedGaussMix(k=5, gamma=30.0, eta=2.0)
    assert m.epsilon() == acc.theorem1_epsilon(eta=2.0, gamma=30.0, k=5, delta=1e-5).epsilon
    rng = np.random.default_rng(5)
    x = rng.normal(size=(400, 3))
    x /= np.linalg.norm(x, axis=1).max()
    lam = float(np.linalg.eigvalsh(x.T @ x)[0])
    z = np.linspace(-6, m.tau, 200)
    v = m._variances(x, z)
    # Theorem 1's event: for z <= tau, lambda_min + noise variance >= gamma C^2 (App. D, unit-fixed).
    assert np.all(lam + v >= 30.0 * (1 - 1e-12))
    # gamma <= tau branch: variance gamma C^2 (paper prints gamma C as the std: notes §3 (a)).
    small = mech.ModifiedGaussMix(k=5, gamma=3.0, eta=2.0, delta=1e-5, row_bound=2.0)
    assert np.all(small._variances(x, z) == 3.0 * 4.0)
    out = m.sample(x, 200, rng)
    assert out.shape == (200, 5, 3)
    assert m.release(x, rng).shape == (5, 3)
    pair = m.worst_case_pair()
    assert pair.data.shape[1] == 1 and np.all(pair.neighbour[0] == 0)


def test_modified_sample_matches_release_distribution():
    """Both paths draw z, then rows N(0, X^T X + v I): compare the mean squared output entry."""
    m = mech.ModifiedGaussMix(k=4, gamma=50.0, eta=3.0, delta=1e-5, row_bound=1.0)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(300, 2))
    x /= np.linalg.norm(x, axis=1).max()
    rel = np.stack([m.release(x, rng) for _ in range(1500)])
    smp = m.sample(x, 1500, rng)
    a, b = (rel**2).mean(axis=(1, 2)), (smp**2).mean(axis=(1, 2))
    assert abs(a.mean() - b.mean()) <= 5 * math.sqrt(a.var() / a.size + b.var() / b.size)


def _regression_data(rng, n=3000, d=3):
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1).max()
    theta = np.array([1.0, -1.0, 0.5])[:d]
    y = x @ theta + 0.01 * rng.uniform(-1, 1, size=n)
    y /= np.abs(y).max()
    return x, y


def test_linear_mixing_algorithm2():
    rng = np.random.default_rng(7)
    x, y = _regression_data(rng)
    lm = mech.LinearMixing(epsilon=2.0, delta=1e-6, k=40, x_bound=1.0, y_bound=1.0)
    assert lm.gamma == acc.calibrate_gamma_linear_mixing(2.0, 1e-6, k=40)
    assert lm.event == acc.ModifiedGaussMix(k=40, gamma=lm.gamma, eta=lm.gamma / math.sqrt(40))
    assert lm._inner.row_bound == pytest.approx(math.sqrt(2.0))
    theta = lm.release((x, y), rng)
    ols = np.linalg.lstsq(x, y, rcond=None)[0]
    thetas = lm.sample((x, y), 300, rng)
    assert thetas.shape == (300, 3) and theta.shape == (3,)
    # lambda_min([X, y]^T [X, y]) ~ 0 here, so Algorithm 1 adds variance ~ gamma C^2 to both blocks: the
    # sketched normal equations concentrate on ridge regression with nu = gamma C^2 (paper App. F).
    nu = lm.gamma * 2.0
    ridge = np.linalg.solve(x.T @ x + nu * np.eye(3), x.T @ y)
    assert np.linalg.norm(np.median(thetas, axis=0) - ridge) < 0.1 * np.linalg.norm(ridge)
    assert np.linalg.norm(ridge) < np.linalg.norm(ols)
    exact = mech.LinearMixing(epsilon=2.0, delta=1e-6, k=40, x_bound=1.0, y_bound=1.0, route=acc.AccountingRoute.EXACT)
    assert exact.gamma < lm.gamma


def test_linear_mixing_validation():
    rng = np.random.default_rng(8)
    x, y = _regression_data(rng, n=50)
    lm = mech.LinearMixing(epsilon=1.0, delta=1e-6, k=10, x_bound=1.0, y_bound=0.5)
    with pytest.raises(ValueError, match="y_bound"):
        lm.release((x, y), rng)
    assert lm.release((x, 0.5 * y), rng).shape == (3,)
    clipping = mech.LinearMixing(epsilon=1.0, delta=1e-6, k=10, x_bound=1.0, y_bound=0.5, clip=True)
    assert clipping.release((x, y), rng).shape == (3,)
    with pytest.raises(ValueError, match="n >= d"):
        lm.release((x[:2], 0.5 * y[:2]), rng)
    with pytest.raises(ValueError, match="pair"):
        lm.release(x, rng)
    with pytest.raises(ValueError, match="X row"):
        lm.release((2 * x, 0.5 * y), rng)
    with pytest.raises(ValueError, match="x_bound"):
        mech.LinearMixing(epsilon=1.0, delta=1e-6, k=10, x_bound=0.0, y_bound=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        mech.LinearMixing(epsilon=0.0, delta=1e-6, k=10, x_bound=1.0, y_bound=1.0)
    pair = lm.worst_case_pair()
    lm.concatenate(pair.data)
    lm.concatenate(pair.neighbour)


@pytest.mark.parametrize(("q", "b2", "scale"), [(6.0, -0.0707574661, 3.5331960549), (4.0, -0.0891437374, 2.8044594863)])
def test_quadratic_surrogate(q, b2, scale):
    b0, b1, got_b2 = mech.quadratic_logistic_surrogate(q)
    assert b0 == pytest.approx(-math.log(2))
    assert b1 == pytest.approx(0.5, rel=1e-14)
    assert got_b2 == pytest.approx(b2, abs=1e-10)
    assert -b1 / (2 * got_b2) == pytest.approx(scale, abs=1e-10)
    s = np.linspace(-q, q, 2001)
    err = np.abs(-np.logaddexp(0, -s) - (b0 + b1 * s + got_b2 * s**2)).max()
    assert err == pytest.approx({6.0: 0.238, 4.0: 0.101}[q], abs=2e-3)


def test_logistic_mixing_classifies():
    rng = np.random.default_rng(9)
    n, d = 4000, 3
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1).max()
    y01 = (x @ np.array([1.0, -1.0, 0.5]) + 0.05 * rng.normal(size=n) > 0).astype(float)
    y = mech.LogisticMixing.labels_from_binary(y01)
    model = mech.LogisticMixing(epsilon=4.0, delta=1e-6, k=60, x_bound=1.0)
    thetas = model.sample((x, y), 50, rng)
    accuracy = np.mean(np.sign(x @ np.median(thetas, axis=0)) == y)
    assert accuracy > 0.9
    assert model.release((x, y), rng).shape == (3,)
    with pytest.raises(ValueError, match="labels"):
        model.release((x, y01 + 1), rng)
    pair = model.worst_case_pair()
    assert pair.data[1][0] == 1 and pair.neighbour[1][0] == 0


def test_sampled_worst_case_pair_matches_exact_profile():
    """Monte Carlo via sample + log_likelihood_ratio on the worst-case pair vs the exact chi-square profile.

    The pair has removal leverage t = 1/(gamma+1) and addition leverage s = 1/gamma (both data sets satisfy
    the scale bound), so delta_remove(eps; t) and delta_add(eps; s) must match the estimates.
    """
    g = mech.GaussMix(k=5, sigma=math.sqrt(2.0), row_bound=1.0, lambda_min_bound=1.0)  # gamma = 3
    gamma = g.event.gamma
    pair = g.worst_case_pair()
    rng = np.random.default_rng(11)
    n = 400_000
    out_p = g.sample(pair.data, n, rng)
    llr_p = g.log_likelihood_ratio(out_p, pair.data, pair.neighbour)
    out_q = g.sample(pair.neighbour, n, rng)
    llr_q = g.log_likelihood_ratio(out_q, pair.neighbour, pair.data)
    for eps in (0.1, 0.4):
        terms = np.maximum(0.0, -np.expm1(eps - llr_p))  # E_P[(1 - e^{eps - L})_+]
        exact = float(acc.exact_delta_remove(eps, k=5, t=1 / (gamma + 1)))
        assert abs(terms.mean() - exact) <= 4 * terms.std() / math.sqrt(n)
        terms = np.maximum(0.0, -np.expm1(eps - llr_q))
        exact = float(acc.exact_delta_add(eps, k=5, s=1 / gamma))
        assert abs(terms.mean() - exact) <= 4 * terms.std() / math.sqrt(n)
        # the accountant's profile (t = s = 1/gamma) dominates this pair in both directions
        reported = acc.gaussmix_privacy_profile(g.event).delta(eps)
        assert float(acc.exact_delta_remove(eps, k=5, t=1 / (gamma + 1))) <= reported
        assert exact <= reported
