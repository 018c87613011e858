"""One-run auditing (Steinke, Nasr, Jagielski 2023): the p-value against an mpmath oracle, the closed-form δ = 0
bound, the perfect-attacker table and the jax_privacy constants of auditing-anchors §5.5 (both analyses),
monotonicity properties, seeded validity suites on correct mechanisms, and input validation."""

from __future__ import annotations

import dataclasses
import doctest
import json
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from dplens.accountant import conversions
from dplens.auditing import bounds
from dplens.auditing import one_run as orun

SIGNIFICANCE = 0.05
N_SECTION_5_5 = 10_000
DELTA_SECTION_5_5 = 1e-6


def _deterministic_normal(mu: float, n: int) -> np.ndarray:
    """Quantiles (i + ½)/n of N(mu, 1): the deterministic scores of the jax_privacy test (auditing-anchors §5.5)."""
    return stats.norm.ppf(np.linspace(0, 1, n, endpoint=False) + 1 / (2 * n)) + mu


def _section_5_5_scores(shift: float) -> tuple[np.ndarray, np.ndarray]:
    n = N_SECTION_5_5
    scores = np.concatenate((_deterministic_normal(shift, n), _deterministic_normal(0.0, n)))
    labels = np.concatenate((np.ones(n, dtype=bool), np.zeros(n, dtype=bool)))
    return scores, labels


def _oracle_p_value(m: int, r: int, v: int, eps: float, delta: float) -> mpmath.mpf:
    """p(ε) from exact binomial probabilities at 50 digits (the definition, no numerics to trust)."""
    with mpmath.workdps(50):
        q = mpmath.e ** mpmath.mpf(eps) / (1 + mpmath.e ** mpmath.mpf(eps))
        pmf = [mpmath.binomial(r, k) * q**k * (1 - q) ** (r - k) for k in range(r + 1)]
        beta = mpmath.fsum(pmf[v:])
        alpha, window = mpmath.mpf(0), mpmath.mpf(0)
        for i in range(1, v + 1):
            window += pmf[v - i]
            alpha = max(alpha, window / i)
        return min(mpmath.mpf(1), beta + alpha * mpmath.mpf(delta) * 2 * m)


# --------------------------------------------------------------------------------------------
# The p-value and the bound from counts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "r", "v", "eps", "delta"),
    [
        (100, 60, 60, 0.0, 0.0),  # β = 2^-60
        (100, 60, 60, 0.0, 1e-4),
        (1000, 200, 200, 0.5, 1e-6),
        (1000, 200, 190, 3.0, 1e-6),
        (10_000, 300, 280, 2.0, 1e-7),
        (50, 40, 25, 1.0, 1e-3),
        (20, 10, 3, 0.3, 1e-2),
        (1000, 150, 150, 6.0, 1e-5),
    ],
)
def test_p_value_matches_the_mpmath_oracle(m, r, v, eps, delta):
    p = orun.one_run_p_value(eps, canaries=m, guesses=r, correct=v, delta=delta)
    assert p == pytest.approx(float(_oracle_p_value(m, r, v, eps, delta)), rel=1e-9)


def test_p_value_keeps_relative_precision_deep_in_the_tail():
    # A perfect attacker with 800 guesses at ε = 0: p = 2^-800 ≈ 1.5e-241, far below any subtraction's reach.
    p = orun.one_run_p_value(0.0, canaries=1000, guesses=800, correct=800)
    assert p == pytest.approx(2.0**-800, rel=1e-10)
    p_delta = orun.one_run_p_value(0.0, canaries=1000, guesses=800, correct=800, delta=1e-300)
    assert p_delta == pytest.approx(float(_oracle_p_value(1000, 800, 800, 0.0, 1e-300)), rel=1e-9)


def test_p_value_edge_counts():
    assert orun.one_run_p_value(1.0, canaries=10, guesses=0, correct=0, delta=0.1) == 1.0
    assert orun.one_run_p_value(1.0, canaries=10, guesses=5, correct=0) == 1.0
    assert orun.one_run_epsilon_lower_bound(canaries=10, guesses=0, correct=0) == 0.0


