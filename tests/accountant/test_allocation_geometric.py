"""The heavy-tailed random allocation's laws of S on a geometric grid (split and merged in convex order): the cells'
integrals against mpmath, the laws' mass and mean, and the two-step bracket against the exact profile — narrow, being
of order Δz², where the former path (every pairwise sum of log S rounded the same way) was of order Δz."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import allocation


def _two_step_delta(eps: float, sigma: float, direction: str) -> float:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "helpers" / "allocation_exact.py"
    spec = importlib.util.spec_from_file_location("_helpers_allocation_exact", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.two_step_delta(eps, sigma, direction)


def test_the_gauss_legendre_rule_is_numpy_s():
    nodes, weights = allocation._gauss_legendre()
    reference_nodes, reference_weights = np.polynomial.legendre.leggauss(allocation._NODES)
    np.testing.assert_allclose(nodes, 0.5 * (1.0 + reference_nodes), rtol=0, atol=1e-15)
    np.testing.assert_allclose(weights, 0.5 * reference_weights, rtol=1e-14)


@pytest.mark.parametrize("sigma", [0.4, 0.6])
def test_the_coordinate_cells_are_within_their_error_bounds_of_mpmath(sigma):
    s, dz = 1.0 / sigma, 0.02
    merged, split, q_out, p_out = allocation._coordinate(s, dz)
    mpmath.mp.dps = 40
    mean = mpmath.mpf(-0.5 * s * s)

    def density(x):
        return mpmath.npdf(x, mean, s)

    picks = [0, 7, merged.mass.size // 3, int(np.argmax(merged.mass)), merged.mass.size - 5, merged.mass.size - 1]
    for i in picks:
        k = merged.start + i
        a, b = mpmath.mpf(k) * dz, mpmath.mpf(k + 1) * dz
        mass = mpmath.quad(density, [a, b])
        moment = mpmath.quad(lambda x, a=a: mpmath.exp(x - a) * density(x), [a, b])
        up = mpmath.quad(lambda x, a=a: mpmath.expm1(x - a) * density(x), [a, b]) / mpmath.expm1(dz)
        assert abs(merged.mass[i] - mass) <= merged.mass_error[i], (i, merged.mass[i], mass)
        assert abs(merged.moment[i] - moment) <= merged.moment_error[i], (i, merged.moment[i], moment)
        assert merged.mass_error[i] <= 1e-11 * merged.mass[i]  # a few ulps of itself, far into the tails
        # The split law's point k holds the cell's mass less its share sent up, plus the cell below's share.
        assert split.start == merged.start
        below = mpmath.quad(lambda x, a=a: mpmath.expm1(x - a + dz) * density(x), [a - dz, a]) / mpmath.expm1(dz)
        expected = mass - up + (below if i > 0 else 0)
        assert abs(split.mass[i] - expected) <= split.mass_error[i] + 1e-300, (i, split.mass[i], expected)
    # The mass outside the grid: both tails of 10 standard deviations (and more on the far side).
    k_lo, k_hi = merged.start, merged.start + merged.mass.size
    exact_out = mpmath.ncdf(k_lo * dz, mean, s) + 1 - mpmath.ncdf(k_hi * dz, mean, s)
    assert float(exact_out) <= q_out <= 1.0001 * float(exact_out)
    assert 0 < p_out < 1e-20


@pytest.mark.parametrize("steps", [2, 7, 12])
def test_the_split_and_merged_laws_keep_mass_and_mean(steps):
    s, dz = 2.0, 0.02
    merged, split, q_out, _ = allocation._coordinate(s, dz)
    inside = (1.0 - q_out) ** steps  # the laws are restricted to every coordinate on the grid
    up = allocation._geometric_power(split, steps, dz)
    down = allocation._geometric_power(merged, steps, dz)
    y_up = np.exp((up.start + np.arange(up.mass.size)) * dz)
    y_down = np.exp((down.start + np.arange(down.mass.size)) * dz)
    assert abs(up.mass.sum() - inside) <= up.mass_error.sum() + 1e-15
    assert abs(down.mass.sum() - inside) <= down.mass_error.sum() + 1e-15
    # E[S; on the grid] = t·E[Y; Y on the grid]·(1 − q_out)^(t−1): the tilted mass inside, ~1 − 1e-22.
    mean = steps * (1.0 - q_out) ** (steps - 1)
    assert float(np.sum(y_up * up.mass)) == pytest.approx(mean, rel=1e-12)
    assert float(np.sum(y_down * down.moment)) == pytest.approx(mean, rel=1e-12)
    # Every merged atom within its cell [y_k, y_{k+1}]: the grid's cells keep their meaning through the sums.
    normal = down.mass > 1e-290  # (a subnormal mass has few digits)
    ratio = down.moment[normal] / down.mass[normal]
    assert np.all(ratio >= 1.0 - 1e-9) and np.all(ratio <= math.exp(dz) * (1.0 + 1e-9))
    # The split law is the more spread out (convex order): its call prices are never below the merged law's.
    for strike in (0.5 * steps, steps, 3.0 * steps, 30.0 * steps):
        split_call = float(np.sum(up.mass * np.maximum(y_up - strike, 0.0)))
        merged_call = float(np.sum(np.maximum(y_down * down.moment - strike * down.mass, 0.0)))
        assert split_call >= merged_call - 1e-12


def _law_delta(law: allocation._Law, eps: float, *, upper: bool) -> float:
    """δ(ε) = Σ p·(1 − e^{ε − loss})₊ of one law, its mass at +∞ and its error on the bound's side."""
    finite = np.isfinite(law.losses) & (law.mass > 0)
    value = float(np.sum(law.mass[finite] * np.maximum(-np.expm1(eps - law.losses[finite]), 0.0)))
    return value + law.infinity + law.error if upper else value - law.error


