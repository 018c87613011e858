"""Audit statistics: Clopper–Pearson bounds (mpmath oracles), ε lower bounds in both directions, the
measurability ceiling (auditing-anchors §5.4), threshold strategies and the multiplicity correction."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dplens.auditing import bounds as bd


@pytest.fixture(autouse=True)
def _mpmath_digits():
    """The mpmath oracles' precision, set for each test (60 digits): it is process-wide state, and a module-level
    setting lasts only until another module's test changes it (a shuffled run caught this)."""
    with mpmath.workdps(60):
        yield


def _binomial_cdf(k: int, n: int, p: float) -> mpmath.mpf:
    """P[Bin(n, p) ≤ k] by the regularised incomplete beta function at 60 digits."""
    p = mpmath.mpf(p)
    return mpmath.betainc(n - k, k + 1, 0, 1 - p, regularized=True)


# --------------------------------------------------------------------------------------------
# Clopper–Pearson
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "alpha"),
    [(0, 10, 0.05), (3, 10, 0.05), (1, 10**6, 0.025), (7, 10**7, 1e-4), (500, 1000, 0.05), (999, 1000, 0.01)],
)
def test_clopper_pearson_upper_solves_the_binomial_tail_equation(k, n, alpha):
    upper = float(bd.clopper_pearson_upper(k, n, alpha))
    # Definition: P[Bin(n, p_u) ≤ k] = α, to full relative precision even for p_u ~ 1e-7.
    assert float(_binomial_cdf(k, n, upper)) == pytest.approx(alpha, rel=1e-8)


@pytest.mark.parametrize(("k", "n", "alpha"), [(1, 10, 0.05), (3, 10**6, 0.025), (999, 1000, 0.05), (5, 5000, 1e-6)])
def test_clopper_pearson_lower_solves_the_binomial_tail_equation(k, n, alpha):
    lower = float(bd.clopper_pearson_lower(k, n, alpha))
    # P[Bin(n, p_l) ≥ k] = 1 − P[Bin(n, p_l) ≤ k − 1] = α.
    assert float(1 - _binomial_cdf(k - 1, n, lower)) == pytest.approx(alpha, rel=1e-8)


def test_clopper_pearson_edges():
    assert float(bd.clopper_pearson_upper(10, 10, 0.05)) == 1.0
    assert float(bd.clopper_pearson_lower(0, 10, 0.05)) == 0.0
    assert float(bd.clopper_pearson_upper(0, 10**7, 0.025)) == pytest.approx(-math.expm1(math.log(0.025) / 1e7))
    assert float(bd.clopper_pearson_lower(10, 10, 0.05)) == pytest.approx(0.05 ** (1 / 10))
    # scipy's beta quantile agrees where it is accurate.
    assert float(bd.clopper_pearson_upper(40, 1000, 0.05)) == pytest.approx(stats.beta.ppf(0.95, 41, 960), rel=1e-10)


def test_clopper_pearson_is_vectorised_with_per_element_levels():
    k = np.array([0, 5, 50])
    levels = np.array([0.01, 0.02, 0.05])
    upper = bd.clopper_pearson_upper(k, 100, levels)
    assert upper.shape == (3,)
    for i in range(3):
        assert upper[i] == pytest.approx(float(bd.clopper_pearson_upper(int(k[i]), 100, float(levels[i]))))


def test_clopper_pearson_coverage_by_simulation():
    # The one-sided upper bound misses the true p with probability at most α (exact test: usually less).
    rng = np.random.default_rng(11)
    p, n, alpha = 0.03, 400, 0.1
    k = rng.binomial(n, p, size=20_000)
    misses = np.mean(bd.clopper_pearson_upper(k, n, alpha) < p)
    assert misses <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / k.size)
    lower_misses = np.mean(bd.clopper_pearson_lower(k, n, alpha) > p)
    assert lower_misses <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / k.size)


@given(
    n=st.integers(1, 10**6),
    fraction=st.floats(0, 1),
    alpha=st.floats(1e-6, 0.5),
)
@settings(max_examples=200, deadline=None)
def test_clopper_pearson_brackets_the_rate(n, fraction, alpha):
    k = round(fraction * n)
    lower = float(bd.clopper_pearson_lower(k, n, alpha))
    upper = float(bd.clopper_pearson_upper(k, n, alpha))
    assert 0.0 <= lower <= k / n <= upper <= 1.0
    # A smaller significance (higher confidence) gives a wider interval.
    assert float(bd.clopper_pearson_upper(k, n, alpha / 10)) >= upper


