"""Tests for dplens.research.corrdp.accounting (seed 000, note research/corrdp-and-dp-ftrl.md §A6 tests C1–C8)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.research.corrdp import accounting as c

# ------------------------------------------------------------------------------------------------
# Fixtures: the note's distributions


def example_2_5(with_x3: bool = False) -> c.JointDistribution:
    """Example 2.5: X1 | X2 = k ~ Bernoulli(k/3), k ∈ {1, 2} (X2 uniform; code 0 has mass 0)."""
    t = np.zeros((2, 3))
    for k in (1, 2):
        t[1, k] = 0.5 * k / 3
        t[0, k] = 0.5 * (1 - k / 3)
    if with_x3:
        return c.JointDistribution(np.stack([0.3 * t, 0.7 * t], axis=-1), names=("x1", "x2", "x3"))
    return c.JointDistribution(t, names=("x1", "x2"))


def noisy_xor() -> c.JointDistribution:
    """C6: X2, X3 i.i.d. Bernoulli(½); X1 = X2 ⊕ X3 with probability 0.9."""
    t = np.zeros((2, 2, 2))
    for a in range(2):
        for b in range(2):
            x = a ^ b
            t[x, a, b] += 0.25 * 0.9
            t[1 - x, a, b] += 0.25 * 0.1
    return c.JointDistribution(t, names=("x1", "x2", "x3"))


def joint_vs_marginal() -> c.JointDistribution:
    """C7: (X1, X2) uniform on {00, 11} given X3 = 0 and on {01, 10} given X3 = 1."""
    t = np.zeros((2, 2, 2))
    t[0, 0, 0] = t[1, 1, 0] = t[0, 1, 1] = t[1, 0, 1] = 0.25
    return c.JointDistribution(t)


# ------------------------------------------------------------------------------------------------
# C1: Example 2.5


def test_c1_example_2_5_distances():
    dist = example_2_5()
    assert c.tv_distance([1 / 3, 2 / 3], [2 / 3, 1 / 3]) == pytest.approx(1 / 3, abs=1e-12)
    r = c.dataset_distance(dist, ["x1"], [1, 2], [1, 1])
    assert r.distance == pytest.approx(1 / 3, abs=1e-9)
    assert r.argmax_subset == ("x2",)
    assert c.dataset_distance(dist, [0], [1, 2], [0, 1]).distance == 1.0
    assert c.feature_tv(dist, [0], 1) == pytest.approx(1 / 3, abs=1e-9)


def test_conditional_tv_and_identity_equality():
    dist = example_2_5()
    assert c.conditional_tv(dist, ["x1"], {"x2": 2}, {"x2": 1}) == pytest.approx(1 / 3, abs=1e-12)
    assert c.conditional_tv(dist, ["x1"], {"x1": 1}, {"x1": 0}) == 1.0
    assert dist == dist and dist != example_2_5()
    with pytest.raises(ValueError, match="given"):
        c.conditional_tv(dist, ["x1"], {"x2": 0}, {"x2": 1})


def test_c1_extended_with_independent_x3():
    dist = example_2_5(with_x3=True)
    tvs = c.feature_tvs(dist, ["x1"])
    assert tvs["x2"] == pytest.approx(0.333333, abs=1e-6)
    assert tvs["x3"] == pytest.approx(0.0, abs=1e-12)
    assert c.dataset_distance(dist, [0], [1, 2, 0], [1, 1, 0]).distance == pytest.approx(0.333333, abs=1e-6)


def test_d_zero_for_identical_and_independent_change():
    dist = example_2_5(with_x3=True)
    assert c.dataset_distance(dist, [0], [1, 2, 0], [1, 2, 0]).distance == 0.0
    assert c.dataset_distance(dist, [0], [1, 2, 0], [1, 2, 1]).distance == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# C2: correlated sensitivity and Laplace


def test_c2_correlated_sensitivity_both_conventions():
    tv = {1: 1 / 3, 2: 0.0}
    assert c.correlated_sensitivity([1, 1, 1], [0], tv) == pytest.approx(4 / 3, abs=1e-12)
    corr = c.correlated_sensitivity([1, 1, 1], [0], tv, convention=c.NeighbourConvention.CORRDP)
    assert corr == pytest.approx(1.0, abs=1e-12)
    assert c.correlated_sensitivity([1, 1, 1], [0], tv, l1_sensitivity=0.5) == 0.5
    assert c.laplace_scale(4 / 3, 1.0) == pytest.approx(4 / 3, abs=1e-12)


def test_c2_accuracy_bounds_and_coverage():
    assert c.laplace_accuracy_bound(4 / 3, 1.0, dimension=3, beta=0.1) == pytest.approx(4.534930, abs=1e-6)
    assert c.laplace_accuracy_coverage(dimension=3, beta=0.1) == pytest.approx(0.903296, abs=1e-6)
    assert c.laplace_accuracy_bound(1.5, 0.5, dimension=10, beta=0.05) == pytest.approx(15.894952, abs=1e-6)
    assert c.laplace_accuracy_coverage(dimension=10, beta=0.05) == pytest.approx(0.951110, abs=1e-6)


@given(st.integers(1, 50), st.floats(1e-4, 1.0))
def test_coverage_at_least_one_minus_beta(k, beta):
    assert c.laplace_accuracy_coverage(dimension=k, beta=beta) >= 1 - beta - 1e-12


# ------------------------------------------------------------------------------------------------
# C3, C4: eq. (3)


def test_c3_base_variance():
    for n in (10, 1000, 12345):
        v = c.base_noise_variance(epsilon=1, delta=1e-5, lipschitz=1, steps=n**2, n=n)
        assert v == pytest.approx(12.512925, abs=1e-6)
    v = c.base_noise_variance(epsilon=0.5, delta=1e-6, lipschitz=1, steps=1000**2, n=1000)
    assert v == pytest.approx(59.262042, abs=1e-6)
    assert math.sqrt(v) == pytest.approx(7.698184, abs=1e-6)
    v = c.base_noise_variance(epsilon=1, delta=1e-5, lipschitz=1, steps=1000, n=100)
    assert v == pytest.approx(1.2512925, abs=1e-6)


C4_TV = dict(zip(range(2, 10), [0.5, 0.3, 0.1, 0.05, 0.02, 0.0, 1.0, 0.2], strict=True))


def test_c4_weights_and_variances():
    w = c.noise_weights(10, [0, 1], C4_TV)
    np.testing.assert_allclose(w, [1, 1, 0.5, 0.3, 0.1, 0.05, 0.04, 0.04, 1.0, 0.2], atol=1e-12)
    assert w.sum() == pytest.approx(4.23, abs=1e-12)
    var = c.noise_variances(epsilon=1, delta=1e-5, lipschitz=1, steps=1000**2, n=1000, weights=w)
    expected = [12.512925, 12.512925, 6.256463, 3.753878, 1.251293, 0.625646, 0.500517, 0.500517, 12.512925, 2.502585]
    np.testing.assert_allclose(var, expected, atol=1e-6)
    tvs = list(C4_TV.values())
    assert sum(tvs) == pytest.approx(2.17)
    assert c.utility_proxy(tvs, num_sensitive=2) == pytest.approx(4.17, abs=1e-12)
    # vector form gives the same weights
    vec = np.zeros(10)
    vec[2:] = tvs
    np.testing.assert_array_equal(c.noise_weights(10, [0, 1], vec), w)


def test_weights_cap_inflated_estimates():
    w = c.noise_weights(4, [0], {1: 1.7, 2: 0.2, 3: 0.0})
    np.testing.assert_allclose(w, [1.0, 1.0, 0.2, 1 / 16])


@settings(max_examples=60)
@given(
    st.integers(2, 30).flatmap(
        lambda m: st.tuples(st.just(m), st.integers(1, m), st.lists(st.floats(0, 1), min_size=m, max_size=m))
    )
)
def test_weights_in_range(args):
    m, ms, tvs = args
    w = c.noise_weights(m, range(ms), np.asarray(tvs))
    assert np.all(w >= (ms / m) ** 2 - 1e-15) and np.all(w <= 1.0)
    assert np.all(w[:ms] == 1.0)


# ------------------------------------------------------------------------------------------------
# C5: Def. 3.10 inflation


@pytest.mark.parametrize(
    ("c2", "m_u", "delta", "n", "gamma", "expected"),
    [
        (1, 10, 1e-5, 10**4, 0.5, 0.0743384),
        (1, 8, 1e-5, 10**3, 0.5, 0.2331726),
        (0.5, 100, 1e-6, 10**5, 0.5, 0.0135723),
        (1, 10, 1e-5, 10**4, 1 / 3, 0.3450485),
    ],
)
def test_c5_inflation(c2, m_u, delta, n, gamma, expected):
    got = c.paper_tv_inflation(c2=c2, gamma=gamma, num_insensitive=m_u, delta=delta, n=n)
    assert got == pytest.approx(expected, abs=1e-6)


# ------------------------------------------------------------------------------------------------
# C6, C7: TV(j) versus d; joint sensitive law


def test_c6_noisy_xor_gap_and_warning():
    dist = noisy_xor()
    assert c.feature_tv(dist, [0], 1) == pytest.approx(0.0, abs=1e-12)
    assert c.feature_tv(dist, [0], 2) == pytest.approx(0.0, abs=1e-12)
    r = c.dataset_distance(dist, [0], [0, 0, 0], [0, 1, 0])
    assert r.distance == pytest.approx(0.8, abs=1e-9)
    assert r.argmax_subset == ("x2", "x3")
    assert c.conservative_feature_tv(dist, [0], 1) == pytest.approx(0.8, abs=1e-9)
    with pytest.warns(c.CorrelationWarning, match="understates"):
        tvs = c.feature_tvs(dist, [0])
    assert tvs == pytest.approx({"x2": 0.0, "x3": 0.0}, abs=1e-12)
    with pytest.warns(c.CorrelationWarning):
        cons = c.feature_tvs(dist, [0], convention=c.TvConvention.CONSERVATIVE)
    assert cons == pytest.approx({"x2": 0.8, "x3": 0.8}, abs=1e-9)


def test_weights_from_distribution_noisy_xor():
    dist = noisy_xor()
    with pytest.warns(c.CorrelationWarning):
        paper = c.noise_weights_from_distribution(dist, ["x1"])
    np.testing.assert_allclose(paper, [1.0, 1 / 9, 1 / 9])  # TV = 0 → the (m_s/m)² floor
    with pytest.warns(c.CorrelationWarning):
        cons = c.noise_weights_from_distribution(dist, ["x1"], convention=c.TvConvention.CONSERVATIVE)
    np.testing.assert_allclose(cons, [1.0, 0.8, 0.8], atol=1e-9)


def test_no_warning_when_tv_covers_d():
    with warnings.catch_warnings():
        warnings.simplefilter("error", c.CorrelationWarning)
        c.feature_tvs(example_2_5(with_x3=True), [0])


def test_c7_joint_not_marginal():
    dist = joint_vs_marginal()
    assert c.feature_tv(dist, [0, 1], 2) == pytest.approx(1.0, abs=1e-12)
    assert c.feature_tv(dist, [0], 2) == pytest.approx(0.0, abs=1e-12)
    assert c.feature_tv(dist, [1], 2) == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# C8: lower-bound term


def test_c8_lower_bound_term():
    tvs = list(C4_TV.values())
    assert c.lower_bound_term(tvs) == pytest.approx(1.0, abs=1e-12)
    assert c.lower_bound_term([0.5] * 8) == pytest.approx(2.0, abs=1e-12)
    assert sum([0.5] * 8) == 4.0


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_lower_bound_term_below_sum(tvs):
    assert c.lower_bound_term(tvs) <= sum(tvs) + 1e-9


# ------------------------------------------------------------------------------------------------
# Hypothesis: random small joint tables


def _tables():
    return st.lists(st.integers(2, 3), min_size=2, max_size=4).flatmap(
        lambda shape: st.lists(st.floats(0.01, 1.0), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))).map(
            lambda v: np.asarray(v).reshape(shape) / np.sum(v)
        )
    )


@settings(max_examples=40, deadline=None)
@given(_tables(), st.data())
def test_tv_relations_on_random_tables(table, data):
    dist = c.JointDistribution(table)
    m = dist.num_features
    s = data.draw(st.integers(0, m - 2))
    sensitive = [s]
    for j in range(m):
        if j == s:
            continue
        tv = c.feature_tv(dist, sensitive, j)
        tv_star = c.conservative_feature_tv(dist, sensitive, j)
        assert 0.0 <= tv <= 1.0 and 0.0 <= tv_star <= 1.0
        assert tv_star >= tv - 1e-12  # I = {j} is one conditioning set
        # d of any pair differing only in j is between TV given j alone and TV*(j) (full support)
        e = tuple(data.draw(st.integers(0, k - 1)) for k in table.shape)
        v = data.draw(st.integers(0, table.shape[j] - 1))
        e2 = list(e)
        e2[j] = v
        d = c.dataset_distance(dist, sensitive, list(e), e2).distance
        single = c.tv_distance(dist.conditional(sensitive, {j: e[j]}), dist.conditional(sensitive, {j: v}))
        assert single - 1e-12 <= d <= tv_star + 1e-12
        assert d <= 1.0


# ------------------------------------------------------------------------------------------------
# Estimator: plug-in + UCB covers the true TV at the stated rate


def _sample_xor_like(rng, n, rho):
    x1 = rng.integers(0, 2, n)
    x2 = np.where(rng.random(n) < rho, x1, rng.integers(0, 2, n))
    x3 = rng.integers(0, 3, n)
    return np.column_stack([x1, x2, x3])


def test_estimator_ucb_covers_true_tv():
    rho, beta, reps = 0.4, 0.1, 200
    rng = np.random.default_rng(2024)
    failures = 0
    for _ in range(reps):
        est = c.estimate_feature_tvs(_sample_xor_like(rng, 400, rho), [0], beta=beta, num_values=(2, 2, 3))
        true = (rho, 0.0)
        failures += any(u < t for u, t in zip(est.upper, true, strict=True))
        assert all(0 <= x <= 1 for x in est.estimate + est.upper)
    # each run fails w.p. <= beta; P[Binomial(200, 0.1) >= 35] < 1e-3
    assert failures < 35
    d = est.to_dict()
    assert d["kind"] == "estimate" and len(d["tv_upper_confidence"]) == 2


def test_estimator_inflation_shrinks_with_n():
    rng = np.random.default_rng(0)
    small = c.estimate_feature_tvs(_sample_xor_like(rng, 200, 0.4), [0], beta=0.05)
    large = c.estimate_feature_tvs(_sample_xor_like(rng, 20000, 0.4), [0], beta=0.05)
    assert large.inflation[0] < small.inflation[0]
    assert large.estimate[0] == pytest.approx(0.4, abs=0.05)


def test_from_data_is_empirical():
    samples = np.array([[0, 1], [1, 1], [1, 0], [1, 1]])
    dist = c.JointDistribution.from_data(samples, names=("a", "b"))
    np.testing.assert_allclose(dist.table, [[0, 0.25], [0.25, 0.5]])
    assert dist.index("b") == 1


# ------------------------------------------------------------------------------------------------
# Event, pair budget, RDP, spec


def test_pair_epsilon_corrected_reading():
    assert c.pair_epsilon(1.0, 1.0) == 1.0
    assert c.pair_epsilon(1.0, 1 / 3) == pytest.approx(3.0)
    assert c.pair_epsilon(1.0, 0.0) == math.inf


def test_event_roundtrip_and_spec():
    event = c.CorrDpLaplace(epsilon=0.7)
    assert event.neighboring is ev.NeighboringRelation.REPLACE_ONE
    assert ev.event_from_dict(ev.event_to_dict(event)) == event
    built = c.SPEC_TYPES["corrdp_laplace"]({"type": "corrdp_laplace", "epsilon": 0.7, "count": 3})
    assert built == ev.SelfComposed(event=event, count=3)
    with pytest.raises(ValueError, match="epsilon"):
        c.SPEC_TYPES["corrdp_laplace"]({"epsilon": "x"})
    with pytest.raises(ValueError, match="unknown"):
        c.SPEC_TYPES["corrdp_laplace"]({"epsilon": 1.0, "scale": 2})


def test_rdp_equals_laplace_and_is_superadditive_in_shift():
    from dplens.accountant import rdp

    curve = rdp.rdp_curve(c.CorrDpLaplace(epsilon=0.8))
    ref = rdp.rdp_curve(ev.Laplace(noise_multiplier=1 / 0.8))
    alphas = np.array([1.5, 2.0, 10.0, 100.0])
    np.testing.assert_allclose(curve(alphas), ref(alphas), rtol=1e-12)
    # product of Laplace shifts s1 + s2 = s is dominated by the single shift s (docstring argument)
    for a in alphas:
        for s1, s2 in [(0.1, 0.7), (0.4, 0.4), (0.05, 2.0)]:
            g = [rdp.laplace_rdp(np.array([a]), noise_multiplier=1 / s)[0] for s in (s1, s2, s1 + s2)]
            assert g[0] + g[1] <= g[2] + 1e-12


# ------------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: c.JointDistribution(np.array([0.5, 0.6])), "sum to 1"),
        (lambda: c.JointDistribution(np.array([1.5, -0.5])), "non-negative"),
        (lambda: c.JointDistribution(np.array([0.5, 0.5]), names=("a", "b")), "names"),
        (lambda: c.JointDistribution.from_data(np.array([[0.5, 1]])), "integer"),
        (lambda: c.tv_distance([0.5, 0.5], [1.0]), "shape"),
        (lambda: c.dataset_distance(example_2_5(), [0], [1, 0], [1, 1]), "positive probability"),
        (lambda: c.feature_tv(example_2_5(), ["nope"], 1), "feature"),
        (lambda: c.correlated_sensitivity([1, -1], [0], {1: 0.2}), "coordinate_sensitivities"),
        (lambda: c.correlated_sensitivity([1, 1], [0], {1: 1.2}), r"tv\[1\]"),
        (lambda: c.correlated_sensitivity([1, 1, 1], [0], {1: 0.2}), "missing"),
        (lambda: c.laplace_scale(1.0, 0.0), "epsilon"),
        (lambda: c.laplace_accuracy_bound(1.0, 1.0, dimension=0, beta=0.1), "dimension"),
        (lambda: c.laplace_accuracy_bound(1.0, 1.0, dimension=3, beta=1.5), "beta"),
        (lambda: c.base_noise_variance(epsilon=1, delta=0, lipschitz=1, steps=1, n=1), "delta"),
        (lambda: c.noise_weights(3, [5], {1: 0.1}), "sensitive"),
        (lambda: c.noise_weights(3, [], [0, 0, 0]), "sensitive"),
        (lambda: c.paper_tv_inflation(c2=1, gamma=0.7, num_insensitive=3, delta=1e-5, n=10), "gamma"),
        (lambda: c.pair_epsilon(1.0, 1.5), "distance"),
        (lambda: c.CorrDpLaplace(epsilon=-1.0), "epsilon"),
        (lambda: c.estimate_feature_tvs(np.array([[0, 1], [1, 0]]), [0], beta=0.0), "beta"),
        (lambda: c.feature_tvs(noisy_xor(), [0], convention="paper"), "convention"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
