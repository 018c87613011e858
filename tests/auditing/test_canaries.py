"""Canary games on DP-SGD: the acceptance cases (one run and many runs, white-box Dirac canaries, σ = 1,
q = 0.01, T = 1000), the vectorised game against the real numpy loop, the exact final-model likelihood ratio against
mpmath, input canaries, user training functions (their errors in their own words), workers, bad input."""

from __future__ import annotations

import json
import math
import re

import mpmath
import numpy as np
import pytest
from scipy import stats

from dplens.accountant import events as ev
from dplens.auditing import canaries as cn
from dplens.auditing import runner
from dplens.auditing.games import AuditResult, Verdict
from dplens.auditing.scores import OneRunAuditResult
from dplens.spec import AUDIT_CANARIES, AUDIT_INPUT_CANARIES, AUDIT_OBSERVATIONS, AUDIT_SCORES

P_MIN = 1e-3
ACCEPTANCE = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=1000)


@pytest.fixture(scope="module")
def accountant_epsilon() -> float:
    """The accountant's ε of the acceptance run at δ = 1e-5, from dp-accounting's PLD directly (the reference)."""
    import dp_accounting
    from dp_accounting import pld

    event = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))
    accountant = pld.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(event, 1000)
    return accountant.get_epsilon(1e-5)


def test_the_reference_epsilon(accountant_epsilon):
    assert accountant_epsilon == pytest.approx(1.83, abs=0.005)  # feature-dp.md §5.4 "generic unit tests": 1.8282


# --------------------------------------------------------------------------------------------
# Acceptance
# --------------------------------------------------------------------------------------------


def test_one_run_acceptance_numpy_dp_sgd(accountant_epsilon):
    training = cn.DpSgdTraining(**ACCEPTANCE)
    result = cn.one_run_canary_audit(training, canaries=1000, seed=0)  # white-box gradient, all steps, exact LLR
    assert isinstance(result, OneRunAuditResult)
    assert result.epsilon_claimed == pytest.approx(accountant_epsilon, abs=0.005)
    assert "accountant" in result.claim_source
    assert 0 < result.epsilon_lower_bound <= result.epsilon_claimed
    assert result.verdict is Verdict.CONSISTENT
    assert result.game["canary"] == "gradient" and result.game["observe"] == "all_steps"
    assert "one numpy run" in result.game["description"]
    low_claim = cn.one_run_canary_audit(training, canaries=1000, seed=0, claim=accountant_epsilon / 20)
    assert low_claim.epsilon_lower_bound == result.epsilon_lower_bound  # same seed, same run
    assert low_claim.verdict is Verdict.VIOLATION


@pytest.mark.slow
def test_one_run_acceptance_over_seeds(accountant_epsilon):
    training = cn.DpSgdTraining(**ACCEPTANCE)
    bounds = [cn.one_run_canary_audit(training, canaries=1000, seed=s).epsilon_lower_bound for s in range(20)]
    assert all(0 <= b <= accountant_epsilon for b in bounds)
    assert np.mean(np.array(bounds) > accountant_epsilon / 20) >= 0.8


def test_multi_run_dirac_small(accountant_epsilon):
    training = cn.DpSgdTraining(**ACCEPTANCE)
    result = cn.multi_run_canary_audit(training, trials=20_000, seed=1)
    assert isinstance(result, AuditResult)
    assert result.score == "exact log-likelihood ratio" and "Dirac" in result.mechanism
    # At 2·10⁴ trainings per side the bound varies with the seed: 0.35–0.49 of the accountant's ε over seeds 1–8
    # (0.64–0.89); the ≥ 0.5× acceptance is at 2·10⁵ (the slow test below: 0.55–0.60 over seeds 0–3).
    assert 0.3 * accountant_epsilon <= result.epsilon_lower_bound <= accountant_epsilon
    assert result.verdict is Verdict.CONSISTENT
    assert result.trajectory[-1]["trials"] == 20_000  # the bound against the number of trainings


@pytest.mark.slow
def test_multi_run_dirac_acceptance(accountant_epsilon):
    training = cn.DpSgdTraining(**ACCEPTANCE)
    result = cn.multi_run_canary_audit(training, trials=200_000, seed=2, workers=2)
    assert 0.5 * accountant_epsilon <= result.epsilon_lower_bound <= accountant_epsilon
    assert result.trials == 200_000


# --------------------------------------------------------------------------------------------
# The vectorised game is the real loop's canary coordinate
# --------------------------------------------------------------------------------------------


