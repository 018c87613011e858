"""The attribute-inference game: the §6.1 reference table, the k-ary bounds against an independent linear-programme
oracle, randomized response attaining the bound, validity over hundreds of seeded audits, verdicts under both
readings of a claim, seed 003 Theorem 4 side by side, determinism across backends, and bad input."""

from __future__ import annotations

import itertools
import json
import math
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pytest
from scipy import optimize, stats

from dplens.accountant import conversions
from dplens.accountant.curves import PrivacyProfile
from dplens.auditing import attribute as at
from dplens.auditing import bounds as bd
from dplens.auditing.games import Verdict
from dplens.mechanisms.additive import GaussianMechanism, NoLeakage, RandomizedResponseMechanism

SIGNIFICANCE = 0.05
REPETITIONS = 200
#: The acceptance rule of the validity suites: the fraction of bounds above the true ε may exceed α by at most two
#: standard errors of a binomial proportion over the repetitions.
ALLOWED = SIGNIFICANCE + 2 * math.sqrt(SIGNIFICANCE * (1 - SIGNIFICANCE) / REPETITIONS)


def _rr_success(epsilon: float, k: int) -> float:
    return math.exp(epsilon) / (math.exp(epsilon) + k - 1)


def _position_guess(outputs):
    """A cheating attacker: it would win if the outputs of one attribute value were passed as one block."""
    n = len(outputs)
    return (np.arange(n) * 3) // n


def _half_guess(outputs):
    """Guesses 1.5: not an attribute value."""
    return np.full(len(outputs), 1.5)


def _out_of_range_guess(outputs):
    return np.full(len(outputs), 7)


def _no_leakage_likelihood(outputs, value):
    return np.zeros(len(outputs))


# --------------------------------------------------------------------------------------------
# The bounds: reference table, closed forms, and an independent linear-programme oracle
# --------------------------------------------------------------------------------------------

# auditing-anchors §6.1, "attr success" columns k = 2, 5, 10 (printed precision as in the note).
REFERENCE_TABLE = {
    0.1: ("0.525", "0.217", "0.109"),
    0.5: ("0.623", "0.292", "0.155"),
    1.0: ("0.731", "0.405", "0.232"),
    2.0: ("0.881", "0.649", "0.451"),
    4.0: ("0.982", "0.932", "0.859"),
    8.0: ("0.9997", "0.9987", "0.997"),
}


def _round_half_up(value: float, places: int) -> Decimal:
    return Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


@pytest.mark.parametrize("delta", [0.0, 1e-5])
@pytest.mark.parametrize(("epsilon", "column"), [(e, c) for e in REFERENCE_TABLE for c in range(3)])
def test_reference_table_6_1(epsilon, column, delta):
    # The table is computed "with δ = 1e-5 where shown"; at its printed precision δ = 0 and δ = 1e-5 agree. Three
    # entries (ε = 0.1 k = 5, ε = 0.5 k = 2, ε = 4 k = 10) were rounded twice (to one more digit, then half up):
    # e.g. 0.21648 → 0.2165 → 0.217. Every entry is reproduced exactly under that rounding, and within 0.55 units
    # in its last place.
    k = (2, 5, 10)[column]
    printed = REFERENCE_TABLE[epsilon][column]
    places = len(printed.split(".")[1])
    value = at.max_success(epsilon=epsilon, delta=delta, prior=np.full(k, 1 / k))
    assert abs(value - float(printed)) <= 0.55 * 10.0**-places
    assert str(_round_half_up(float(_round_half_up(value, places + 1)), places)) == printed


def test_uniform_prior_closed_form_and_its_inverse():
    for k, epsilon, delta in itertools.product((2, 3, 7), (0.0, 0.3, 2.0, 9.0), (0.0, 1e-6, 0.01)):
        prior = np.full(k, 1 / k)
        expected = (math.exp(epsilon) + (k - 1) * delta) / (math.exp(epsilon) + k - 1)
        value = at.max_success(epsilon=epsilon, delta=delta, prior=prior)
        assert value >= expected and value == pytest.approx(expected, rel=1e-11)
        assert at.max_success_prior_bound(epsilon=epsilon, delta=delta, prior=prior) == pytest.approx(expected)
        if epsilon > 0:  # inverse of the exact (not rounded-up) value: the note's ln((k − 1)(p − δ)/(1 − p))
            assert at.epsilon_lower_bound(expected, delta=delta, prior=prior) == pytest.approx(epsilon, abs=1e-9)
    for p in (0.3, 0.5, 0.9, 0.999):  # δ = 0: ε_lb = ln(p(k − 1)/(1 − p)), clamped at 0
        for k in (2, 4):
            expected = max(0.0, math.log(p * (k - 1) / (1 - p)))
            assert at.epsilon_lower_bound(p, delta=0.0, prior=np.full(k, 1 / k)) == pytest.approx(expected)