@pytest.mark.parametrize(("r", "v"), [(100, 100), (100, 90), (1000, 700), (50, 20), (7, 7)])
def test_pure_dp_bound_is_the_logit_of_the_clopper_pearson_lower_bound(r, v):
    eps = orun.one_run_epsilon_lower_bound(canaries=2 * r, guesses=r, correct=v, significance=SIGNIFICANCE)
    q_lower = float(bounds.clopper_pearson_lower(v, r, SIGNIFICANCE))
    assert eps == pytest.approx(max(0.0, math.log(q_lower / (1 - q_lower))), rel=1e-9, abs=1e-12)
    if eps > 0:  # the supremum is where β(ε) = P[Binom(r, q) ≥ v] reaches α
        assert float(stats.binom.sf(v - 1, r, special.expit(eps))) == pytest.approx(SIGNIFICANCE, rel=1e-7)


@pytest.mark.parametrize(
    ("m", "r", "v", "delta"), [(1000, 100, 100, 1e-5), (20_000, 3368, 2801, 1e-6), (500, 80, 70, 1e-3)]
)
def test_bound_with_delta_sits_on_the_rejection_boundary(m, r, v, delta):
    eps = orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=v, delta=delta)
    assert eps > 0
    assert orun.one_run_p_value(eps, canaries=m, guesses=r, correct=v, delta=delta) <= SIGNIFICANCE
    assert orun.one_run_p_value(eps + 1e-7, canaries=m, guesses=r, correct=v, delta=delta) > SIGNIFICANCE
    # δ only weakens the claim under test: the δ = 0 bound is an upper limit.
    assert eps <= orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=v)


# Steinke one-run with a perfect attacker (auditing-anchors §5.5): (m, r, ε_lb at δ = 0, ε_lb at δ = 1e-5).
PERFECT_ATTACKER = [
    (1000, 100, 3.493, 3.465),
    (1000, 1000, 5.809, 5.782),
    (10_000, 10_000, 8.113, 7.834),
    (100_000, 100, 3.493, 0.809),
    (100_000, 100_000, 10.416, 8.128),
]


@pytest.mark.parametrize(("m", "r", "eps_pure", "eps_delta"), PERFECT_ATTACKER)
def test_perfect_attacker_table(m, r, eps_pure, eps_delta):
    pure = orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=r, significance=SIGNIFICANCE)
    approx = orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=r, significance=SIGNIFICANCE, delta=1e-5)
    assert pure == pytest.approx(eps_pure, abs=5e-4)
    assert approx == pytest.approx(eps_delta, abs=5e-4)
    # δ = 0 perfect-attacker rule of thumb ε_lb ≈ ln(r / ln(1/α)) (auditing-anchors §1.6).
    assert pure == pytest.approx(math.log(r / math.log(1 / SIGNIFICANCE)), abs=0.1)


# --------------------------------------------------------------------------------------------
# The jax_privacy constants (auditing-anchors §5.5)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("shift", "frontier", "expected"), [(1, 386, 1.13346), (2, 374, 2.311945), (4, 140, 4.395568)])
def test_section_5_5_pareto_heuristic_reproduces_the_jax_constants(shift, frontier, expected):
    scores, labels = _section_5_5_scores(shift)
    result = orun.one_run_audit(
        scores,
        labels,
        significance=SIGNIFICANCE,
        delta=DELTA_SECTION_5_5,
        correction=orun.ParetoFrontierHeuristic(),
    )
    assert result.epsilon_lower_bound == pytest.approx(expected, rel=1e-4)
    assert result.hypotheses == frontier
    assert result.heuristic is True and result.is_estimate is False
    assert "heuristic" in result.assumption
    assert result.canaries == 2 * N_SECTION_5_5
    assert result.correct == result.in_correct and result.out_guesses == 0
    # The reported bound is the bound of the reported cut.
    again = orun.one_run_epsilon_lower_bound(
        canaries=result.canaries,
        guesses=result.guesses,
        correct=result.correct,
        significance=SIGNIFICANCE / frontier,
        delta=DELTA_SECTION_5_5,
    )
    assert again == pytest.approx(result.epsilon_lower_bound, rel=1e-9)


