"""The privacy unit: user-level DP-SGD (example-level sampling with at most K examples, user-level sampling).

Truth comes from dp-accounting's ``MixtureOfGaussiansDpEvent`` PLD (the tight ELS analysis, a test-time reference),
the exact Binomial tail (mpmath), μ-GDP closed forms for the unamplified samplers, the example-level DP-SGD event
(K = 1 is that event), dplens's GroupPrivacy (a valid but looser bound the tight one must never exceed), and properties
any valid user-level bound must have (≥ the example-level ε, monotone in K, calibration never above its target).
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.approx_dp import ApproxDp
from dplens.accountant.compose import Accountant
from dplens.accountant.dp_sgd import dp_sgd_epsilon
from dplens.accountant.group import GroupPrivacy
from dplens.accountant.user_level import (
    TRUNCATION_DELTA,
    UserLevelRun,
    binomial_tail_bound,
    els_step,
    user_epsilons,
    user_level_epsilon,
    user_level_noise_multiplier,
)


def _dpa_mixture_epsilon(sigma: float, q: float, steps: int, delta: float, k: int, interval: float) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from scipy.stats import binom

    probs = binom.pmf(range(k + 1), k, q)
    event = dp_event.MixtureOfGaussiansDpEvent(sigma, [float(i) for i in range(k + 1)], [float(p) for p in probs])
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    return accountant.compose(event, steps).get_epsilon(delta)


def _els(sigma: float, q: float, steps: int, k: int, n: int = 100_000) -> UserLevelRun:
    batch = round(q * n)
    return UserLevelRun(
        noise_multiplier=sigma, dataset_size=n, batch_size=batch, epochs=steps * batch / n, max_examples_per_user=k
    )


def test_els_matches_dp_accounting_mixture_pld():
    """σ = 1.5, q = 0.01, T = 200, K = 2: within 1 % of dp-accounting's (pessimistic) PLD, and our certified lower
    end is below it (so we are never below the truth it bounds)."""
    reference = _dpa_mixture_epsilon(1.5, 0.01, 200, 1e-5, 2, interval=2e-3)
    result = Accountant().compose(_els(1.5, 0.01, 200, 2)).epsilon_result(1e-5, method="pld")
    assert abs(result.epsilon - reference) <= 0.01 * reference
    assert result.epsilon_lower <= reference


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 4, 8])
def test_els_headline_configuration_against_dp_accounting(k):
    """The issue's (σ, q, T, δ) = (1.5, 0.005, 5000, 1e-6): within 1 % of dp-accounting at its default grid."""
    reference = _dpa_mixture_epsilon(1.5, 0.005, 5000, 1e-6, k, interval=1e-4)
    result = Accountant().compose(_els(1.5, 0.005, 5000, k, n=200_000)).epsilon_result(1e-6, method="pld")
    assert abs(result.epsilon - reference) <= 0.01 * reference
    assert result.epsilon_lower <= reference


@pytest.mark.parametrize("k", [2, 4, 8])
def test_els_never_looser_than_group_privacy(k):
    run = _els(1.5, 0.005, 5000, k, n=200_000)
    tight = Accountant().compose(run).epsilon(1e-6, method="pld")
    group = GroupPrivacy(event=run.record_run().standard_event(), group_size=k)
    assert tight <= Accountant().compose(group).epsilon(1e-6, method="rdp")


