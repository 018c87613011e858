"""Monte Carlo ε of MF trainings under fixed bins: the verification rule and the privacy-loss samples."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from dplens.accountant import matrix_factorization as mf
from dplens.accountant import mf_monte_carlo as mc
from dplens.accountant import pld
from dplens.accountant.mf_accounting import mf_epsilon
from dplens.accountant.samplers import FixedBins, RandomAllocation


def _jax_delta_calculation():
    """jax_privacy's delta_calculation.py read from its file (numpy and scipy only: no JAX is loaded here)."""
    spec = importlib.util.find_spec("jax_privacy")
    if spec is None:
        pytest.skip('needs the [jax] extra: pip install "dplens[jax]"')
    path = Path(spec.origin).parent / "experimental" / "monte_carlo" / "delta_calculation.py"
    module_spec = importlib.util.spec_from_file_location("_jax_delta_calculation", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("samples", "base"), [(75_000, 5e-4), (10**6, 2e-6), (5000, 1e-2)])
def test_overall_delta_is_jax_privacys_verification_rule(samples, base):
    theirs = _jax_delta_calculation().get_overall_delta(samples, base)
    assert mc.overall_delta(samples, base) == pytest.approx(theirs, rel=1e-6)
    assert mc.overall_delta(samples, base) >= base


def test_base_delta_meets_its_delta_and_matches_jax_privacy():
    ref = _jax_delta_calculation()
    for samples, delta in ((75_000, 1e-3), (2 * 10**6, 1e-5)):
        base = mc.base_delta(samples, delta)
        assert mc.overall_delta(samples, base) <= delta
        # jax_privacy solves |overall − δ| → 0 with a bounded optimiser (xatol 1e-4 δ) and its inner τ search less
        # finely: its base is a little smaller; both verify δ (any τ gives a valid overall δ)
        theirs = ref.get_base_delta(samples, delta)
        assert theirs * (1 - 1e-9) <= base <= theirs * (1 + 5e-3)


def test_too_few_samples_say_how_many():
    with pytest.raises(ValueError, match=r"too few to verify delta=0.001.*use at least"):
        mc.base_delta(1000, 1e-3)


@pytest.mark.parametrize("cycles", [1, 3])
def test_identity_strategy_losses_match_the_exact_fixed_bins_pld(cycles):
    """C = I under fixed bins is DP-SGD under fixed bins: the core's exact allocation PLD (a closed reference)."""
    t, sigma, n = 6, 1.0, 100_000
    strategy = mf.dense_strategy(np.eye(t * cycles))
    remove, add = mc.fixed_bins_losses(
        strategy, period=t, noise_multiplier=sigma, samples=n, rng=np.random.default_rng(1)
    )
    event = (
        RandomAllocation(noise_multiplier=sigma, steps=t)
        if cycles == 1
        else FixedBins(noise_multiplier=sigma, steps=t, cycles=cycles)
    )
    for eps in (0.25, 1.0):
        exact = pld.pld_delta([(event, 1)], eps)
        for losses in (remove, add):
            values = -np.expm1(np.minimum(eps - losses, 0.0))
            assert mc._empirical_delta(losses, eps) <= exact.delta + 5 * values.std() / math.sqrt(n)
        hat = max(mc._empirical_delta(remove, eps), mc._empirical_delta(add, eps))
        assert abs(hat - exact.delta) <= 5 * values.std() / math.sqrt(n) + (exact.delta - exact.delta_lower)


def test_monte_carlo_sits_below_the_unamplified_bound_and_is_reproducible():
    coefs = np.array([1.0, 0.5, 0.375, 0.3125])
    kw = dict(
        mechanism="bandmf",
        bands=4,
        strategy=coefs / np.linalg.norm(coefs),
        sampling="fixed-bins",
        dataset_size=160,
        batch_size=10,
        epochs=4,
        noise_multiplier=1.5,
        delta=1e-3,
        monte_carlo=100_000,
        seed=3,
    )
    r = mf_epsilon(**kw)
    # the Rényi bound (mf_renyi), below the unamplified 4.4968 of issue 48 (tests/accountant/test_mf_renyi.py)
    assert r.bound == "upper" and r.epsilon == r.renyi["epsilon"] < 4.4968
    assert 1.8 < r.epsilon_monte_carlo < r.epsilon  # issue 48: Monte Carlo ≈ 2.28 (remove) for a 4-band strategy
    payload = r.to_dict()
    assert payload["monte_carlo"]["is_estimate"] and payload["monte_carlo"]["samples_per_direction"] == 100_000
    assert payload["monte_carlo"]["base_delta"] < 1e-3
    assert mf_epsilon(**kw).epsilon_monte_carlo == r.epsilon_monte_carlo


