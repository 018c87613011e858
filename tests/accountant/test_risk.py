"""Attack risk read off the trade-off curve (dplens.accountant.risk): closed forms, mpmath, the PLD engine's certified
bracket, the RDP route's validity, Bayes success, monotonicity in noise, every spec type, bad input."""

from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from dplens.accountant import conversions, pld_engine
from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method
from dplens.accountant.risk import CURVE_FPRS, DEFAULT_FPRS, attack_risk, budget_risk, check_fpr
from dplens.accountant.tradeoff import laplace_trade_off
from dplens.spec import parse_spec, spec_types

FPRS = (1e-4, 0.001, 0.01, 0.1, 0.5)


def gaussians(mu: float) -> Accountant:
    """Four Gaussians that compose to exactly μ-GDP (σ = 2/μ each)."""
    return Accountant().compose(ev.Gaussian(noise_multiplier=2.0 / mu), 4)


def psg(q: float, sigma: float, steps: int) -> Accountant:
    return Accountant().compose(ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma)), steps)


def mp_gaussian_tpr(mu: float, alpha: float) -> mpmath.mpf:
    """Φ(Φ⁻¹(α) + μ) at 40 digits (DRS 2022 Def. 2.7: TPR = 1 − G_μ(α))."""
    with mpmath.workdps(40):
        z = -mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * mpmath.mpf(alpha))
        return mpmath.ncdf(z + mu)


# --------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 2.0, 4.0])
def test_gaussian_tpr_is_the_closed_form_and_never_below_mpmath(mu):
    risk = attack_risk(gaussians(mu), fprs=FPRS, method="exact")
    for fpr, upper, lower in zip(FPRS, risk.tpr_upper, risk.tpr_lower, strict=True):
        exact = mp_gaussian_tpr(mu, fpr)
        assert upper >= exact >= lower
        assert float(upper - exact) <= 1e-11 and float(exact - lower) <= 1e-11
    assert risk.advantage_upper == pytest.approx(2 * stats.norm.cdf(mu / 2) - 1, rel=1e-12, abs=3e-12)
    assert risk.advantage_upper >= 2 * stats.norm.cdf(mu / 2) - 1


@pytest.mark.parametrize("mu", [0.5, 1.0, 3.0])
def test_gaussian_through_the_pld_engine_brackets_the_closed_form(mu):
    risk = attack_risk(gaussians(mu), fprs=FPRS, method="pld")
    assert risk.method is Method.PLD and risk.tpr_lower is not None
    for fpr, upper, lower in zip(FPRS, risk.tpr_upper, risk.tpr_lower, strict=True):
        exact = float(mp_gaussian_tpr(mu, fpr))
        assert lower <= exact <= upper
        assert upper - lower <= max(1e-3 * upper, 1e-7)
    exact_advantage = 2 * stats.norm.cdf(mu / 2) - 1
    assert risk.advantage_lower <= exact_advantage <= risk.advantage_upper


@pytest.mark.parametrize("b", [0.5, 1.0, 3.0])
def test_laplace_tpr_is_one_minus_the_drs_curve(b):
    alphas = np.array(FPRS)
    expected = 1.0 - np.asarray(laplace_trade_off(1.0 / b, alphas))
    acc = Accountant().compose(ev.Laplace(noise_multiplier=b))
    exact = attack_risk(acc, fprs=FPRS, method="exact")
    assert np.allclose(exact.tpr_upper, expected, rtol=1e-11, atol=1e-12)
    assert np.all(np.array(exact.tpr_upper) >= expected)
    engine = attack_risk(acc, fprs=FPRS, method="pld")
    assert np.all(np.array(engine.tpr_lower) <= expected + 1e-15)
    assert np.all(expected <= np.array(engine.tpr_upper))
    # advantage = δ(0) = 1 − e^{−ε₀/2} (the Laplace profile at ε = 0)
    assert exact.advantage_upper == pytest.approx(-math.expm1(-0.5 / b), rel=1e-12, abs=3e-12)


def _one_step_tpr(q: float, sigma: float, alpha: float) -> float:
    """One Poisson-subsampled Gaussian step, both tests in closed form (the worse one is the guarantee):
    membership (null N(0, σ²), alternative (1 − q)N(0, σ²) + qN(1, σ²)): TPR = (1 − q)α + qΦ̄(Φ̄⁻¹(α) − 1/σ);
    the reverse test (null the mixture) by solving for its threshold."""
    membership = (1 - q) * alpha + q * stats.norm.sf(stats.norm.isf(alpha) - 1 / sigma)

    def fpr(t: float) -> float:
        return (1 - q) * stats.norm.cdf(t / sigma) + q * stats.norm.cdf((t - 1) / sigma) - alpha

    threshold = optimize.brentq(fpr, -60, 60, xtol=1e-14)
    reverse = stats.norm.cdf(threshold / sigma)
    return max(membership, reverse)