def test_k_one_is_the_example_level_event():
    assert els_step(1.5, 1, 0.005, 1e-20)[0] == ev.PoissonSampled(
        sampling_rate=0.005, event=ev.Gaussian(noise_multiplier=1.5)
    )
    example = dp_sgd_epsilon(dataset_size=200_000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    user = user_level_epsilon(
        dataset_size=200_000,
        batch_size=1000,
        epochs=25,
        noise_multiplier=1.5,
        delta=1e-6,
        max_examples_per_user=1,
    )
    assert user.epsilon == example.epsilon and user.privacy_unit == "user" and example.privacy_unit == "example"


@settings(max_examples=8, deadline=None)
@given(k=st.integers(1, 6), sigma=st.floats(0.8, 3.0), q=st.floats(0.002, 0.05))
def test_user_level_at_least_example_level_and_monotone_in_k(k, sigma, q):
    def eps(kk: int) -> float:
        return Accountant().compose(_els(sigma, q, 50, kk)).epsilon(1e-5, method="pld")

    low, here, high = eps(1), eps(k), eps(k + 1)
    assert low <= here * (1 + 1e-9) and here <= high * (1 + 1e-9)


@pytest.mark.parametrize(("trials", "p", "k"), [(1000, 0.005, 20), (100, 0.01, 8), (50, 0.3, 30), (8, 0.005, 3)])
def test_binomial_tail_bound_is_above_the_exact_tail(trials, p, k):
    mpmath.mp.dps = 50
    exact = mpmath.fsum(
        mpmath.binomial(trials, i) * mpmath.mpf(p) ** i * (1 - mpmath.mpf(p)) ** (trials - i)
        for i in range(k + 1, trials + 1)
    )
    assert binomial_tail_bound(trials, p, k) >= float(exact)


def test_large_k_is_truncated_with_a_certified_delta_in_seconds():
    runs = {k: _els(30.0, 0.005, 5000, k, n=200_000) for k in (8, 100, 1000)}
    values = {k: Accountant().compose(r).epsilon(1e-6, method="pld") for k, r in runs.items()}
    assert values[8] < values[100] < values[1000]
    for k in (100, 1000):
        assert 0 < runs[k].truncation_delta() <= TRUNCATION_DELTA
        step = runs[k].standard_event()
        assert isinstance(step, ev.Composed) and step.events[1] == ApproxDp(
            epsilon=0.0, delta=runs[k].truncation_delta()
        )


def test_truncated_mixture_contains_the_full_mixture():
    """K = 100 truncated against the full 101-component mixture (all masses representable at q = 0.05): the
    truncated ledger's ε is an upper bound, at most the width of a bracket above the full one."""
    from scipy.stats import binom

    run = _els(40.0, 0.05, 200, 100)
    truncated = Accountant().compose(run).epsilon_result(1e-6, method="pld")
    probs = binom.pmf(range(101), 100, 0.05)
    full = ev.MixtureOfGaussians(
        standard_deviation=40.0,
        sensitivities=tuple(float(i) for i in range(101)),
        sampling_probs=tuple(float(p) / float(probs.sum()) for p in probs),
    )
    exact = Accountant().compose(full, count=200).epsilon_result(1e-6, method="pld")
    assert run.truncation_delta() > 0
    assert truncated.epsilon >= exact.epsilon_lower
    assert truncated.epsilon <= exact.epsilon * 1.001


def test_delta_only_guarantee_composes_exactly_in_the_engine():
    """Gaussian(σ) ⊗ (0, δ₀): δ(ε) = δ₀ + (1 − δ₀)·δ_G(ε), so ε at δ is the Gaussian's at (δ − δ₀)/(1 − δ₀)."""
    sigma, d0, delta = 2.0, 1e-7, 1e-5
    result = Accountant().compose(
        ev.Composed(events=(ev.Gaussian(noise_multiplier=sigma), ApproxDp(epsilon=0.0, delta=d0)))
    )
    got = result.epsilon_result(delta, method="pld")
    exact = conversions.gdp_epsilon(1.0 / sigma, (delta - d0) / (1 - d0))
    assert got.epsilon_lower <= exact <= got.epsilon
    assert "dplens engine" in got.details


def test_user_sampling_is_the_run_over_users():
    user = user_level_epsilon(
        dataset_size=200_000,
        batch_size=1000,
        epochs=25,
        noise_multiplier=1.5,
        delta=1e-6,
        user_sampling=True,
        users=50_000,
    )
    over_users = dp_sgd_epsilon(dataset_size=50_000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    assert user.epsilon == over_users.epsilon and user.steps == 1250 and user.sampling_rate == 0.02
    assert user.dataset_size == 200_000 and user.to_dict()["user_sampling"] is True


@pytest.mark.parametrize("sampling", ["shuffle", "balls-and-bins", "cyclic"])
def test_unamplified_samplers_give_k_times_the_gdp_mu(sampling):
    result = user_level_epsilon(
        dataset_size=10_000,
        batch_size=100,
        epochs=3,
        noise_multiplier=20.0,
        delta=1e-5,
        sampling=sampling,
        max_examples_per_user=4,
    )
    assert result.epsilon == pytest.approx(conversions.gdp_epsilon(4 * math.sqrt(3) / 20.0, 1e-5), rel=1e-9)
    example = dp_sgd_epsilon(
        dataset_size=10_000, batch_size=100, epochs=3, noise_multiplier=20.0, delta=1e-5, sampling=sampling
    )
    assert result.lower_bound == "lower bound" and result.epsilon_lower <= example.epsilon <= result.epsilon


@pytest.mark.parametrize("sampling", ["fixed-size", "truncated-poisson"])
def test_samplers_without_a_user_level_bound_are_refused(sampling):
    with pytest.raises(ValueError, match="no user-level bound"):
        UserLevelRun(
            noise_multiplier=1.0,
            dataset_size=1000,
            batch_size=10,
            epochs=1,
            sampling=sampling,
            max_examples_per_user=2,
            max_batch_size=20 if sampling == "truncated-poisson" else None,
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(max_examples_per_user=0), "max_examples_per_user must be an integer >= 1; got 0"),
        (dict(), "needs max_examples_per_user"),
        (dict(user_sampling=True), "user_sampling needs users"),
        (dict(max_examples_per_user=2, users=2000), "users must be <= dataset_size=1000; got users=2000"),
        (dict(user_sampling=True, users=5), "batch_size must be <= users=5"),
        (dict(max_examples_per_user=2, users=100), "exceeds max_examples_per_user"),
    ],
)
def test_bad_user_level_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        UserLevelRun(noise_multiplier=1.0, dataset_size=1000, batch_size=10, epochs=1, **kwargs)


