"""The accountant's summary (:meth:`Accountant.summary`): every route (checked against the Accountant and closed
forms), the ε(δ) table, the RDP and trade-off curves, the claim region — what a report renders."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dplens.accountant import conversions
from dplens.accountant.compose import Method
from dplens.spec import load_spec, parse_spec

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples"


def _gdp_epsilon(mu: float, delta: float) -> float:
    """Closed-form ε(δ) of μ-GDP by bisection on δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (DRS 2022 Cor. 2.13)."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        d = stats.norm.cdf(-mid / mu + mu / 2) - math.exp(mid) * stats.norm.cdf(-mid / mu - mu / 2)
        lo, hi = (mid, hi) if d > delta else (lo, mid)
    return hi


def test_routes_match_the_accountant_and_the_tightest_is_marked():
    spec = load_spec(EXAMPLES / "dp_sgd_mnist.toml")
    acc = spec.accountant()
    accounting = acc.summary(1e-5)
    expected = {r.method.value: r.epsilon for r in acc.all_routes(1e-5)}
    got = {r.method: r.epsilon for r in accounting.routes}
    assert got == expected and set(got) == {"rdp", "pld"}
    assert accounting.tightest.method == "pld" and accounting.epsilon == acc.epsilon(1e-5)
    assert [u["method"] for u in accounting.unsupported] == ["exact", "pure"]
    rdp = next(r for r in accounting.routes if r.method == "rdp")
    assert rdp.optimal_order == pytest.approx(acc.epsilon_result(1e-5, method=Method.RDP).optimal_order)
    assert next(r for r in accounting.routes if r.method == "pld").discretisation.startswith("value_discretization")


def test_gaussian_routes_against_the_closed_form():
    accounting = load_spec(EXAMPLES / "gaussian_claim.toml").accountant().summary(1e-5)
    exact = next(r for r in accounting.routes if r.method == "exact")
    truth = _gdp_epsilon(1.0, 1e-5)  # 4.377 (research note §5.1, computed)
    assert truth == pytest.approx(4.377, abs=1e-3)
    assert exact.epsilon >= truth - 1e-9 and exact.epsilon == pytest.approx(truth, rel=1e-6)
    assert all(r.epsilon >= truth - 1e-9 for r in accounting.routes)  # every route is an upper bound


def test_pure_dp_route_and_delta_zero():
    spec_dict = {"mechanism": [{"type": "laplace", "epsilon": 0.5, "count": 3}]}
    spec = parse_spec(spec_dict)
    acc = spec.accountant()
    pure = acc.summary(0.0)
    assert [r.method for r in pure.routes] == ["pure"] and pure.epsilon == pytest.approx(1.5)
    approx = acc.summary(1e-6)
    assert {r.method for r in approx.routes} >= {"rdp", "pld", "pure"}
    assert approx.epsilon <= 1.5 + 1e-12  # the pure route keeps the tightest at or below basic composition


def test_gaussian_has_no_pure_guarantee_at_delta_zero():
    accounting = load_spec(EXAMPLES / "gaussian_claim.toml").accountant().summary(0.0)
    assert [r.method for r in accounting.routes] == ["pure"] and math.isinf(accounting.epsilon)


def test_epsilon_of_delta_is_an_upper_bound_and_non_increasing():
    accounting = load_spec(EXAMPLES / "gaussian_claim.toml").accountant().summary(1e-5)
    for method in ("rdp", "pld", "exact"):
        rows = sorted((r["delta"], r["epsilon"]) for r in accounting.epsilon_of_delta if r["method"] == method)
        assert len(rows) == 12
        eps = [e for _, e in rows]
        assert all(a >= b - 1e-12 for a, b in itertools.pairwise(eps))
        for delta, epsilon in rows:
            assert epsilon >= _gdp_epsilon(1.0, delta) - 1e-9, (method, delta)


