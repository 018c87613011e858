"""Certified brackets at production scale (issue 47): small sampling rates, low noise, long trainings.

Truth comes from closed forms (the one-step hockey stick of the Poisson-subsampled Gaussian, in mpmath) and from
dp-accounting's PLD at a fixed interval: its pessimistic value bounds the truth from above (so dplens's lower end may
not exceed it) and its optimistic value from below (so dplens's upper end may not fall under it).
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.accountant import pld_engine as pe


def psg(q: float, sigma: float) -> ev.PoissonSampled:
    return ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))


@functools.cache
def dpa_epsilon(q: float, sigma: float, steps: int, delta: float, interval: float, pessimistic: bool) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pl

    step = pl.from_gaussian_mechanism(
        standard_deviation=sigma,
        sampling_prob=q,
        value_discretization_interval=interval,
        pessimistic_estimate=pessimistic,
        use_connect_dots=pessimistic,
    )
    return float(step.self_compose(steps).get_epsilon_for_delta(delta))


def test_issue_row_small_rate_is_resolved():
    # Issue 47's row 3: q = 1e-4, σ = 0.57337, T = 30 000, δ = 1e-6 gave [0, 0.99998] (the driver gave up on a grid
    # coarser than q, where the optimistic merge lumps each step's losses together).
    bracket = pe.epsilon_bracket([(psg(1e-4, 0.57337), 30000)], 1e-6)
    assert bracket.tolerance_met and bracket.note is None
    assert bracket.lower > 0 and bracket.relative_width <= 5e-3
    assert bracket.lower <= dpa_epsilon(1e-4, 0.57337, 30000, 1e-6, 1e-4, True)
    assert bracket.upper >= dpa_epsilon(1e-4, 0.57337, 30000, 1e-6, 1e-4, False)


def test_refinement_goes_on_while_the_lower_end_is_zero():
    # q = 2e-5: on the first grids (Δ ≥ q) the lower end is 0 and the width says nothing; the driver starts at q/2.
    bracket = pe.epsilon_bracket([(psg(2e-5, 0.6), 20000)], 1e-5)
    assert bracket.tolerance_met and 0 < bracket.lower <= bracket.upper
    assert bracket.interval <= 1e-5
    assert bracket.relative_width <= 1e-3


def _exact_remove_delta(eps: float, q: float, sigma: float) -> float:
    """δ_remove(ε) of one step in closed form: P = (1 − q)N(0, σ²) + qN(1, σ²) against Q = N(0, σ²)."""
    mpmath.mp.dps = 40
    e, q, s = mpmath.mpf(eps), mpmath.mpf(q), mpmath.mpf(sigma)
    if mpmath.exp(e) <= 1 - q:
        return float(-mpmath.expm1(e))
    x = s * s * mpmath.log((mpmath.exp(e) - (1 - q)) / q) + mpmath.mpf(1) / 2
    tail0 = mpmath.ncdf(-x / s)
    tail1 = mpmath.ncdf(-(x - 1) / s)
    return float((1 - q) * tail0 + q * tail1 - mpmath.exp(e) * tail0)


def _pmf_delta(pmf: pe.GridPmf, interval: float, eps: float) -> float:
    losses = pmf.losses(interval)
    above = losses > eps
    return float(pmf.infinity_mass + np.sum(pmf.pmf[above] * -np.expm1(eps - losses[above])))


@pytest.mark.parametrize(("q", "interval"), [(1e-6, 2e-6), (1e-4, 3e-5), (3e-3, 1e-3)])
def test_aligned_grid_brackets_one_step(q, interval):
    # The remove direction's grid passes through log(1 − q): both PMFs bracket the exact hockey stick at every ε,
    # and the optimistic one keeps the step's bulk (no single atom holding almost all of the mass below 0).
    pmfs = pe.loss_distribution(psg(q, 0.6), pe.LossGrid(interval=interval)).remove
    offset = pmfs.optimistic.offset
    assert math.isclose((math.log1p(-q) - offset) / interval, round((math.log1p(-q) - offset) / interval), abs_tol=1e-6)
    for eps in (-2 * q, 0.0, q, 0.5 * interval, 3 * interval, 0.1, 1.0):
        exact = _exact_remove_delta(eps, q, 0.6)
        assert _pmf_delta(pmfs.optimistic, interval, eps) <= exact * (1 + 1e-9) + 1e-15
        assert _pmf_delta(pmfs.pessimistic, interval, eps) >= exact * (1 - 1e-9) - 1e-15


def test_lower_end_is_not_above_dp_accounting_at_small_sizes():
    cases = ((0.01, 1.0, 100, 1e-5, (1e-4,)), (1e-3, 0.7, 500, 1e-6, (1e-4,)))
    for q, sigma, steps, delta, intervals in cases:
        bracket = pe.epsilon_bracket([(psg(q, sigma), steps)], delta)
        for interval in intervals:
            assert bracket.lower <= dpa_epsilon(q, sigma, steps, delta, interval, True)
            assert bracket.upper >= dpa_epsilon(q, sigma, steps, delta, interval, False)
        assert bracket.relative_width <= 5e-3


@functools.cache
def _bracket(q: float, sigma: float, steps: int) -> tuple[float, float]:
    bracket = pe.epsilon_bracket([(psg(q, sigma), steps)], 1e-5)
    assert bracket.lower <= bracket.upper
    return bracket.lower, bracket.upper


def _monotone(smaller: tuple[float, float], larger: tuple[float, float]) -> None:
    """ε(smaller) ≤ ε(larger): the bracket ends may cross by no more than the brackets' own widths."""
    (lo_s, hi_s), (lo_l, hi_l) = smaller, larger
    assert lo_s <= hi_l  # validity: lo_s ≤ ε(smaller) ≤ ε(larger) ≤ hi_l
    assert hi_s - hi_l <= (hi_s - lo_s) + 1e-12
    assert lo_s - lo_l <= (hi_l - lo_l) + 1e-12