@pytest.mark.parametrize(("q", "sigma"), [(0.2, 0.8), (0.05, 1.5), (0.5, 0.5)])
def test_one_subsampled_step_is_bracketed_by_the_engine(q, sigma):
    fprs = (1e-4, 1e-3, 0.01, 0.05)  # away from the segment of slope −1 that joins the two directions' curves
    risk = attack_risk(psg(q, sigma, 1), fprs=(*fprs, 0.5), method="pld", tolerance=1e-5)
    for fpr, upper, lower in zip(fprs, risk.tpr_upper, risk.tpr_lower, strict=False):
        exact = _one_step_tpr(q, sigma, fpr)
        assert lower - 1e-12 <= exact <= upper + 1e-12
        assert upper - lower <= 1e-5 * upper + 1e-7
    # on that segment the guarantee is the convex hull of both directions (DRS 2022 Prop. F.2): at or above either
    assert risk.tpr_upper[-1] >= _one_step_tpr(q, sigma, 0.5) - 1e-12


def test_mnist_dp_sgd_matches_the_reference_values():
    # notes §5.7: the PLD envelope gives β(0.01) = 0.95979 and β(0.1) = 0.76037; advantage 0.22448
    risk = attack_risk(psg(256 / 60000, 1.1, 14063), fprs=(0.01, 0.1), method="pld")
    assert risk.tpr_lower[0] <= 1 - 0.95979 + 1e-5 and 1 - 0.95979 - 1e-5 <= risk.tpr_upper[0] <= 0.0403
    assert risk.tpr_lower[1] <= 1 - 0.76037 + 1e-5 <= risk.tpr_upper[1] + 2e-5
    assert risk.advantage_lower <= 0.22448 <= risk.advantage_upper
    # the engine's own δ(0) bracket is the advantage bracket
    bracket = pld_engine.delta_bracket(list(psg(256 / 60000, 1.1, 14063).ledger), 0.0)
    assert risk.advantage_upper >= bracket.lower and risk.advantage_lower <= bracket.upper


# --------------------------------------------------------------------------------------------
# The RDP route and Bayes success
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.3, 1.0, 2.5])
def test_rdp_route_is_valid_and_not_far_off_for_gaussians(mu):
    rdp = attack_risk(gaussians(mu), fprs=FPRS, method="rdp")
    exact = attack_risk(gaussians(mu), fprs=FPRS, method="exact")
    assert rdp.tpr_lower is None and rdp.method is Method.RDP
    for r, e in zip(rdp.tpr_upper, exact.tpr_upper, strict=True):
        assert e <= r <= min(1.0, 3 * e + 0.05)
    assert exact.advantage_upper <= rdp.advantage_upper


def test_rdp_route_is_valid_for_subsampled_gaussians():
    acc = psg(0.01, 1.0, 500)
    rdp, engine = (attack_risk(acc, fprs=FPRS, method=m) for m in ("rdp", "pld"))
    assert all(r >= e for r, e in zip(rdp.tpr_upper, engine.tpr_lower, strict=True))
    best = attack_risk(acc, fprs=FPRS)
    assert best.tpr_upper == tuple(min(a, b) for a, b in zip(rdp.tpr_upper, engine.tpr_upper, strict=True))
    assert {r.method for r in best.routes} == {Method.PLD, Method.RDP}


@pytest.mark.parametrize("prior", [0.01, 0.3, 0.5, 0.9])
def test_bayes_success_is_the_sup_over_tests(prior):
    mu = 1.3
    risk = attack_risk(gaussians(mu), fprs=(0.01,), prior=prior, method="exact")
    alphas = np.concatenate([np.geomspace(1e-12, 1e-3, 2000), np.linspace(1e-3, 1 - 1e-9, 200_000)])
    tpr = stats.norm.cdf(stats.norm.ppf(alphas) + mu)
    brute = float(np.max(prior * tpr + (1 - prior) * (1 - alphas)))
    assert brute <= risk.success_upper <= brute + 1e-6
    assert risk.success_lower <= risk.success_upper
    assert risk.to_dict()["bayes"]["baseline"] == max(prior, 1 - prior)


