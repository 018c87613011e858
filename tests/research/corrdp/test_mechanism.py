"""Tests for the CorrDP mechanisms (seed 000: CorrDP Laplace, Def. 2.8 / Thm 2.9; CorrDP-SGD, Alg. 1 / eq. (3))."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats

from dplens.mechanisms.base import Mechanism
from dplens.research.corrdp import accounting as acc
from dplens.research.corrdp import mechanism as mc

TV_C2 = {1: 1 / 3, 2: 0.0}


def c2_mechanism(epsilon: float = 1.0) -> mc.CorrDpLaplaceMechanism:
    return mc.CorrDpLaplaceMechanism(bounds=[1.0, 1.0, 1.0], sensitive=[0], tv=TV_C2, epsilon=epsilon)


def test_protocol_event_and_scale():
    mech = c2_mechanism()
    assert isinstance(mech, Mechanism)
    assert mech.event == acc.CorrDpLaplace(epsilon=1.0)
    assert mech.correlated_sensitivity == pytest.approx(4 / 3, abs=1e-12)  # note C2
    assert mech.scale == pytest.approx(4 / 3, abs=1e-12)
    assert mech.accuracy_bound(beta=0.1) == pytest.approx(4.534930, abs=1e-6)


def test_samples_are_laplace_with_the_stated_scale():
    mech = c2_mechanism()
    data = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    out = mech.sample(data, 20000, np.random.default_rng(1))
    assert out.shape == (20000, 3)
    noise = out - data.sum(axis=0)
    for k in range(3):
        assert stats.kstest(noise[:, k], stats.laplace(scale=mech.scale).cdf).pvalue > 1e-3
    assert mech.release(data, np.random.default_rng(2)).shape == (3,)


def test_accuracy_coverage_monte_carlo():
    """Thm 2.9 bound holds with exact probability (1 − β/K)^K = 0.903296 (note C2)."""
    mech = c2_mechanism()
    data = np.zeros((1, 3))
    n = 40000
    out = mech.sample(data, n, np.random.default_rng(3))
    hits = int(np.sum(np.max(np.abs(out), axis=1) <= mech.accuracy_bound(beta=0.1)))
    p = acc.laplace_accuracy_coverage(dimension=3, beta=0.1)
    assert stats.binomtest(hits, n, p).pvalue > 1e-4
    assert hits / n >= 0.9 - 4 * np.sqrt(0.09 / n)


def test_log_likelihood_ratio_exact():
    mech = c2_mechanism(epsilon=0.7)
    pair = mech.worst_case_pair()
    out = mech.sample(pair.data, 50, np.random.default_rng(4))
    llr = mech.log_likelihood_ratio(out, pair.data, pair.neighbour)
    f0, f1 = mech.query(pair.data), mech.query(pair.neighbour)
    ref = stats.laplace.logpdf(out, f0, mech.scale).sum(1) - stats.laplace.logpdf(out, f1, mech.scale).sum(1)
    np.testing.assert_allclose(llr, ref, atol=1e-10)
    # sensitive change: |LLR| ≤ ε Σ_S Δf_j / Δ_C f ≤ ε (d = 1)
    far = np.array([[-100.0, 0.0, 0.0]])
    bound = 0.7 * 1.0 / (4 / 3)
    assert abs(mech.log_likelihood_ratio(far, pair.data, pair.neighbour)[0]) == pytest.approx(bound, rel=1e-12)
    assert bound <= 0.7


def test_insensitive_change_loss_within_pair_budget():
    """A change of insensitive feature 1 costs ≤ ε Δf_1/Δ_C f ≤ ε/d when d ≤ TV(1) = 1/3 (note §A3)."""
    mech = c2_mechanism(epsilon=1.0)
    d0 = np.zeros((1, 3))
    d1 = d0.copy()
    d1[0, 1] = 1.0
    out = mech.sample(d0, 2000, np.random.default_rng(5))
    llr = np.abs(mech.log_likelihood_ratio(out, d0, d1))
    assert llr.max() <= 1.0 / (4 / 3) + 1e-12
    assert llr.max() <= acc.pair_epsilon(1.0, 1 / 3)


def _exact_table(rho: list[float]) -> np.ndarray:
    """Exact joint law of make_correlated_data's codes for m = 2 m_s, one proxy per sensitive feature."""
    ms = len(rho)
    t = np.zeros((2,) * (2 * ms))
    for codes in itertools.product((0, 1), repeat=2 * ms):
        p = 0.5**ms
        for k, r in enumerate(rho):
            p *= r * (codes[ms + k] == codes[k]) + (1 - r) / 2
        t[codes] = p
    return t


def test_correlated_data_has_the_stated_tv():
    rho = [0.5, 0.3]
    dist = acc.JointDistribution(_exact_table(rho))
    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.CorrelationWarning)  # TV*(j) = TV(j): no understatement
        tvs = acc.feature_tvs(dist, [0, 1])
    assert list(tvs.values()) == pytest.approx(rho, abs=1e-12)
    data = mc.make_correlated_data(
        n=40000,
        num_features=4,
        num_sensitive=2,
        proxy_strength=rho,
        model=mc.LossModel.LOGISTIC,
        rng=np.random.default_rng(6),
    )
    assert data.tv == {2: 0.5, 3: 0.3}
    emp = acc.JointDistribution.from_data(data.codes)
    assert [acc.feature_tv(emp, [0, 1], j) for j in (2, 3)] == pytest.approx(rho, abs=0.03)
    np.testing.assert_allclose(np.linalg.norm(data.features, axis=1), 1.0)


