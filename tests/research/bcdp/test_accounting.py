"""Tests for dplens.research.bcdp.accounting (seed 002; reference values from research/bcdp.md §2, §4.5, §5.2)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method
from dplens.research.bcdp import accounting as b

# ------------------------------------------------------------------------------------------------
# Fixtures: the paper's examples as explicit channels


def example1_channel(a: float, bb: float, c: float) -> np.ndarray:
    """Example 1 (L211–218): P{M = 1 | x} = a at (0,0), b at (1,0), 0 at (0,1), c at (1,1); axes (x1, x2, y)."""
    ch = np.zeros((2, 2, 2))
    for (x1, x2), p in {(0, 0): a, (1, 0): bb, (0, 1): 0.0, (1, 1): c}.items():
        ch[x1, x2] = [1 - p, p]
    return ch


def example2_channel() -> np.ndarray:
    """Example 2 (eq. 14): [x1⊕x2, x3] or [x2, x1⊕x3] with probability ½ each; outputs (y1, y2) flattened."""
    ch = np.zeros((2, 2, 2, 4))
    for x1 in range(2):
        for x2 in range(2):
            for x3 in range(2):
                ch[x1, x2, x3, 2 * (x1 ^ x2) + x3] += 0.5
                ch[x1, x2, x3, 2 * x2 + (x1 ^ x3)] += 0.5
    return ch


UNIFORM2 = b.JointDistribution(np.full((2, 2), 0.25))
UNIFORM3 = b.JointDistribution(np.full((2, 2, 2), 0.125))

# ------------------------------------------------------------------------------------------------
# Examples 1 and 2 (note §5.2(a))


@pytest.mark.parametrize(
    ("abc", "expected"),
    [((0.5, 0.5, 0.5), (0.693147, 0.693147)), ((0.2, 0.7, 0.4), (1.704748, 0.810930))],
)
def test_example1_exact_bcdp(abc, expected):
    ch = example1_channel(*abc)
    np.testing.assert_allclose(b.exact_bcdp(UNIFORM2, ch), expected, atol=1e-6)
    assert b.exact_ldp(ch) == math.inf  # BCDP without LDP (Example 1's point)


def test_example1_a_b_c_equal_one_is_not_bcdp():
    """Erratum (note §7): 'finite for a, b, c ∈ (0, 1]' fails at the boundary."""
    assert np.all(b.exact_bcdp(UNIFORM2, example1_channel(1, 1, 1)) == math.inf)
    assert b.exact_bcdp(UNIFORM2, example1_channel(0.5, 1, 1))[0] == math.inf  # b = c = 1
    assert b.exact_bcdp(UNIFORM2, example1_channel(1, 1, 0.5))[1] == math.inf  # a = b = 1


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 0.99), st.floats(0.01, 0.99), st.floats(0.01, 0.99))
# At 50x the examples (issue 33): δ₁ = 6.1e-5 is the log of a ratio near 1, where a float logarithm's absolute
# error of ~1e-16 is 2e-12 relative, for the library and for a float oracle alike.
@example(0.7, 0.6452696938459658, 0.0546875)
def test_example1_matches_closed_form(a, bb, c):
    """Note §2 [D]: δ₁ = max{|log((b+c)/a)|, |log((2−a)/(2−b−c))|}, δ₂ likewise with (a+b)/c.

    The closed form in mpmath (exact for these doubles); exact_bcdp is "exact up to float error in the
    logarithms", i.e. a few ulps of 1 in absolute terms (1e-15 nats), besides 1e-12 relative."""
    with mpmath.workdps(50):
        a, bb, c = (mpmath.mpf(v) for v in (a, bb, c))
        d1 = max(abs(mpmath.log((bb + c) / a)), abs(mpmath.log((2 - a) / (2 - bb - c))))
        d2 = max(abs(mpmath.log((a + bb) / c)), abs(mpmath.log((2 - c) / (2 - a - bb))))
        exact = [float(d1), float(d2)]
    got = b.exact_bcdp(UNIFORM2, example1_channel(float(a), float(bb), float(c)))
    np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-15)