def _coordinates_of_a_real_run(m: int, seed: int):
    training = cn.DpSgdTraining(noise_multiplier=1.0, sampling_rate=0.05, steps=200, dataset_size=200, model_dim=5)
    included = np.random.default_rng(seed).random(m) < 0.5
    x, y = training.base_data()
    canary_x, canary_y = training.dirac_canaries(m)
    features = np.concatenate([np.concatenate([x, np.zeros((x.shape[0], m))], axis=1), canary_x[included]])
    labels = np.concatenate([y, canary_y[included]])
    columns = training.model_dim + np.arange(m)
    steps = []

    def observe(t, before, after):
        steps.append((before[columns] - after[columns]) * training.expected_batch_size / training.learning_rate)

    training.run(features, labels, np.random.default_rng(seed + 1), observe)
    return training, included, np.array(steps)  # (T, m), in units of C = 1


def test_real_loop_canary_coordinates_have_the_games_distribution():
    training, included, x = _coordinates_of_a_real_run(400, seed=3)
    out = x[:, ~included].ravel()
    assert stats.kstest(out, stats.norm(0, 1).cdf).pvalue > P_MIN  # pure noise σC when the canary is absent
    inside = x[:, included].ravel()
    q = training.sampling_rate

    def mixture_cdf(v):
        return (1 - q) * stats.norm.cdf(v) + q * stats.norm.cdf(v - 1.0)

    assert stats.kstest(inside, mixture_cdf).pvalue > P_MIN  # C·Bernoulli(q) + N(0, σ²C²)
    # The whole-run likelihood ratios agree with the vectorised game's (two-sample KS).
    game = cn.DiracCanaryGame(noise_multiplier=1.0, sampling_rate=q, steps=training.steps)
    real = game.log_likelihood_ratio(x[:, included].T, True, False)
    fast = game.log_likelihood_ratio(game.sample(True, 4000, np.random.default_rng(9)), True, False)
    assert stats.ks_2samp(real, fast).pvalue > P_MIN


def test_train_interface_returns_the_updates():
    training = cn.DpSgdTraining(noise_multiplier=1.0, sampling_rate=0.1, steps=30, dataset_size=50, model_dim=3)
    data = training.base_data()
    updates = training(data, np.random.default_rng(5))
    theta = training.run(*data, np.random.default_rng(5))
    assert updates.shape == (30, 3)
    np.testing.assert_allclose(updates.sum(axis=0), theta, atol=1e-12)
    assert training.event == ev.SelfComposed(
        event=ev.PoissonSampled(sampling_rate=0.1, event=ev.Gaussian(noise_multiplier=1.0)), count=30
    )


@pytest.mark.parametrize(("steps", "q", "sigma"), [(1, 0.3, 1.0), (5, 0.2, 0.7), (40, 0.05, 2.0)])
def test_final_model_likelihood_ratio_against_mpmath(steps, q, sigma):
    game = cn.DiracCanaryGame(noise_multiplier=sigma, sampling_rate=q, steps=steps, observe=cn.Observation.FINAL)
    s = np.array([-3.0, 0.0, 0.7, 2.5, 9.0])
    ours = game.log_likelihood_ratio(s[:, None], True, False)
    with mpmath.workdps(40):
        scale = mpmath.sqrt(mpmath.mpf(sigma) ** 2 * steps)
        for value, got in zip(s, ours, strict=True):
            p = mpmath.mpf(q)
            weights = [mpmath.binomial(steps, k) * p**k * (1 - p) ** (steps - k) for k in range(steps + 1)]
            inside = mpmath.fsum(w * mpmath.npdf(value, k, scale) for k, w in enumerate(weights))
            assert float(mpmath.log(inside / mpmath.npdf(value, 0, scale))) == pytest.approx(got, rel=1e-10, abs=1e-12)
    assert np.allclose(game.log_likelihood_ratio(s[:, None], False, True), -ours)
    # Increasing in s: the plain sum (dot product) orders trainings like the likelihood ratio.
    assert np.all(np.diff(game.log_likelihood_ratio(np.linspace(-5, 20, 50)[:, None], True, False)) > 0)


def test_final_observation_multi_run_is_valid_and_weaker():
    training = cn.DpSgdTraining(noise_multiplier=1.0, sampling_rate=0.05, steps=100)
    final = cn.multi_run_canary_audit(training, trials=5000, observe="final", seed=2)
    every = cn.multi_run_canary_audit(training, trials=5000, observe="all_steps", seed=2, claim=final.epsilon_claimed)
    assert final.epsilon_lower_bound <= every.epsilon_lower_bound <= every.epsilon_claimed
    assert final.pair != every.pair


# --------------------------------------------------------------------------------------------
# Input canaries and user training functions
# --------------------------------------------------------------------------------------------

SMALL = dict(noise_multiplier=0.3, sampling_rate=0.1, steps=30, dataset_size=100, model_dim=5, learning_rate=1.0)