def _run(seed: int, model: mc.LossModel) -> tuple[float, float, mc.SgdResult, mc.SgdResult]:
    rng = np.random.default_rng(seed)
    data = mc.make_correlated_data(
        n=1000, num_features=20, num_sensitive=2, proxy_strength=[0.5, 0.3], model=model, rng=rng
    )
    w = acc.noise_weights(20, data.sensitive, data.tv)
    theta_hat = mc.minimise_loss(data.features, data.labels, model=model, radius=5.0)
    f_hat = mc.empirical_loss(theta_hat, data.features, data.labels, model=model)
    kw = dict(model=model, epsilon=1.0, delta=1e-5, steps=1000, batch_size=50, radius=5.0)
    a = mc.corrdp_sgd(data.features, data.labels, weights=w, rng=np.random.default_rng(100 + seed), **kw)
    b = mc.dp_sgd(data.features, data.labels, rng=np.random.default_rng(100 + seed), **kw)
    risk = lambda r: mc.empirical_loss(r.theta, data.features, data.labels, model=model) - f_hat  # noqa: E731
    return risk(a), risk(b), a, b


@pytest.mark.parametrize("model", [mc.LossModel.LOGISTIC, mc.LossModel.LINEAR])
def test_corrdp_sgd_beats_dp_sgd_with_known_correlation(model):
    """Utility (Thm 3.6 vs the DP-ERM rate): less noise on weakly correlated coordinates → lower excess risk."""
    results = [_run(seed, model) for seed in range(3)]
    corr = np.array([r[0] for r in results])
    plain = np.array([r[1] for r in results])
    assert np.all(corr >= -1e-9) and np.all(plain >= -1e-9)  # θ̂ is (near-)optimal
    assert corr.mean() < plain.mean()
    _, _, a, b = results[0]
    base = acc.base_noise_variance(epsilon=1.0, delta=1e-5, lipschitz=a.lipschitz, steps=1000, n=1000)
    np.testing.assert_allclose(a.noise_std**2, base * a.weights, rtol=1e-12)
    np.testing.assert_allclose(b.noise_std**2, base, rtol=1e-12)
    assert (a.noise_std**2).sum() / (b.noise_std**2).sum() == pytest.approx(2.96 / 20, rel=1e-12)
    assert np.linalg.norm(a.theta) <= 5.0 + 1e-9
    assert a.to_dict()["calibration"].startswith("eq. (3) paper formula")


def test_dp_sgd_is_corrdp_sgd_with_unit_weights():
    data = mc.make_correlated_data(
        n=200,
        num_features=6,
        num_sensitive=2,
        proxy_strength=[0.2],
        model=mc.LossModel.LOGISTIC,
        rng=np.random.default_rng(7),
    )
    kw = dict(model=mc.LossModel.LOGISTIC, epsilon=1.0, delta=1e-5, steps=50, batch_size=20, radius=2.0)
    a = mc.dp_sgd(data.features, data.labels, rng=np.random.default_rng(8), **kw)
    b = mc.corrdp_sgd(data.features, data.labels, weights=np.ones(6), rng=np.random.default_rng(8), **kw)
    np.testing.assert_array_equal(a.theta, b.theta)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mc.CorrDpLaplaceMechanism(bounds=[1, 0], sensitive=[0], tv={1: 0.1}, epsilon=1), "bounds"),
        (lambda: mc.CorrDpLaplaceMechanism(bounds=[1, 1], sensitive=[0], tv={1: 0.1}, epsilon=0), "epsilon"),
        (lambda: c2_mechanism().sample(np.full((1, 3), 2.0), 3, np.random.default_rng(0)), "data"),
        (lambda: c2_mechanism().sample(np.zeros((1, 3)), 0, np.random.default_rng(0)), "n"),
        (lambda: c2_mechanism().sample(np.zeros((1, 3)), 3, 0), "rng"),
        (lambda: mc.empirical_loss(np.zeros(2), np.ones((3, 2)), np.zeros(3), model=mc.LossModel.LINEAR), "norm"),
        (
            lambda: mc.empirical_loss(np.zeros(2), np.zeros((3, 2)), np.full(3, 0.5), model=mc.LossModel.LOGISTIC),
            "labels",
        ),
        (
            lambda: mc.corrdp_sgd(
                np.zeros((3, 2)),
                np.zeros(3),
                model=mc.LossModel.LINEAR,
                weights=[1, 2],
                epsilon=1,
                delta=1e-5,
                steps=1,
                batch_size=1,
                radius=1,
                rng=np.random.default_rng(0),
            ),
            "weights",
        ),
        (
            lambda: mc.corrdp_sgd(
                np.zeros((3, 2)),
                np.zeros(3),
                model=mc.LossModel.LINEAR,
                weights=[1, 1],
                epsilon=1,
                delta=1e-5,
                steps=1,
                batch_size=5,
                radius=1,
                rng=np.random.default_rng(0),
            ),
            "batch_size",
        ),
        (
            lambda: mc.make_correlated_data(
                n=10,
                num_features=3,
                num_sensitive=3,
                proxy_strength=[],
                model=mc.LossModel.LINEAR,
                rng=np.random.default_rng(0),
            ),
            "num_sensitive",
        ),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