def test_example2_one_copy_and_composition_failure():
    ch = example2_channel()
    np.testing.assert_allclose(b.exact_bcdp(UNIFORM3, ch), [0.0, math.log(3), math.log(3)], atol=1e-12)
    two = b.exact_bcdp(UNIFORM3, b.compose_channels(ch, ch))
    assert two[0] == math.inf  # 0 + 0 would be the (wrong) composed value
    np.testing.assert_allclose(two[1:], [math.log(5), math.log(5)], atol=1e-12)
    np.testing.assert_allclose(two[1:], [1.609438, 1.609438], atol=1e-6)
    assert b.exact_ldp(ch) == math.inf


# ------------------------------------------------------------------------------------------------
# Proposition 4 against exact BCDP (note §5.2(b))

TABLE_B = [
    ((0.1, 1.0), 0.1, (0.192489, 1.009992), (0.258565, 1.010462)),
    ((0.1, 1.0), 0.5, (0.570615, 1.049969), (0.720115, 1.051249)),
    ((0.5, 0.5), 0.1, (0.548994, 0.548994), (0.562855, 0.562855)),
    ((0.5, 0.5), 0.5, (0.746154, 0.746154), (0.780930, 0.780930)),
    ((0.2, 1.0, 2.0), 0.1, (0.437532, 1.171373, 2.111959), (1.267656, 1.589175, 2.208648)),
    ((0.2, 1.0, 2.0), 0.5, (1.353495, 1.882995, 2.563598), (2.555440, 2.611936, 2.770135)),
]


@pytest.mark.parametrize(("c", "q", "exact", "bound"), TABLE_B)
def test_proposition4_vs_exact_table(c, q, exact, bound):
    prior = b.correlated_mixture_prior(len(c), q)
    ch = b.per_coordinate_randomized_response_channel(c)
    np.testing.assert_allclose(b.exact_bcdp(prior, ch), exact, atol=1e-6)
    np.testing.assert_allclose(b.bcdp_from_coordinate_dp(c, q), bound, atol=1e-6)
    # the channel is exactly c-coordinate-DP and (Σc)-LDP, the prior has TV = q for every coordinate
    np.testing.assert_allclose(b.exact_coordinate_dp(ch), c, rtol=1e-12)
    assert b.exact_ldp(ch) == pytest.approx(sum(c), rel=1e-12)
    np.testing.assert_allclose(b.prior_tv_bounds(prior), q, rtol=1e-12)


@pytest.mark.parametrize("c", [(0.1, 1.0), (0.2, 1.0, 2.0), (0.5, 0.5)])
def test_proposition4_tight_at_q_zero_and_one(c):
    ch = b.per_coordinate_randomized_response_channel(c)
    for q, expected in ((0.0, np.array(c)), (1.0, np.full(len(c), sum(c)))):
        exact = b.exact_bcdp(b.correlated_mixture_prior(len(c), q), ch)
        np.testing.assert_allclose(exact, expected, rtol=1e-9)
        np.testing.assert_allclose(b.bcdp_from_coordinate_dp(c, q), expected, rtol=1e-9)


def test_proposition4_erratum_sum_over_coordinates_not_users():
    """Part 1 gives (Σ_{j=1}^{d} c_j)-LDP (printed Σ_{i=1}^{n}); δᵢ uses the sum over j ≠ i of the d coordinates."""
    c = [0.3, 0.5, 0.7]
    assert b.CoordinateBudget(coordinate_dp=c).ldp_epsilon == pytest.approx(1.5)
    q = 0.2
    expected = [ci + math.log(1 + q * math.exp(sum(c) - ci) - q) for ci in c]
    np.testing.assert_allclose(b.bcdp_from_coordinate_dp(c, q), expected, rtol=1e-11)


