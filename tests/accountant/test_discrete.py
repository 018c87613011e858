"""Discrete Laplace / discrete Gaussian events: RDP and exact profiles against mpmath sums and dp-accounting."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dplens.accountant.compose import Accountant, Method
from dplens.accountant.discrete import (
    DiscreteGaussian,
    DiscreteLaplace,
    discrete_gaussian_delta,
    discrete_laplace_delta,
    discrete_laplace_rdp,
)
from dplens.accountant.events import event_from_dict, event_to_dict


@pytest.fixture(autouse=True)
def _mpmath_digits():
    """The mpmath oracles' precision, set for each test (40 digits): it is process-wide state, and a module-level
    setting lasts only until another module's test changes it (a shuffled run caught this)."""
    with mp.workdps(40):
        yield


def _dl_pmf(a):
    r = mp.e ** (-mp.mpf(a))
    c = (1 - r) / (1 + r)
    return lambda z: c * r ** abs(z)


def _dl_rdp_mp(alpha, a, sensitivity, span=4000):
    """Finite sum over [−span, span + Δ] (mpmath's nsum does not converge reliably on these)."""
    p = _dl_pmf(a)
    alpha = mp.mpf(alpha)
    total = mp.fsum(p(z) ** alpha * p(z - sensitivity) ** (1 - alpha) for z in range(-span, span + sensitivity))
    return float(mp.log(total) / (alpha - 1))


def _dl_delta_mp(eps, a, sensitivity, span=4000):
    p = _dl_pmf(a)
    return float(mp.fsum(max(p(z) - mp.e**eps * p(z - sensitivity), 0) for z in range(-span, span + sensitivity)))


def _dg_delta_mp(eps, sigma, sensitivity, span=400):
    sigma = mp.mpf(sigma)
    mass = lambda z: mp.e ** (-(mp.mpf(z) ** 2) / (2 * sigma * sigma))  # noqa: E731
    norm = mp.fsum(mass(z) for z in range(-span, span + 1))
    return float(mp.fsum(max(mass(z) - mp.e**eps * mass(z - sensitivity), 0) for z in range(-span, span + 1)) / norm)


@pytest.mark.parametrize(("a", "sensitivity"), [(0.5, 1), (0.05, 7), (1.3, 3)])
@pytest.mark.parametrize("alpha", [1.5, 2.0, 10.0, 100.0])
def test_discrete_laplace_rdp_is_exact(a, sensitivity, alpha):
    expected = _dl_rdp_mp(alpha, a, sensitivity)
    got = float(discrete_laplace_rdp(np.array([alpha]), noise_parameter=a, sensitivity=sensitivity)[0])
    assert got == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(("a", "sensitivity"), [(0.5, 1), (0.05, 7), (1.3, 3)])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3, 1.0])
def test_discrete_laplace_profile_is_exact(a, sensitivity, eps):
    expected = _dl_delta_mp(eps, a, sensitivity)
    got = float(discrete_laplace_delta(np.array([eps]), noise_parameter=a, sensitivity=sensitivity)[0])
    assert got == pytest.approx(expected, rel=1e-10, abs=1e-15)


def test_discrete_laplace_matches_dp_accounting():
    from dp_accounting.pld import privacy_loss_distribution as pld

    reference = pld.from_discrete_laplace_mechanism(0.01, sensitivity=100, value_discretization_interval=1e-5)
    for eps in (0.1, 0.5, 0.9):
        ours = float(discrete_laplace_delta(np.array([eps]), noise_parameter=0.01, sensitivity=100)[0])
        assert ours <= reference.get_delta_for_epsilon(eps) + 1e-12  # dp-accounting is pessimistic
        assert ours == pytest.approx(reference.get_delta_for_epsilon(eps), rel=1e-3)


@pytest.mark.parametrize(("sigma", "sensitivity"), [(1.0, 1), (3.0, 2), (20.0, 16)])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_discrete_gaussian_profile_is_exact(sigma, sensitivity, eps):
    expected = _dg_delta_mp(eps, sigma, sensitivity)
    got = float(discrete_gaussian_delta(np.array([eps]), sigma=sigma, sensitivity=sensitivity)[0])
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-16)


def test_discrete_gaussian_approaches_the_continuous_gaussian():
    """For σ ≫ 1 the discrete Gaussian's ε(δ) is the continuous one's (CKS 2020 §1: the gap vanishes)."""
    discrete = Accountant().compose(DiscreteGaussian(sigma=1024.0, sensitivity=1024)).epsilon(1e-5, method=Method.EXACT)
    from dplens.accountant.events import Gaussian

    continuous = Accountant().compose(Gaussian(noise_multiplier=1.0)).epsilon(1e-5, method=Method.EXACT)
    assert discrete == pytest.approx(continuous, rel=1e-4)


