"""Tuning (Papernot–Steinke repeat-and-select) against dp-accounting's RDP accountant, and adaptive clipping (Andrew
et al. 2021) against the closed form of the composed Gaussians."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.adaptive_clipping import AdaptiveClipping, effective_noise_multiplier
from dplens.accountant.compose import Accountant
from dplens.accountant.tuning import tuning_epsilon, tuning_event

BASE = ev.SelfComposed(event=ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.1)), count=1000)


@pytest.mark.parametrize(
    ("distribution", "mean", "shape"),
    [
        ("geometric", 10, None),
        ("poisson", 10, None),
        ("truncated-negative-binomial", 10, 0.5),
        ("geometric", 40, None),
        ("poisson", 40, None),
        ("logarithmic", 5, None),
        ("truncated-negative-binomial", 10, 2.0),
    ],
)
def test_repeat_and_select_within_half_a_percent_of_dp_accounting(distribution, mean, shape):
    from dp_accounting.rdp import rdp_privacy_accountant

    study = tuning_event(BASE, distribution=distribution, mean=mean, shape=shape)
    ours = Accountant().compose(study).epsilon(1e-6, method="rdp")
    reference = rdp_privacy_accountant.RdpAccountant().compose(study.to_dp_accounting()).get_epsilon(1e-6)
    assert abs(ours - reference) <= 0.005 * reference


@settings(max_examples=6, deadline=None)
@given(
    sigma=st.floats(0.7, 5.0),
    steps=st.integers(1, 2000),
    mean=st.floats(1.0, 100.0),
    distribution=st.sampled_from(["geometric", "poisson", "logarithmic"]),
)
def test_tuning_epsilon_is_at_least_one_run(sigma, steps, mean, distribution):
    run = ev.SelfComposed(
        event=ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=sigma)), count=steps
    )
    out = tuning_epsilon(run, distribution=distribution, mean=mean, delta=1e-5)
    assert out.epsilon >= out.one_run_epsilon
    assert Accountant().compose(tuning_event(run, distribution=distribution, mean=mean)).epsilon(
        1e-5, method="rdp"
    ) >= (out.one_run_epsilon * (1 - 1e-9))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(distribution="geometric", mean=0), "mean .* must be a finite number > 0; got 0"),
        (dict(distribution="poisson", mean=-3.0), "mean .* must be a finite number > 0; got -3.0"),
        (dict(distribution="geometric", mean=0.5), "must be >= 1"),
        (dict(distribution="truncated-negative-binomial", mean=10, shape=0), "shape .* > 0 .*got 0"),
        (dict(distribution="truncated-negative-binomial", mean=10, shape=-0.5), "got -0.5"),
        (dict(distribution="geometric", mean=10, shape=2.0), "shape applies to 'truncated-negative-binomial' only"),
        (dict(distribution="uniform", mean=10), "distribution must be one of"),
    ],
)
def test_bad_tuning_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tuning_event(BASE, **kwargs)


def test_adaptive_clipping_without_sampling_is_the_closed_form_gdp():
    """q = 1: T steps of two Gaussians (σ_eff, 2σ_b) are exactly μ-GDP, μ = √T·(σ_eff⁻² + (2σ_b)⁻²)^{1/2} = √T/σ."""
    sigma, sigma_b, steps = 1.1, 12.8, 100
    ada = AdaptiveClipping.from_total(noise_multiplier=sigma, count_noise=sigma_b, sampling_rate=1.0, steps=steps)
    mu = math.sqrt(steps) * math.sqrt(effective_noise_multiplier(sigma, sigma_b) ** -2 + (2 * sigma_b) ** -2)
    assert mu == pytest.approx(math.sqrt(steps) / sigma, rel=1e-12)
    exact = conversions.gdp_epsilon(mu, 1e-5)
    got = Accountant().compose(ada).epsilon_result(1e-5, method="pld")
    assert got.epsilon_lower <= exact <= got.epsilon <= exact * (1 + 1e-3)


def test_adaptive_clipping_under_sampling_is_dp_sgd_at_the_total_noise():
    ada = AdaptiveClipping.from_total(noise_multiplier=1.1, count_noise=12.8, sampling_rate=0.004, steps=1000)
    plain = ev.PoissonSampled(sampling_rate=0.004, event=ev.Gaussian(noise_multiplier=ada.total_noise_multiplier))
    for method in ("rdp", "pld"):
        a = Accountant().compose(ada).epsilon(1e-5, method=method)
        b = Accountant().compose(plain, count=1000).epsilon(1e-5, method=method)
        assert a == pytest.approx(b, rel=1e-9)
    # Using the gradient noise σ alone (forgetting the count query) would under-count the privacy loss.
    naive = AdaptiveClipping(gradient_noise=1.1, count_noise=12.8, sampling_rate=0.004, steps=1000)
    assert Accountant().compose(naive).epsilon(1e-5, method="rdp") > Accountant().compose(plain, count=1000).epsilon(
        1e-5, method="rdp"
    )


def test_adaptive_clipping_bad_input():
    with pytest.raises(ValueError, match="count_noise must exceed noise_multiplier / 2"):
        effective_noise_multiplier(2.0, 1.0)
    with pytest.raises(ValueError, match="sampling_rate must be in"):
        AdaptiveClipping(gradient_noise=1.0, count_noise=5.0, sampling_rate=0.0, steps=10)


def test_a_raw_count_as_opacus_releases_it_costs_more_than_the_sigma_it_is_charged():
    """Opacus 1.6's AdaClipDPOptimizer noises Σ bᵢ (sensitivity 1 under add/remove) at std σ_u, yet sets σ_eff for a
    count of sensitivity ½ and charges σ: the two queries amount to (σ_eff⁻² + σ_u⁻²)^(−1/2) < σ."""
    sigma, sigma_u, q, steps = 1.1, 1.0, 256 / 60000, 14063
    opacus_run = AdaptiveClipping(
        gradient_noise=effective_noise_multiplier(sigma, sigma_u),
        count_noise=sigma_u,
        sampling_rate=q,
        steps=steps,
        count_sensitivity=1.0,
    )
    assert opacus_run.total_noise_multiplier == pytest.approx(
        (effective_noise_multiplier(sigma, sigma_u) ** -2 + sigma_u**-2) ** -0.5, rel=1e-12
    )
    assert opacus_run.total_noise_multiplier < sigma
    charged = Accountant().compose(
        ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma)), count=steps
    )
    actual = Accountant().compose(opacus_run).epsilon(1e-5, method="rdp")
    assert actual > 1.5 * charged.epsilon(1e-5, method="rdp")


def test_a_search_over_user_level_runs_is_accounted_and_costs_more_than_one():
    from dplens.accountant.user_level import UserLevelRun

    run = UserLevelRun(noise_multiplier=1.5, dataset_size=200_000, batch_size=1000, epochs=25, max_examples_per_user=4)
    out = tuning_epsilon(run, distribution="geometric", mean=10, delta=1e-6)
    assert out.epsilon > out.one_run_epsilon >= Accountant().compose(run).epsilon(1e-6, method="pld")