def test_proposition4_part2_and_combined_form():
    c, q, eps = np.array([0.2, 1.0, 2.0]), 0.3, 1.5
    part1 = c + np.log(1 + q * np.exp(c.sum() - c) - q)
    part2 = np.minimum(c + np.log(1 + q * math.exp(eps) - q), eps)
    np.testing.assert_allclose(b.bcdp_from_coordinate_dp(c, q, ldp_epsilon=eps), np.minimum(part1, part2), rtol=1e-11)
    # an ε above Σ_{j≠i} c_j does not loosen part 1
    np.testing.assert_allclose(b.bcdp_from_coordinate_dp(c, q, ldp_epsilon=math.inf), part1, rtol=1e-11)


def test_proposition4_large_budgets_in_log_space():
    c, q = [800.0, 900.0], 0.25
    got = b.bcdp_from_coordinate_dp(c, q)
    for i in range(2):
        s = mpmath.mpf(sum(c) - c[i])
        want = mpmath.mpf(c[i]) + mpmath.log(1 + mpmath.mpf(q) * (mpmath.e**s - 1))
        # rounded up by a relative 1e-12 (conversions.round_up), never down
        assert float(want) <= got[i] <= float(want) * (1 + 2e-12)


def test_proposition4_rounds_up():
    c, q = [0.1, 1.0], 0.1
    raw = np.array(c) + np.log1p(q * np.expm1(sum(c) - np.array(c)))
    got = b.bcdp_from_coordinate_dp(c, q)
    assert np.all(got >= raw) and np.all(got <= raw * (1 + 1e-11))


@st.composite
def prior_and_channel(draw):
    """A random prior over a small product space (with some zero-mass points) and a strictly positive channel."""
    d = draw(st.integers(2, 3))
    ks = tuple(draw(st.lists(st.integers(2, 3), min_size=d, max_size=d)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.full(math.prod(ks), draw(st.sampled_from([0.3, 1.0, 5.0]))))
    if draw(st.booleans()):
        table[rng.random(table.size) < 0.2] = 0.0
        if table.sum() == 0:
            table[0] = 1.0
    table = table / table.sum()
    num_out = draw(st.integers(2, 4))
    sharp = draw(st.sampled_from([0.2, 1.0, 3.0]))
    channel = rng.dirichlet(np.ones(num_out), size=math.prod(ks)) * (1 - 1e-3) + 1e-3 / num_out
    channel = channel**sharp
    channel /= channel.sum(axis=1, keepdims=True)
    return b.JointDistribution(table.reshape(ks)), channel.reshape(*ks, num_out)


@settings(max_examples=150, deadline=None)
@given(prior_and_channel())
def test_proposition4_upper_bounds_exact_bcdp(pc):
    """Property (acceptance): Proposition 4 (corrected, both parts) ≥ exact BCDP on random small priors/channels."""
    prior, channel = pc
    exact = b.exact_analysis(prior, channel)
    delta = np.array(exact.delta)
    part1 = b.bcdp_from_coordinate_dp(exact.coordinate_dp, exact.tv_bounds)
    both = b.bcdp_from_coordinate_dp(exact.coordinate_dp, exact.tv_bounds, ldp_epsilon=exact.ldp_epsilon)
    assert np.all(part1 >= delta - 1e-12)
    assert np.all(both >= delta - 1e-12)
    # Prop. 3 (LDP ⇒ BCDP) and Prop. 4(1)'s LDP claim
    assert np.all(delta <= exact.ldp_epsilon + 1e-12)
    assert exact.ldp_epsilon <= sum(exact.coordinate_dp) + 1e-12


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 3), min_size=1, max_size=5),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_proposition4_monotone_in_q_and_between_limits(c, q1, q2):
    lo, hi = sorted((q1, q2))
    d_lo, d_hi = b.bcdp_from_coordinate_dp(c, lo), b.bcdp_from_coordinate_dp(c, hi)
    assert np.all(d_lo <= d_hi * (1 + 1e-12) + 1e-300)
    assert np.all(d_lo >= np.array(c) - 1e-12)
    assert np.all(d_hi <= sum(c) * (1 + 1e-11) + 1e-12)