def test_section_5_5_cut_of_the_notes_is_within_solver_tolerance_of_the_optimum():
    # The notes name the top-3368 cut (2801 TP / 567 FP) for shift 1; it is not a frontier vertex and its bound
    # is within 1e-6 of the frontier optimum (jax_privacy's Brent tolerance), so both give 1.13346.
    eps = orun.one_run_epsilon_lower_bound(
        canaries=20_000, guesses=3368, correct=2801, significance=SIGNIFICANCE / 386, delta=DELTA_SECTION_5_5
    )
    assert eps == pytest.approx(1.13346, rel=1e-5)
    best = orun.one_run_audit(
        *_section_5_5_scores(1), delta=DELTA_SECTION_5_5, correction=orun.ParetoFrontierHeuristic()
    ).epsilon_lower_bound
    assert 0 <= best - eps < 1e-6


@pytest.mark.parametrize(("shift", "expected"), [(1, 2.164749), (2, 4.7218075), (4, 9.133752)])
def test_section_5_5_gaussian_fdp_reproduces_the_jax_constants(shift, expected):
    scores, labels = _section_5_5_scores(shift)
    result = orun.one_run_audit(
        scores,
        labels,
        significance=SIGNIFICANCE,
        delta=DELTA_SECTION_5_5,
        correction=orun.ParetoFrontierHeuristic(),
        analysis=orun.GaussianFDP(),
    )
    assert result.epsilon_lower_bound == pytest.approx(expected, rel=1e-4)
    assert result.is_estimate is True and result.heuristic is True
    assert "GDP-shaped" in result.assumption
    # Below the true ε of the μ = shift Gaussian (auditing-anchors §5.5 column "true ε").
    assert result.epsilon_lower_bound < conversions.gdp_epsilon(shift, DELTA_SECTION_5_5)


@pytest.mark.parametrize("analysis", [orun.ApproximateDP(), orun.GaussianFDP()])
@pytest.mark.parametrize("correction", [orun.ParetoFrontierHeuristic(), orun.BonferroniCutoffs()])
def test_identical_score_distributions_give_no_evidence(analysis, correction):
    scores, labels = _section_5_5_scores(0.0)
    result = orun.one_run_audit(scores, labels, delta=DELTA_SECTION_5_5, correction=correction, analysis=analysis)
    assert result.epsilon_lower_bound == 0.0


@pytest.mark.parametrize("shift", [1, 2, 4])
def test_a_priori_cutoffs_are_valid_bounds_below_the_true_epsilon(shift):
    scores, labels = _section_5_5_scores(shift)
    for rule in (orun.TopK(), orun.Symmetric()):
        result = orun.one_run_audit(scores, labels, delta=DELTA_SECTION_5_5, rule=rule)
        assert result.heuristic is False and result.is_estimate is False and result.assumption is None
        assert result.hypotheses == len(orun.default_cutoffs(2 * N_SECTION_5_5, rule=rule))
        assert 0 < result.epsilon_lower_bound < conversions.gdp_epsilon(shift, DELTA_SECTION_5_5)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@st.composite
def _game(draw):
    m = draw(st.integers(1, 5000))
    r = draw(st.integers(0, min(m, 400)))
    v = draw(st.integers(0, r))
    # 2mδ ≤ 1: the regime where monotonicity is proved (see one_run_p_value).
    delta = draw(st.sampled_from([0.0, 1.0])) * draw(st.floats(0.0, 1.0)) / (2 * m)
    return m, r, v, min(delta, 0.5)


@settings(max_examples=150, deadline=None)
@given(_game(), st.floats(0.0, 15.0), st.floats(0.0, 15.0))
def test_p_value_is_non_decreasing_in_epsilon(game, eps_a, eps_b):
    m, r, v, delta = game
    lo, hi = sorted((eps_a, eps_b))
    p_lo = orun.one_run_p_value(lo, canaries=m, guesses=r, correct=v, delta=delta)
    p_hi = orun.one_run_p_value(hi, canaries=m, guesses=r, correct=v, delta=delta)
    assert p_lo <= p_hi * (1 + 1e-9) + 1e-300