@pytest.mark.parametrize(
    ("successes", "trials", "significance"),
    [(-1, 10, 0.05), (11, 10, 0.05), (1, 0, 0.05), (1.5, 10, 0.05), (1, 10, 0.0), (1, 10, 1.0), (1, 10, math.nan)],
)
def test_clopper_pearson_rejects_bad_input(successes, trials, significance):
    with pytest.raises(ValueError, match=r"successes|trials|counts|significance"):
        bd.clopper_pearson_upper(successes, trials, significance)


# --------------------------------------------------------------------------------------------
# ε lower bounds and the ceiling
# --------------------------------------------------------------------------------------------


def test_epsilon_lower_bounds_are_the_hypothesis_testing_inequalities():
    fpr, fnr, delta = 0.01, 0.5, 1e-5
    forward, reverse = bd.epsilon_lower_bounds(fpr, fnr, delta)
    assert float(forward) == pytest.approx(math.log((1 - delta - fnr) / fpr), rel=1e-12)
    assert float(reverse) == pytest.approx(math.log((1 - delta - fpr) / fnr), rel=1e-12)
    # The directions are separate statistics: swapping the rates swaps them (no absolute value anywhere).
    swapped = bd.epsilon_lower_bounds(fnr, fpr, delta)
    assert float(swapped[0]) == pytest.approx(float(reverse))
    assert float(swapped[1]) == pytest.approx(float(forward))


def test_epsilon_lower_bounds_with_no_room_are_minus_infinity():
    forward, reverse = bd.epsilon_lower_bounds(1.0, 1.0, 0.0)
    assert forward == -np.inf and reverse == -np.inf
    # A zero rate facing a certain error is no evidence either (−∞ − (−∞) is not a number, not a bound).
    forward, _ = bd.epsilon_lower_bounds(0.0, 1.0, 0.0)
    assert forward == -np.inf


def test_null_rates_give_no_evidence_in_either_direction():
    # The jax_privacy PR #270 bug: abs() of a one-sided statistic reported ε ≈ 3.5 on null scores.
    forward, reverse = bd.epsilon_lower_bounds(0.6, 0.6, 0.0)
    assert forward < 0 and reverse < 0
    mu_forward, mu_reverse = bd.gdp_mu_lower_bounds(0.6, 0.6)
    assert mu_forward < 0 and mu_reverse < 0


def test_gdp_mu_lower_bound_inverts_the_gaussian_trade_off():
    mu = 1.3
    fpr = np.array([0.01, 0.1, 0.3])
    fnr = stats.norm.cdf(stats.norm.isf(fpr) - mu)  # exactly on G_μ
    forward, _ = bd.gdp_mu_lower_bounds(fpr, fnr)
    np.testing.assert_allclose(forward, mu, rtol=1e-10)


# §5.4 of the auditing notes: ε_max(N) with a perfect attack at 95 % (and 99 %) confidence.
CEILING_95 = {100: 3.28, 1_000: 5.60, 10_000: 7.91, 100_000: 10.21, 1_000_000: 12.51, 10_000_000: 14.81}


@pytest.mark.parametrize(("trials", "expected"), sorted(CEILING_95.items()))
def test_measurability_ceiling_matches_the_notes(trials, expected):
    assert bd.measurability_ceiling(trials, 0.05) == pytest.approx(expected, abs=1e-2)  # table rounded to 0.01
    # ≈ ln(N / ln(2/α))
    assert bd.measurability_ceiling(trials, 0.05) == pytest.approx(math.log(trials / math.log(2 / 0.05)), abs=0.03)


@pytest.mark.parametrize(("trials", "expected"), [(1_000, 5.24), (1_000_000, 12.15)])
def test_measurability_ceiling_at_99_percent(trials, expected):
    assert bd.measurability_ceiling(trials, 0.01) == pytest.approx(expected, abs=5e-3)


def test_ceiling_shrinks_with_multiplicity_and_delta():
    base = bd.measurability_ceiling(10_000, 0.05)
    assert bd.measurability_ceiling(10_000, 0.05, share=1 / 201) < base
    assert bd.measurability_ceiling(10_000, 0.05, delta=0.1) < base
    with pytest.raises(ValueError, match="share"):
        bd.measurability_ceiling(10_000, 0.05, share=0)


# --------------------------------------------------------------------------------------------
# Strategies and evaluation
# --------------------------------------------------------------------------------------------


def _counts(thresholds, positives, negatives) -> bd.RateCounts:
    return bd.RateCounts(
        thresholds=np.asarray(thresholds, dtype=float),
        positives=np.asarray(positives, dtype=np.int64),
        negatives=np.asarray(negatives, dtype=np.int64),
    )