@pytest.mark.parametrize(("others", "expected"), [(1, 0.10), (9, 0.243)])
def test_joint_tv_grows_with_dimension(others, expected):
    """Pitfall §6.4: each x_j copies xᵢ w.p. ρ = 0.1 (else a fair coin), independently; the *joint* TV of x₋ᵢ
    is 0.10 / 0.243 for d − 1 = 1 / 9 (note [V], 3 significant digits), though every pair has TV 0.1."""
    rho = 0.1
    d = others + 1
    table = np.zeros((2,) * d)
    for x in np.ndindex(*table.shape):
        p = 0.5
        for xj in x[1:]:
            p *= rho * (xj == x[0]) + (1 - rho) * 0.5
        table[x] = p
    q = b.prior_tv_bounds(b.JointDistribution(table))
    assert q[0] == pytest.approx(expected, abs=5e-4)
    if others > 1:
        pair = b.prior_tv_bounds(b.JointDistribution(table.sum(axis=tuple(range(2, d)))))
        assert pair[0] == pytest.approx(rho)


# ------------------------------------------------------------------------------------------------
# Budgets compose, BCDP does not


def test_budget_composition_adds_epsilon_and_c():
    one = b.CoordinateBudget(coordinate_dp=(0.1, 0.4), ldp_epsilon=0.4)
    two = one.compose(b.CoordinateBudget(coordinate_dp=(0.2, 0.2)))
    assert two.coordinate_dp == pytest.approx((0.3, 0.6))
    assert two.ldp_epsilon == pytest.approx(0.8)
    assert (one + one).coordinate_dp == one.repeat(2).coordinate_dp
    # the LDP level never exceeds Σc
    assert b.CoordinateBudget(coordinate_dp=(0.1, 0.2), ldp_epsilon=5.0).ldp_epsilon == pytest.approx(0.3)


def test_two_halves_of_mechanism1_are_bcdp_exactly_as_the_budget_says():
    """Algorithm 2's argument (L831): two c/2 copies compose to (c_d, c), converted once with Prop. 4."""
    for q in (0.1, 0.3):
        alloc = b.theorem2_allocation([0.3, 1.0, 2.0], epsilon=2.0, q=q)
        half = np.array(alloc.c_sorted) / 2
        ch = b.mechanism1_randomized_response_channel(half)
        both = b.compose_channels(ch, ch)
        exact = b.exact_bcdp(b.correlated_mixture_prior(3, q), both)
        budget = b.CoordinateBudget(coordinate_dp=tuple(half), ldp_epsilon=half[-1]).repeat(2)
        guarantee = budget.bcdp(alloc.tv_bounds())
        assert np.all(exact <= np.array(guarantee.delta) + 1e-12)
        assert guarantee.satisfies(alloc.delta, epsilon=2.0)
        assert b.exact_ldp(both) <= guarantee.ldp_epsilon + 1e-12


# ------------------------------------------------------------------------------------------------
# Theorem 2 allocation (note §4.2, §4.5, §5.2(c), §5.2(d))

TABLE_C = [
    ((0.3, 1, 2), 0.1, (0.135, 0.835, 1.027450), (0.172789, 0.554468, 0.694533), 1.027450),
    ((0.3, 1, 2), 0.3, (0.105, 0.540988, 0.540988), (0.202013, 0.362241, 0.362241), 0.540988),
    ((0.2, 0.2, 2, 2), 0.1, (0.09, 0.09, 0.771395, 0.771395), (0.106609, 0.106609, 0.455337, 0.455337), 0.771395),
    ((0.2, 0.2, 2, 2), 0.3, (0.07, 0.07, 0.380326, 0.380326), (0.129845, 0.129845, 0.242817, 0.242817), 0.380326),
]