def test_the_example_unit_is_refused_by_the_user_level_entry_point():
    with pytest.raises(ValueError, match="privacy_unit='user'"):
        user_level_epsilon(
            dataset_size=1000, batch_size=10, epochs=1, noise_multiplier=1.0, delta=1e-5, privacy_unit="example"
        )


@pytest.mark.parametrize(
    "unit",
    [
        dict(max_examples_per_user=3),
        dict(user_sampling=True, users=20_000),
        dict(max_examples_per_user=3, sampling="shuffle"),
    ],
)
def test_user_level_calibration_never_overshoots(unit):
    result = user_level_noise_multiplier(
        dataset_size=50_000, batch_size=500, epochs=2, target_epsilon=4.0, delta=1e-5, **unit
    )
    assert result.epsilon <= 4.0 and result.privacy_unit == "user"
    recomputed = user_level_epsilon(
        dataset_size=50_000,
        batch_size=500,
        epochs=2,
        noise_multiplier=result.noise_multiplier,
        delta=1e-5,
        method="pld",
        **unit,
    )
    assert recomputed.epsilon <= 4.0 * (1 + 1e-3)  # the same value re-accounted (its own grid)
    less = user_level_epsilon(
        dataset_size=50_000,
        batch_size=500,
        epochs=2,
        noise_multiplier=result.noise_multiplier * 0.99,
        delta=1e-5,
        method="pld",
        **unit,
    )
    assert less.epsilon > 4.0  # and it is the smallest such σ to 1 %


def test_heterogeneous_users_give_worst_case_and_distribution():
    out = user_epsilons({1: 150_000, 5: 10_000}, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    single = user_level_epsilon(
        dataset_size=200_000,
        batch_size=1000,
        epochs=25,
        noise_multiplier=1.5,
        delta=1e-6,
        max_examples_per_user=5,
        method="pld",
    )
    assert out.worst_case.epsilon == single.epsilon and out.dataset_size == 200_000 and out.users == 160_000
    assert out.quantile(0.5) == out.rows[0][2] < out.quantile(1.0) == single.epsilon
    with pytest.raises(ValueError, match="histogram"):
        user_epsilons({}, batch_size=10, epochs=1, noise_multiplier=1.0, delta=1e-5)


def test_zero_out_of_a_users_examples_is_the_add_remove_pair_under_poisson():
    common = dict(dataset_size=200_000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    zero = user_level_epsilon(**common, max_examples_per_user=2, neighboring="zero_out", method="pld")
    add = user_level_epsilon(**common, max_examples_per_user=2, method="pld")
    assert zero.epsilon == add.epsilon and zero.neighboring == "zero_out" and "same dominating pair" in zero.details


@pytest.mark.parametrize("sampling", ["balls-and-bins", "shuffle", "fixed-size", "truncated-poisson"])
def test_k_one_is_the_example_level_run_under_every_sampler(sampling):
    common = dict(dataset_size=2000, batch_size=100, epochs=2, noise_multiplier=2.0, delta=1e-5, sampling=sampling)
    if sampling == "truncated-poisson":
        common["max_batch_size"] = 150
    example = dp_sgd_epsilon(**common)
    user = user_level_epsilon(**common, max_examples_per_user=1)
    assert user.epsilon == example.epsilon and user.epsilon_lower == example.epsilon_lower