def test_accountant_routes_and_pure_epsilon():
    event = DiscreteLaplace(noise_parameter=0.25, sensitivity=2)
    accountant = Accountant().compose(event, 3)
    assert accountant.pure_epsilon() == pytest.approx(1.5)
    assert accountant.epsilon(1e-5, method=Method.RDP) <= 1.5 + 1e-9
    assert Accountant().compose(event).epsilon(1e-5, method=Method.EXACT) <= 0.5 + 1e-9
    zcdp = DiscreteGaussian(sigma=2.0, sensitivity=1)
    rdp = Accountant().compose(zcdp).rdp_curve()
    assert float(rdp(np.array([4.0]))[0]) == pytest.approx(4 * zcdp.zcdp_rho())


def test_events_serialise_and_validate():
    for event in (DiscreteLaplace(noise_parameter=0.5, sensitivity=3), DiscreteGaussian(sigma=2.0, dimension=4)):
        assert event_from_dict(event_to_dict(event)) == event
    with pytest.raises(ValueError, match="sensitivity must be an integer >= 1; got 0"):
        DiscreteLaplace(noise_parameter=1.0, sensitivity=0)
    with pytest.raises(ValueError, match="noise_parameter must be a finite number > 0; got -1"):
        DiscreteLaplace(noise_parameter=-1)
    with pytest.raises(ValueError, match="dimension must be an integer >= 1"):
        DiscreteGaussian(sigma=1.0, dimension=0)
    with pytest.raises(ValueError, match="exact discrete Gaussian profile is one-dimensional"):
        Accountant().compose(DiscreteGaussian(sigma=1.0, dimension=2)).exact_profile()


def test_rdp_limits():
    value = discrete_laplace_rdp(np.array([1e6]), noise_parameter=0.3, sensitivity=4)[0]
    assert value == pytest.approx(1.2, rel=1e-5) and value <= 1.2  # → aΔ as α → ∞, never above
    assert math.isfinite(discrete_laplace_rdp(np.array([1.0001]), noise_parameter=0.3, sensitivity=4)[0])


def _exact_composed_discrete_gaussian_delta(sigma, sensitivity, count, epsilon):
    """δ(ε) of `count` discrete Gaussians, exactly: the loss is linear in the sum S of the noises,
    L = (count·Δ² − 2ΔS)/(2σ²), and S's PMF is the count-fold convolution of N_Z(0, σ²) (support cut at 40σ)."""
    reach = math.ceil(40 * sigma) + 1
    z = np.arange(-reach, reach + 1, dtype=float)
    pmf = np.exp(-(z * z) / (2 * sigma * sigma))
    pmf /= pmf.sum()
    total = np.array([1.0])
    for _ in range(count):
        total = np.convolve(total, pmf)
    s = np.arange(total.size, dtype=float) - count * reach
    loss = (count * sensitivity**2 - 2.0 * sensitivity * s) / (2 * sigma * sigma)
    return float(np.sum(total * np.clip(-np.expm1(epsilon - loss), 0.0, None)))


@pytest.mark.parametrize(("sigma", "sensitivity", "count"), [(2.0, 1, 10), (0.7, 1, 5), (3.0, 2, 20), (1.0, 1, 1)])
def test_discrete_gaussian_pld_brackets_the_exact_composition(sigma, sensitivity, count):
    from dplens.accountant import pld_engine

    event = DiscreteGaussian(sigma=sigma, sensitivity=sensitivity)
    for epsilon in (0.5, 2.0, 5.0):
        exact = _exact_composed_discrete_gaussian_delta(sigma, sensitivity, count, epsilon)
        bracket = pld_engine.delta_bracket([(event, count)], epsilon)
        assert bracket.lower <= exact * (1 + 1e-9) + 1e-15
        assert exact <= bracket.upper * (1 + 1e-9) + 1e-15
    # Through the accountant: the PLD route, with its certified lower end, tighter than the zCDP (RDP) route.
    accountant = Accountant().compose(event, count=count)
    result = accountant.epsilon_result(1e-5, method=Method.PLD)
    assert result.epsilon_lower <= result.epsilon <= accountant.epsilon(1e-5, method=Method.RDP)


def test_discrete_gaussian_pld_is_one_dimensional():
    from dplens.accountant import events as ev
    from dplens.accountant import pld_engine

    two = DiscreteGaussian(sigma=2.0, dimension=2)
    assert not pld_engine.supports(two, neighboring=ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    assert pld_engine.supports(DiscreteGaussian(sigma=2.0), neighboring=ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    assert Accountant().compose(two, count=3).epsilon(1e-5) > 0  # RDP answers
