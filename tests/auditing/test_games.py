"""The distinguishing game: validity over hundreds of seeded audits (auditing-anchors §5.6 T1, §9), verdicts,
scores, strategies, the result's contract, and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dplens.accountant import conversions
from dplens.auditing import bounds as bd
from dplens.auditing import games
from dplens.mechanisms.additive import (
    GaussianMechanism,
    LaplaceMechanism,
    NoLeakage,
    RandomizedResponseMechanism,
    SubsampledGaussianMechanism,
)
from dplens.mechanisms.base import NeighbouringPair
from dplens.spec import load_spec, parse_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIGNIFICANCE = 0.05
REPETITIONS = 300
#: The acceptance rule of the validity suite: the fraction of bounds above the true ε may exceed α only by
#: two standard errors of a binomial proportion over the repetitions.
ALLOWED = SIGNIFICANCE + 2 * math.sqrt(SIGNIFICANCE * (1 - SIGNIFICANCE) / REPETITIONS)


def _identity(outputs):
    return np.asarray(outputs, dtype=float)


def _exceedance(mechanism, true_epsilon: float, *, delta: float, trials: int, **options) -> tuple[float, list]:
    results = [
        games.audit(
            mechanism, trials=trials, delta=delta, claimed_epsilon=true_epsilon, seed=seed, estimates=False, **options
        )
        for seed in range(REPETITIONS)
    ]
    above = sum(r.epsilon_lower_bound > true_epsilon for r in results)
    return above / REPETITIONS, results


# --------------------------------------------------------------------------------------------
# Validity: ≥ 200 seeded audits per case, the fraction above the true ε ≤ α + 2 standard errors
# --------------------------------------------------------------------------------------------


def test_validity_gaussian_default_strategy():
    true_epsilon = conversions.gdp_epsilon(1.0, 1e-5)  # σ = 1: exactly 1-GDP
    fraction, results = _exceedance(GaussianMechanism(noise_multiplier=1.0), true_epsilon, delta=1e-5, trials=5000)
    assert fraction <= ALLOWED
    assert np.mean([r.epsilon_lower_bound for r in results]) > 0.5  # the audits do find leakage


def test_validity_laplace_at_the_optimal_fixed_threshold():
    # The most sensitive case: one threshold, fixed in advance at the optimum (loss = ε exactly for o ≥ 1), so
    # the bound sits right at the true ε and only the Clopper–Pearson coverage keeps it below.
    epsilon = 1.0
    fraction, results = _exceedance(
        LaplaceMechanism(scale=1 / epsilon),
        epsilon,
        delta=0.0,
        trials=5000,
        strategy=bd.FixedThreshold(epsilon * (1 - 1e-9)),
    )
    assert fraction <= ALLOWED
    assert np.mean([r.epsilon_lower_bound for r in results]) > 0.85 * epsilon


def test_validity_randomized_response():
    epsilon = 0.5
    mechanism = RandomizedResponseMechanism(epsilon=epsilon, num_values=3)
    fraction, results = _exceedance(mechanism, epsilon, delta=0.0, trials=4000)
    assert fraction <= ALLOWED
    assert max(r.epsilon_lower_bound for r in results) > 0


def test_validity_no_leakage_learned_score():
    # True ε = 0: any positive bound is a false claim of leakage.
    mechanism = NoLeakage()
    fraction, results = _exceedance(
        mechanism, 0.0, delta=0.0, trials=2000, score=games.LearnedScore(training_trials=500)
    )
    assert fraction <= ALLOWED
    assert all(r.score.startswith("black-box") for r in results)


def test_validity_no_leakage_black_box_score():
    fraction, _ = _exceedance(NoLeakage(), 0.0, delta=0.0, trials=2000, score=games.BlackBoxScore(_identity))
    assert fraction <= ALLOWED


def test_validity_reverse_direction():
    """Evidence only in the reverse direction (the case of jax_privacy PR #270): one Poisson-subsampled Gaussian
    step audited as "absent (D) vs present (D′)". The log-likelihood ratio is then bounded above by −log(1 − q), so
    the forward test can certify at most log 2 here, and the leakage shows up as D′ vs D on the complement."""
    mechanism = SubsampledGaussianMechanism(noise_multiplier=0.5, sampling_rate=0.5)
    pair = NeighbouringPair(data=0.0, neighbour=1.0, description="absent vs present")
    accountant_epsilon = mechanism_epsilon(mechanism, 1e-5)  # an upper bound on the true ε of either direction
    fraction, results = _exceedance(mechanism, accountant_epsilon, delta=1e-5, trials=5000, pair=pair)
    assert fraction <= ALLOWED
    strong = [r for r in results if r.epsilon_lower_bound > math.log(2)]
    assert len(strong) > REPETITIONS // 2
    assert all(r.bound_direction == bd.REVERSE for r in strong)


def mechanism_epsilon(mechanism, delta: float) -> float:
    from dplens.accountant.compose import Accountant

    return Accountant().compose(mechanism.event).epsilon(delta)


# --------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------


def test_under_claimed_gaussian_is_a_violation():
    spec = load_spec(EXAMPLES / "gaussian_claim.toml")  # σ = 1, claim ε = 1 at δ = 1e-5 (true ε = 4.38)
    result = games.audit_spec(spec, trials=100_000, seed=1)
    assert result.verdict is games.Verdict.VIOLATION
    assert result.epsilon_lower_bound > spec.claim.epsilon
    assert result.epsilon_lower_bound <= conversions.gdp_epsilon(1.0, 1e-5)
    assert result.claim_source == "spec [claim]"
    assert "violated" in result.verdict_reason


def test_correct_claim_is_consistent():
    claim = conversions.gdp_epsilon(1.0, 1e-5)
    result = games.audit(GaussianMechanism(noise_multiplier=1.0), trials=50_000, delta=1e-5, claimed_epsilon=claim)
    assert result.verdict is games.Verdict.CONSISTENT
    assert 0 < result.epsilon_lower_bound <= claim < result.ceiling


def test_claim_beyond_the_ceiling_is_inconclusive():
    result = games.audit(LaplaceMechanism(scale=0.05), trials=1000, delta=0.0, claimed_epsilon=20.0)
    assert result.ceiling < 20.0
    assert result.verdict is games.Verdict.INCONCLUSIVE
    assert "ceiling" in result.verdict_reason


def test_spec_without_claim_audits_the_accountants_epsilon():
    spec = parse_spec({"mechanism": [{"type": "laplace", "epsilon": 1.0}]})
    result = games.audit_spec(spec, trials=20_000, delta=0.0)
    assert result.epsilon_claimed == pytest.approx(1.0)
    assert result.claim_source.startswith("accountant")
    assert result.verdict is games.Verdict.CONSISTENT

    gaussian = parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 2.0}]})
    result = games.audit_spec(gaussian, trials=20_000)
    assert result.delta == 1e-5
    assert result.epsilon_claimed == pytest.approx(gaussian.accountant().epsilon(1e-5))


def test_spec_delta_must_match_the_claim():
    spec = load_spec(EXAMPLES / "gaussian_claim.toml")
    with pytest.raises(ValueError, match="delta"):
        games.audit_spec(spec, trials=1000, delta=1e-3)


def test_heterogeneous_spec_is_audited_as_a_product():
    spec = load_spec(EXAMPLES / "heterogeneous.toml")
    result = games.audit_spec(spec, trials=5000)
    # The accountant's ε (≈ 10.1) is beyond what 5000 trials can certify: no violation could be seen.
    assert result.ceiling < result.epsilon_claimed
    assert result.verdict is games.Verdict.INCONCLUSIVE
    assert 0 < result.epsilon_lower_bound <= result.epsilon_claimed
    assert "[3]" in result.pair  # three parts, each with its worst-case pair


# --------------------------------------------------------------------------------------------
# Scores, strategies, determinism
# --------------------------------------------------------------------------------------------


def test_learned_score_finds_gaussian_leakage():
    exact = games.audit(GaussianMechanism(noise_multiplier=1.0), trials=20_000, delta=1e-5, claimed_epsilon=5.0)
    learned = games.audit(
        GaussianMechanism(noise_multiplier=1.0),
        trials=20_000,
        delta=1e-5,
        claimed_epsilon=5.0,
        score=games.LearnedScore(training_trials=5000),
    )
    assert learned.epsilon_lower_bound > 0.7 * exact.epsilon_lower_bound > 0


def test_exact_score_needs_a_likelihood_ratio():
    with pytest.raises(ValueError, match="log_likelihood_ratio"):
        games.audit(NoLeakage(), trials=100, delta=0.0, claimed_epsilon=1.0, score=games.ExactLikelihoodRatio())


def test_split_strategy_is_valid_and_counts_only_the_held_out_chunks():
    mechanism = LaplaceMechanism(scale=1.0)
    result = games.audit(mechanism, trials=16_000, delta=0.0, claimed_epsilon=1.0, strategy=bd.Split(), seed=3)
    assert result.threshold_strategy["name"] == "split"
    assert 0.4 * 16_000 <= result.trials <= 0.6 * 16_000  # about half of the chunks choose, the rest bound
    assert 0 < result.epsilon_lower_bound <= 1.0


def test_same_seed_same_result_and_different_seeds_differ():
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    first, second, other = (
        games.audit(mechanism, trials=10_000, delta=1e-5, claimed_epsilon=4.4, seed=s).to_dict() for s in (7, 7, 8)
    )
    for data in (first, second, other):
        data.pop("elapsed_seconds")
    assert first == second
    assert first["counts"] != other["counts"]


def test_more_trials_tighten_the_bound():
    mechanism = LaplaceMechanism(scale=1.0)
    small = games.audit(mechanism, trials=2_000, delta=0.0, claimed_epsilon=1.0, seed=5)
    large = games.audit(mechanism, trials=200_000, delta=0.0, claimed_epsilon=1.0, seed=5)
    assert small.epsilon_lower_bound < large.epsilon_lower_bound <= 1.0
    assert small.ceiling < large.ceiling
    trials = [point["trials"] for point in large.trajectory]
    assert trials == sorted(trials) and trials[-1] == 200_000


# --------------------------------------------------------------------------------------------
# The result's contract
# --------------------------------------------------------------------------------------------


def test_result_round_trips_through_strict_json():
    result = games.audit(GaussianMechanism(noise_multiplier=1.0), trials=5000, delta=1e-5, claimed_epsilon=2.0)
    data = result.to_dict()
    text = json.dumps(data, allow_nan=False)  # no ±inf or NaN may leak into JSON
    assert games.AuditResult.from_dict(json.loads(text)).to_dict() == data
    for key in ("epsilon_lower_bound", "epsilon_claimed", "delta", "confidence", "trials", "verdict", "ceiling"):
        assert key in data
    assert data["is_estimate"] is False
    assert data["estimates"] and all(e["is_estimate"] is True and e["assumption"] for e in data["estimates"])
    assert {e["name"] for e in data["estimates"]} == {"gdp", "point"}
    assert sum(data["counts"]["positives"]) == sum(data["counts"]["negatives"]) == 5000


def test_result_from_dict_rejects_tampering():
    data = games.audit(LaplaceMechanism(scale=1.0), trials=1000, delta=0.0, claimed_epsilon=1.0).to_dict()
    missing = dict(data)
    missing.pop("ceiling")
    with pytest.raises(ValueError, match="ceiling"):
        games.AuditResult.from_dict(missing)
    with pytest.raises(ValueError, match="format_version"):
        games.AuditResult.from_dict(data | {"format_version": 99})


def test_pure_dp_has_no_gdp_estimate_and_gdp_is_labelled():
    pure = games.audit(LaplaceMechanism(scale=1.0), trials=5000, delta=0.0, claimed_epsilon=1.0)
    assert [e["name"] for e in pure.estimates] == ["point"]
    approx = games.audit(GaussianMechanism(noise_multiplier=1.0), trials=5000, delta=1e-5, claimed_epsilon=4.4)
    gdp = next(e for e in approx.estimates if e["name"] == "gdp")
    assert "GDP-shape assumption" in gdp["assumption"] and gdp["mu"] > 0


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"trials": 0}, "trials"),
        ({"trials": 1.5}, "trials"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0.2}, "confidence"),
        ({"claimed_epsilon": -1.0}, "claimed_epsilon"),
        ({"claimed_epsilon": math.inf}, "claimed_epsilon"),
        ({"delta": 1.5}, "delta"),
        ({"seed": -3}, "seed"),
        ({"pair": (1.0, 0.0)}, "pair"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"score": "exact"}, "score"),
        ({"strategy": "grid"}, "strategy"),
    ],
)
def test_bad_input_names_the_argument(options, name):
    arguments = {"trials": 100, "delta": 0.0, "claimed_epsilon": 1.0} | options
    with pytest.raises(ValueError, match=name):
        games.audit(LaplaceMechanism(scale=1.0), **arguments)


def test_not_a_mechanism():
    with pytest.raises(ValueError, match="mechanism"):
        games.audit(object(), trials=10, delta=0.0, claimed_epsilon=1.0)


def test_unauditable_spec_type_is_named():
    spec = parse_spec({"mechanism": [{"type": "modified_gaussmix", "k": 5, "gamma": 100.0, "eta": 0.5}]})
    with pytest.raises(ValueError, match=r"ModifiedGaussMix|modified"):
        games.audit_spec(spec, trials=100)