def test_prior_bound_at_pure_dp_is_the_posterior_odds_formula():
    rng = np.random.default_rng(7)
    for _ in range(20):
        prior = rng.dirichlet(np.ones(rng.integers(2, 6)))
        epsilon = float(rng.uniform(0, 4))
        m = prior.max()
        expected = math.exp(epsilon) * m / (math.exp(epsilon) * m + 1 - m)
        assert at.max_success_prior_bound(epsilon=epsilon, delta=0.0, prior=prior) == pytest.approx(expected)


def _subset_lp_oracle(epsilon: float, delta: float, prior: np.ndarray) -> float:
    """max Σ_a π_a Q_a(a) over channels Q with Q_a(E) ≤ e^ε Q_b(E) + δ for every subset E and a ≠ b (dense)."""
    k = prior.size
    rows, bounds_ = [], []
    for a, b in itertools.permutations(range(k), 2):
        for size in range(1, k + 1):
            for subset in itertools.combinations(range(k), size):
                row = np.zeros(k * k)
                row[[a * k + g for g in subset]] += 1.0
                row[[b * k + g for g in subset]] -= math.exp(epsilon)
                rows.append(row)
                bounds_.append(delta)
    equal = np.kron(np.eye(k), np.ones(k))
    cost = -np.diag(prior).ravel()
    result = optimize.linprog(cost, A_ub=np.array(rows), b_ub=bounds_, A_eq=equal, b_eq=np.ones(k), method="highs")
    assert result.status == 0
    return -result.fun


def test_exact_maximum_against_an_independent_subset_programme():
    rng = np.random.default_rng(3)
    cases = [(np.full(3, 1 / 3), 1.0, 0.0), (np.full(4, 0.25), 0.5, 0.02), (np.array([0.8, 0.2]), 1.0, 0.01)]
    cases += [(np.array([0.3, 0.7]), 0.2, 0.0)]
    for _ in range(10):
        cases.append(
            (rng.dirichlet(np.ones(rng.integers(3, 5))), float(rng.uniform(0, 3)), float(rng.choice([0, 0.01])))
        )
    for prior, epsilon, delta in cases:
        oracle = _subset_lp_oracle(epsilon, delta, prior)
        exact = at.max_success(epsilon=epsilon, delta=delta, prior=prior)
        loose = at.max_success_prior_bound(epsilon=epsilon, delta=delta, prior=prior)
        assert oracle - 1e-9 <= exact <= oracle + 2e-8  # exact (closed forms or the hockey-stick programme)
        assert exact <= loose + 1e-12  # the derived closed form is a valid upper bound for every prior and δ


def test_zero_prior_values_do_not_change_the_bound():
    with_zero = at.max_success(epsilon=1.0, delta=0.001, prior=[0.5, 0.0, 0.5])
    assert with_zero == pytest.approx(at.max_success(epsilon=1.0, delta=0.001, prior=[0.5, 0.5]))


def test_inverse_of_the_exact_maximum_for_non_uniform_priors():
    for prior in ([0.5, 0.3, 0.2], [0.4, 0.3, 0.2, 0.1], [0.6, 0.4]):
        for epsilon, delta in ((1.0, 0.0), (2.5, 1e-3)):
            success = at.max_success(epsilon=epsilon, delta=delta, prior=prior)
            assert success > max(prior)  # beyond the flat part, where the maximum is the baseline
            recovered = at.epsilon_lower_bound(success - 1e-6, delta=delta, prior=prior)
            assert epsilon - 1e-3 < recovered <= epsilon


# --------------------------------------------------------------------------------------------
# Randomized response attains the bound; validity
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "epsilon"), [(2, 0.5), (5, 1.0), (10, 2.0)])
def test_randomized_response_attains_the_bound(k, epsilon):
    mechanism = RandomizedResponseMechanism(epsilon=epsilon, num_values=k)
    result = at.audit(mechanism, trials=200_000, claim=epsilon, confidence=0.99, seed=11)
    low, high = result.confidence_interval
    assert low <= _rr_success(epsilon, k) <= high
    assert result.replace_one_success_upper_bound == pytest.approx(_rr_success(epsilon, k))
    assert result.epsilon_lower_bound == pytest.approx(epsilon, abs=0.1)
    assert result.baseline == pytest.approx(1 / k)