@pytest.mark.parametrize(("delta", "q", "c", "exact", "ldp"), TABLE_C)
def test_theorem2_end_to_end_exact(delta, q, c, exact, ldp):
    alloc = b.theorem2_allocation(delta, epsilon=2.0, q=q)
    assert alloc.zeta == pytest.approx((1 + q) / 2)
    np.testing.assert_allclose(alloc.c_sorted, c, atol=1e-6)
    ch = b.mechanism1_randomized_response_channel(alloc.c_sorted)
    prior = b.correlated_mixture_prior(len(delta), q)
    np.testing.assert_allclose(b.exact_bcdp(prior, ch), exact, atol=1e-6)
    assert b.exact_ldp(ch) == pytest.approx(ldp, abs=1e-6)
    np.testing.assert_allclose(b.exact_coordinate_dp(ch), alloc.c_sorted, rtol=1e-9)


@pytest.mark.parametrize("delta", [(0.3, 1.0, 2.0), (0.2, 0.2, 2.0, 2.0)])
@pytest.mark.parametrize("q", [0.0, 0.05, 0.1, 0.3, 0.6, 0.9, 1.0])
def test_theorem2_allocation_is_bcdp_and_ldp_exactly(delta, q):
    """Note §5.2(c): every combination satisfies δ-BCDP and ε-LDP, checked exactly."""
    alloc = b.theorem2_allocation(delta, epsilon=2.0, q=q)
    ch = b.mechanism1_randomized_response_channel(alloc.c_sorted)
    exact = b.exact_bcdp(b.correlated_mixture_prior(len(delta), q), ch)
    assert np.all(exact <= np.minimum(delta, 2.0) * (1 + 1e-9))
    assert b.exact_ldp(ch) <= 2.0 * (1 + 1e-9)
    assert alloc.guarantee().satisfies(delta, epsilon=2.0)
    if q == 1.0:  # tight: exact = δ₁·1
        np.testing.assert_allclose(exact, delta[0], rtol=1e-9)


FIG3_DELTA = (0.2, 0.2) + (2.0,) * 8
TABLE_D = [(0.0, 0.2, 2.0), (0.01, 0.138067, 2.0), (0.05, 0.095, 1.167582), (0.1, 0.09, 0.771395),
           (0.3, 0.07, 0.380326), (0.5, 0.05, 0.280407), (0.9, 0.01, 0.209044), (1.0, 0.2, 0.2)]  # fmt: skip
TABLE_D_HALF = [(0.05, 0.1, 1.132504), (0.1, 0.1, 0.718673), (0.3, 0.1, 0.300527), (0.5, 0.190903, 0.190903),
                (1.0, 0.1, 0.1)]  # fmt: skip


@pytest.mark.parametrize(("q", "c1", "cd"), TABLE_D)
def test_theorem2_fig3_c_vectors_heuristic_zeta(q, c1, cd):
    alloc = b.theorem2_allocation(FIG3_DELTA, epsilon=2.0, q=q)
    c = np.array(alloc.c_sorted)
    np.testing.assert_allclose(c[:2], c1, atol=1e-6)
    np.testing.assert_allclose(c[2:], cd, atol=1e-6)


@pytest.mark.parametrize(("q", "c1", "cd"), TABLE_D_HALF)
def test_theorem2_fig3_c_vectors_zeta_half(q, c1, cd):
    c = np.array(b.theorem2_allocation(FIG3_DELTA, epsilon=2.0, q=q, zeta=0.5).c_sorted)
    np.testing.assert_allclose(c[:2], c1, atol=1e-6)
    np.testing.assert_allclose(c[2:], cd, atol=1e-6)