@pytest.mark.parametrize("sigma", [0.4, 0.5, 0.65])
@pytest.mark.parametrize("dz", [0.02, 0.005])
def test_the_two_step_laws_bracket_the_exact_profile_to_second_order(sigma, dz):
    upper, lower = allocation._heavy_laws(sigma, 2, 1.0, dz)
    for name in ("remove", "add"):
        for eps in (0.5, 2.0, 5.0):
            exact = _two_step_delta(eps, sigma, name)
            high = _law_delta(getattr(upper, name), eps, upper=True)
            low = _law_delta(getattr(lower, name), eps, upper=False)
            assert low <= exact <= high, (name, eps, low, exact, high)
            # O(Δz²): at Δz = 0.02 the bracket on δ is within 0.2 %, at 0.005 within 0.02 % (first order: ~Δz).
            assert high - low <= (0.002 if dz == 0.02 else 2e-4) * exact + 1e-13, (name, eps, low, exact, high)


def test_the_heavy_tailed_one_epoch_bracket_is_narrow_and_fast_to_build():
    # σ = 0.5, 100 steps, δ = 1e-5 (benchmarks/bench_samplers.py): pld-accounting 2.0's [5.3843, 5.4078]; the former
    # log-S path's [5.3937, 5.3987] (0.09 %) in 1.1 s of laws.
    from dplens.accountant.compose import Accountant
    from dplens.accountant.samplers import RandomAllocation

    result = Accountant().compose(RandomAllocation(noise_multiplier=0.5, steps=100), 1).epsilon_result(1e-5)
    assert result.epsilon >= 5.3843 and result.epsilon_lower <= 5.4078
    assert 5.3937 <= result.epsilon <= 5.3987 and 5.3937 <= result.epsilon_lower <= 5.3987  # inside the former bracket
    assert result.epsilon - result.epsilon_lower <= 4e-4 * result.epsilon, (result.epsilon_lower, result.epsilon)


@settings(max_examples=5, deadline=None, derandomize=True)
@given(
    sigma=st.floats(0.45, 0.68),
    ratio=st.floats(1.02, 1.3),
    steps=st.integers(2, 100),
    more=st.integers(1, 100),
    epochs=st.integers(1, 2),
)
def test_heavy_tailed_brackets_are_ordered_and_monotone(sigma, ratio, steps, more, epochs):
    # Issue 47: lower ≤ upper, and both monotone in σ, the steps per epoch and the epochs — each upper end at least
    # the lower end of a run that is more private (more noise, more steps to hide in, fewer epochs).
    from dplens.accountant.compose import Accountant
    from dplens.accountant.samplers import RandomAllocation

    def bracket(noise: float, t: int, e: int):
        result = Accountant().compose(RandomAllocation(noise_multiplier=noise, steps=t), e).epsilon_result(1e-6)
        assert 0 < result.epsilon_lower <= result.epsilon < math.inf
        return result.epsilon_lower, result.epsilon

    low, high = bracket(sigma, steps, epochs)
    assert bracket(sigma * ratio, steps, epochs)[0] <= high  # more noise
    assert bracket(sigma, steps + more, epochs)[0] <= high  # more steps per epoch
    if epochs > 1:
        assert bracket(sigma, steps, epochs - 1)[0] <= high  # one epoch fewer
    assert low <= high
