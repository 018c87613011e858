"""The jax_privacy subject of check_dp_sgd (issue 46): crafted per-sample gradients through jax_privacy's own
clipped_grad (padding, microbatching) and privatizer reach the update exactly; a correct step on jax_privacy's Poisson
batch selection passes every check; planted bugs — noise for the mean added to the sum, clipping off, nan_safe off,
the accountant told the physical batch size, noise at every physical batch — are named by their checks; the sampler
adapter yields the strategy's own batches. Each subject compiles its jitted blocks once (module fixtures)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax_privacy", reason='needs the [jax] extra: pip install "dplens[jax]"')

from jax_privacy import accounting, batch_selection, noise_addition

from dplens.auditing.training import checks
from dplens.auditing.training.batches import BatchSource
from dplens.auditing.training.check import check_dp_sgd
from dplens.auditing.training.declared import Declaration
from dplens.integrations.jax_privacy_step import batch_selection_sampler, jax_privacy_step

N, B = 1000, 100  # Poisson rate 0.1: 3000 probe calls at sigma = 1 (the fewest check_dp_sgd makes)
DECL = Declaration(noise_multiplier=1.0, max_grad_norm=1.0, batch_size=B, dataset_size=N, steps=10, delta=1e-5)
DP_PARAMS = accounting.DpParams(noise_multipliers=1.0, num_samples=N, batch_size=B, delta=1e-5)


def _step(stddev=1.0, *, dp_params=DP_PARAMS, max_physical_batch_size=None, accumulate=None, **options):
    """jax_privacy's Gaussian privatizer at ``stddev`` on clipped_grad (C = 1 and ``options``), divided by B."""
    return jax_privacy_step(
        lambda key: noise_addition.gaussian_privatizer(stddev=stddev, prng_key=key),
        clipped_grad_options={"l2_clip_norm": 1.0, **options},
        normalise=B,
        dp_params=dp_params,
        max_physical_batch_size=max_physical_batch_size,
        accumulate=accumulate,
        pad_multiple=128,  # few padded shapes: few compilations
    )


def _found(step, calls: int) -> dict[str, checks.Check]:
    probes = checks.run_probes(step, DECL, np.random.SeedSequence(0), calls=calls)
    return {c.name: c for c in checks.step_checks(probes, DECL, 0.05 / 9, np.random.default_rng(0), None)}


@pytest.fixture(scope="module")
def correct():
    """One correct jax_privacy step (sigma = C = 1, divided by B), compiled once for the module."""
    return _step()


def test_the_update_is_the_clipped_sum_through_microbatches_and_padded_physical_batches():
    grads = np.random.default_rng(1).normal(size=(37, 5)) * 3
    norms = np.linalg.norm(grads, axis=1)
    clipped_mean = (np.minimum(1.0, 1.0 / norms)[:, None] * grads).sum(axis=0) / B
    for options, physical in (({"microbatch_size": 8}, 5), ({"max_physical_batch_size": 16}, 3)):
        step = _step(0.0, **options)  # no noise: the update is jax_privacy's clipped sum over B exactly
        np.testing.assert_allclose(step(grads, np.random.default_rng(0)), clipped_mean, rtol=1e-5, atol=1e-7)
        record = step.accounting()
        assert (record.noised_steps, record.physical_batches) == (1, physical), options
        assert record.rate == pytest.approx(B / N, rel=1e-12)  # DpsgdTrainingAccountant's q = batch_size/num_samples
    assert np.all(step(np.zeros((0, 5)), np.random.default_rng(0)) == 0.0)  # an empty Poisson batch


def test_a_correct_step_on_poisson_batch_selection_passes_every_check(correct):
    strategy = batch_selection.CyclicPoissonSampling(sampling_prob=B / N, iterations=10**6)
    result = check_dp_sgd(
        correct,
        sampler_function=batch_selection_sampler(strategy),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        batch_size=B,
        dataset_size=N,
        steps=5,
        delta=1e-5,
        trials=20,
        seed=0,
    )
    verdicts = {c.name: c.verdict for c in result.checks}
    assert result.subject_kind == "jax_privacy"
    assert verdicts["gradient_accumulation"] == verdicts["sampling_law"] == "PASS", result.summary()
    assert result.verdict == "PASS", result.summary()