@settings(max_examples=150, deadline=None)
@given(_game(), st.floats(0.0, 15.0))
def test_p_value_is_non_increasing_in_correct_guesses(game, eps):
    m, r, v, delta = game
    if v == r:
        return
    p_v = orun.one_run_p_value(eps, canaries=m, guesses=r, correct=v, delta=delta)
    p_next = orun.one_run_p_value(eps, canaries=m, guesses=r, correct=v + 1, delta=delta)
    assert p_next <= p_v * (1 + 1e-9) + 1e-300


@settings(max_examples=60, deadline=None)
@given(_game(), st.sampled_from([0.01, 0.05, 0.2]))
def test_bound_is_monotone_in_the_evidence(game, alpha):
    m, r, v, delta = game
    if v == r:
        return
    lower = orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=v, significance=alpha, delta=delta)
    higher = orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=v + 1, significance=alpha, delta=delta)
    assert higher >= lower - 1e-9
    # and a stricter significance never gives a larger bound
    strict = orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=v, significance=alpha / 10, delta=delta)
    assert strict <= lower + 1e-9


def test_p_value_stays_monotone_where_the_proof_does_not_reach():
    # 2mδ > 1 (e.g. m = 1e5, δ = 1e-5): no proof, checked on a grid for the perfect-attacker row of §5.5.
    grid = np.linspace(0.0, 6.0, 121)
    p = [orun.one_run_p_value(e, canaries=100_000, guesses=100, correct=100, delta=1e-5) for e in grid]
    assert np.all(np.diff(p) >= -1e-12)


# --------------------------------------------------------------------------------------------
# Validity: seeded one-run audits of correct mechanisms
# --------------------------------------------------------------------------------------------

REPETITIONS = 200
ALLOWED_FAILURES = SIGNIFICANCE + 2 * math.sqrt(SIGNIFICANCE * (1 - SIGNIFICANCE) / REPETITIONS)


def test_validity_on_the_gaussian_mechanism():
    # Canary i adds μ·[included] to its own coordinate, observed with N(0, 1) noise: μ-GDP, so (ε(μ, δ), δ)-DP.
    mu, delta, m = 2.0, 1e-5, 1000
    true_eps = conversions.gdp_epsilon(mu, delta)
    seeds = np.random.SeedSequence(20231101).spawn(REPETITIONS)
    above = {"top_k": 0, "symmetric": 0}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        labels = rng.random(m) < 0.5
        scores = rng.normal(mu * labels, 1.0)
        for rule, name in ((orun.TopK(), "top_k"), (orun.Symmetric(), "symmetric")):
            result = orun.one_run_audit(scores, labels, significance=SIGNIFICANCE, delta=delta, rule=rule)
            above[name] += result.epsilon_lower_bound > true_eps
    for count in above.values():
        assert count / REPETITIONS <= ALLOWED_FAILURES


def test_validity_on_randomized_response_where_the_test_is_sharp():
    # ε-randomized response per canary: V ~ Binom(r, e^ε/(1 + e^ε)) exactly, the extremal case of the theorem, with
    # heavy ties (scores are bits) resolved against the auditor.
    eps, m = 1.0, 400
    seeds = np.random.SeedSequence(7).spawn(REPETITIONS)
    above = 0
    for seed in seeds:
        rng = np.random.default_rng(seed)
        labels = rng.random(m) < 0.5
        reported = labels ^ (rng.random(m) < 1 / (1 + math.exp(eps)))
        result = orun.one_run_audit(reported.astype(float), labels, rule=orun.Symmetric())
        above += result.epsilon_lower_bound > eps
    assert above / REPETITIONS <= ALLOWED_FAILURES


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_exact_size_of_the_one_run_test_on_randomized_response(eps):
    # All r guesses are RR outputs: P[ε_lb(V) > ε] summed exactly over V ~ Binom(r, q) is the test's true size.
    r = 300
    q = special.expit(eps)
    size = sum(
        stats.binom.pmf(v, r, q)
        for v in range(r + 1)
        if orun.one_run_epsilon_lower_bound(canaries=r, guesses=r, correct=v, significance=SIGNIFICANCE) > eps
    )
    assert size <= SIGNIFICANCE
    assert size > SIGNIFICANCE / 5  # and the bound is not vacuous: the test uses most of its budget