rates = st.sampled_from([1e-3, 3e-3, 0.01, 0.03, 0.1])
sigmas = st.sampled_from([0.6, 0.8, 1.0, 1.5, 2.0])
counts = st.sampled_from([10, 30, 100, 300, 1000])


@settings(max_examples=12, deadline=None)
@given(q=rates, sigma=sigmas, steps=counts, which=st.sampled_from(["q", "sigma", "steps"]))
def test_bracket_is_monotone_within_its_width(q, sigma, steps, which):
    if which == "q":
        _monotone(_bracket(q / 2, sigma, steps), _bracket(q, sigma, steps))
    elif which == "sigma":
        _monotone(_bracket(q, sigma * 1.25, steps), _bracket(q, sigma, steps))
    else:
        _monotone(_bracket(q, sigma, steps), _bracket(q, sigma, 2 * steps))


def test_unresolvable_grid_says_why():
    # q = 1e-6 at σ = 0.5 over 10⁶ steps: resolving one step needs a grid of 5e-7, beyond the engine's window. The
    # bracket is returned with its reason (outside issue 47's regime: q ≥ 5e-6).
    bracket = pe.epsilon_bracket([(psg(1e-6, 0.5), 10**6)], 1e-6)
    assert not bracket.tolerance_met
    assert bracket.note is not None and "window" in bracket.note
    assert bracket.lower <= bracket.upper
    assert bracket.upper >= 0.0596  # the engine's own value at a 1e-6 grid is 0.059695


def test_binomial_quantile_matches_the_full_scan():
    from scipy.special import bdtrc

    from dplens.accountant import allocation

    rng = np.random.default_rng(47)
    for _ in range(200):
        steps = int(rng.integers(1, 3000))
        probability = float(10 ** rng.uniform(-6, 0))
        failure = float(10 ** rng.uniform(-16, -2))
        tails = bdtrc(np.arange(steps + 1, dtype=float), steps, probability)
        expected = int(np.argmax(tails <= failure)) if (tails <= failure).any() else steps
        assert allocation._binomial_quantile(steps, probability, failure) == expected


def test_deviation_extremes_match_every_count():
    from dplens.accountant import allocation

    rng = np.random.default_rng(2602)
    for _ in range(300):
        steps = int(rng.integers(2, 10**5))
        worst = int(rng.integers(0, min(steps, 2000) + 1))
        linear, var = float(10 ** rng.uniform(-5, 1)), float(10 ** rng.uniform(-8, 1))
        mu = float(rng.normal())
        low, high = mu - float(10 ** rng.uniform(-4, 2)), mu + float(10 ** rng.uniform(-4, 2))

        def ends(counts, mu=mu, low=low, high=high, linear=linear, var=var, steps=steps, log_term=30.0):
            regular = steps - counts
            u = linear + np.sqrt(linear * linear + 2.0 * regular * var * log_term)
            return float(np.min(regular * mu - u + counts * low)), float(np.max(regular * mu + u + counts * high))

        every = ends(np.arange(worst + 1, dtype=float))
        few = ends(allocation._extreme_counts(worst, steps, linear, 2.0 * var * 30.0, (mu - low, high - mu)))
        assert few == pytest.approx(every, rel=1e-12, abs=1e-12)


@pytest.mark.slow
def test_one_epoch_of_a_billion_records_is_answered():
    # N = 10⁹, B = 10: 10⁸ steps in one epoch. Blocked Chernoff windows asked for 2.6·10¹⁰ points; now ~20 s.
    from dplens.accountant.samplers import RandomAllocation

    bracket = pe.epsilon_bracket([(RandomAllocation(noise_multiplier=1.0, steps=10**8), 1)], 1e-6)
    assert 0 < bracket.lower <= bracket.upper < 1e-3
    assert bracket.relative_width <= 5e-3


