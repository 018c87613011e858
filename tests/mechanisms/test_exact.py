"""Exact discrete samplers and the secure release of the Laplace and Gaussian mechanisms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dplens.mechanisms.additive import GaussianMechanism, LaplaceMechanism, release_grid
from dplens.mechanisms.exact import bernoulli_exp, discrete_gaussian, discrete_laplace


def _chi_square_p(draws: np.ndarray, log_pmf, span: int) -> float:
    support = np.arange(-span, span + 1)
    expected = np.exp(log_pmf(support))
    expected /= expected.sum()
    observed = np.array([(draws == k).sum() for k in support])
    keep = expected * draws.size >= 5
    pooled_expected = np.append(expected[keep] * draws.size, draws.size * expected[~keep].sum())
    pooled_observed = np.append(observed[keep], draws.size - observed[keep].sum())
    return float(stats.chisquare(pooled_observed, pooled_expected).pvalue)


def test_bernoulli_exp_rates():
    rng = np.random.default_rng(0)
    for n, d in [(0, 1), (1, 3), (5, 2), (7, 7)]:
        coins = bernoulli_exp(np.full(100_000, n), np.full(100_000, d), rng)
        assert abs(coins.mean() - math.exp(-n / d)) < 5 * math.sqrt(0.25 / 100_000)


def test_discrete_laplace_matches_its_pmf():
    draws = discrete_laplace(3, 200_000, np.random.default_rng(1))
    assert _chi_square_p(draws, lambda k: -np.abs(k) / 3, 40) > 1e-3


@pytest.mark.parametrize("sigma_squared", [1, 9, 10**10])
def test_discrete_gaussian_matches_its_pmf(sigma_squared):
    draws = discrete_gaussian(sigma_squared, 100_000 if sigma_squared < 100 else 300, np.random.default_rng(2))
    if sigma_squared < 100:
        assert _chi_square_p(draws, lambda k: -(k * k) / (2 * sigma_squared), 40) > 1e-3
    else:  # the Python-integer path: the scale is right
        assert 0.8 < draws.std() / math.sqrt(sigma_squared) < 1.2


def test_sampler_arguments():
    with pytest.raises(ValueError, match="t must be an integer >= 1; got 0"):
        discrete_laplace(0, 10, np.random.default_rng())
    with pytest.raises(ValueError, match=r"sigma_squared must be an integer >= 1; got 2\.5"):
        discrete_gaussian(2.5, 10, np.random.default_rng())


@pytest.mark.parametrize("mechanism", [LaplaceMechanism(scale=1.5), GaussianMechanism(noise_multiplier=0.8)])
def test_release_is_on_the_grid_and_centred(mechanism):
    scale = getattr(mechanism, "scale", None) or mechanism.noise_multiplier
    grid = release_grid(scale)
    rng = np.random.default_rng(3)
    values = mechanism.release_batch(2.3, 50_000, rng)
    assert np.all(values / grid == np.round(values / grid))
    assert abs(values.mean() - round(2.3 / grid) * grid) < 5 * scale * 2 / math.sqrt(50_000)
    single = mechanism.release(2.3, rng)
    assert isinstance(single, float) and (single / grid).is_integer()
    vector = mechanism.release(np.array([1.0, 2.0]), rng)
    assert vector.shape == (2,)


def test_release_accounting_covers_the_grid():
    for scale in (0.013, 0.5, 1.0, 3.7, 5000.0):
        event = LaplaceMechanism(scale=scale).release_event()
        assert event.pure_dp_epsilon() <= 1 / scale * (1 + 1e-12)
        assert event.sensitivity == round(1 / release_grid(scale))
        gaussian = GaussianMechanism(noise_multiplier=scale).release_event()
        assert gaussian.zcdp_rho() <= 1 / (2 * scale * scale) * (1 + 1e-12)
    assert LaplaceMechanism(scale=1.0).release_event(dimension=3).sensitivity == 1024 + 2


def test_insecure_float_path_is_the_textbook_mechanism():
    rng = np.random.default_rng(4)
    value = LaplaceMechanism(scale=1.0).release(3.0, rng, insecure_float=True)
    assert (value / release_grid(1.0)) != round(value / release_grid(1.0))  # an arbitrary double


def test_secure_release_passes_every_float_check():
    """The release that users deploy: CONSISTENT with every float check on (10^5 here; 10^6 in the slow test)."""
    from dplens.auditing.floats import SamplerModel
    from dplens.auditing.target_game import HistogramRatio, Reachability, audit_target
    from dplens.auditing.targets import TargetPair, as_target

    checks = tuple(Reachability(sampler=m, scale=1.0) for m in SamplerModel)
    result = audit_target(
        as_target(LaplaceMechanism(scale=1.0)),
        TargetPair(data=1.0, neighbour=0.0, query=(1.0, 0.0)),
        claim_epsilon=1.0,
        trials=100_000,
        seed=0,
        scores=(HistogramRatio(), *checks),
    )
    assert result.verdict.value == "CONSISTENT" and len(result.float_evidence) == 5


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_acceptance_secure_release_consistent_at_1e6(kind):
    from dplens.accountant.compose import Accountant
    from dplens.auditing.floats import SamplerModel
    from dplens.auditing.target_game import HistogramRatio, Reachability, audit_target
    from dplens.auditing.targets import TargetPair, as_target

    mechanism = LaplaceMechanism(scale=1.0) if kind == "laplace" else GaussianMechanism(noise_multiplier=1.0)
    delta = 0.0 if kind == "laplace" else 1e-5
    claim = 1.0 if kind == "laplace" else Accountant().compose(mechanism.release_event()).epsilon(delta)
    checks = tuple(Reachability(sampler=m, scale=1.0) for m in SamplerModel)
    result = audit_target(
        as_target(mechanism),
        TargetPair(data=1.0, neighbour=0.0, query=(1.0, 0.0)),
        claim_epsilon=claim,
        claim_delta=delta,
        trials=1_000_000,
        seed=0,
        scores=(HistogramRatio(), *checks),
    )
    print(kind, result.epsilon_lower_bound, claim, result.elapsed_seconds)
    assert result.verdict.value == "CONSISTENT"