def test_monte_carlo_refusals():
    base = dict(dataset_size=160, batch_size=10, epochs=4, noise_multiplier=1.5, delta=1e-3, monte_carlo=10**5)
    with pytest.raises(ValueError, match="applies to sampling 'fixed-bins' or 'b-min-sep' only"):
        mf_epsilon(mechanism="bsr", bands=4, sampling="cyclic", **base)
    signed = np.tril(np.ones((64, 64))) - 1.5 * np.eye(64)
    signed /= np.linalg.norm(signed, axis=0).max()
    with pytest.raises(ValueError, match="must be non-negative for the Monte Carlo"):
        mf_epsilon(mechanism="matrix", strategy=signed, sampling="fixed-bins", **base)


# --------------------------------------------------------------------------------------------
# b-min-sep sampling
# --------------------------------------------------------------------------------------------


def _b_min_sep_patterns(steps: int, separation: int, rate: float) -> dict[tuple[int, ...], float]:
    """Every participation pattern of the stationary b-min-sep process over ``steps`` steps, with its probability."""
    out: dict[tuple[int, ...], float] = {}

    def walk(eligible: int, probability: float, taken: tuple[int, ...]) -> None:
        if eligible >= steps:
            out[taken] = out.get(taken, 0.0) + probability
            return
        walk(eligible + separation, probability * rate, (*taken, eligible))
        if rate < 1:
            walk(eligible + 1, probability * (1 - rate), taken)

    start = 1.0 / (1.0 + (separation - 1) * rate)
    walk(0, start, ())
    for m in range(1, separation):
        walk(m, rate * start, ())
    return out


@pytest.mark.parametrize(("separation", "rate"), [(1, 0.3), (2, 0.4), (3, 0.4), (3, 0.95), (4, 1.0)])
def test_b_min_sep_loss_is_the_exact_likelihood_ratio(separation, rate):
    # Against the sum over every participation pattern of the process (the exact mixture), on a 7-step strategy.
    steps, sigma = 7, 0.8
    coefficients = np.array([0.7, 0.5, 0.3, 0.2][:separation])
    coefficients /= np.linalg.norm(coefficients)
    patterns = _b_min_sep_patterns(steps, separation, rate)
    assert sum(patterns.values()) == pytest.approx(1.0, abs=1e-12)
    y = np.random.default_rng(3).standard_normal((steps, 6)) * sigma + 0.4
    got = mc._b_min_sep_loss(mc._window_dots(y, coefficients), coefficients, separation, rate, sigma)
    for column in range(y.shape[1]):
        total = 0.0
        for taken, probability in patterns.items():
            mode = np.zeros(steps)
            for s in taken:
                rows = np.arange(s, min(steps, s + coefficients.size))
                mode[rows] += coefficients[: rows.size]
            total += probability * math.exp((mode @ y[:, column] - 0.5 * mode @ mode) / sigma**2)
        assert got[column] == pytest.approx(math.log(total), abs=1e-12)


def test_b_min_sep_participations_keep_their_separation_and_stationary_rate():
    steps, separation, rate, samples = 120, 4, 0.2, 40_000
    rows, cols = mc._participation_rows(steps, separation, rate, samples, np.random.default_rng(5))
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    same = rows[1:] == rows[:-1]
    assert np.all(np.diff(cols)[same] >= separation)
    expected = 1.0 / (separation - 1 + 1.0 / rate)  # the stationary share of steps an example takes part in
    for step in (0, 1, separation - 1, 60, steps - 1):
        share = np.count_nonzero(cols == step) / samples
        assert abs(share - expected) <= 5 * math.sqrt(expected * (1 - expected) / samples), step


def test_b_min_sep_with_separation_one_is_poisson_dp_sgd():
    """b = 1 and one band: each step takes part independently with probability p — DP-SGD under Poisson sampling,
    whose certified PLD bracket is the reference."""
    from dplens.accountant import events as ev

    steps, rate, sigma, n = 10, 0.3, 1.0, 200_000
    strategy = mf.banded_toeplitz_strategy([1.0], steps)
    remove, add = mc.b_min_sep_losses(
        strategy, min_separation=1, sampling_rate=rate, noise_multiplier=sigma, samples=n, rng=np.random.default_rng(2)
    )
    event = ev.PoissonSampled(sampling_rate=rate, event=ev.Gaussian(noise_multiplier=sigma))
    for eps in (0.25, 1.0):
        exact = pld.pld_delta([(event, steps)], eps)
        for losses in (remove, add):
            values = -np.expm1(np.minimum(eps - losses, 0.0))
            assert mc._empirical_delta(losses, eps) <= exact.delta + 5 * values.std() / math.sqrt(n)
        hat = max(mc._empirical_delta(remove, eps), mc._empirical_delta(add, eps))
        assert abs(hat - exact.delta) <= 5 * values.std() / math.sqrt(n) + (exact.delta - exact.delta_lower)


