"""Calibration: never overshoots, matches dp-accounting, clear errors."""

import math

import dp_accounting as dpa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.accountant.calibrate import Direction, calibrate, calibrate_dp_sgd_noise
from dplens.accountant.compose import Accountant, Method

MNIST_Q = 256 / 60000


@settings(max_examples=20, deadline=None)
@given(
    q=st.floats(1e-3, 0.2),
    steps=st.integers(10, 5000),
    target=st.floats(0.3, 10.0),
    delta=st.sampled_from([1e-7, 1e-5, 1e-3]),
)
def test_rdp_calibration_never_overshoots(q, steps, target, delta):
    result = calibrate_dp_sgd_noise(
        sampling_rate=q, steps=steps, target_epsilon=target, target_delta=delta, method=Method.RDP, upper=1000.0
    )
    independent = (
        Accountant()
        .compose(ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=result.value)), steps)
        .epsilon(delta, method=Method.RDP)
    )
    assert independent <= target
    assert result.epsilon <= target
    # Tight: 0.1 % less noise would break the target.
    tighter = (
        Accountant()
        .compose(ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=result.value * 0.999)), steps)
        .epsilon(delta, method=Method.RDP)
    )
    assert tighter > target


@pytest.mark.parametrize(("target", "reference_sigma"), [(1.0, 2.02521), (3.0, 0.96844), (8.0, 0.65582)])
def test_pld_calibration_matches_dp_accounting(target, reference_sigma):
    result = calibrate_dp_sgd_noise(sampling_rate=MNIST_Q, steps=14_063, target_epsilon=target, target_delta=1e-5)
    assert result.value == pytest.approx(reference_sigma, rel=5e-3)
    assert result.epsilon <= target and result.epsilon_lower <= result.epsilon
    # Never less noise than the exact answer: the true ε at the calibrated σ is ≤ the target. Checked independently
    # with dp-accounting's own (pessimistic) PLD accountant on a grid finer than dplens's, 5e-5. (At its default 1e-4
    # dp-accounting can be looser than dplens's certified bound: at the ε = 1 answer it gives 1.0000089 where the
    # true ε is 0.99984, and its own calibrated σ for ε = 8, 0.65582, carries ≈ 1e-4 more noise than needed.)
    acc = dpa.pld.PLDAccountant(value_discretization_interval=5e-5)
    acc.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(MNIST_Q, dpa.GaussianDpEvent(result.value)), 14_063))
    assert acc.get_epsilon(1e-5) <= target


@pytest.mark.parametrize(("target", "reference_sigma"), [(1.0, 2.17849), (3.0, 1.01412), (8.0, 0.67812)])
def test_rdp_calibration_matches_reference(target, reference_sigma):
    result = calibrate_dp_sgd_noise(
        sampling_rate=MNIST_Q, steps=14_063, target_epsilon=target, target_delta=1e-5, method=Method.RDP
    )
    # Continuous α can only need less noise than dp-accounting's grid.
    assert reference_sigma * 0.99 <= result.value <= reference_sigma * (1 + 1e-5)


def test_integer_steps_calibration():
    def make(steps: int) -> Accountant:
        return Accountant().compose(
            ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.0)), steps
        )

    result = calibrate(make, target_epsilon=2.0, target_delta=1e-5, lower=1, upper=100_000, integer=True, param="steps")
    assert isinstance(result.value, int)
    assert make(result.value).epsilon(1e-5, method=Method.RDP) <= 2.0
    assert make(result.value + 1).epsilon(1e-5, method=Method.RDP) > 2.0


def test_unreachable_target_is_a_clear_error():
    def make(sigma: float) -> Accountant:
        return Accountant().compose(ev.Gaussian(noise_multiplier=sigma))

    with pytest.raises(ValueError, match="unreachable"):
        calibrate(make, target_epsilon=0.01, target_delta=1e-5, lower=0.5, upper=2.0, direction=Direction.DECREASING)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"target_epsilon": -1.0}, "target_epsilon"),
        ({"target_epsilon": float("nan")}, "target_epsilon"),
        ({"target_delta": 0.0}, "target_delta"),
        ({"target_delta": 1.5}, "target_delta"),
        ({"lower": 5.0, "upper": 1.0}, "lower"),
    ],
)
def test_bad_arguments_are_value_errors(kwargs, name):
    args = {"target_epsilon": 1.0, "target_delta": 1e-5, "lower": 0.5, "upper": 50.0} | kwargs
    with pytest.raises(ValueError, match=name):
        calibrate(lambda s: Accountant().compose(ev.Gaussian(noise_multiplier=s)), **args)


def test_calibrated_gaussian_matches_analytic_gaussian():
    # Calibrating a single Gaussian through the exact route recovers Balle–Wang's σ (notes §5.4).
    result = calibrate(
        lambda s: Accountant().compose(ev.Gaussian(noise_multiplier=s)),
        target_epsilon=1.0,
        target_delta=1e-5,
        lower=0.5,
        upper=50.0,
        method=Method.EXACT,
    )
    assert result.value == pytest.approx(3.730632, abs=1e-5)
    assert math.isfinite(result.epsilon) and result.epsilon <= 1.0