def _exceedance(mechanism, true_epsilon: float, **options) -> tuple[float, list]:
    results = [at.audit(mechanism, claim=max(true_epsilon, 0.1), seed=seed, **options) for seed in range(REPETITIONS)]
    above = sum(r.epsilon_lower_bound > true_epsilon for r in results)
    return above / REPETITIONS, results


def test_validity_randomized_response():
    # The Bayes attacker attains the bound exactly, so ε_lb > ε happens exactly when p_lb exceeds the true success:
    # the sharpest case there is.
    fraction, results = _exceedance(RandomizedResponseMechanism(epsilon=1.0, num_values=4), 1.0, trials=2000)
    assert fraction <= ALLOWED
    assert np.mean([r.epsilon_lower_bound for r in results]) > 0.75  # the audits do find the leakage


def test_validity_randomized_response_with_a_non_uniform_prior():
    # Binary, prior (0.7, 0.3), ε = 1.5: the maximum a posteriori attacker also attains the binary maximum.
    mechanism = RandomizedResponseMechanism(epsilon=1.5, num_values=2)
    fraction, results = _exceedance(mechanism, 1.5, trials=2000, prior=[0.7, 0.3])
    assert fraction <= ALLOWED
    assert np.mean([r.success_rate for r in results]) == pytest.approx(_rr_success(1.5, 2), abs=0.005)


def test_validity_no_leakage_with_a_trained_classifier():
    attacker = at.Classifier(training_trials=1000)
    fraction, results = _exceedance(NoLeakage(), 0.0, trials=2000, k=3, attacker=attacker)
    assert fraction <= ALLOWED
    assert np.mean([r.success_rate for r in results]) == pytest.approx(1 / 3, abs=0.01)


def test_validity_no_leakage_bayes_with_a_given_likelihood():
    attacker = at.BayesOptimal(log_likelihood=_no_leakage_likelihood)
    fraction, _ = _exceedance(NoLeakage(), 0.0, trials=2000, prior=[0.5, 0.3, 0.2], attacker=attacker)
    assert fraction <= ALLOWED


def test_validity_randomized_response_non_uniform_ternary_prior():
    # k = 3 and a non-uniform prior: the ε lower bound inverts the linear programme.
    mechanism = RandomizedResponseMechanism(epsilon=1.0, num_values=3)
    fraction, _ = _exceedance(mechanism, 1.0, trials=3000, prior=[0.5, 0.3, 0.2])
    assert fraction <= ALLOWED


def test_outputs_reach_the_attacker_in_trial_order():
    # Were the outputs grouped by attribute value, guessing by position would win almost always; in trial order
    # it is an attacker that ignores the output (success 1/3).
    result = at.audit(NoLeakage(), trials=30_000, claim=0.5, k=3, attacker=_position_guess, seed=1)
    assert result.success_rate == pytest.approx(1 / 3, abs=0.01)
    assert result.attacker == "user attacker"


# --------------------------------------------------------------------------------------------
# Verdicts, readings, Theorem 4
# --------------------------------------------------------------------------------------------


def test_leaking_more_than_claimed_is_a_violation():
    result = at.audit(RandomizedResponseMechanism(epsilon=2.0, num_values=4), trials=5000, claim=1.0, seed=3)
    assert result.verdict is Verdict.VIOLATION
    assert result.success_lower_bound > result.success_upper_bound
    assert result.epsilon_lower_bound > 1.0
    assert "violated" in result.verdict_reason


def test_gaussian_leaking_more_than_its_gdp_claim_is_a_violation():
    # σ = 0.5 between attribute values 0 and 1 is exactly 2-GDP; a 1-GDP claim allows at most Φ(1/2).
    mechanism = GaussianMechanism(noise_multiplier=0.5)
    result = at.audit(mechanism, trials=5000, claim=at.GdpClaim(mu=1.0), datasets=(0.0, 1.0), seed=4)
    assert result.verdict is Verdict.VIOLATION
    assert result.replace_one_success_upper_bound == pytest.approx(stats.norm.cdf(0.5), abs=1e-9)
    assert result.epsilon_claimed == pytest.approx(conversions.gdp_epsilon(1.0, 1e-5))
    assert "add_remove" in result.adjacency  # the mechanism states an add/remove guarantee: said in the result


