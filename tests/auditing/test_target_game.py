"""Target audits: the acceptance cases of issue 15, validity, multiplicity, reproducibility, the result type."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dplens.auditing import target_game as tg
from dplens.auditing.floats import SamplerModel
from dplens.auditing.games import Verdict
from dplens.auditing.stages.candidates import fit_candidates
from dplens.auditing.stages.chunks import TargetCountTask
from dplens.auditing.stages.pilot import draw_pilot
from dplens.auditing.targets import TargetPair, as_target, batched

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "targets"


@pytest.fixture
def in_examples(monkeypatch):
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("mechanisms", None)


def _audit(name: str, pair: str, trials: int, **kwargs):
    return tg.audit_target(f"mechanisms:{name}", pair, claim_epsilon=1.0, trials=trials, seed=0, **kwargs)


def test_textbook_float_laplace_is_a_violation(in_examples):
    result = _audit("textbook_laplace", "pair.json", 20_000)
    assert result.verdict is Verdict.VIOLATION and result.epsilon_lower_bound > 5
    assert result.best_score.startswith("float reachability (numpy-laplace")
    evidence = result.float_evidence[0]
    assert evidence["unreachable_from_neighbour"] > 0.3 * 20_000
    assert evidence["own_side_misses_data"] == evidence["own_side_misses_neighbour"] == 0
    assert "outputs on D are unreachable from the neighbour's query value" in result.verdict_reason
    assert result.probe["available"] and result.probe["query_data"] == 3.0 and result.reproducible


@pytest.mark.slow
def test_acceptance_textbook_laplace_within_1e5(in_examples):
    result = _audit("textbook_laplace", "pair.json", 100_000)
    assert result.verdict is Verdict.VIOLATION and result.epsilon_lower_bound > 8


def test_exact_geometric_is_consistent(in_examples):
    result = _audit("geometric", "pair.json", 20_000)
    assert result.verdict is Verdict.CONSISTENT and result.epsilon_lower_bound <= 1.0
    assert result.output_kind == "integer" and result.float_evidence == ()


@pytest.mark.slow
def test_acceptance_geometric_consistent_at_2e5(in_examples):
    result = _audit("geometric", "pair.json", 200_000)
    assert result.verdict is Verdict.CONSISTENT and result.epsilon_lower_bound <= 1.0


def test_sensitivity_slip_is_a_violation_even_without_float_checks(in_examples):
    result = _audit("sensitivity_slip", "pair_slip.json", 20_000)
    assert result.verdict is Verdict.VIOLATION
    histogram = next(s for s in result.scores if s["kind"] == "histogram-ratio")
    assert histogram["epsilon_lower_bound"] > 2.0  # the distributional leak alone (true epsilon 3)


def test_global_rng_target_is_not_reproducible(in_examples):
    result = _audit("global_rng_laplace", "pair.json", 2_000)
    assert result.reproducible is False
    assert "numpy's global RNG" in result.reproducibility_note
    assert result.to_dict()["reproducible"] is False
    python_random = _audit("python_random_laplace", "pair.json", 2_000)
    assert python_random.reproducible is False


def test_python_random_float_flaw_with_stated_sampler(in_examples):
    pair = TargetPair(data=[1, 1, 0, 1], neighbour=[1, 1, 0], query=(3.0, 2.0), noise=("inverse-cdf-laplace", 1.0))
    result = tg.audit_target("mechanisms:python_random_laplace", pair, claim_epsilon=1.0, trials=5_000, seed=0)
    assert result.verdict is Verdict.VIOLATION
    assert result.float_evidence[0]["sampler"] == "inverse-cdf-laplace"


def test_categorical_and_user_scores(in_examples):
    result = _audit("randomized_response", "pair_rr.json", 10_000)
    assert result.output_kind == "categorical" and result.verdict is Verdict.CONSISTENT
    result = _audit("geometric", "pair.json", 5_000, scores="mechanisms:distance_score")
    names = [s["name"] for s in result.scores]
    assert names == ["histogram ratio (per integer, pilot)", "user score mechanisms:distance_score"]
    # one weighted Bonferroni over both scores: their shares of alpha sum to alpha, each gets part of it
    shares = [s["significance"] for s in result.scores]
    assert sum(shares) == pytest.approx(0.05) and all(0 < s < 0.05 for s in shares)


def test_bonferroni_over_scores_is_paid():
    def target(data, rng):
        return float(data) + rng.laplace(0.0, 1.0)

    one = tg.audit_target(target, (1, 0), claim_epsilon=1.0, trials=2_000, seed=0, scores=(tg.HistogramRatio(),))
    both = tg.audit_target(target, (1, 0), claim_epsilon=1.0, trials=2_000, seed=0)
    assert [s["significance"] for s in one.scores] == [pytest.approx(0.05)]
    shares = [s["significance"] for s in both.scores]
    assert len(shares) >= 2 and sum(shares) == pytest.approx(0.05) and max(shares) < 0.05


def test_vector_outputs_use_a_density_ratio_and_coordinatewise_float_checks():
    @batched
    def histogram(data, rng, size):
        return np.asarray(data, dtype=float) + rng.laplace(0.0, 1.0, size=(size, 2))

    result = tg.audit_target(histogram, ([3.0, 1.0], [2.0, 1.0]), claim_epsilon=1.0, trials=5_000, seed=1)
    assert result.output_kind == "vector (dimension 2)"
    assert {s["kind"] for s in result.scores} == {"logistic-ratio", "boosted-trees", "reachability"}
    assert result.verdict is Verdict.VIOLATION


def test_counts_do_not_grow_with_trials():
    def target(data, rng):
        return float(data) + rng.normal(0.0, 1.0)

    pair = TargetPair(data=1.0, neighbour=0.0)
    fit = draw_pilot(as_target(target), pair, 0, 200, 0)
    binners, _ = fit_candidates((tg.HistogramRatio(),), fit, tg.OutputKind.REAL, 1, None, pair)
    task = TargetCountTask(as_target(target), 1.0, 0.0, tuple(binners), 0)
    small = task(0, 10, np.random.SeedSequence(1))
    large = task(0, 3_000, np.random.SeedSequence(1))
    assert small.shape == large.shape and large.sum() == 6_000


def test_workers_give_the_same_result_as_one_process(in_examples):
    one = _audit("noisy_sum_batched", "pair.json", 40_000)
    two = _audit("noisy_sum_batched", "pair.json", 40_000, workers=2)
    assert one.epsilon_lower_bound == two.epsilon_lower_bound and two.backend.startswith("process-pool")


def test_result_round_trips_and_reads_well(in_examples):
    result = _audit("textbook_laplace", "pair.json", 3_000)
    data = result.to_dict()
    assert tg.TargetAuditResult.from_dict(data).to_dict() == data
    text = repr(result)
    assert "verdict=VIOLATION" in text and "reproducible=True" in text
    with pytest.raises(ValueError, match="missing required field 'verdict'"):
        tg.TargetAuditResult.from_dict({k: v for k, v in data.items() if k != "verdict"})


def test_pair_search_runs_the_final_audit_on_the_chosen_pair(in_examples):
    result = _audit("sensitivity_slip", "pair_search.json", 5_000, search_budget=8, search_trials=500)
    assert len(result.pairs_tried) == 8 and all(p["is_estimate"] for p in result.pairs_tried)
    assert result.pair["description"].startswith("searched (add_remove")
    assert result.verdict is Verdict.VIOLATION


def test_bad_arguments():
    def target(data, rng):
        return 0.0

    with pytest.raises(ValueError, match="claim_epsilon must be a finite number >= 0; got -1"):
        tg.audit_target(target, (1, 0), claim_epsilon=-1, trials=10)
    with pytest.raises(ValueError, match="trials must be an integer >= 1; got 0"):
        tg.audit_target(target, (1, 0), claim_epsilon=1.0, trials=0)
    with pytest.raises(ValueError, match="no score can be applied to these outputs"):  # categories, no histogram
        tg.audit_target(lambda data, rng: "x", (1, 0), claim_epsilon=1.0, trials=10, scores=(tg.HistogramRatio(),))


# --------------------------------------------------------------------------------------------
# Validity: audits of targets exactly at their claim violate it no more often than 1 − confidence
# --------------------------------------------------------------------------------------------


@batched
def _geometric_at_claim(data, rng, size):
    p = -math.expm1(-1.0)
    return int(data) + rng.geometric(p, size) - rng.geometric(p, size)


def _flip_at_claim(data, rng):
    keep = rng.random() < math.exp(1.0) / (1.0 + math.exp(1.0))
    return bool(data) if keep else not bool(data)


def _violation_rate(target, runs: int, trials: int) -> tuple[int, int]:
    violations = 0
    for seed in range(runs):
        result = tg.audit_target(target, (1, 0), claim_epsilon=1.0, trials=trials, seed=seed, pilot_trials=2_000)
        violations += result.verdict is Verdict.VIOLATION
    return violations, runs


def _binomial_ceiling(runs: int, significance: float = 0.05) -> int:
    """The largest violation count compatible with a rate <= significance (one-sided 99.9 % binomial bound)."""
    return int(stats.binom.ppf(0.999, runs, significance))


def test_validity_small():
    violations, runs = _violation_rate(_geometric_at_claim, 25, 4_000)
    assert violations <= _binomial_ceiling(runs)


@pytest.mark.slow
@pytest.mark.parametrize("target", [_geometric_at_claim, _flip_at_claim])
def test_validity_200_audits_at_the_claim(target):
    violations, runs = _violation_rate(target, 200, 20_000)
    print(f"{target.__name__}: {violations} violations in {runs} audits")
    assert violations <= _binomial_ceiling(runs)


def test_float_check_on_release_of_dplens_gaussian_is_silent():
    from dplens.mechanisms.additive import GaussianMechanism

    mechanism = GaussianMechanism(noise_multiplier=1.0)
    checks = tuple(tg.Reachability(sampler=m, scale=1.0) for m in SamplerModel)
    pair = TargetPair(data=1.0, neighbour=0.0, query=(1.0, 0.0))
    result = tg.audit_target(
        as_target(mechanism),
        pair,
        claim_epsilon=4.4,
        claim_delta=1e-5,
        trials=20_000,
        seed=0,
        scores=(tg.HistogramRatio(), *checks),
    )
    assert result.verdict is Verdict.CONSISTENT and len(result.scores) == 6
