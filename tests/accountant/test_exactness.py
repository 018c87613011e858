"""Exactness: trade-off curves at the ends, randomized response under zero-out, α = ∞, and the edge cases
q = 0, δ = 0, count = 0 on every route."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event as dpe
from dp_accounting.pld import privacy_loss_distribution as dpa_pld
from dp_accounting.privacy_accountant import NeighboringRelation as DpaRelation
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from dplens.accountant import conversions, rdp, tradeoff
from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method

ALPHAS = np.concatenate([[0.0], np.geomspace(1e-12, 1.0, 400)])
ZERO_OUT = ev.NeighboringRelation.REPLACE_SPECIAL


def _routes(acc: Accountant, delta: float) -> dict[str, float]:
    return {r.method.value: r.epsilon for r in acc.all_routes(delta)}


# --------------------------------------------------------------------------------------------
# Trade-off curves
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.05, 0.1, 1.0, 3.0])
def test_gaussian_trade_off_is_g_mu_exactly(sigma):
    # From an ε grid ending at 60, f(0) was 0 at σ = 0.05 and off by 0.137 at σ = 0.1; now it is G_{1/σ}.
    f = Accountant().compose(ev.Gaussian(noise_multiplier=sigma)).trade_off()
    assert f(0.0) == 1.0 and f(1.0) == 0.0
    assert np.max(np.abs(f(ALPHAS) - conversions.gaussian_trade_off(1 / sigma, ALPHAS))) < 1e-12


def test_grid_envelope_reaches_the_ends_too():
    # Profiles without a closed-form curve still get f(0) = 1 − δ(∞): the grid now runs to ε = 700.
    profile = conversions.profile_to_trade_off(lambda e: conversions.gdp_delta(20.0, e), np.array([0.0, 1.0]))
    assert profile[0] == pytest.approx(1.0, abs=1e-12) and profile[1] == 0.0


@pytest.mark.parametrize(("eps", "k"), [(1.0, 2), (0.5, 2), (2.0, 5), (1.0, 10)])
def test_randomized_response_trade_off_is_exact(eps, k):
    # The exact curve of the pair P = (p_hi, p_lo, …), Q = (p_lo, p_hi, …) by the Neyman–Pearson lemma, computed here
    # independently: outcomes in decreasing Q/P, randomised at the boundary; the pair is symmetric.
    p_lo = 1 / (math.exp(eps) + k - 1)
    p_hi = math.exp(eps) * p_lo
    p = np.array([p_hi] + [p_lo] * (k - 1))
    q = np.array([p_lo, p_hi] + [p_lo] * (k - 2))
    order = np.argsort(-(q / p), kind="stable")
    alpha_v = np.concatenate([[0.0], np.cumsum(p[order])])  # type-I error of rejecting the first j outcomes
    beta_v = np.concatenate([[1.0], 1.0 - np.cumsum(q[order])])
    expected = np.interp(ALPHAS, alpha_v, beta_v)
    f = Accountant().compose(ev.RandomizedResponse(epsilon=eps, num_values=k)).trade_off()
    assert np.max(np.abs(f(ALPHAS) - expected)) < 1e-12
    if k == 2:  # binary RR is exactly f_{ε,0} (the grid envelope was 0.36 % low in power at ε = 1)
        assert np.max(np.abs(f(ALPHAS) - conversions.dp_trade_off(eps, 0.0, ALPHAS))) < 1e-12


def test_laplace_trade_off_closed_form_against_its_pld():
    closed = tradeoff.laplace_trade_off(1.0, ALPHAS)
    pmf = dpa_pld.from_laplace_mechanism(1.0, value_discretization_interval=1e-4)._pmf_remove
    from_pld = tradeoff.discrete_trade_off([tradeoff.dp_accounting_pmf_arrays(pmf)])(ALPHAS)
    # The pessimistic PLD's curve lies below the exact one, by at most its discretisation.
    assert np.all(from_pld <= closed + 1e-12)
    assert np.max(closed - from_pld) < 1e-3
    assert closed[0] == 1.0 and closed[-1] == 0.0


def test_pld_trade_off_ends_and_non_private():
    step = ev.PoissonSampled(sampling_rate=0.05, event=ev.Gaussian(noise_multiplier=0.8))
    f = Accountant(value_discretization_interval=1e-3).compose(step, 50).trade_off()
    values = f(ALPHAS)
    # f(0) = 1 up to the PLD engine's certified floating-point bound on its FFT (2.3e-12 here), which the curve counts
    # as mass at infinite loss so that it stays a lower bound on the exact one.
    assert 1.0 - 1e-11 <= values[0] <= 1.0 and values[-1] == 0.0
    assert np.all(np.diff(values) <= 1e-15)  # non-increasing
    assert np.all(values <= 1.0 - ALPHAS + 1e-12)  # f(α) ≤ 1 − α
    blatant = Accountant().compose(ev.NonPrivate()).compose(ev.Gaussian(noise_multiplier=1.0))
    assert np.all(blatant.pld_profile().trade_off()(ALPHAS) == 0.0)


# --------------------------------------------------------------------------------------------
# Randomized response under zero-out; dp-accounting's RR count bug
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "k"), [(0.5, 2), (1.0, 3), (2.0, 10)])
def test_randomized_response_zero_out_matches_dp_accounting(eps, k):
    p = k / (math.exp(eps) + k - 1)
    orders = np.array([1.01, 1.5, 2.0, 10.0, 100.0, np.inf])
    ref = [dpa_rdp._randomized_response_rdp_replace_special(p, k, a) for a in orders]
    mine = rdp.randomized_response_zero_out_rdp(orders, epsilon=eps, num_values=k)
    assert mine == pytest.approx(ref, rel=1e-9)
    # The profile (both orders of P against the uniform response) against dp-accounting's exact PLD.
    event = ev.RandomizedResponse(epsilon=eps, num_values=k, neighboring=ZERO_OUT)
    acc = Accountant().compose(event)
    pld = dpa_pld.from_randomized_response(p, k, neighboring_relation=DpaRelation.REPLACE_SPECIAL)
    for target in (0.0, 0.3 * eps, 0.9 * eps):
        assert acc.delta(target, method=Method.EXACT) == pytest.approx(pld.get_delta_for_epsilon(target), abs=1e-4)
    # Zero-out is half a replace-one step: strictly smaller ε, and the old (replace-one) answer was too large.
    replace_one = Accountant().compose(ev.RandomizedResponse(epsilon=eps, num_values=k))
    assert acc.epsilon(1e-6) < replace_one.epsilon(1e-6)


def test_randomized_response_count_is_composed_on_the_pld_route():
    # dp-accounting 0.6's PLDAccountant composes RandomizedResponseDpEvent once whatever the count (1.0987 for three
    # runs of ε = log 3); the exact answer is 3·log 3 at δ = 0 and 3.29583 at δ = 1e-6.
    from dp_accounting.pld import pld_privacy_accountant

    buggy = pld_privacy_accountant.PLDAccountant(DpaRelation.REPLACE_ONE)
    buggy.compose(dpe.RandomizedResponseDpEvent(0.5, 2), 3)
    assert buggy.get_epsilon(1e-6) == pytest.approx(1.0987, abs=1e-4)
    acc = Accountant().compose(ev.RandomizedResponse(epsilon=math.log(3)), 3)
    routes = _routes(acc, 1e-6)
    # Exact: the loss 3·log 3 has probability (3/4)³, so δ(ε) = (3/4)³(1 − e^{ε − 3 log 3}) just below it.
    exact = 3 * math.log(3) + math.log1p(-1e-6 / 0.75**3)
    assert exact * (1 - 1e-12) <= routes["pld"] <= exact + 1e-3 * exact  # the certified bracket's tolerance
    assert exact * (1 - 1e-12) <= routes["exact"] <= exact + 1e-9


# --------------------------------------------------------------------------------------------
# α = ∞ and δ = 0
# --------------------------------------------------------------------------------------------


def test_max_divergence_of_pure_dp_mechanisms():
    assert rdp.rdp_curve(ev.Laplace(noise_multiplier=0.5))(math.inf) == 2.0
    assert rdp.rdp_curve(ev.RandomizedResponse(epsilon=1.3, num_values=4))(math.inf) == pytest.approx(1.3, rel=1e-12)
    eps, k = 1.3, 4
    p_lo = 1 / (math.exp(eps) + k - 1)
    expected = max(math.log(k * math.exp(eps) * p_lo), -math.log(k * p_lo))
    zero_out = rdp.rdp_curve(ev.RandomizedResponse(epsilon=eps, num_values=k, neighboring=ZERO_OUT))
    assert zero_out(math.inf) == pytest.approx(expected, rel=1e-12)
    assert rdp.rdp_curve(ev.Gaussian(noise_multiplier=1.0))(math.inf) == math.inf
    step = ev.PoissonSampled(sampling_rate=0.1, event=ev.Gaussian(noise_multiplier=1.0))
    assert rdp.rdp_curve(step)(math.inf) == math.inf
    assert rdp.rdp_curve(ev.ZcdpMechanism(rho=0.0, xi=0.2))(math.inf) == 0.2


def test_delta_zero_on_every_route():
    single = _routes(Accountant().compose(ev.Laplace(noise_multiplier=2.0)), 0.0)
    assert single["rdp"] == pytest.approx(0.5, rel=1e-9) and single["exact"] == pytest.approx(0.5, rel=1e-9)
    laplace = Accountant().compose(ev.Laplace(noise_multiplier=2.0), 3)
    routes = _routes(laplace, 0.0)
    assert routes["rdp"] == pytest.approx(1.5, rel=1e-9) and routes["rdp"] >= 1.5
    assert routes["pld"] >= 1.5  # dp-accounting's Laplace PLD puts its truncated tail at +∞: ∞ is valid
    rr = Accountant().compose(ev.RandomizedResponse(epsilon=0.7, num_values=3), 4)
    for value in _routes(rr, 0.0).values():
        assert 2.8 * (1 - 1e-12) <= value <= 2.8 + 4 * 1e-4 + 1e-9  # the PLD rounds each loss up to the grid
    gaussian = Accountant().compose(ev.Gaussian(noise_multiplier=1.0))
    assert set(_routes(gaussian, 0.0).values()) == {math.inf}
    assert gaussian.epsilon(0.0) == math.inf and laplace.epsilon(0.0) == pytest.approx(1.5, rel=1e-9)
    assert laplace.delta(1.5) == 0.0


# --------------------------------------------------------------------------------------------
# q = 0 and count = 0
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        ev.PoissonSampled(sampling_rate=0.0, event=ev.Gaussian(noise_multiplier=1.0)),
        ev.SelfComposed(event=ev.Gaussian(noise_multiplier=1.0), count=0),
        ev.SelfComposed(event=ev.Laplace(noise_multiplier=1.0), count=0),
        ev.SelfComposed(event=ev.RandomizedResponse(epsilon=1.0), count=0),
        ev.Composed(events=()),
    ],
)
def test_nothing_private_is_zero_on_every_route(event):
    acc = Accountant().compose(event)
    for delta in (0.0, 1e-6):
        routes = _routes(acc, delta)
        assert routes and set(routes.values()) == {0.0}, routes
    assert Accountant().compose(ev.Gaussian(noise_multiplier=1.0), 0).ledger == ()
    assert Accountant().compose(ev.Gaussian(noise_multiplier=1.0), 0).epsilon(1e-6) == 0.0