def test_correct_claim_is_consistent_and_a_tiny_audit_is_inconclusive():
    mechanism = RandomizedResponseMechanism(epsilon=1.0, num_values=3)
    assert at.audit(mechanism, trials=5000, claim=1.0, seed=5).verdict is Verdict.CONSISTENT
    tiny = at.audit(mechanism, trials=20, claim=8.0, seed=5)
    assert tiny.verdict is Verdict.INCONCLUSIVE
    assert tiny.ceiling_success == pytest.approx(SIGNIFICANCE ** (1 / 20))
    assert tiny.ceiling_success <= tiny.success_upper_bound and tiny.ceiling_epsilon < 8.0


def test_the_two_readings_of_a_claim():
    # Binary RR at ε = 1 against a claim of 0.8. Replace-one: at most e^0.8/(e^0.8 + 1) = 0.690 < 0.731, a violation.
    # Feature-DP (Theorem 4, b = 1/2): at most 1 − e^−0.8/2 = 0.775 > 0.731, consistent.
    mechanism = RandomizedResponseMechanism(epsilon=1.0, num_values=2)
    replace = at.audit(mechanism, trials=20_000, claim=0.8, seed=6)
    feature = at.audit(mechanism, trials=20_000, claim=0.8, seed=6, reading=at.ClaimReading.FEATURE_DP)
    assert replace.successes == feature.successes
    assert replace.verdict is Verdict.VIOLATION and replace.epsilon_lower_bound > 0.8
    assert feature.verdict is Verdict.CONSISTENT and feature.feature_dp_epsilon_lower_bound <= 0.8
    assert feature.success_upper_bound == pytest.approx(1 - math.exp(-0.8) / 2, abs=1e-9)
    assert "Theorem 4" in feature.verdict_reason
    # Each reading's verdict agrees with its own ε lower bound against the claim.
    low = feature.success_lower_bound
    assert feature.feature_dp_epsilon_lower_bound == pytest.approx(math.log(0.5 / (1 - low)), abs=1e-9)


def test_the_feature_dp_reading_asks_the_plug_in_registry(monkeypatch):
    """issue 39: Theorem 4 comes from the plug-in that declares attribute_inference bounds (feature DP), never from
    a module the audit names; the numbers are the plug-in's own."""
    import types

    from dplens.accountant import plugins
    from dplens.research.feature_dp import accounting as fdp

    assert plugins.attribute_inference_bounds() is fdp
    mechanism = RandomizedResponseMechanism(epsilon=1.0, num_values=2)
    feature = at.audit(mechanism, trials=2000, claim=0.8, seed=6, reading=at.ClaimReading.FEATURE_DP)
    assert feature.theorem4_baseline == fdp.baseline_success([0.5, 0.5])
    assert feature.theorem4_success_upper_bound == fdp.attribute_inference_bound_dp(
        epsilon=0.8, delta=0.0, baseline=feature.theorem4_baseline
    )
    stub = types.SimpleNamespace(
        baseline_success=fdp.baseline_success,
        attribute_inference_bound_dp=lambda *, epsilon, delta, baseline: 0.999,
    )
    monkeypatch.setattr(plugins, "attribute_inference_bounds", lambda: stub)
    stubbed = at.audit(mechanism, trials=2000, claim=0.8, seed=6, reading=at.ClaimReading.FEATURE_DP)
    assert stubbed.theorem4_success_upper_bound == 0.999 and stubbed.successes == feature.successes


# feature-dp.md §3.3 test values: (ε, δ, b) → 1 − f_{ε,δ}(b), and Φ(Φ⁻¹(b) + μ) for μ-GDP.
THEOREM4_DP = [(1.0, 1e-5, 2, 0.816064), (1.0, 0.0, 10, 0.271828)]
THEOREM4_GDP = {
    0.5: (0.691462, 0.217239, 0.033899),
    1.0: (0.841345, 0.389144, 0.092362),
    2.0: (0.977250, 0.763760, 0.372081),
}


@pytest.mark.parametrize(("epsilon", "delta", "k", "expected"), THEOREM4_DP)
def test_theorem4_side_by_side_dp(epsilon, delta, k, expected):
    mechanism = RandomizedResponseMechanism(epsilon=0.5, num_values=k)
    result = at.audit(mechanism, trials=500, claim=at.DpClaim(epsilon=epsilon, delta=delta), seed=0)
    assert round(result.theorem4_success_upper_bound, 6) == expected
    assert result.theorem4_baseline == pytest.approx(1 / k)
    assert result.replace_one_success_upper_bound <= result.theorem4_success_upper_bound  # replace-one is tighter