@pytest.mark.parametrize(("observe", "kind"), [("final", "mislabelled"), ("all_steps", "out_of_distribution")])
def test_input_canaries_multi_run(observe, kind):
    training = cn.DpSgdTraining(**{**SMALL, "steps": 15})
    result = cn.multi_run_canary_audit(
        training, trials=64, canary="input", observe=observe, input_canary=kind, claim=5.0
    )  # an explicit claim: the accountant's PLD at σ = 0.3 alone takes seconds
    assert result.epsilon_lower_bound <= result.epsilon_claimed
    assert result.pilot_trials == 16 and result.chunks == 16  # training_game_plan: a quarter of 64; 16 chunks
    expected_score = "loss" if observe == "final" else "dot product"
    assert expected_score in result.score and kind.replace("_", "-") in result.mechanism
    assert result.empirical_trade_off  # the ROC the report draws


def test_input_canaries_one_run_scores_point_the_right_way():
    training = cn.DpSgdTraining(**SMALL)
    result = cn.one_run_canary_audit(training, canaries=400, canary="input", observe="final", claim=1.0, seed=1)
    assert result.auc_estimate > 0.5  # an included canary has the lower loss (higher score)
    assert result.game["score"] == "loss"


def noisy_sum_train(data, rng):
    """A user "training": the sum of records clipped to norm 1, plus N(0, I) — the Gaussian mechanism, σ = 1."""
    x = np.atleast_2d(np.asarray(data, dtype=float))
    x = x / np.maximum(np.linalg.norm(x, axis=1), 1.0)[:, None]
    return x.sum(axis=0) + rng.standard_normal(x.shape[1])


def dot_score(output, canaries):
    return np.asarray(canaries, dtype=float) @ output


def flaky_train(data, rng):
    if rng.random() < 0.5:
        raise RuntimeError("the loss diverged")
    return noisy_sum_train(data, rng)


def test_user_training_one_run_and_multi_run():
    m = 1000
    canaries = np.eye(m)
    base = np.zeros((10, m))
    training = cn.UserTraining(train=noisy_sum_train, data=base, canaries=canaries, score=dot_score)
    gaussian_eps = 4.377  # σ = 1, Δ = 1 Gaussian mechanism at δ = 1e-5 per canary
    one = cn.one_run_canary_audit(training, claim=gaussian_eps, seed=0)
    assert one.canaries == m and 0 < one.epsilon_lower_bound <= gaussian_eps
    assert cn.one_run_canary_audit(training, claim=0.2, seed=0).verdict is Verdict.VIOLATION
    many = cn.multi_run_canary_audit(training, trials=2000, claim=gaussian_eps, seed=0)
    assert 0 < many.epsilon_lower_bound <= gaussian_eps
    assert "noisy_sum_train" in many.mechanism and "the first canary record" in many.mechanism


def test_user_code_fails_in_its_own_words():
    training = cn.UserTraining(train=flaky_train, data=np.zeros((3, 4)), canaries=np.eye(4), score=dot_score)
    with pytest.raises(cn.UserCodeError) as info:
        cn.multi_run_canary_audit(training, trials=50, claim=1.0)
    message = str(info.value)
    assert "flaky_train" in message and "RuntimeError: the loss diverged" in message
    assert "training" in message and "canary" in message
    seed = int(re.search(r"default_rng\((\d+)\)", message).group(1))
    with pytest.raises(RuntimeError, match="diverged"):  # the printed seed reproduces the failure
        flaky_train(np.zeros((3, 4)), np.random.default_rng(seed))
    bad_score = cn.UserTraining(
        train=noisy_sum_train, data=np.zeros((3, 4)), canaries=np.eye(4), score=lambda out, c: [1.0, float("nan")]
    )
    with pytest.raises(cn.UserCodeError, match="must return 4 finite numbers"):
        cn.one_run_canary_audit(bad_score, claim=1.0)


def test_user_functions_by_import_path():
    training = cn.UserTraining(
        train="numpy.random:default_rng", data=np.zeros((2, 2)), canaries=np.eye(2), score="numpy:sum"
    )
    assert "numpy.random:default_rng" in training.describe()
    with pytest.raises(ValueError, match="cannot import 'no_such_module_xyz:train'"):
        cn.UserTraining(train="no_such_module_xyz:train", data=[1], canaries=[1], score=dot_score)
    with pytest.raises(ValueError, match="callable or 'module:name'"):
        cn.UserTraining(train="not-a-path", data=[1], canaries=[1], score=dot_score)


