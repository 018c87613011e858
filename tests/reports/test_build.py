"""Building reports: every accounting route (checked against the Accountant and closed forms), the claim and
its certification, the curves behind the figures, verdict sentences, and provenance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dplens.accountant import conversions
from dplens.accountant.compose import Method
from dplens.reports.build import account, build_report, describe_sampling
from dplens.reports.format import fmt_lower, fmt_upper
from dplens.reports.model import AuditEvidence, Definition, Status
from dplens.spec import load_spec, parse_spec

from .conftest import EXAMPLES, FIXED_TIME


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
    accounting = account(acc, delta=1e-5)
    expected = {r.method.value: r.epsilon for r in acc.all_routes(1e-5)}
    got = {r.method: r.epsilon for r in accounting.routes}
    assert got == expected and set(got) == {"rdp", "pld"}
    assert accounting.tightest.method == "pld" and accounting.epsilon == acc.epsilon(1e-5)
    assert [u["method"] for u in accounting.unsupported] == ["exact", "pure"]
    rdp = next(r for r in accounting.routes if r.method == "rdp")
    assert rdp.optimal_order == pytest.approx(acc.epsilon_result(1e-5, method=Method.RDP).optimal_order)
    assert next(r for r in accounting.routes if r.method == "pld").discretisation.startswith("value_discretization")


def test_gaussian_routes_against_the_closed_form():
    accounting = account(load_spec(EXAMPLES / "gaussian_claim.toml").accountant(), delta=1e-5)
    exact = next(r for r in accounting.routes if r.method == "exact")
    truth = _gdp_epsilon(1.0, 1e-5)  # 4.377 (research note §5.1, computed)
    assert truth == pytest.approx(4.377, abs=1e-3)
    assert exact.epsilon >= truth - 1e-9 and exact.epsilon == pytest.approx(truth, rel=1e-6)
    assert all(r.epsilon >= truth - 1e-9 for r in accounting.routes)  # every route is an upper bound


def test_pure_dp_route_and_delta_zero():
    spec_dict = {"mechanism": [{"type": "laplace", "epsilon": 0.5, "count": 3}]}
    spec = parse_spec(spec_dict)
    acc = spec.accountant()
    pure = account(acc, delta=0.0)
    assert [r.method for r in pure.routes] == ["pure"] and pure.epsilon == pytest.approx(1.5)
    approx = account(acc, delta=1e-6)
    assert {r.method for r in approx.routes} >= {"rdp", "pld", "pure"}
    assert approx.epsilon <= 1.5 + 1e-12  # the pure route keeps the tightest at or below basic composition
    # 3 × 0.5 is exactly 1.5: certified although the accountant's bound is rounded up by a relative 1e-12
    for claimed, certified in ((1.6, True), (1.5, True), (1.4999, False)):
        claim_spec = parse_spec(spec_dict | {"claim": {"epsilon": claimed}})
        report = build_report(spec=claim_spec, delta=0.0, title="laplace", not_audited_reason="test")
        assert report.claim.definition is Definition.PURE_DP
        assert report.claim.certified_by_accountant is certified


def test_gaussian_has_no_pure_guarantee_at_delta_zero():
    accounting = account(load_spec(EXAMPLES / "gaussian_claim.toml").accountant(), delta=0.0)
    assert [r.method for r in accounting.routes] == ["pure"] and math.isinf(accounting.epsilon)


def test_epsilon_of_delta_is_an_upper_bound_and_non_increasing():
    accounting = account(load_spec(EXAMPLES / "gaussian_claim.toml").accountant(), delta=1e-5)
    for method in ("rdp", "pld", "exact"):
        rows = sorted((r["delta"], r["epsilon"]) for r in accounting.epsilon_of_delta if r["method"] == method)
        assert len(rows) == 12
        eps = [e for _, e in rows]
        assert all(a >= b - 1e-12 for a, b in itertools.pairwise(eps))
        for delta, epsilon in rows:
            assert epsilon >= _gdp_epsilon(1.0, delta) - 1e-9, (method, delta)


def test_trade_off_samples_never_exceed_the_exact_curve():
    # The sampled curve is a pointwise lower bound on the exact f-DP curve (pessimistic): G_μ(α) = Φ(Φ⁻¹(1−α) − μ).
    accounting = account(load_spec(EXAMPLES / "gaussian_claim.toml").accountant(), delta=1e-5)
    alpha = np.array([p["alpha"] for p in accounting.trade_off])
    beta = np.array([p["beta"] for p in accounting.trade_off])
    exact = np.asarray(conversions.gaussian_trade_off(1.0, alpha))
    assert np.all(beta <= exact + 1e-9)
    assert np.max(exact - beta) < 0.01  # and close to it
    assert alpha[0] == 0.0 and alpha[-1] == 1.0 and np.all(np.diff(beta) <= 1e-12)


def test_rdp_samples_are_the_composed_curve(unaudited_report):
    acc = load_spec(EXAMPLES / "heterogeneous.toml").accountant()
    accounting = unaudited_report.accounting
    alpha = np.array([p["alpha"] for p in accounting.rdp_curve])
    rdp = np.array([p["rdp"] for p in accounting.rdp_curve])
    np.testing.assert_allclose(rdp, acc.rdp_curve()(alpha), rtol=1e-12)
    assert accounting.tightest.optimal_order is None or accounting.tightest.method != "rdp"
    assert any(a == pytest.approx(next(r for r in accounting.routes if r.method == "rdp").optimal_order) for a in alpha)


def test_claim_certification():
    under = build_report(
        spec=load_spec(EXAMPLES / "gaussian_claim.toml"), delta=1e-5, title="t", not_audited_reason="x"
    )
    assert under.claim.epsilon == 1.0 and under.claim.certified_by_accountant is False
    assert under.claim.mu == pytest.approx(1.0)  # the Gaussian is exactly 1-GDP
    assert "does NOT support the claimed ε = 1.000" in under.verdict.sentence
    own = build_report(spec=load_spec(EXAMPLES / "dp_sgd_mnist.toml"), delta=1e-5, title="t", not_audited_reason="x")
    assert own.claim.epsilon == own.accounting.epsilon and own.claim.source.startswith("accountant (pld)")
    assert own.claim.mu is None and own.verdict.status is Status.NOT_AUDITED
    assert own.verdict.sentence.startswith("Not audited: no empirical test was run (x)")
    assert f"ε ≤ {fmt_upper(own.accounting.epsilon)}" in own.verdict.sentence


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        ("VIOLATION", "Violation: with 95% confidence the true ε at δ = 1e-05 is at least 2.546"),
        ("CONSISTENT", "Consistent: the audit's 95% lower bound ε ≥ 2.546 does not exceed"),
        ("INCONCLUSIVE", "Inconclusive: with 100000 trials per side no audit could measure an ε above 10.21"),
    ],
)
def test_verdict_sentences(audit_dict, verdict, expected):
    report = build_report(
        spec=load_spec(EXAMPLES / "gaussian_claim.toml"),
        delta=1e-5,
        title="t",
        audit=AuditEvidence.from_audit_dict(audit_dict(verdict=verdict)),
        created_utc=FIXED_TIME,
    )
    assert report.verdict.status is Status(verdict)
    assert report.verdict.sentence.startswith(expected)
    assert any(reason.startswith("Estimates (not bounds): gdp ε ≈ 4.215") for reason in report.verdict.reasons)
    assert fmt_lower(2.546) == "2.546"


def test_sampling_descriptions():
    poisson = load_spec(EXAMPLES / "dp_sgd_mnist.toml").accountant().ledger
    assert describe_sampling(poisson).startswith("Poisson sampling with rate q = 0.00426667 (14063 steps)")
    assert describe_sampling(load_spec(EXAMPLES / "gaussian_claim.toml").accountant().ledger).startswith("no sub")


def test_provenance(audited_report):
    prov = audited_report.provenance
    spec = load_spec(EXAMPLES / "gaussian_claim.toml")
    assert prov.spec_sha256 == spec.sha256 and prov.seeds == {"audit": 7}
    assert prov.tool["name"] == "dplens" and prov.created_utc == FIXED_TIME
    assert {"numpy", "scipy", "dp-accounting", "matplotlib", "jinja2"} <= set(prov.dependencies)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delta": 1.0}, "delta must be in"),
        ({"delta": -1e-5}, "delta must be in"),
        ({"privacy_unit": " "}, "privacy_unit"),
        ({"not_audited_reason": None}, "not_audited_reason"),
    ],
)
def test_bad_arguments(kwargs, message):
    args = {"delta": 1e-5, "title": "t", "not_audited_reason": "x"} | kwargs
    with pytest.raises(ValueError, match=message):
        build_report(spec=load_spec(EXAMPLES / "gaussian_claim.toml"), **args)


def test_certification_tolerance_is_only_the_rounding_margin():
    from dplens.accountant.conversions import round_up
    from dplens.reports.build import certifies

    for exact in (0.1, 1.5, 2.0, 37.25):
        assert certifies(round_up(exact), exact)  # the accountant's own rounding of the exact value
        assert not certifies(exact * (1 + 3e-12), exact)
        assert not certifies(math.nextafter(exact * 1.0001, math.inf), exact)