def test_b_min_sep_monte_carlo_sits_below_the_unamplified_bound_and_is_reproducible():
    kw = dict(
        mechanism="bandmf",
        strategy=np.array([0.8, 0.5, 0.33]) / np.linalg.norm([0.8, 0.5, 0.33]),
        sampling="b-min-sep",
        min_separation=4,
        dataset_size=400,
        batch_size=40,
        epochs=4,
        noise_multiplier=1.0,
        delta=1e-3,
        monte_carlo=80_000,
        seed=7,
    )
    r = mf_epsilon(**kw)
    assert 0 < r.epsilon_monte_carlo < r.epsilon  # the estimate below the valid (unamplified) bound
    payload = r.to_dict()
    assert payload["epsilon"] == r.epsilon and payload["bound"] == "upper"
    assert payload["monte_carlo"]["is_estimate"] and "b-min-sep" in payload["monte_carlo"]["dominating_pair"]
    assert "rate 0.142857" in payload["monte_carlo"]["dominating_pair"]  # p = 1/(N/B − b + 1) = 1/7
    assert mf_epsilon(**kw).epsilon_monte_carlo == r.epsilon_monte_carlo


def test_b_min_sep_monte_carlo_refusals():
    base = dict(
        mechanism="bandmf",
        sampling="b-min-sep",
        dataset_size=400,
        batch_size=40,
        epochs=2,
        noise_multiplier=1.0,
        delta=1e-3,
        monte_carlo=10**5,
    )
    three = np.array([0.8, 0.5, 0.33]) / np.linalg.norm([0.8, 0.5, 0.33])
    with pytest.raises(ValueError, match="needs at most min_separation=2 bands; the strategy has 3"):
        mf_epsilon(strategy=three, min_separation=2, **base)
    with pytest.raises(ValueError, match="without a cap on participations"):
        mf_epsilon(strategy=three, min_separation=4, max_participations=3, **base)
    with pytest.raises(ValueError, match="batch_size=40 is too large for b-min-sep with min_separation=12"):
        mf_epsilon(strategy=three, min_separation=12, **base)


@pytest.mark.parametrize(("bands", "steps", "separation", "rate"), [(1, 9, 1, 0.3), (3, 20, 3, 0.4), (4, 37, 6, 0.2)])
def test_b_min_sep_chunks_are_the_recursion_on_the_drawn_outputs(bands, steps, separation, rate):
    # A chunk's P-side exponents come from the band of CᵀC on the participations; against the window dots of the
    # output y = σz + Cx itself, on the chunk's own draws (its generator: the normals, then the participations).
    sigma, k = 0.9, 50
    coefficients = np.linspace(1.0, 0.4, bands)
    coefficients /= np.linalg.norm(coefficients)
    chunks = mc._BMinSepChunks(coefficients, steps=steps, separation=separation, rate=rate, noise_multiplier=sigma, k=k)
    seed = np.random.SeedSequence(4)
    remove, add = chunks.losses(seed)
    rng = np.random.Generator(np.random.SFC64(seed))
    y = rng.standard_normal((steps, k)) * sigma
    rows, cols = mc._participation_rows(steps, separation, rate, k, rng)
    assert rows.size > k // 2
    expected_add = -mc._b_min_sep_loss(mc._window_dots(y, coefficients), coefficients, separation, rate, sigma)
    for band, value in enumerate(coefficients):
        inside = cols + band < steps
        y[cols[inside] + band, rows[inside]] += value
    expected_remove = mc._b_min_sep_loss(mc._window_dots(y, coefficients), coefficients, separation, rate, sigma)
    np.testing.assert_allclose(add, expected_add, rtol=0, atol=1e-11)
    np.testing.assert_allclose(remove, expected_remove, rtol=0, atol=1e-11)
    again = chunks.losses(seed)  # the buffers reused: the same draws give the same losses
    np.testing.assert_array_equal(again[0], remove)


def test_b_min_sep_losses_do_not_depend_on_the_number_of_workers():
    strategy = mf.banded_toeplitz_strategy(np.array([0.8, 0.6]) / np.linalg.norm([0.8, 0.6]), 30)
    kw = dict(min_separation=2, sampling_rate=0.2, noise_multiplier=1.0, samples=150_001)
    one = mc.b_min_sep_losses(strategy, **kw, rng=np.random.default_rng(9), workers=1)
    two = mc.b_min_sep_losses(strategy, **kw, rng=np.random.default_rng(9), workers=2)
    assert one[0].shape == one[1].shape == (150_001,)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])


@pytest.mark.parametrize(("separation", "rate"), [(1, 0.3), (4, 0.05), (7, 0.5)])
def test_the_linear_recursion_rescales_like_the_log_space_one(separation, rate):
    # 3000 steps whose terms grow by up to e^60 a step: the linear-space recursion rescales many times (its growth
    # bound passes e^600) and must agree with the log-space recursion on the same ℓ.
    log_a, linear = mc._linear_scale(separation, rate)
    assert linear
    ell = np.random.default_rng(8).normal(0.0, 20.0, size=(3000, 40)) + np.linspace(-5, 40, 40)
    assert np.log1p(np.exp(ell + log_a).max(axis=1)).sum() > 50 * 600
    linear_loss = mc._loss_from_exponents(ell + log_a, separation, rate)
    log_loss = mc._loss_in_log_space(ell.copy(), separation, rate)
    np.testing.assert_allclose(linear_loss, log_loss, rtol=1e-10, atol=1e-8)