def test_workers_and_checkpoint_do_not_change_a_training_game(tmp_path):
    training = cn.DpSgdTraining(**{**SMALL, "steps": 10})
    common = dict(trials=96, canary="input", claim=1.0, seed=4, pilot_trials=32)
    one = cn.multi_run_canary_audit(training, **common)
    two = cn.multi_run_canary_audit(training, **common, workers=2, checkpoint=tmp_path / "ckpt.json")
    drop = ("elapsed_seconds", "backend")
    assert {k: v for k, v in one.to_dict().items() if k not in drop} == {
        k: v for k, v in two.to_dict().items() if k not in drop
    }
    header = json.loads((tmp_path / "ckpt.json").read_text().splitlines()[0])  # append-only: a header, then chunks
    assert header["format"] == runner.CHECKPOINT_FORMAT


# --------------------------------------------------------------------------------------------
# Options and bad input
# --------------------------------------------------------------------------------------------


def test_spec_values_are_the_option_values():
    assert tuple(k.value for k in cn.CanaryKind) == AUDIT_CANARIES
    assert tuple(k.value for k in cn.Observation) == AUDIT_OBSERVATIONS
    assert tuple(k.value for k in cn.CanaryScore) == AUDIT_SCORES
    assert tuple(k.value for k in cn.InputCanary) == AUDIT_INPUT_CANARIES


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: cn.one_run_canary_audit(t, canary="input", score="likelihood_ratio"), "does not apply"),
        (lambda t: cn.one_run_canary_audit(t, observe="sometimes"), "observe must be one of"),
        (lambda t: cn.one_run_canary_audit(t, canaries=0), "canaries"),
        (lambda t: cn.multi_run_canary_audit(t, trials=10, delta=0.0), "delta must be > 0"),
        (lambda t: cn.multi_run_canary_audit("train", trials=10), "training must be"),
        (lambda t: cn.DpSgdTraining(noise_multiplier=0.0, sampling_rate=0.1, steps=1), "noise_multiplier"),
        (lambda t: cn.DiracCanaryGame(noise_multiplier=1.0, sampling_rate=1.5, steps=1), "sampling_rate"),
        (lambda t: cn.DiracCanaryGame(**ACCEPTANCE).sample(1.0, 2, np.random.default_rng(0)), "True"),
    ],
)
def test_bad_input(call, message):
    training = cn.DpSgdTraining(noise_multiplier=1.0, sampling_rate=0.1, steps=5, dataset_size=20, model_dim=2)
    with pytest.raises(ValueError, match=message):
        call(training)


def test_user_training_needs_a_claim():
    training = cn.UserTraining(train=noisy_sum_train, data=np.zeros((2, 2)), canaries=np.eye(2), score=dot_score)
    with pytest.raises(ValueError, match="claim"):
        cn.one_run_canary_audit(training)


def test_module_doctest():
    import doctest

    failures, _ = doctest.testmod(cn, verbose=False)
    assert failures == 0
    assert math.isfinite(cn.DiracCanaryGame(**ACCEPTANCE).release(True, np.random.default_rng(0)).sum())


# --------------------------------------------------------------------------------------------
# One pilot and chunk rule for every game that trains a model per trial (issue 39)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trials", "pilot", "chunk"),
    [(1, 1, 1), (5, 5, 1), (16, 8, 1), (64, 16, 4), (256, 64, 16), (1000, 100, 63), (20_000, 2000, 1250)],
)
def test_training_game_plan_is_a_quarter_between_8_and_100_then_a_tenth_in_16_chunks(trials, pilot, chunk):
    plan = cn.training_game_plan(trials)
    assert (plan.pilot_trials, plan.chunk_size) == (pilot, chunk)
    assert plan.pilot_trials <= trials and math.ceil(trials / plan.chunk_size) <= 16
    assert cn.training_game_plan(trials, pilot_trials=3, chunk_size=2).to_dict() == {"pilot_trials": 3, "chunk_size": 2}


def test_numpy_training_game_takes_its_pilot_and_chunks_from_the_shared_plan(monkeypatch):
    """The numpy loop (vectorised=False) and user trainings hand games.audit what training_game_plan decides."""
    seen = []
    monkeypatch.setattr(cn.games, "audit", lambda game, **options: seen.append(options))
    training = cn.DpSgdTraining(noise_multiplier=1.0, sampling_rate=0.1, steps=3)
    for trials in (16, 64, 256, 1000, 20_000):
        cn.multi_run_canary_audit(training, trials=trials, claim=1.0, vectorised=False)
        plan = cn.training_game_plan(trials)
        assert (seen[-1]["pilot_trials"], seen[-1]["chunk_size"]) == (plan.pilot_trials, plan.chunk_size)
    monkeypatch.setattr(
        cn, "training_game_plan", lambda trials, **given: cn.TrainingGamePlan(pilot_trials=7, chunk_size=5)
    )
    cn.multi_run_canary_audit(training, trials=40, claim=1.0, canary="input")
    assert (seen[-1]["pilot_trials"], seen[-1]["chunk_size"]) == (7, 5)