def test_corollary1_thresholds():
    """Note §4.5: δ = 0.2, ε = 2, ζ = ½: c_d = ε up to q* = 0.0164611, c_d ≤ δ from q = 0.4750208."""
    q_star = math.expm1(0.1) / math.expm1(2.0)
    q_low = math.expm1(0.1) / math.expm1(0.2)
    assert q_star == pytest.approx(0.0164611, abs=1e-7)
    assert q_low == pytest.approx(0.4750208, abs=1e-7)
    below = b.theorem2_allocation(FIG3_DELTA, epsilon=2.0, q=q_star * 0.99, zeta=0.5).c_sorted
    above = b.theorem2_allocation(FIG3_DELTA, epsilon=2.0, q=q_star * 1.01, zeta=0.5).c_sorted
    assert below[-1] == 2.0 and above[-1] < 2.0
    # case 2 of the proof sets c_{1..k} = δ/2 only while c_d > δ (erratum [E/U] of note §4.5)
    assert b.theorem2_allocation(FIG3_DELTA, epsilon=2.0, q=q_low * 0.99, zeta=0.5).c_sorted[0] == pytest.approx(0.1)
    c = b.theorem2_allocation(FIG3_DELTA, epsilon=2.0, q=0.5, zeta=0.5).c_sorted
    np.testing.assert_allclose(c, 0.190903, atol=1e-6)


def test_theorem2_tolerant_comparison_q1_zeta1():
    """Note §6.6: at q = 1, ζ = 1 the first term of c_d equals δ̃₁ only up to float error (the note saw
    log(exp(0.3)) > 0.3; our stable form log1p(expm1(x)) overshoots at x = 0.34), and an exact comparison then
    sends c₁ to −0.0 instead of δ̃₁."""
    assert math.log1p(math.expm1(0.34)) > 0.34
    alloc = b.theorem2_allocation([0.34, 1.0, 2.0], epsilon=2.0, q=1.0, zeta=1.0)
    assert alloc.c_sorted == (0.34, 0.34, 0.34)
    assert alloc.guarantee().satisfies([0.34, 1.0, 2.0], epsilon=2.0)
    # without the tolerance: c_d stays one ulp above δ̃₁ and c₁ collapses to 0 (clamped from −0.0)
    strict = b.theorem2_allocation([0.34, 1.0, 2.0], epsilon=2.0, q=1.0, zeta=1.0, tolerance=0.0)
    assert strict.c_sorted[0] == 0.0 and strict.c_sorted[-1] > 0.34


def test_theorem2_special_cases_and_zeta_one():
    delta = [0.3, 0.7, 1.5]
    np.testing.assert_allclose(b.theorem2_allocation(delta, epsilon=1.0, q=0.0).c_sorted, [0.3, 0.7, 1.0])
    np.testing.assert_allclose(b.theorem2_allocation(delta, epsilon=5.0, q=1.0, zeta=0.4).c_sorted, 0.12)
    # ζ = 1, q < 1: c₁ = 0 (coordinate 1 gets no information), still valid
    alloc = b.theorem2_allocation(delta, epsilon=5.0, q=0.5, zeta=1.0)
    assert alloc.c_sorted[0] == 0.0
    assert alloc.guarantee().satisfies(delta, epsilon=5.0)
    # c₁ = (1 − ζ)δ̃₁ when c_d is set by the first term and exceeds δ̃₁ (L300)
    alloc = b.theorem2_allocation(delta, epsilon=5.0, q=0.05, zeta=0.3)
    assert alloc.c_sorted[0] == pytest.approx(0.7 * 0.3, rel=1e-12)


def test_theorem2_unsorted_delta_is_permuted_back():
    delta = [2.0, 0.2, 1.0, 0.2]
    alloc = b.theorem2_allocation(delta, epsilon=2.0, q=0.1)
    ref = b.theorem2_allocation(sorted(delta), epsilon=2.0, q=0.1)
    assert alloc.order == (1, 3, 2, 0)
    assert alloc.c_sorted == ref.c_sorted
    assert alloc.coordinate_dp == (ref.c_sorted[3], ref.c_sorted[0], ref.c_sorted[2], ref.c_sorted[1])
    assert alloc.tv_bounds() == (1.0, 0.1, 0.1, 0.1)  # the coordinate processed last is exempt
    assert alloc.guarantee().satisfies(delta, epsilon=2.0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.01, 10), min_size=1, max_size=8),
    st.floats(0.05, 10),
    st.floats(0, 1),
    st.one_of(st.none(), st.floats(0.01, 1)),
)
def test_theorem2_allocation_properties(delta, epsilon, q, zeta):
    alloc = b.theorem2_allocation(delta, epsilon=epsilon, q=q, zeta=zeta)
    c = np.array(alloc.c_sorted)
    assert np.all(c >= 0)
    assert np.all(np.diff(c) >= 0)  # Mechanism 1 needs a non-decreasing c
    assert alloc.ldp_epsilon <= min(max(delta), epsilon) * (1 + 1e-12)
    assert alloc.guarantee().satisfies(delta, epsilon=epsilon)