@pytest.mark.parametrize(
    ("label", "stddev", "options", "check"),
    [
        ("noise for the mean added to the sum", 1.0 / B, {}, "noise_std"),
        ("clipping off", 1.0, {"l2_clip_norm": float("inf")}, "clipping"),
        ("nan_safe off", 1.0, {"nan_safe": False}, "non_finite_rows"),
    ],
)
def test_planted_bugs_are_violations_of_their_checks(label, stddev, options, check):
    found = _found(_step(stddev, **options), calls=600)
    assert found[check].verdict == "VIOLATION", (label, found[check].finding)
    others = [name for name, c in found.items() if c.verdict == "VIOLATION" and name != check]
    assert others == [], (label, others)


def test_accumulation_bugs_are_named_by_the_gradient_accumulation_check():
    physical = accounting.DpParams(noise_multipliers=1.0, num_samples=N, batch_size=25, delta=1e-5)

    def noise_each(sums, privatize):  # a hand-written accumulation that noises every physical batch
        total = privatize(sums[0])
        for part in sums[1:]:
            total = total + privatize(part)
        return total

    steps = {
        "microbatched": _step(microbatch_size=25),
        "physical rate": _step(dp_params=physical, max_physical_batch_size=25),
        "every physical batch": _step(max_physical_batch_size=25, accumulate=noise_each),
    }
    found = {
        label: checks.accumulation_check(
            checks.run_probes(s, DECL, np.random.SeedSequence(0), calls=150), DECL, 0.05 / 9
        )
        for label, s in steps.items()
    }
    assert found["microbatched"].verdict == "PASS", found["microbatched"].finding  # jax_privacy's own accumulation
    assert found["physical rate"].verdict == "VIOLATION" and "physical batch size" in found["physical rate"].finding
    assert found["every physical batch"].verdict == "DEVIATION", found["every physical batch"].finding
    assert "every physical step" in found["every physical batch"].finding


def test_the_sampler_adapter_yields_the_strategys_batches_without_padding():
    strategy = batch_selection.CyclicPoissonSampling(sampling_prob=0.05, iterations=30, cycle_length=3)
    ours = list(batch_selection_sampler(strategy)(200, np.random.default_rng(7)))
    theirs = list(strategy.batch_iterator(200, rng=np.random.default_rng(7)))
    assert len(ours) == 30 and all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))

    class Padded(batch_selection.BatchSelectionStrategy):  # a strategy that pads its batches with -1
        def batch_iterator(self, num_examples, rng=None):
            yield from (batch_selection.pad_to_multiple_of(np.arange(k), 8) for k in (3, 9))

    assert [b.tolist() for b in batch_selection_sampler(Padded())(20, np.random.default_rng(0))] == [
        [0, 1, 2],
        list(range(9)),
    ]
    # balls-in-bins (each record once per cycle) declared Poisson: the sampling law says so
    bins = batch_selection.BallsInBinsSampling(cycle_length=10, iterations=10**6)
    source = BatchSource("poisson", N, B, 10, batch_selection_sampler(bins), "balls-in-bins")
    assert checks.sampling_check(source, DECL, 0.05 / 9, np.random.SeedSequence(0)).verdict == "VIOLATION"


def test_bad_input_is_one_line_naming_the_argument():
    gaussian = lambda key: noise_addition.gaussian_privatizer(stddev=1.0, prng_key=key)  # noqa: E731
    bad = {
        "privatizer must be callable": dict(privatizer=None),
        "must be a mapping .* with l2_clip_norm": dict(clipped_grad_options={"nan_safe": True}),
        r"may not set \['batch_argnums'\]": dict(clipped_grad_options={"l2_clip_norm": 1.0, "batch_argnums": 0}),
        "normalise must be a positive number": dict(normalise=0),
        "dp_params must be a jax_privacy.accounting.DpParams": dict(dp_params={"batch_size": B}),
        "max_physical_batch_size must be an integer >= 1": dict(max_physical_batch_size=0),
    }
    for message, change in bad.items():
        arguments = dict(
            privatizer=gaussian, clipped_grad_options={"l2_clip_norm": 1.0}, normalise=B, dp_params=DP_PARAMS
        )
        arguments.update(change)
        with pytest.raises(ValueError, match=message):
            jax_privacy_step(arguments.pop("privatizer"), **arguments)
    dense = jax_privacy_step(
        lambda key: noise_addition.matrix_factorization_privatizer(np.eye(10), stddev=1.0, prng_key=key),
        clipped_grad_options={"l2_clip_norm": 1.0},
        normalise=B,
        dp_params=DP_PARAMS,
    )  # its update uses the key it was built with, not its state: one compiled update would repeat its noise
    with pytest.raises(ValueError, match="noise is not carried in its state"):
        dense(np.ones((3, 4)), np.random.default_rng(0))
