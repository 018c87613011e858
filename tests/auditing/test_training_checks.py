"""Implementation checks of a DP-SGD step (issue 46): planted bugs each found and named by its check, correct controls
passing, over-noising a DEVIATION, the sampling law of the loader that runs, bad input in one line; the stated
assumption of finite gradients (non_finite_rows reported but not counted)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dplens.auditing.training import checks
from dplens.auditing.training.batches import BatchSource, declared_batches
from dplens.auditing.training.check import check_dp_sgd, overall_verdict
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


def _small(step, *, trials: int = 100, seed: int = 0, **options):
    """A three-step check of ``step`` on 500 records (the declared σ, C and B of this module)."""
    return check_dp_sgd(
        step,
        noise_multiplier=SIGMA,
        max_grad_norm=C,
        batch_size=B,
        dataset_size=500,
        steps=3,
        delta=1e-5,
        trials=trials,
        seed=seed,
        **options,
    )


def _tenth_of_the_noise(g, rng):
    return (_clipped_sum(g) + rng.normal(0, 0.1 * SIGMA * C, g.shape[1])) / B


def test_stated_finite_gradients_leave_non_finite_rows_reported_but_not_counted():
    default, assumed = _small(nan_leak), _small(nan_leak, assume_finite_gradients=True)
    by_default, by_assumed = ({c.name: c for c in r.checks} for r in (default, assumed))
    leak = by_default["non_finite_rows"]
    assert default.verdict == "VIOLATION" and leak.verdict == "VIOLATION" and not leak.excluded_from_overall
    assert "torch.nan_to_num" in leak.finding and "assume_finite_gradients=True" in leak.finding  # the remedy
    assert "\n" not in leak.finding
    # the check still ran, with its own verdict, finding and share of alpha; only the marker differs
    marked = by_assumed["non_finite_rows"]
    assert (marked.verdict, marked.finding, marked.significance) == (leak.verdict, leak.finding, leak.significance)
    assert marked.excluded_from_overall
    assert (
        marked.exclusion_reason == "the user states every per-sample gradient is finite (assume_finite_gradients=True)"
    )
    # the same seed gives the same other checks; they, the audit and the model-based bound decide
    others = [c for c in assumed.checks if c.name != "non_finite_rows"]
    assert [(c.name, c.verdict) for c in others] == [(c.name, c.verdict) for c in default.checks if c is not leak]
    verdicts = [c.verdict for c in others] + [assumed.audit.verdict, assumed.model_based.verdict]
    expected = "VIOLATION" if "VIOLATION" in verdicts else "PASS" if set(verdicts) == {"PASS"} else "INCONCLUSIVE"
    assert assumed.verdict == expected and expected != "VIOLATION", assumed.summary()
    assert "under 1 stated assumption" in assumed.summary().splitlines()[0]
    data, plain = (json.loads(json.dumps(r.to_dict(), allow_nan=False)) for r in (assumed, default))
    assert data["stated_assumptions"] == [
        {
            "option": "assume_finite_gradients",
            "statement": "every per-sample gradient is finite",
            "excludes": ["non_finite_rows"],
            "checked_by_dplens": False,
        }
    ]
    assert plain["stated_assumptions"] == [] and not any(c["excluded_from_overall"] for c in plain["checks"])
    assert [c["name"] for c in data["checks"] if c["excluded_from_overall"]] == ["non_finite_rows"]
    assert data["checks"][-1]["exclusion_reason"] == marked.exclusion_reason
    # the Bonferroni split is unchanged: the excluded check keeps its share
    assert (data["alpha_split"], data["alpha_each"]) == (plain["alpha_split"], plain["alpha_each"]) == (8, 0.05 / 8)


def test_overall_verdict_counts_every_check_not_excluded():
    def check(name, verdict, excluded=False):
        return checks.Check(
            name=name,
            verdict=verdict,
            measured=None,
            declared=None,
            quantity="",
            finding="",
            significance=0.01,
            excluded_from_overall=excluded,
        )

    leak = check("non_finite_rows", "VIOLATION", excluded=True)
    assert overall_verdict([check("noise_std", "PASS"), leak], "PASS", "PASS") == "PASS"
    assert overall_verdict([check("noise_std", "VIOLATION"), leak], "PASS", "PASS") == "VIOLATION"
    assert overall_verdict([check("noise_std", "PASS"), leak], "VIOLATION", "PASS") == "VIOLATION"
    assert overall_verdict([check("noise_std", "DEVIATION"), leak], "PASS", "PASS") == "INCONCLUSIVE"
    assert overall_verdict([check("noise_std", "PASS"), check("non_finite_rows", "VIOLATION")], "PASS") == "VIOLATION"


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_assume_finite_gradients_must_be_a_bool(value):
    import dplens

    for run in (check_dp_sgd, dplens.check_dp_sgd):
        with pytest.raises(
            ValueError, match=r"^check_dp_sgd: assume_finite_gradients must be True or False; got "
        ) as err:
            run(
                reference_step(SIGMA, C, B),
                noise_multiplier=SIGMA,
                max_grad_norm=C,
                batch_size=B,
                dataset_size=N,
                steps=T,
                delta=1e-5,
                assume_finite_gradients=value,
            )
        assert repr(value) in str(err.value) and "\n" not in str(err.value)


def test_under_noised_training_is_found_by_the_audit_and_the_model_based_bound():
    result = _small(_tenth_of_the_noise, trials=600, seed=2)
    assert result.verdict == "VIOLATION"
    assert result.model_based.verdict == "VIOLATION"
    assert result.audit.epsilon_lower_bound > result.claimed_epsilon, result.summary()


def test_final_model_observer_audits_the_sum_of_the_steps():
    result = _small(_tenth_of_the_noise, trials=600, seed=4, observe="final")
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


def _fresh_probes(rng: np.random.Generator, scales: np.ndarray, length: int) -> checks.Probes:
    """Probe calls of fresh Gaussian noise, call i at scale ``scales[i % 3]`` (its probe batch size), in sequences
    of ``length`` calls: only the noise and the sequences are filled (what fresh_check reads)."""
    calls = 200 * length
    noise = rng.normal(size=(calls, 64)) * scales[np.arange(calls) % 3, None]
    empty = {b: np.zeros(0) for b in (25, 50, 100)}
    return checks.Probes(
        sizes=(25, 50, 100), a_mean=empty, a_rows={b: b - 1 for b in (25, 50, 100)}, h=empty, noise=noise,
        sequence=np.arange(calls) // length, nonfinite=None, nonfinite_bad=0, nonfinite_error=None,
    )  # fmt: skip


def test_fresh_noise_of_two_scales_is_not_flagged_beyond_alpha():
    # Noise whose scale follows the probe's batch size (here 1 and 3: summed over nine physical batches at the largest
    # size), in sequences of 9 calls, so that the calls paired across sequences share their scale. With one pooled
    # scale the cross-sequence statistic's variance was E[s^4]/E[s^2]^2 = 2.06: about 5 % false alarms at alpha 0.02.
    alpha, runs = 0.02, 400
    decl = Declaration(noise_multiplier=SIGMA, max_grad_norm=C, batch_size=B, dataset_size=N, steps=9, delta=1e-5)
    rng = np.random.default_rng(46)
    found = [
        checks.fresh_check(_fresh_probes(rng, np.array([1.0, 1.0, 3.0]), 9), decl, alpha, None) for _ in range(runs)
    ]
    flagged = sum(c.verdict == "VIOLATION" for c in found)
    across = sum(c.verdict == "VIOLATION" and "separate probe sequences" in c.finding for c in found)
    assert stats.binomtest(across, runs, alpha / 2, alternative="greater").pvalue > 0.01, across  # each test: alpha/2
    assert stats.binomtest(flagged, runs, alpha, alternative="greater").pvalue > 0.01, flagged


def test_each_training_reseeds_the_global_generators_with_64_bits_or_more():
    # one 32-bit word each made two of 7·10⁴ trainings share torch's seed with probability ≈ 45 %: a false
    # "noise repeats" finding in the Opacus shuffle-gap run at 3·10⁴ per side
    import random

    from dplens.auditing.training.framework_free import reseed_globals

    seeds = [np.random.SeedSequence([7, i]) for i in range(64)]
    python_states, numpy_draws = set(), set()
    for seed in seeds:
        reseed_globals(seed)
        python_states.add(random.getrandbits(64))
        numpy_draws.add(int(np.random.randint(0, 2**62, dtype=np.int64)))
    assert len(python_states) == len(numpy_draws) == 64
    torch = pytest.importorskip("torch", reason='needs the [torch] extra: pip install "dplens[torch]"')
    torch_seeds = []
    for seed in seeds:
        reseed_globals(seed)
        torch_seeds.append(torch.initial_seed())
    assert max(torch_seeds) >= 2**32 and len(set(torch_seeds)) == 64