def test_power_on_randomized_response():
    eps, m = 3.0, 2000
    rng = np.random.default_rng(0xBAD5EED)
    labels = rng.random(m) < 0.5
    reported = labels ^ (rng.random(m) < 1 / (1 + math.exp(eps)))
    result = orun.one_run_audit(reported.astype(float), labels)
    assert 0.75 * eps < result.epsilon_lower_bound < eps


# --------------------------------------------------------------------------------------------
# Rules, ties, results
# --------------------------------------------------------------------------------------------


def test_ties_are_resolved_against_the_auditor():
    scores = np.zeros(6)
    labels = np.array([1, 1, 1, 0, 0, 0])
    top = orun.one_run_audit(scores, labels, correction=orun.BonferroniCutoffs(cutoffs=(3,)))
    assert (top.guesses, top.correct) == (3, 0)
    sym = orun.one_run_audit(scores, labels, rule=orun.Symmetric(), correction=orun.BonferroniCutoffs(cutoffs=(2,)))
    assert (sym.guesses, sym.correct) == (4, 0)
    # Strictly ordered scores are counted as ranked.
    ranked = orun.one_run_audit(
        np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0]),
        labels,
        rule=orun.Symmetric(),
        correction=orun.BonferroniCutoffs(cutoffs=(2,)),
    )
    assert (ranked.in_correct, ranked.out_correct, ranked.in_threshold, ranked.out_threshold) == (2, 2, 4.0, 1.0)


def test_default_cutoffs_depend_on_the_number_of_canaries_only():
    for m in (1, 2, 17, 1000, 10**6):
        for rule in (orun.TopK(), orun.Symmetric()):
            if m < 2 and isinstance(rule, orun.Symmetric):
                continue
            cut = orun.default_cutoffs(m, rule=rule)
            k_max = m if isinstance(rule, orun.TopK) else m // 2
            assert list(cut) == sorted(set(cut)) and cut[0] >= 1 and cut[-1] == k_max and len(cut) <= 32


def test_result_is_frozen_and_serialisable():
    scores, labels = _section_5_5_scores(2)
    result = orun.one_run_audit(scores[::10], labels[::10], delta=1e-5)
    record = result.to_dict()
    json.dumps(record)
    assert record["epsilon_lower_bound"] == result.epsilon_lower_bound
    assert record["is_estimate"] is False and record["heuristic"] is False
    assert record["confidence"] == pytest.approx(1 - SIGNIFICANCE)
    assert record["correction"] == "bonferroni_cutoffs" and record["analysis"] == "approximate_dp"
    assert {"guesses", "correct", "canaries", "delta", "significance", "cutoff", "hypotheses"} <= record.keys()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.epsilon_lower_bound = 99.0  # type: ignore[misc]


def test_module_doctest():
    assert doctest.testmod(orun).failed == 0


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------