def test_budget_risk_is_the_trade_off_of_epsilon_delta():
    eps, delta = 1.2, 1e-4
    risk = budget_risk(eps, delta, fprs=FPRS, prior=0.3)
    expected = 1 - np.asarray(conversions.dp_trade_off(eps, delta, np.array(FPRS)))
    assert np.allclose(risk.tpr_upper, expected, atol=1e-11)
    # δ(0) of the curve by DRS 2022 Prop. 2.12 on a grid (an upper bound), and in closed form (KOV 2015)
    curve = np.asarray(conversions.trade_off_to_delta(lambda a: conversions.dp_trade_off(eps, delta, a), [0.0]))
    assert curve[0] - 1e-3 <= risk.advantage_upper <= curve[0] + 1e-12
    assert risk.advantage_upper == pytest.approx((math.exp(eps) - 1 + 2 * delta) / (math.exp(eps) + 1), rel=1e-11)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    q=st.floats(1e-3, 0.3),
    sigma=st.floats(0.6, 4.0),
    steps=st.integers(2, 2000),
    factor=st.floats(1.05, 3.0),
)
def test_risk_is_monotone_in_noise(q, sigma, steps, factor):
    low, high = (attack_risk(psg(q, s, steps), fprs=DEFAULT_FPRS, method="pld") for s in (sigma, sigma * factor))
    assert all(h <= lo for h, lo in zip(high.tpr_upper, low.tpr_upper, strict=True))
    assert high.advantage_upper <= low.advantage_upper
    for risk in (low, high):  # and every bound is at least what random guessing reaches
        assert all(t >= f for t, f in zip(risk.tpr_upper, risk.fprs, strict=True))


def test_engine_optimistic_settle_of_a_tiny_one_step_loss():
    # pld_engine._settle merged the last two buckets with `out_p[-2] += out_p.pop()`: the pop ran between the read and
    # the write, so [a, b, c] became [b + c, b] (a lost, b twice; an IndexError with two buckets). This one-step loss
    # reached it; the merged edge must keep the optimistic side below the exact hockey stick.
    q, sigma = 0.001, 1.9453125 * 2.6015625
    step = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))
    remove = pld_engine.compose([(step, 1)], pld_engine.LossGrid(interval=2e-3)).remove
    for eps in (1e-5, 1e-4, 5e-4):
        threshold = sigma**2 * math.log((math.exp(eps) - (1 - q)) / q) + 0.5  # the remove direction's exact δ(ε)
        tail, shifted = stats.norm.sf(threshold / sigma), stats.norm.sf((threshold - 1) / sigma)
        exact = q * shifted - (math.exp(eps) - (1 - q)) * tail
        low, high = (float(bound(np.array([eps]))[0]) for bound in (remove.delta_lower, remove.delta_upper))
        assert low <= exact <= high


@settings(max_examples=20, deadline=None)
@given(mu=st.floats(0.01, 6.0), fpr=st.floats(1e-6, 0.99))
def test_gaussian_tpr_is_an_upper_bound_for_any_mu_and_fpr(mu, fpr):
    risk = attack_risk(gaussians(mu), fprs=(fpr,), method="exact")
    assert risk.tpr_upper[0] >= float(mp_gaussian_tpr(mu, fpr))


def test_curve_samples_are_ordered_and_contain_the_card():
    risk = attack_risk(psg(0.02, 1.0, 200), curve=True)
    fprs = [p[0] for p in risk.curve]
    assert fprs == sorted(fprs) and set(DEFAULT_FPRS) <= set(fprs) and len(fprs) == len(set(CURVE_FPRS))
    uppers = [p[1] for p in risk.curve]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(uppers))  # TPR grows with FPR
    assert all(lo is None or lo <= up for _, up, lo in risk.curve)


def test_empty_and_non_private_ledgers():
    empty = attack_risk(Accountant(), fprs=(0.01,))
    assert empty.tpr_upper == (0.01,) or empty.tpr_upper[0] == pytest.approx(0.01, abs=1e-11)
    assert empty.advantage_upper <= 1e-11
    leak = attack_risk(Accountant().compose(ev.NonPrivate()), fprs=(0.01,))
    assert leak.tpr_upper == (1.0,) and leak.advantage_upper == 1.0


# --------------------------------------------------------------------------------------------
# Every spec type dplens accounts
# --------------------------------------------------------------------------------------------


