"""Implementation checks of a DP-SGD step (issue 46): planted bugs each found and named by its check, correct controls
passing, over-noising a DEVIATION, the sampling law of the loader that runs, bad input in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dplens.auditing.training import checks
from dplens.auditing.training.batches import BatchSource, declared_batches
from dplens.auditing.training.check import check_dp_sgd
from dplens.auditing.training.declared import Declaration
from dplens.auditing.training.framework_free import StepSubject, reference_step

N, B, T, SIGMA, C = 5000, 50, 100, 1.0, 1.0
ALPHA = 0.05 / 9


def _clipped_sum(g: np.ndarray, clip: float = C) -> np.ndarray:
    g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
    norms = np.linalg.norm(g, axis=1)
    return np.minimum(1.0, clip / np.maximum(norms, 1e-300)) @ g


def sum_noise_on_mean(g, rng):  # jax_privacy 383: noise for the sum added to the mean (over-noising)
    return _clipped_sum(g) / B + rng.normal(0, SIGMA * C, g.shape[1])


def mean_noise_on_sum(g, rng):  # the reverse: noise for the mean added to the sum (1/B of the noise)
    return _clipped_sum(g) + rng.normal(0, SIGMA * C / B, g.shape[1])


def rank_one(g, rng):  # one draw broadcast over the vector
    return (_clipped_sum(g) + rng.normal(0, SIGMA * C) * np.ones(g.shape[1])) / B


def no_clipping(g, rng):
    g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
    return (g.sum(axis=0) + rng.normal(0, SIGMA * C, g.shape[1])) / B


def batch_clipping(g, rng):  # the batch's sum clipped as a whole
    g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
    total = g.sum(axis=0)
    total *= min(1.0, C / max(np.linalg.norm(total), 1e-300))
    return (total + rng.normal(0, SIGMA * C, g.shape[1])) / B


def actual_batch(g, rng):  # divided by the actual batch size (Opacus 420)
    return (_clipped_sum(g) + rng.normal(0, SIGMA * C, g.shape[1])) / len(g)


def reused_generator(g, rng):  # a generator re-seeded to the same state at every call
    return (_clipped_sum(g) + np.random.default_rng(1234).normal(0, SIGMA * C, g.shape[1])) / B


def nan_leak(g, rng):  # no nan_safe: a NaN row makes the update NaN
    norms = np.linalg.norm(g, axis=1)
    return (np.minimum(1.0, C / np.maximum(norms, 1e-300)) @ g + rng.normal(0, SIGMA * C, g.shape[1])) / B


def over_noised(g, rng):  # 1.5 sigma: conservative
    return (_clipped_sum(g) + rng.normal(0, 1.5 * SIGMA * C, g.shape[1])) / B


def smaller_clip(g, rng):
    return (_clipped_sum(g, C / 4) + rng.normal(0, SIGMA * C, g.shape[1])) / B


DECL = Declaration(noise_multiplier=SIGMA, max_grad_norm=C, batch_size=B, dataset_size=N, steps=T, delta=1e-5)


def _checks(step, seed: int = 3) -> dict[str, checks.Check]:
    probes = checks.run_probes(StepSubject(step), DECL, np.random.SeedSequence(seed))
    return {c.name: c for c in checks.step_checks(probes, DECL, ALPHA, np.random.default_rng(seed), None)}


@pytest.mark.parametrize(
    ("step", "check", "words"),
    [
        (mean_noise_on_sum, "noise_std", "noise calibrated for the mean added to the sum"),
        (rank_one, "noise_gaussian_independent", "rank-one"),
        (no_clipping, "clipping", "not clipped per sample"),
        (batch_clipping, "clipping", "not clipped per sample"),
        (actual_batch, "normalisation", "actual batch size"),
        (reused_generator, "fresh_noise", "noise repeats"),
        (nan_leak, "non_finite_rows", "non-finite"),
    ],
)
def test_planted_bug_is_a_violation_named_by_its_check(step, check, words):
    found = _checks(step)
    assert found[check].verdict == "VIOLATION", found[check].finding
    assert words in found[check].finding


def test_reference_step_passes_every_check():
    found = _checks(reference_step(SIGMA, C, B))
    assert {name: c.verdict for name, c in found.items()} == dict.fromkeys(found, "PASS")
    assert abs(found["noise_std"].measured - SIGMA) < 0.02 * SIGMA  # within 2 %
    assert abs(found["normalisation"].measured - B) < 0.02 * B


def test_sum_step_declared_sum_passes():
    decl = Declaration(
        noise_multiplier=SIGMA, max_grad_norm=C, batch_size=B, dataset_size=N, steps=T, delta=1e-5, normalise="sum"
    )
    probes = checks.run_probes(StepSubject(reference_step(SIGMA, C, B, "sum")), decl, np.random.SeedSequence(2))
    found = {c.name: c for c in checks.step_checks(probes, decl, ALPHA, np.random.default_rng(2), None)}
    assert all(c.verdict == "PASS" for c in found.values()), [c.finding for c in found.values()]
    assert abs(found["normalisation"].measured - 1.0) < 0.02


@pytest.mark.parametrize(
    ("step", "check"), [(sum_noise_on_mean, "noise_std"), (over_noised, "noise_std"), (smaller_clip, "clipping")]
)
def test_conservative_departure_is_a_deviation_not_a_violation(step, check):
    found = _checks(step)
    assert found[check].verdict == "DEVIATION", found[check].finding
    assert all(c.verdict != "VIOLATION" for c in found.values()), [c.finding for c in found.values()]


def _shuffled(n, rng):
    return declared_batches("shuffle", n, B, 10**6, rng)


def _poisson(n, rng):
    return declared_batches("poisson", n, B, T, rng)


def _fixed_size(n, rng):
    return declared_batches("fixed-size", n, B, T, rng)


def _with_duplicates(n, rng):
    while True:
        batch = rng.choice(n, size=B, replace=True)
        batch[1] = batch[0]
        yield batch


@pytest.mark.parametrize(
    ("function", "declared", "verdict", "words"),
    [
        (_shuffled, "poisson", "VIOLATION", "not Poisson"),
        (_fixed_size, "poisson", "VIOLATION", "not Poisson"),
        (_poisson, "poisson", "PASS", "Poisson at rate"),
        (_shuffled, "shuffle", "PASS", "exactly once"),
        (_poisson, "shuffle", "VIOLATION", "do not hold each record exactly once"),
        (_with_duplicates, "poisson", "VIOLATION", "hold a record twice"),
    ],
)
def test_sampling_law_of_the_loader_against_the_declared_sampler(function, declared, verdict, words):
    decl = Declaration(
        noise_multiplier=SIGMA, max_grad_norm=C, batch_size=B, dataset_size=N, steps=T, delta=1e-5, sampler=declared
    )
    source = BatchSource(declared, N, B, T, function, "loader")
    found = checks.sampling_check(source, decl, ALPHA, np.random.SeedSequence(0))
    assert found.verdict == verdict, found.finding
    assert words in found.finding


def test_check_dp_sgd_end_to_end_json_contract():
    result = check_dp_sgd(
        reference_step(SIGMA, C, B),
        noise_multiplier=SIGMA,
        max_grad_norm=C,
        batch_size=B,
        dataset_size=N,
        steps=20,
        delta=1e-5,
        trials=200,
        seed=1,
    )
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["verdict"] == "PASS", result.summary()
    assert {"name", "verdict", "measured", "declared"} <= set(data["checks"][0])
    assert {"epsilon_lower_bound", "claimed_epsilon", "verdict"} <= set(data["audit"])
    assert {"epsilon_lower_bound", "assumptions"} <= set(data["model_based"])
    assert "model-based" in data["model_based"]["assumptions"] and data["model_based"]["kind"] == "model-based"
    assert data["audit"]["epsilon_lower_bound"] <= data["claimed_epsilon"]
    assert data["model_based"]["epsilon_lower_bound"] <= data["claimed_epsilon"]


def test_under_noised_training_is_found_by_the_audit_and_the_model_based_bound():
    def tenth(g, rng):
        return (_clipped_sum(g) + rng.normal(0, 0.1 * SIGMA * C, g.shape[1])) / B

    result = check_dp_sgd(
        tenth,
        noise_multiplier=SIGMA,
        max_grad_norm=C,
        batch_size=B,
        dataset_size=500,
        steps=3,
        delta=1e-5,
        trials=600,
        seed=2,
    )
    assert result.verdict == "VIOLATION"
    assert result.model_based.verdict == "VIOLATION"
    assert result.audit.epsilon_lower_bound > result.claimed_epsilon, result.summary()


def test_final_model_observer_audits_the_sum_of_the_steps():
    def tenth(g, rng):
        return (_clipped_sum(g) + rng.normal(0, 0.1 * SIGMA * C, g.shape[1])) / B

    result = check_dp_sgd(
        tenth,
        noise_multiplier=SIGMA,
        max_grad_norm=C,
        batch_size=B,
        dataset_size=500,
        steps=3,
        delta=1e-5,
        trials=600,
        seed=4,
        observe="final",
    )
    assert result.audit.observe == "final" and "final model" in result.audit.statistic
    assert result.audit.verdict == "VIOLATION", result.summary()


_IMPORT_TIME_GENERATOR = np.random.default_rng(7)


def own_generator(g, rng):  # ignores rng: its generator was seeded once, at import
    return (_clipped_sum(g) + _IMPORT_TIME_GENERATOR.normal(0, SIGMA * C, g.shape[1])) / B


def test_a_generator_seeded_at_import_repeats_its_noise_across_worker_processes():
    result = check_dp_sgd(
        own_generator,
        noise_multiplier=SIGMA,
        max_grad_norm=C,
        batch_size=B,
        dataset_size=500,
        steps=3,
        delta=1e-5,
        trials=200,
        workers=2,
    )
    fresh = next(c for c in result.checks if c.name == "fresh_noise")
    assert fresh.verdict == "VIOLATION" and "trainings' first-step noise repeat" in fresh.finding


BUGS = [
    (mean_noise_on_sum, "noise_std"),
    (rank_one, "noise_gaussian_independent"),
    (no_clipping, "clipping"),
    (batch_clipping, "clipping"),
    (actual_batch, "normalisation"),
    (reused_generator, "fresh_noise"),
    (nan_leak, "non_finite_rows"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("step", "check"), BUGS, ids=[b.__name__ for b, _ in BUGS])
def test_planted_bug_is_named_in_95_percent_of_20_seeds(step, check):
    named = sum(_checks(step, seed)[check].verdict == "VIOLATION" for seed in range(20))
    assert named >= 19


@pytest.mark.slow
def test_reference_step_is_flagged_at_a_rate_consistent_with_alpha_over_40_seeds():
    from scipy import stats

    flagged = sum(
        any(c.verdict == "VIOLATION" for c in _checks(reference_step(SIGMA, C, B), seed).values()) for seed in range(40)
    )
    # the six step checks hold 6/9 of alpha = 0.05 here: the one-sided binomial test against 0.05 must not reject
    assert stats.binomtest(flagged, 40, 0.05, alternative="greater").pvalue > 0.01, flagged