_SCORES = np.array([0.1, 0.5, 0.9, 1.3])
_LABELS = np.array([0, 1, 0, 1])


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"significance": 0.0}, r"significance.*0\.0"),
        ({"significance": 1.0}, r"significance.*1\.0"),
        ({"significance": 1.5}, r"significance.*1\.5"),
        ({"significance": True}, r"significance.*True"),
        ({"delta": -0.1}, r"delta.*-0\.1"),
        ({"delta": 1.0}, r"delta.*1\.0"),
        ({"delta": float("nan")}, r"delta.*nan"),
        ({"analysis": orun.GaussianFDP()}, r"delta.*0\.0"),
        ({"rule": orun.Symmetric(), "correction": orun.ParetoFrontierHeuristic()}, r"rule.*Symmetric"),
        ({"correction": orun.BonferroniCutoffs(cutoffs=(2, 5))}, r"cutoffs.*\(2, 5\)"),
        ({"rule": "top_k"}, r"rule.*top_k"),
        ({"correction": "bonferroni"}, r"correction.*bonferroni"),
        ({"analysis": "dp"}, r"analysis.*dp"),
    ],
)
def test_bad_audit_options_raise(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        orun.one_run_audit(_SCORES, _LABELS, **kwargs)


@pytest.mark.parametrize(
    ("scores", "labels", "pattern"),
    [
        (np.array([0.1, np.nan, 0.3, 0.4]), _LABELS, r"scores.*NaN.*index 1"),
        (_SCORES, np.array([0, 1, 0]), r"labels.*length.*4.*got 3"),
        (np.array([]), np.array([]), r"scores.*non-empty"),
        (np.ones((2, 2)), np.ones((2, 2)), r"scores.*1-D.*\(2, 2\)"),
        (_SCORES, np.array([0, 1, 2, 1]), r"labels.*0/1"),
        (["a", "b", "c", "d"], _LABELS, r"scores.*numbers"),
    ],
)
def test_bad_scores_or_labels_raise(scores, labels, pattern):
    with pytest.raises(ValueError, match=pattern):
        orun.one_run_audit(scores, labels)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"canaries": 0, "guesses": 0, "correct": 0}, r"canaries.*0"),
        ({"canaries": 10, "guesses": 11, "correct": 0}, r"guesses.*11"),
        ({"canaries": 10, "guesses": 5, "correct": 6}, r"correct.*6"),
        ({"canaries": 10, "guesses": -1, "correct": 0}, r"guesses.*-1"),
        ({"canaries": 10.5, "guesses": 1, "correct": 0}, r"canaries.*10\.5"),
        ({"canaries": 10, "guesses": 5, "correct": 3, "significance": 2.0}, r"significance.*2\.0"),
        ({"canaries": 10, "guesses": 5, "correct": 3, "delta": 1.5}, r"delta.*1\.5"),
    ],
)
def test_bad_counts_raise(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        orun.one_run_epsilon_lower_bound(**kwargs)


def test_bad_p_value_and_option_arguments_raise():
    with pytest.raises(ValueError, match=r"epsilon.*-1"):
        orun.one_run_p_value(-1.0, canaries=10, guesses=5, correct=3)
    with pytest.raises(ValueError, match=r"delta.*0"):
        orun.gaussian_fdp_one_run_epsilon(canaries=10, guesses=5, correct=3, delta=0.0)
    with pytest.raises(ValueError, match=r"size.*0"):
        orun.BonferroniCutoffs(size=0)
    with pytest.raises(ValueError, match=r"cutoffs.*\(0,\)"):
        orun.BonferroniCutoffs(cutoffs=(0,))
    with pytest.raises(ValueError, match=r"canaries.*1"):
        orun.default_cutoffs(1, rule=orun.Symmetric())


# --------------------------------------------------------------------------------------------
# The f-DP one-run analysis against the (ε, δ)-DP curve (a bound) and the combined analysis (issue 37)
# --------------------------------------------------------------------------------------------


def _issue_scores(mu: float, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The one-run scores of issue 37: each of m canaries in with probability ½, a member's score shifted by μ."""
    rng = np.random.default_rng(seed)
    member = rng.random(m) < 0.5
    return rng.normal(0.0, 1.0, m) + mu * member, member


# (μ, m, numpy seed) → the issue's f-DP-vs-(ε, δ) value with jax_privacy's Bonferroni over the Pareto frontier, and
# dplens's Steinke et al. bound before the issue (symmetric guesses, 32 a-priori cut-offs).
ISSUE_SETTINGS = [((2.0, 1000, 0), 2.88, 3.00), ((3.0, 1000, 1), 3.59, 3.81), ((2.0, 5000, 2), 3.92, 2.96)]


@pytest.mark.parametrize(("setting", "fdp_pareto", "steinke"), ISSUE_SETTINGS)
def test_fdp_against_the_epsilon_delta_curve_reproduces_the_issue_numbers(setting, fdp_pareto, steinke):
    scores, member = _issue_scores(*setting)
    heuristic = orun.one_run_audit(
        scores, member, delta=1e-5, correction=orun.ParetoFrontierHeuristic(), analysis=orun.EpsilonDeltaFDP()
    )
    assert heuristic.epsilon_lower_bound == pytest.approx(fdp_pareto, abs=0.005)
    assert heuristic.heuristic is True and heuristic.is_estimate is False
    old = orun.one_run_audit(scores, member, delta=1e-5, rule=orun.Symmetric())
    assert old.epsilon_lower_bound == pytest.approx(steinke, abs=0.005)
    # With the valid a-priori cut-offs the f-DP analysis is tighter than both, and the combination (α split 1:4) is
    # at least the better of the two numbers above and within 0.1 of the f-DP analysis run alone at the full α.
    fdp = orun.one_run_audit(scores, member, delta=1e-5, rule=orun.Symmetric(), analysis=orun.EpsilonDeltaFDP())
    combined = orun.one_run_audit(scores, member, delta=1e-5, rule=orun.Symmetric(), analysis=orun.Combined.default())
    assert combined.epsilon_lower_bound >= max(fdp_pareto, steinke)
    assert fdp.epsilon_lower_bound - 0.1 <= combined.epsilon_lower_bound <= fdp.epsilon_lower_bound
    true_eps = conversions.gdp_epsilon(setting[0], 1e-5)
    assert combined.epsilon_lower_bound < true_eps
    assert combined.analysis.startswith("combined") and len(combined.components) == 2
    assert combined.share in (0.2, 0.8) and combined.hypothesis_significance == pytest.approx(
        SIGNIFICANCE * combined.share / combined.hypotheses
    )


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("canaries", [300, 1000])
def test_exact_size_of_the_fdp_test_on_randomized_response(eps, canaries):
    # The extremal case: all r = 300 guesses are ε-RR outputs, V ~ Binom(r, e^ε/(1 + e^ε)) exactly. Summing over V
    # gives the true probability that the f-DP bound exceeds ε: at most α, and the test uses a fair part of it.
    r, q = 300, special.expit(eps)
    size = sum(
        stats.binom.pmf(v, r, q)
        for v in range(r + 1)
        if orun.fdp_one_run_epsilon_lower_bound(canaries=canaries, guesses=r, correct=v, significance=SIGNIFICANCE)
        > eps
    )
    assert SIGNIFICANCE / 5 < size <= SIGNIFICANCE


@settings(max_examples=60, deadline=None)
@given(_game(), st.floats(0.0, 8.0), st.floats(0.0, 8.0), st.sampled_from([0.0, 1e-6, 1e-3]))
def test_fdp_excess_is_non_increasing_in_epsilon(game, eps_a, eps_b, delta):
    m, r, v, _ = game
    lo, hi = sorted((eps_a, eps_b))
    excess = [orun._fdp_excess(e, m, r, v, SIGNIFICANCE, delta, orun._EPSILON_DELTA) for e in (lo, hi)]
    assert excess[1] <= excess[0] + 1e-12


@pytest.mark.parametrize(
    ("m", "r", "v", "delta"), [(1000, 100, 100, 1e-5), (1000, 500, 300, 1e-3), (10_000, 2000, 1500, 0)]
)
def test_fdp_bound_is_falsified_at_its_value_and_not_above(m, r, v, delta):
    eps = orun.fdp_one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=v, delta=delta)
    assert eps > 0
    assert orun._fdp_excess(eps, m, r, v, SIGNIFICANCE, delta, orun._EPSILON_DELTA) > 0
    assert orun._fdp_excess(eps + 1e-6, m, r, v, SIGNIFICANCE, delta, orun._EPSILON_DELTA) <= 0
    # Pure DP, a perfect attacker: the f-DP recursion and Steinke et al.'s exact binomial tail agree.
    if v == r and delta == 0:
        assert eps == pytest.approx(orun.one_run_epsilon_lower_bound(canaries=m, guesses=r, correct=r), rel=1e-6)


def test_the_gaussian_family_number_is_no_bound_on_randomized_response():
    # Negative control (issue 37): on pure ε = 1 randomized-response canaries the Gaussian-family f-DP number
    # exceeds the true ε in most seeds, while the (ε, δ) curve's bound never does in the same seeds.
    above_gaussian = above_bound = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        member = rng.random(10_000) < 0.5
        reported = member ^ (rng.random(10_000) < 1 / (1 + math.e))
        kwargs = {"delta": 1e-5, "rule": orun.Symmetric()}
        gaussian = orun.one_run_audit(reported.astype(float), member, analysis=orun.GaussianFDP(), **kwargs)
        bound = orun.one_run_audit(reported.astype(float), member, analysis=orun.Combined.default(), **kwargs)
        above_gaussian += gaussian.epsilon_lower_bound > 1.0
        above_bound += bound.epsilon_lower_bound > 1.0
    assert above_gaussian >= 8 and above_bound == 0


def _false_alarms(make, true_eps: float, delta: float, seeds: int, significance: float) -> int:
    count = 0
    for seed in np.random.SeedSequence(37).spawn(seeds):
        scores, member = make(np.random.default_rng(seed))
        result = orun.one_run_audit(
            scores, member, significance=significance, delta=delta, rule=orun.Symmetric(),
            analysis=orun.Combined.default(),
        )  # fmt: skip
        count += result.epsilon_lower_bound > true_eps
    return count


def _gaussian_canaries(mu: float, m: int):
    def make(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        member = rng.random(m) < 0.5
        return rng.normal(mu * member, 1.0), member

    return make


def _rr_canaries(eps: float, m: int):
    def make(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        member = rng.random(m) < 0.5
        return (member ^ (rng.random(m) < 1 / (1 + math.exp(eps)))).astype(float), member

    return make


@pytest.mark.parametrize(
    ("make", "true_eps", "delta"),
    [
        (_gaussian_canaries(2.0, 1000), conversions.gdp_epsilon(2.0, 1e-5), 1e-5),
        (_rr_canaries(1.0, 2000), 1.0, 0.0),
    ],
    ids=["gaussian", "randomized-response"],
)
def test_combined_false_alarm_rate_is_consistent_with_alpha(make, true_eps, delta):
    # 100 seeds of canary games whose true ε is known, at α = 0.2 (so that a procedure exceeding α would show):
    # the number of bounds above the true ε passes a one-sided binomial test against Binom(100, α).
    seeds, alpha = 100, 0.2
    count = _false_alarms(make, true_eps, delta, seeds, alpha)
    assert stats.binomtest(count, seeds, alpha, alternative="greater").pvalue > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "true_eps", "delta"),
    [
        (_gaussian_canaries(2.0, 5000), conversions.gdp_epsilon(2.0, 1e-5), 1e-5),
        (_gaussian_canaries(1.0, 10_000), conversions.gdp_epsilon(1.0, 1e-5), 1e-5),
        (_rr_canaries(1.0, 10_000), 1.0, 0.0),
        (_rr_canaries(2.0, 5000), 2.0, 0.0),
    ],
    ids=["gaussian-2-5000", "gaussian-1-10000", "rr-1-10000", "rr-2-5000"],
)
def test_combined_false_alarm_rate_many_seeds(make, true_eps, delta):
    seeds = 400
    for alpha in (0.05, 0.2):
        count = _false_alarms(make, true_eps, delta, seeds, alpha)
        assert stats.binomtest(count, seeds, alpha, alternative="greater").pvalue > 1e-3


def test_combined_validation():
    with pytest.raises(ValueError, match=r"analyses.*bounds only.*GaussianFDP"):
        orun.Combined(analyses=(orun.GaussianFDP(),))
    with pytest.raises(ValueError, match=r"shares.*summing to 1.*0\.6"):
        orun.Combined(shares=(0.5, 0.6))
    with pytest.raises(ValueError, match=r"repeat"):
        orun.Combined(analyses=(orun.ApproximateDP(), orun.ApproximateDP()))
    assert orun.Combined().shares == (0.5, 0.5)
    record = orun.one_run_audit(_SCORES, _LABELS, analysis=orun.Combined()).to_dict()
    assert orun.OneRunResult.from_dict(json.loads(json.dumps(record))).to_dict() == record


def _monotone_chain(x: np.ndarray, y: np.ndarray) -> list[int]:
    """The upper hull by Andrew's monotone chain, point by point (the oracle of the vectorised version)."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            if (x[a] - x[o]) * (y[i] - y[o]) - (y[a] - y[o]) * (x[i] - x[o]) >= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return hull


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)).filter(lambda step: step != (0, 0)), max_size=60))
def test_vectorised_hull_is_the_monotone_chain(steps):
    # Staircases like the ROC's (FN, TN): from (0, 0), each threshold adds misses to x, y or both, never neither.
    x = np.cumsum([0] + [s[0] for s in steps]).astype(np.int64)
    y = np.cumsum([0] + [s[1] for s in steps]).astype(np.int64)
    assert orun._upper_hull(x, y).tolist() == _monotone_chain(x, y)