# ------------------------------------------------------------------------------------------------
# The accountant-level event and the spec types


def test_event_roundtrip_and_accountant_ldp_routes():
    e = b.CoordinateDpRelease(coordinate_dp=(0.1, 0.5, 1.0), ldp_epsilon=1.0)
    assert ev.event_from_dict(ev.event_to_dict(e)) == e
    acc = Accountant().compose(e, count=3)
    assert acc.pure_epsilon() == pytest.approx(3.0, rel=1e-11)
    assert acc.pure_epsilon() >= 3.0
    # RDP route (binary RR at ε dominates every ε-DP pair): ≤ basic composition, and ≥ the RR's own ε at δ
    rdp_eps = acc.epsilon(1e-6, method=Method.RDP)
    assert rdp_eps <= 3.0 + 1e-9
    single = Accountant().compose(e)
    rr = Accountant().compose(ev.RandomizedResponse(epsilon=1.0, num_values=2))
    assert single.delta(0.5, method=Method.EXACT) == pytest.approx(rr.delta(0.5, method=Method.EXACT))
    assert single.delta(0.5, method=Method.EXACT) == pytest.approx((math.e - math.exp(0.5)) / (1 + math.e))
    # default LDP level Σc
    assert b.CoordinateDpRelease(coordinate_dp=(0.1, 0.2)).pure_dp_epsilon() == pytest.approx(0.3)


def test_coordinate_budget_from_ledger_then_bcdp():
    half = b.CoordinateDpRelease(coordinate_dp=(0.05, 0.4), ldp_epsilon=0.4)
    acc = Accountant().compose(half, count=2)
    budget = b.coordinate_budget(acc)
    assert budget.coordinate_dp == pytest.approx((0.1, 0.8)) and budget.ldp_epsilon == pytest.approx(0.8)
    composed = b.coordinate_budget(ev.Composed(events=(half, ev.SelfComposed(event=half, count=2))))
    assert composed.ldp_epsilon == pytest.approx(1.2)
    g = budget.bcdp([0.1, 1.0])
    np.testing.assert_allclose(g.delta, b.bcdp_from_coordinate_dp((0.1, 0.8), [0.1, 1.0], ldp_epsilon=0.8))
    assert g.to_dict()["ldp_epsilon"] >= 0.8
    with pytest.raises(ValueError, match="source"):
        b.coordinate_budget(Accountant().compose(ev.Gaussian(noise_multiplier=1.0)))
    with pytest.raises(ValueError, match="dimension"):
        budget.compose(b.CoordinateBudget(coordinate_dp=(0.1,)))


def test_spec_types_build_events():
    from dplens import spec

    event = b.SPEC_TYPES["bcdp_mean"]({"delta": [0.2, 0.2, 2, 2], "epsilon": 2, "q": 0.1, "count": 2})
    assert isinstance(event, ev.SelfComposed) and event.count == 2
    assert event.event.ldp_epsilon == pytest.approx(0.771395, abs=1e-6)
    np.testing.assert_allclose(event.event.coordinate_dp, (0.09, 0.09, 0.771395, 0.771395), atol=1e-6)
    event = b.SPEC_TYPES["coordinate_dp_release"]({"coordinate_dp": [0.1, 0.2]})
    assert event.pure_dp_epsilon() == pytest.approx(0.3)
    with pytest.raises(ValueError, match="unknown key"):
        b.SPEC_TYPES["bcdp_mean"]({"delta": [1.0], "epsilon": 1, "q": 0.1, "sigma": 1})
    with pytest.raises(ValueError, match="q is required"):
        b.SPEC_TYPES["bcdp_mean"]({"delta": [1.0], "epsilon": 1})
    with pytest.raises(ValueError, match="delta"):
        b.SPEC_TYPES["bcdp_mean"]({"delta": 0.3, "epsilon": 1, "q": 0.1})
    assert {"bcdp_mean", "coordinate_dp_release"} <= set(spec.spec_types())