def _registry_cases() -> dict:
    """The spec tables of every spec type (tests/mechanisms/test_registry.py classifies each new type)."""
    path = Path(__file__).resolve().parents[1] / "mechanisms" / "test_registry.py"
    spec = importlib.util.spec_from_file_location("_registry_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tables = {name: tables[0] for name, tables in module.RUNNABLE.items()}
    tables |= {name: table for name, (table, _) in module.NOT_RUNNABLE.items()}
    return {name: table for name, table in tables.items() if name in spec_types()}


_SLOW_TYPES = {"modified_gaussmix"}  # its Theorem 1 profile takes ~8 s to set up


@pytest.mark.parametrize(
    ("type_name", "table"),
    [
        pytest.param(name, table, marks=[pytest.mark.slow] if name in _SLOW_TYPES else [])
        for name, table in sorted(_registry_cases().items())
    ],
)
def test_every_spec_type_has_an_attack_risk(type_name, table):
    spec_accountant = parse_spec({"mechanism": [{"type": type_name, **table}]}).accountant()
    # a coarse fixed PLD grid keeps dp-accounting's fallback (the types dplens's engine does not model) fast
    accountant = Accountant(neighboring=spec_accountant.neighboring, value_discretization_interval=2e-3)
    for event, count in spec_accountant.ledger:
        accountant.compose(event, count)
    risk = attack_risk(accountant, fprs=(0.001, 0.01), prior=0.5)
    assert all(f <= t <= 1.0 for f, t in zip(risk.fprs, risk.tpr_upper, strict=True)), type_name
    assert 0.0 <= risk.advantage_upper <= 1.0 and 0.5 <= risk.success_upper <= 1.0
    if risk.tpr_lower is not None:
        assert all(lo <= up for lo, up in zip(risk.tpr_lower, risk.tpr_upper, strict=True))
    # the (ε, δ) the accountant certifies implies a bound at every FPR that the curve's is not looser than (up to the
    # bracket tolerance: a closed-form profile is read on an ε grid)
    epsilon = accountant.epsilon(1e-6)
    if math.isfinite(epsilon):
        implied = budget_risk(epsilon, 1e-6, fprs=risk.fprs)
        assert all(t <= i * (1 + 1e-3) for t, i in zip(risk.tpr_upper, implied.tpr_upper, strict=True)), type_name


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, math.nan, "x", True])
def test_bad_fpr_and_prior_are_one_line_value_errors(bad):
    with pytest.raises(ValueError, match="fpr must be a number in \\(0, 1\\)"):
        attack_risk(gaussians(1.0), fprs=(bad,))
    with pytest.raises(ValueError, match="prior must be a number in \\(0, 1\\)"):
        attack_risk(gaussians(1.0), prior=bad)
    with pytest.raises(ValueError, match="fpr"):
        check_fpr(bad)


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        attack_risk(gaussians(1.0), fprs=())
    with pytest.raises(ValueError, match="tolerance"):
        attack_risk(gaussians(1.0), tolerance=0)
    with pytest.raises(ValueError, match="method"):
        attack_risk(gaussians(1.0), method="nope")


def test_a_closed_form_that_fails_far_out_still_gives_an_upper_bound():
    from dplens.accountant.risk import _profile_risk, _Query

    def deltas(epsilons):  # 1-GDP, whose "root finder" gives up beyond ε = 30
        eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
        if np.any(eps > 30):
            raise RuntimeError("Failed to converge after 100 iterations.")
        return conversions.gdp_delta(1.0, eps)

    risk = _profile_risk(_Query((0.01, 0.1), None, False, "add_remove"), deltas, Method.EXACT, "test profile")
    exact = [float(mp_gaussian_tpr(1.0, f)) for f in (0.01, 0.1)]
    assert risk.tpr_lower is None
    assert all(e <= t <= e + 1e-4 for e, t in zip(exact, risk.tpr_upper, strict=True))


def test_a_pair_the_mechanism_does_not_attain_has_no_certified_lower_end():
    # a fixed-bins matrix factorisation: its μ-GDP is unamplified (an upper bound only); the exact route used to
    # return it as a closed bracket, its lower end certified, and the amplified Rényi route was never consulted
    from dplens.accountant.compose import Accountant
    from dplens.accountant.mf_accounting import MfTraining

    run = MfTraining(
        mechanism="bsr", sampling="fixed-bins", bands=4, noise_multiplier=1.5, dataset_size=160, batch_size=10, epochs=4
    )
    accountant = Accountant().compose(run)
    best = attack_risk(accountant, fprs=(0.001, 0.01))
    exact = attack_risk(accountant, fprs=(0.001, 0.01), method="exact")
    assert best.tpr_lower is None and best.advantage_lower is None and exact.tpr_lower is None
    assert "not attained" in best.details
    assert best.tpr_upper[0] < exact.tpr_upper[0]  # the amplified route is tighter and is taken