def test_rate_counts_staircase():
    counts = _counts([0.0, 1.0], [2, 3, 5], [6, 3, 1])
    # "score ≥ t_j ⇒ D": FN = positives below t_j, FP = negatives at or above t_j.
    np.testing.assert_array_equal(counts.false_negatives(), [2, 5])
    np.testing.assert_array_equal(counts.false_positives(), [4, 1])


def test_fixed_threshold_bound_by_hand():
    counts = _counts([1.0], [600, 400], [900, 100])
    bound = bd.evaluate(counts, delta=0.0, significance=0.05, strategy=bd.FixedThreshold(1.0))
    fnr_u = float(bd.clopper_pearson_upper(600, 1000, 0.025))
    fpr_u = float(bd.clopper_pearson_upper(100, 1000, 0.025))
    expected = max(math.log((1 - fnr_u) / fpr_u), math.log((1 - fpr_u) / fnr_u), 0.0)
    assert bound.epsilon == pytest.approx(expected, rel=1e-12)
    assert bound.hypotheses == 1
    assert bound.false_positives == 100 and bound.false_negatives == 600


def test_bonferroni_grid_pays_for_every_threshold_and_both_rates():
    rng = np.random.default_rng(3)
    positives = rng.multinomial(10_000, np.full(11, 1 / 11))
    negatives = rng.multinomial(10_000, np.linspace(2, 0.1, 11) / np.linspace(2, 0.1, 11).sum())
    counts = _counts(np.arange(10.0), positives, negatives)
    bound = bd.evaluate(counts, delta=1e-5, significance=0.05, strategy=bd.BonferroniGrid(size=10, focus=0))
    level = 0.05 / 10 / 2
    fnr_u = bd.clopper_pearson_upper(counts.false_negatives(), 10_000, level)
    fpr_u = bd.clopper_pearson_upper(counts.false_positives(), 10_000, level)
    forward, reverse = bd.epsilon_lower_bounds(fpr_u, fnr_u, 1e-5)
    assert bound.epsilon == pytest.approx(max(forward.max(), reverse.max(), 0.0), rel=1e-12)
    assert bound.hypotheses == 10


def test_weighted_bonferroni_rejects_bad_weights():
    counts = _counts([0.0, 1.0], [5, 5, 5], [5, 5, 5])
    with pytest.raises(ValueError, match="weights"):
        bd.evaluate(
            counts, delta=0.0, significance=0.05, strategy=bd.BonferroniGrid(size=2), weights=np.array([0.9, 0.9])
        )


def test_split_needs_selection_and_bounds_one_hypothesis():
    counts = _counts([0.0, 1.0], [100, 300, 600], [600, 300, 100])
    with pytest.raises(ValueError, match="selection"):
        bd.evaluate(counts, delta=0.0, significance=0.05, strategy=bd.Split())
    bound = bd.evaluate(counts, delta=0.0, significance=0.05, strategy=bd.Split(), selection=counts)
    assert bound.hypotheses == 1


def test_corrected_grid_is_valid_on_null_data():
    """On scores that do not depend on D (true ε = 0) the Bonferroni grid reports ε > 0 at most α of the time."""
    rng = np.random.default_rng(2026)
    grid = np.linspace(-2.5, 2.5, 101)
    edges = np.concatenate([[-np.inf], grid, [np.inf]])
    exceed = 0
    repetitions = 300
    for _ in range(repetitions):
        positive, negative = rng.standard_normal(300), rng.standard_normal(300)
        counts = _counts(grid, np.histogram(positive, edges)[0], np.histogram(negative, edges)[0])
        bound = bd.evaluate(counts, delta=0.0, significance=0.05, strategy=bd.BonferroniGrid(size=101, focus=0))
        exceed += bound.epsilon > 0
    assert exceed / repetitions <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / repetitions)


@pytest.mark.parametrize(
    "make",
    [
        lambda: bd.FixedThreshold(math.nan),
        lambda: bd.FixedThreshold("1"),
        lambda: bd.BonferroniGrid(size=0),
        lambda: bd.BonferroniGrid(focus=1.0),
        lambda: bd.Split(fraction=0.0),
        lambda: bd.Split(size=0),
    ],
)
def test_strategies_validate(make):
    with pytest.raises(ValueError, match=r"threshold|size|focus|fraction"):
        make()


def test_estimates_are_labelled():
    counts = _counts([0.0, 1.0, 2.0], [1000, 3000, 4000, 2000], [4000, 3000, 2000, 1000])
    gdp = bd.gdp_estimate(counts, delta=1e-5, significance=0.05)
    point = bd.point_estimate(counts, delta=1e-5)
    for estimate in (gdp, point):
        data = estimate.to_dict()
        assert data["is_estimate"] is True
        assert "not a bound" in data["assumption"]
    assert gdp.details["mu"] > 0