def test_trade_off_samples_never_exceed_the_exact_curve():
    # The sampled curve is a pointwise lower bound on the exact f-DP curve (pessimistic): G_μ(α) = Φ(Φ⁻¹(1−α) − μ).
    accounting = load_spec(EXAMPLES / "gaussian_claim.toml").accountant().summary(1e-5)
    alpha = np.array([p["alpha"] for p in accounting.trade_off])
    beta = np.array([p["beta"] for p in accounting.trade_off])
    exact = np.asarray(conversions.gaussian_trade_off(1.0, alpha))
    assert np.all(beta <= exact + 1e-9)
    assert np.max(exact - beta) < 0.01  # and close to it
    assert alpha[0] == 0.0 and alpha[-1] == 1.0 and np.all(np.diff(beta) <= 1e-12)


def test_rdp_samples_are_the_composed_curve_and_its_conversion():
    acc = load_spec(EXAMPLES / "heterogeneous.toml").accountant()
    summary = acc.summary(1e-6)
    alpha = np.array([p["alpha"] for p in summary.rdp_curve])
    rdp = np.array([p["rdp"] for p in summary.rdp_curve])
    np.testing.assert_allclose(rdp, acc.rdp_curve()(alpha), rtol=1e-12)
    implied = np.array([p["epsilon"] for p in summary.rdp_curve])
    np.testing.assert_allclose(implied, conversions.rdp_to_epsilon_optimal(rdp, alpha, 1e-6), rtol=1e-12)
    rdp_route = next(r for r in summary.routes if r.method == "rdp")
    assert any(a == pytest.approx(rdp_route.optimal_order) for a in alpha)
    assert min(implied) >= rdp_route.epsilon * (1 - 1e-9)  # the route's ε is the minimum over α (rounded up)


def test_claim_region_is_the_trade_off_of_the_claim_and_extra_deltas():
    spec = load_spec(EXAMPLES / "gaussian_claim.toml")  # σ = 1 with a claim of (1, 1e-5)
    acc = spec.accountant()
    summary = acc.summary(1e-6, claim=(1.0, 1e-5), extra_deltas=(1e-5, 0.0, 1e-6))
    alpha = np.array([p["alpha"] for p in summary.claim_region])
    beta = np.array([p["beta"] for p in summary.claim_region])
    # DRS 2022 Prop. 2.5: f(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α))
    expected = np.maximum.reduce([np.zeros_like(alpha), 1 - 1e-5 - math.e * alpha, (1 - 1e-5 - alpha) / math.e])
    np.testing.assert_allclose(beta, expected, atol=1e-12)
    assert summary.claim == (1.0, 1e-5)
    assert summary.epsilon_for(1e-5) == acc.epsilon(1e-5) and summary.epsilon_for(1e-6) == summary.epsilon
    assert math.isinf(summary.epsilon_for(0.0)) and summary.mu == pytest.approx(1.0)
    with pytest.raises(ValueError, match="was not summarised"):
        summary.epsilon_for(1e-3)
    default = acc.summary(1e-5)  # without a claim the region is the accountant's own (ε, δ)
    assert default.claim == (default.epsilon, 1e-5)


def test_summary_dict_is_the_reports_accounting_section():
    from dplens.reports.model import Accounting

    summary = load_spec(EXAMPLES / "dp_sgd_mnist.toml").accountant().summary(1e-5)
    data = summary.to_dict()
    section = Accounting.from_dict(data)
    assert section.epsilon == summary.epsilon and section.tightest.method == summary.tightest.method
    assert data["ledger"]["format"] == "dplens-ledger" and data["neighbouring"] == "add_remove"
    assert "AccountingSummary(delta=1e-05" in repr(summary) and "<table>" in summary._repr_html_()


@pytest.mark.parametrize("delta", [1.0, -1e-5, float("nan"), True])
def test_summary_refuses_a_bad_delta(delta):
    with pytest.raises(ValueError, match="delta must be in"):
        load_spec(EXAMPLES / "gaussian_claim.toml").accountant().summary(delta)