def test_cli_json_has_no_bare_infinity(capsys):
    import json

    from dplens import cli

    cli._emit({"epsilon": math.inf, "nested": [{"low": -math.inf, "nan": math.nan}], "ok": 1.5}, True, "")
    out = capsys.readouterr().out

    def refuse(token):
        raise AssertionError(f"bare {token} in JSON")

    data = json.loads(out, parse_constant=refuse)
    assert data == {"epsilon": "Infinity", "nested": [{"low": "-Infinity", "nan": None}], "ok": 1.5}


def test_balls_and_bins_out_of_range_falls_back_to_fewer_steps():
    # The fallback for 10⁸ steps per epoch, exercised at t = 200: the upper end of t' = 20 steps per epoch bounds the
    # run from above (post-processing), the sum statistic from below; the note states the width and the reason.
    from dplens import cli
    from dplens.accountant import dp_sgd

    run = dp_sgd.DpSgdRun(noise_multiplier=1.0, dataset_size=400, batch_size=2, epochs=1, sampling="balls-and-bins")
    direct = dp_sgd.dp_sgd_epsilon(
        dataset_size=400, batch_size=2, epochs=1, noise_multiplier=1.0, delta=1e-5, sampling="balls-and-bins"
    )
    assert direct.bracket_note is None and direct.epsilon_lower <= direct.epsilon
    bound = dp_sgd._fewer_steps_bound(run, 1e-5, dp_sgd.Method.PLD, ValueError("out of range"))
    assert math.isfinite(bound.epsilon) and bound.epsilon >= direct.epsilon_lower
    assert bound.epsilon_lower <= direct.epsilon and bound.lower_bound == "lower bound"
    assert "20 steps per epoch" in bound.bracket_note and "% wide" in bound.bracket_note
    assert bound.to_dict()["bracket_note"] == bound.bracket_note
    assert "note: the bracket" in cli._dp_sgd_lines(bound)


def test_allocation_is_non_increasing_in_the_steps_per_epoch():
    # The post-processing behind the fallback: one of t steps is at least as private as one of t' < t.
    from dplens.accountant.samplers import RandomAllocation

    few = pe.epsilon_bracket([(RandomAllocation(noise_multiplier=1.0, steps=20), 3)], 1e-5)
    many = pe.epsilon_bracket([(RandomAllocation(noise_multiplier=1.0, steps=200), 3)], 1e-5)
    assert many.lower <= few.upper


@pytest.mark.slow
def test_billion_records_ten_per_batch_low_noise_is_finite():
    import json
    import subprocess
    import sys

    args = ["--dataset-size", "1000000000", "--batch-size", "10", "--epochs", "1", "--noise-multiplier", "0.6"]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dplens.cli",
            "dp-sgd",
            *args,
            "--delta",
            "1e-6",
            "--sampling",
            "balls-and-bins",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out, parse_constant=lambda token: pytest.fail(f"bare {token}"))
    assert 0 < data["epsilon"] < 1 and "bracket_note" in data


def test_truncated_poisson_with_a_generous_cap_has_the_poisson_bracket():
    # B_max = 1300 for an expected batch of 1000: a step truncates with probability 4e-20, counted as an infinite
    # loss; the lower end is the Poisson pair at q·P(Binomial(N − 1, q) ≤ B_max − 1) (attained).
    import dp_accounting as dpa

    from dplens.accountant.dp_sgd import dp_sgd_epsilon

    run = dict(dataset_size=10**5, batch_size=1000, epochs=10, noise_multiplier=1.0, delta=1e-6)
    truncated = dp_sgd_epsilon(**run, sampling="truncated-poisson", max_batch_size=1300)
    assert truncated.details.startswith("pld (dplens engine") and truncated.bracket_note is None
    assert (truncated.epsilon - truncated.epsilon_lower) <= 5e-3 * truncated.epsilon
    accountant = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    step = dpa.TruncatedSubsampledGaussianDpEvent(
        dataset_size=10**5, sampling_probability=0.01, truncated_batch_size=1300, noise_multiplier=1.0
    )
    accountant.compose(dpa.SelfComposedDpEvent(step, truncated.steps))
    assert truncated.epsilon_lower <= accountant.get_epsilon(1e-6)