# ------------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: b.bcdp_from_coordinate_dp([0.1, -1.0], 0.1), "coordinate_dp"),
        (lambda: b.bcdp_from_coordinate_dp([0.1, math.inf], 0.1), "coordinate_dp"),
        (lambda: b.bcdp_from_coordinate_dp([0.1, 0.2], 1.5), "tv_bounds"),
        (lambda: b.bcdp_from_coordinate_dp([0.1, 0.2], [0.1, 0.2, 0.3]), "tv_bounds"),
        (lambda: b.bcdp_from_coordinate_dp([0.1, 0.2], 0.1, ldp_epsilon=-1), "ldp_epsilon"),
        (lambda: b.theorem2_allocation([0.0, 1.0], epsilon=1, q=0.1), "delta"),
        (lambda: b.theorem2_allocation([0.5, 1.0], epsilon=0, q=0.1), "epsilon"),
        (lambda: b.theorem2_allocation([0.5, 1.0], epsilon=1, q=1.1), "q"),
        (lambda: b.theorem2_allocation([0.5, 1.0], epsilon=1, q=0.1, zeta=0.0), "zeta"),
        (lambda: b.theorem2_allocation([0.5, 1.0], epsilon=1, q=True), "q"),
        (lambda: b.CoordinateDpRelease(coordinate_dp=(0.0, 0.0)), "coordinate_dp"),
        (lambda: b.CoordinateDpRelease(coordinate_dp=(0.1,), ldp_epsilon=0.0), "ldp_epsilon"),
        (lambda: b.CoordinateBudget(coordinate_dp=(0.1,)).repeat(0), "count"),
        (lambda: b.exact_bcdp(UNIFORM2, np.full((2, 2, 2), 0.3)), "channel"),
        (lambda: b.exact_bcdp(UNIFORM2, np.full((2, 3, 2), 0.5)), "channel"),
        (lambda: b.exact_bcdp(np.full((2, 2), 0.25), np.full((2, 2, 2), 0.5)), "prior"),
        (lambda: b.correlated_mixture_prior(0, 0.1), "dimension"),
        (lambda: b.mechanism1_randomized_response_channel([0.5, 0.1]), "c_sorted"),
        (lambda: b.compose_channels(), "channels"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------------------------------------------------
# CLI: the example spec is accounted for its LDP guarantee; bad BCDP input exits 2 with one line


def test_cli_accounts_example_spec_ldp(capsys):
    import json
    from pathlib import Path

    from dplens.cli import main

    example = Path(__file__).resolve().parents[3] / "examples" / "bcdp_mean.toml"
    code = main(["account", str(example), "--delta", "1e-6", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    c_d = b.theorem2_allocation([0.2, 0.2, 2.0, 2.0], epsilon=2.0, q=0.1).ldp_epsilon
    eps = json.loads(out)["epsilon"]
    assert eps <= 2 * c_d * (1 + 1e-9)  # never above basic composition of the two c_d-LDP releases
    assert eps >= 2 * c_d - 0.01  # and close to it: at δ = 1e-6 the RR-dominated RDP gains almost nothing


def test_cli_bad_bcdp_spec_exits_2(tmp_path, capsys):
    from dplens.cli import main

    spec = tmp_path / "bad.toml"
    spec.write_text('[[mechanism]]\ntype = "bcdp_mean"\ndelta = [0.2, -1]\nepsilon = 2.0\nq = 0.1\n')
    code = main(["account", str(spec), "--delta", "1e-6"])
    _, err = capsys.readouterr()
    assert code == 2 and "delta" in err and err.count("\n") == 1 and "Traceback" not in err