@pytest.mark.parametrize("mu", sorted(THEOREM4_GDP))
def test_theorem4_side_by_side_gdp(mu):
    for k, expected in zip((2, 10, 100), THEOREM4_GDP[mu], strict=True):
        mechanism = RandomizedResponseMechanism(epsilon=0.5, num_values=k)
        result = at.audit(mechanism, trials=200, claim=at.GdpClaim(mu=mu), seed=0)
        assert round(result.theorem4_success_upper_bound, 6) == expected
    binary = at.audit(RandomizedResponseMechanism(epsilon=0.5), trials=200, claim=at.GdpClaim(mu=mu), seed=0)
    # Replace-one μ-GDP between two equally likely values: the Bayes error of N(0, 1) against N(μ, 1).
    assert binary.replace_one_success_upper_bound == pytest.approx(stats.norm.cdf(mu / 2), abs=1e-9)
    assert binary.replace_one_success_upper_bound >= stats.norm.cdf(mu / 2)


def test_profile_claim_agrees_with_the_gdp_claim():
    profile = PrivacyProfile(remove=lambda e: conversions.gdp_delta(1.0, e), description="1-GDP")
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    common = dict(trials=2000, datasets=(0.0, 1.0), delta=1e-5, seed=2)
    by_profile = at.audit(mechanism, claim=at.ProfileClaim(profile=profile), **common)
    by_gdp = at.audit(mechanism, claim=at.GdpClaim(mu=1.0), **common)
    assert by_profile.replace_one_success_upper_bound == pytest.approx(by_gdp.replace_one_success_upper_bound)
    assert by_profile.theorem4_success_upper_bound == pytest.approx(by_gdp.theorem4_success_upper_bound, abs=1e-5)
    assert by_profile.epsilon_claimed == pytest.approx(by_gdp.epsilon_claimed, rel=1e-6)


# --------------------------------------------------------------------------------------------
# Statistics, attackers, execution, result contract
# --------------------------------------------------------------------------------------------


def test_bound_from_counts_matches_clopper_pearson():
    bound = at.bound_from_counts(700, 1000, prior=[0.5, 0.5], confidence=0.9)
    lower = float(bd.clopper_pearson_lower(700, 1000, 0.1))
    assert bound.success_lower_bound == lower
    assert bound.confidence_interval == (
        float(bd.clopper_pearson_lower(700, 1000, 0.05)),
        float(bd.clopper_pearson_upper(700, 1000, 0.05)),
    )
    assert bound.epsilon_lower_bound == pytest.approx(math.log(lower / (1 - lower)))
    assert bound.advantage == pytest.approx((0.7 - 0.5) / 0.5)
    assert bound.to_dict()["is_estimate"] is False


def test_classifier_finds_gaussian_leakage_between_query_values():
    mechanism = GaussianMechanism(noise_multiplier=0.5)
    result = at.audit(
        mechanism, trials=20_000, claim=1.0, datasets=lambda a: float(a), k=3, attacker=at.Classifier(), seed=8
    )
    # Means 0, 1, 2 and σ = 0.5: the Bayes boundaries 0.5 and 1.5 lie one σ from the nearest means, so the best
    # success is (Φ(1) + (2Φ(1) − 1) + Φ(1))/3 ≈ 0.788; the trained classifier comes close, never above.
    bayes = (4 * stats.norm.cdf(1.0) - 1) / 3
    assert bayes - 0.02 < result.success_rate < result.confidence_interval[1]
    assert result.confidence_interval[0] <= bayes
    assert result.epsilon_lower_bound > 1.0


def test_guesses_outside_the_values_fail_and_non_integer_guesses_are_refused():
    result = at.audit(NoLeakage(), trials=1000, claim=0.5, k=3, attacker=_out_of_range_guess)
    assert result.successes == 0 and all(row[-1] == sum(row) for row in result.confusion)
    with pytest.raises(ValueError, match="integer"):
        at.audit(NoLeakage(), trials=1000, claim=0.5, k=3, attacker=_half_guess)