def test_balls_and_bins_never_reports_an_infinite_epsilon():
    # Two steps per epoch at σ = 0.75: the allocation PLD's add direction split mass onto S = 0 (an infinite loss,
    # 0.5 % of it, above δ), so its upper end was ∞ and the run fell back to the allocation revealed. The grid now
    # starts with a cell [0, o] of mass Φ(−10) and stops low, the tail on its ladder: a certified bracket, below the
    # revealed allocation's closed form.
    from dplens.accountant import conversions
    from dplens.accountant.dp_sgd import dp_sgd_epsilon

    run = dp_sgd_epsilon(
        dataset_size=4, batch_size=2, epochs=1, noise_multiplier=0.75, delta=1e-5, sampling="balls-and-bins"
    )
    assert math.isfinite(run.epsilon) and run.epsilon <= conversions.gdp_epsilon(1 / 0.75, 1e-5) * (1 + 1e-9)
    assert run.epsilon_lower <= run.epsilon <= run.epsilon_lower * (1 + 5e-3) and run.bracket_note is None


def test_a_run_the_pld_route_refuses_states_its_bracket_and_why(capsys):
    # q = 0.01, σ = 5, T = 10⁷ (issue 47's grid, ε ≈ 49): the composition's losses reach ~6·10⁴ nats, beyond the
    # engine's range, so only RDP answers. The bracket is [0, RDP's ε] and the output says so in text and JSON.
    import json

    from dplens import cli
    from dplens.accountant.compose import Accountant, Method
    from dplens.accountant.dp_sgd import dp_sgd_epsilon

    r = dp_sgd_epsilon(dataset_size=10_000, batch_size=100, epochs=100_000, noise_multiplier=5.0, delta=1e-5)
    alone = Accountant().compose(psg(0.01, 5.0), 10_000_000).epsilon(1e-5, method=Method.RDP)
    assert r.method == "rdp" and r.epsilon == pytest.approx(alone, rel=1e-12) and 10 < r.epsilon < 50
    assert r.epsilon_lower == 0.0 and r.lower_bound == "certified"
    assert "100% wide" in r.bracket_note and "PLD route refused" in r.bracket_note
    assert "--method" not in r.bracket_note  # the engine's advice to use RDP is what was done
    # the refusal is the one the best route's answer kept, not a second PLD attempt
    best = Accountant().compose(psg(0.01, 5.0), 10_000_000).epsilon_result(1e-5)
    reasons = dict(best.refusals)
    assert Method.PLD in reasons and Method.RDP not in reasons
    assert reasons[Method.PLD].split("; use ", 1)[0] in r.bracket_note
    assert (
        cli.main(
            [
                "dp-sgd",
                "--dataset-size",
                "10000",
                "--batch-size",
                "100",
                "--epochs",
                "100000",
                "--noise-multiplier",
                "5",
                "--delta",
                "1e-5",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["bracket_note"] == r.bracket_note


@functools.cache
def _fourier_reference():
    """benchmarks/ref_poisson_fourier.py: δ_T(ε) by Fourier inversion of the composed loss's moment generating
    function (no discretisation of the loss, no dplens code)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "ref_poisson_fourier.py"
    spec = importlib.util.spec_from_file_location("ref_poisson_fourier", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fourier_reference_matches_the_gaussian_closed_form():
    # q = 1: T Gaussian steps are one Gaussian of μ = √T/σ (Dong, Roth, Su 2022, Corollary 2.13).
    ref = _fourier_reference()
    law = ref.PoissonGaussian(1.0, 2.0)
    mu = math.sqrt(10) / 2.0
    for eps in (1.0, 4.0):
        exact = float(mpmath.ncdf(-eps / mu + mu / 2) - mpmath.e**eps * mpmath.ncdf(-eps / mu - mu / 2))
        assert ref.delta(law, 10, eps, reverse=False) == pytest.approx(exact, rel=1e-9)
        assert ref.delta(law, 10, eps, reverse=True) == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize(("q", "sigma", "steps", "delta"), [(0.01, 1.0, 1000, 1e-6), (1e-3, 0.6, 3000, 1e-9)])
def test_bracket_holds_the_fourier_reference(q, sigma, steps, delta):
    """The certified bracket against an independent computation: at the lower end the remove direction's δ is at
    least the target, at the upper end neither direction's exceeds it (the add direction's by its Chernoff bound, far
    below δ here). The reference's own numerical error, measured by halving its steps, is below 1e-9 relative here:
    far inside the margins of 1e-6."""
    ref = _fourier_reference()
    bracket = pe.epsilon_bracket([(psg(q, sigma), steps)], delta)
    law = ref.PoissonGaussian(q, sigma)
    at_upper, at_lower = ref.delta(law, steps, np.array([bracket.upper, bracket.lower]), reverse=False)
    assert at_upper <= delta * (1 + 1e-6) and at_lower >= delta * (1 - 1e-6)
    assert ref.chernoff(law, steps, bracket.upper, reverse=True) <= delta
    assert bracket.relative_width <= 5e-3
