"""Random allocation at production scale (issue 47): the tail of the allocation law above the ratio grid, tiny
epochs, tiny noise.

Truth comes from the closed form of the allocation of 1 of 2 steps (one-dimensional integrals of Black–Scholes prices,
:func:`tests.accountant.test_samplers._two_step_delta`), from the Gaussian mechanism's closed form (the allocation
revealed, and the sum statistic), and from properties any valid bracket has.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dplens.accountant import allocation, conversions, pld_engine
from dplens.accountant.samplers import RandomAllocation


def _helper(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "helpers" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_helpers_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_two_step_delta = _helper("allocation_exact").two_step_delta


@pytest.fixture
def low_grid_top(monkeypatch):
    """A ratio grid whose top leaves 10⁻³ of the tilted mass above it: the ladder carries real mass."""
    monkeypatch.setattr(allocation, "TOP_MASS", 1e-3)
    allocation._laws.cache_clear()
    yield
    allocation._laws.cache_clear()


@pytest.mark.parametrize("sigma", [0.8, 1.5])
def test_the_ladder_above_the_grid_keeps_the_two_step_bracket_certified(low_grid_top, sigma):
    laws = allocation.allocation_laws(sigma, 2)
    assert laws.top < 70  # the grid stops low: E[(Y − top)₊] ≈ 10⁻³
    # At an infinite loss only two coordinates on the ladder (a union bound, ~10⁻³·3·10⁻³), not the 10⁻³ above the top.
    assert laws.upper.remove.infinity < 1e-5
    composed = pld_engine.compose(
        [(RandomAllocation(noise_multiplier=sigma, steps=2), 1)], pld_engine.LossGrid(interval=1e-3)
    )
    for name, direction in composed.directions().items():
        for eps in (0.3, 1.0, 2.5, 4.0):
            exact = _two_step_delta(eps, sigma, name)
            low = float(direction.delta_lower(np.array([eps]))[0])
            high = float(direction.delta_upper(np.array([eps]))[0])
            assert low <= exact <= high, (name, eps, low, exact, high)
            # and narrow but for the two-on-the-ladder mass counted at an infinite loss
            assert high - low <= 0.05 * exact + laws.upper.remove.infinity + 1e-9, (name, eps, low, exact, high)


@pytest.mark.parametrize("steps", [2, 3])
def test_a_tiny_epoch_has_a_finite_narrow_pld_bracket(steps):
    # At σ = 0.75 the PLD route gave ε = ∞ for 2 and 3 steps per epoch (the split grid's first cell [0, h] put
    # 0.1–1 % of the add direction's mass on S = 0, an infinite loss): now a finite, narrow bracket below the
    # revealed allocation's exact Gaussian ε (Accountant().compose(...) directly, the PLD route alone).
    from dplens.accountant.compose import Accountant, Method

    event = RandomAllocation(noise_multiplier=0.75, steps=steps)
    result = Accountant().compose(event).epsilon_result(1e-5, method=Method.PLD)
    assert math.isfinite(result.epsilon) and result.epsilon <= conversions.gdp_epsilon(1 / 0.75, 1e-5)
    assert result.epsilon_lower <= result.epsilon <= result.epsilon_lower * (1 + 5e-3)


def test_the_rdp_route_is_the_allocation_revealed():
    # Never ∞ from a finite σ: the RDP route answers every allocation with the revealed run's curve (an upper bound),
    # which the PLD route's bracket lies below; k of t steps reveal k Gaussian steps (σ/√k).
    from dplens.accountant import events as ev
    from dplens.accountant import rdp
    from dplens.accountant.compose import Accountant, Method

    event = RandomAllocation(noise_multiplier=1.0, steps=50)
    revealed = rdp.rdp_curve(ev.Gaussian(noise_multiplier=1.0)).epsilon(1e-5)
    assert Accountant().compose(event).epsilon(1e-5, method=Method.RDP) == pytest.approx(revealed, rel=1e-12)
    assert Accountant().compose(event).epsilon(1e-5, method=Method.PLD) < revealed
    three = RandomAllocation(noise_multiplier=1.0, steps=50, selected=3)
    three_revealed = rdp.rdp_curve(ev.Gaussian(noise_multiplier=1.0 / math.sqrt(3))).epsilon(1e-5)
    assert Accountant().compose(three).epsilon(1e-5, method=Method.RDP) == pytest.approx(three_revealed, rel=1e-12)


def test_tiny_noise_is_answered_by_the_allocation_revealed_without_warnings(capsys):
    # σ = 0.02, 100 steps per epoch: the log-normal tails overflowed doubles (a numpy RuntimeWarning), then an
    # OverflowError refusal naming no alternative. Now the PLD route refuses before any arithmetic and the run is
    # bounded by the allocation revealed (exactly 50-GDP), the sum statistic (5-GDP) below it.
    import warnings

    from dplens import cli

    args = ["dp-sgd", "--sampling", "balls-and-bins", "--noise-multiplier", "0.02", "--dataset-size", "10000"]
    args += ["--batch-size", "100", "--epochs", "1", "--delta", "1e-5", "--json"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = cli.main(args)
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    import json

    data = json.loads(out)
    assert data["epsilon"] == pytest.approx(conversions.gdp_epsilon(50.0, 1e-5), rel=1e-9)
    assert data["epsilon_lower"] == pytest.approx(conversions.gdp_epsilon(5.0, 1e-5), rel=1e-6)
    assert "allocation revealed" in data["bracket_note"]
    with pytest.raises(OverflowError, match="beyond the PLD engine"):
        allocation.allocation_laws(0.02, 100)


def test_many_steps_at_low_noise_bracket_the_independent_reference():
    # σ = 0.55, 1000 steps per epoch, 3 epochs: the ratio grid stops at the sum's bulk, the tail on the ladder. The
    # reference is benchmarks/ref_allocation_linear.py (numpy only, a mean-keeping linear grid of spacing 0.05 up to
    # 2·10⁵, an estimate): ε(10⁻⁶) ≈ 3.46167. At δ = 10⁻⁹ no top mass at an infinite loss competes with δ.
    event = RandomAllocation(noise_multiplier=0.55, steps=1000)
    bracket = pld_engine.epsilon_bracket([(event, 3)], 1e-6)
    assert bracket.lower <= 3.46167 <= bracket.upper and bracket.relative_width <= 5e-3
    small = pld_engine.epsilon_bracket([(event, 3)], 1e-9)
    assert math.isfinite(small.upper) and small.relative_width <= 5e-3 and small.lower > bracket.upper
    # At an infinite loss: two coordinates on the ladder (a union bound), under 1 % of δ = 10⁻⁹ over the 3 epochs.
    assert allocation.allocation_laws(0.55, 1000).upper.remove.infinity < 3e-12


def test_the_laws_round_off_effort_follows_the_composition_asking(monkeypatch):
    """The laws tighten round-off only down to the composition's share of its precision (δ·10⁻⁴ at the default
    tolerance, per epoch), a decade in [10⁻¹³, 10⁻¹⁰]; 10⁻¹³ outside a composition. Coarse or finest, the bracket is
    valid: the two overlap, and the coarse one still meets the tolerance."""
    assert allocation._precision() == allocation.FINEST_PRECISION  # no composition asking
    for share, decade in [(1e-20, 1e-13), (3e-12, 1e-12), (1e-11, 1e-11), (5e-9, 1e-10)]:
        token = pld_engine._EVENT_PRECISION.set(share)
        try:
            assert allocation._precision() == decade, share
        finally:
            pld_engine._EVENT_PRECISION.reset(token)

    seen: list[float] = []
    decade_of = allocation._precision
    monkeypatch.setattr(allocation, "_precision", lambda: seen.append(decade_of()) or seen[-1])
    event = RandomAllocation(noise_multiplier=1.0, steps=20)
    allocation._laws.cache_clear()
    coarse = pld_engine.epsilon_bracket([(event, 2)], 1e-5)
    assert set(seen) == {1e-10}
    seen.clear()
    pld_engine.epsilon_bracket([(event, 2)], 1e-12, tolerance=1e-2)
    assert set(seen) == {1e-13}  # 10⁻¹²·10⁻²/4 per run: below the finest
    monkeypatch.setattr(allocation, "COARSEST_PRECISION", allocation.FINEST_PRECISION)
    allocation._laws.cache_clear()
    finest = pld_engine.epsilon_bracket([(event, 2)], 1e-5)
    allocation._laws.cache_clear()
    assert coarse.tolerance_met and finest.tolerance_met
    assert coarse.lower <= finest.upper and finest.lower <= coarse.upper, (coarse, finest)