def test_bit_identical_in_process_and_in_a_pool(tmp_path):
    def run(seed_offset: int = 0, **options):
        result = at.audit(
            GaussianMechanism(noise_multiplier=1.0),
            trials=40_000,
            claim=1.0,
            datasets=(0.0, 1.0, 2.0),
            attacker=at.Classifier(training_trials=2000),
            chunk_size=5000,
            seed=9 + seed_offset,
            **options,
        )
        data = result.to_dict()
        del data["elapsed_seconds"], data["backend"]
        return data

    alone = run()
    assert run(workers=2) == alone
    checkpoint = tmp_path / "attribute.json"
    assert run(checkpoint=checkpoint) == alone
    assert run(checkpoint=checkpoint) == alone  # resumed: every chunk from the file, none counted twice
    assert run(seed_offset=1)["successes"] != alone["successes"]


def test_result_is_strict_json_and_states_its_adjacency():
    result = at.audit(RandomizedResponseMechanism(epsilon=1.0, num_values=3), trials=3000, claim=1.0, seed=1)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    for key in (
        "successes",
        "trials",
        "success_rate",
        "confidence_interval",
        "baseline",
        "advantage",
        "epsilon_lower_bound",
        "success_upper_bound",
        "theorem4_success_upper_bound",
        "epsilon_claimed",
        "delta",
        "confidence",
        "k",
        "prior",
        "attacker",
        "verdict",
        "verdict_reason",
        "seed",
    ):
        assert key in data
    assert data["is_estimate"] is False
    assert "changing this one attribute of one record" in data["adjacency"]
    assert data["verdict"] in {"CONSISTENT", "VIOLATION", "INCONCLUSIVE"}
    assert sum(map(sum, data["confusion"])) == data["trials"] == 3000
    assert data["successes"] == sum(data["confusion"][a][a] for a in range(3))


RR = RandomizedResponseMechanism(epsilon=1.0, num_values=3)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        (dict(trials=0, claim=1.0), "trials"),
        (dict(trials=100, claim=-1.0), "claim"),
        (dict(trials=100, claim="1"), "claim"),
        (dict(trials=100, claim=at.DpClaim(epsilon=1.0, delta=1e-5), delta=1e-6), "delta"),
        (dict(trials=100, claim=at.GdpClaim(mu=1.0), delta=0.0), "delta"),
        (dict(trials=100, claim=1.0, confidence=1.5), "confidence"),
        (dict(trials=100, claim=1.0, seed=-1), "seed"),
        (dict(trials=100, claim=1.0, prior=[0.5, 0.6, -0.1]), "prior"),
        (dict(trials=100, claim=1.0, prior=[0.5, 0.5]), "prior"),
        (dict(trials=100, claim=1.0, prior=[1.0, 0.0, 0.0]), "prior"),
        (dict(trials=100, claim=1.0, k=3, datasets=(0, 1)), "datasets"),
        (dict(trials=100, claim=1.0, datasets="abc"), "datasets"),
        (dict(trials=100, claim=1.0, k=1), "k"),
        (dict(trials=100, claim=1.0, attacker="bayes"), "attacker"),
        (dict(trials=100, claim=1.0, reading="replace-one"), "reading"),
        (dict(trials=100, claim=1.0, chunk_size=0), "chunk_size"),
        (dict(trials=100, claim=1.0, workers=0), "workers"),
        (dict(trials=100, claim=1.0, attacker=at.Classifier(training_trials=1)), "training_trials"),
    ],
)
def test_bad_input_names_the_argument(options, name):
    with pytest.raises(ValueError, match=name):
        at.audit(RR, **options)


def test_bad_input_to_the_bounds_and_mechanisms():
    with pytest.raises(ValueError, match="mechanism"):
        at.audit(object(), trials=10, claim=1.0, k=2)
    with pytest.raises(ValueError, match="attacker"):
        at.audit(NoLeakage(), trials=10, claim=1.0, k=2, attacker=at.BayesOptimal())
    with pytest.raises(ValueError, match="k"):
        at.audit(NoLeakage(), trials=10, claim=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        at.DpClaim(epsilon=math.inf)
    with pytest.raises(ValueError, match="mu"):
        at.GdpClaim(mu=-1)
    with pytest.raises(ValueError, match="profile"):
        at.ProfileClaim(profile=lambda e: e)
    with pytest.raises(ValueError, match="success_lower_bound"):
        at.epsilon_lower_bound(1.5, delta=0.0, prior=[0.5, 0.5])
    with pytest.raises(ValueError, match="delta"):
        at.max_success(epsilon=1.0, delta=1.0, prior=[0.5, 0.5])
    with pytest.raises(ValueError, match="successes"):
        at.bound_from_counts(11, 10, prior=[0.5, 0.5])
