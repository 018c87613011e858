"""Building reports from finished results: the claim and its certification, verdict sentences, sampling
descriptions, provenance, and bad input. (The accounting itself is tested in tests/accountant/test_summary.py.)"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dplens._api import report_summary
from dplens.reports.build import build_report, describe_sampling
from dplens.reports.format import fmt_lower, fmt_upper
from dplens.reports.model import AuditEvidence, Definition, Status
from dplens.spec import load_spec, parse_spec

from .conftest import EXAMPLES, FIXED_TIME


def _report(spec, delta, **kwargs):
    return build_report(spec=spec, accounting=report_summary(spec, delta), **kwargs)


def test_pure_dp_claim_certification_at_delta_zero():
    spec_dict = {"mechanism": [{"type": "laplace", "epsilon": 0.5, "count": 3}]}
    # 3 × 0.5 is exactly 1.5: certified although the accountant's bound is rounded up by a relative 1e-12
    for claimed, certified in ((1.6, True), (1.5, True), (1.4999, False)):
        claim_spec = parse_spec(spec_dict | {"claim": {"epsilon": claimed}})
        report = _report(claim_spec, 0.0, title="laplace", not_audited_reason="test")
        assert report.claim.definition is Definition.PURE_DP
        assert report.claim.certified_by_accountant is certified


def test_claim_at_another_delta_is_certified_from_the_summary():
    spec = parse_spec(
        {"mechanism": [{"type": "gaussian", "noise_multiplier": 1.0}], "claim": {"epsilon": 4.4, "delta": 1e-5}}
    )
    report = _report(spec, 1e-6, title="t", not_audited_reason="x")  # the report's δ differs from the claim's
    assert report.claim.certified_by_accountant is True  # ε(1e-5) = 4.377 ≤ 4.4
    with pytest.raises(ValueError, match="no epsilon at the claim's delta"):
        build_report(spec=spec, accounting=spec.accountant().summary(1e-6), title="t", not_audited_reason="x")


def test_rdp_samples_reach_the_report(unaudited_report):
    acc = load_spec(EXAMPLES / "heterogeneous.toml").accountant()
    accounting = unaudited_report.accounting
    alpha = np.array([p["alpha"] for p in accounting.rdp_curve])
    rdp = np.array([p["rdp"] for p in accounting.rdp_curve])
    np.testing.assert_allclose(rdp, acc.rdp_curve()(alpha), rtol=1e-12)
    assert accounting.tightest.optimal_order is None or accounting.tightest.method != "rdp"
    assert accounting.claim_region and accounting.claim_region[0]["alpha"] == 0.0


def test_claim_certification():
    under = _report(load_spec(EXAMPLES / "gaussian_claim.toml"), 1e-5, title="t", not_audited_reason="x")
    assert under.claim.epsilon == 1.0 and under.claim.certified_by_accountant is False
    assert under.claim.mu == pytest.approx(1.0)  # the Gaussian is exactly 1-GDP
    assert "does NOT support the claimed ε = 1.000" in under.verdict.sentence
    own = _report(load_spec(EXAMPLES / "dp_sgd_mnist.toml"), 1e-5, title="t", not_audited_reason="x")
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
    report = _report(
        load_spec(EXAMPLES / "gaussian_claim.toml"),
        1e-5,
        title="t",
        audit=AuditEvidence.from_audit_dict(audit_dict(verdict=verdict)),
        created_utc=FIXED_TIME,
    )
    assert report.verdict.status is Status(verdict)
    assert report.verdict.sentence.startswith(expected)
    assert any(reason.startswith("Estimates (not bounds): gdp ε ≈ 4.215") for reason in report.verdict.reasons)
    assert fmt_lower(2.546) == "2.546"


def test_sampling_descriptions():
    poisson = json.loads(load_spec(EXAMPLES / "dp_sgd_mnist.toml").accountant().to_json())
    assert describe_sampling(poisson).startswith("Poisson sampling with rate q = 0.00426667 (14063 steps)")
    plain = json.loads(load_spec(EXAMPLES / "gaussian_claim.toml").accountant().to_json())
    assert describe_sampling(plain).startswith("no sub")


def test_provenance(audited_report):
    prov = audited_report.provenance
    spec = load_spec(EXAMPLES / "gaussian_claim.toml")
    assert prov.spec_sha256 == spec.sha256 and prov.seeds == {"audit": 7}
    assert prov.tool["name"] == "dplens" and prov.created_utc == FIXED_TIME
    assert {"numpy", "scipy", "dp-accounting", "matplotlib", "jinja2"} <= set(prov.dependencies)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"privacy_unit": " "}, "privacy_unit"),
        ({"accounting": 3.0}, "accounting must be"),
        ({"not_audited_reason": None}, "not_audited_reason"),
    ],
)
def test_bad_arguments(kwargs, message):
    spec = load_spec(EXAMPLES / "gaussian_claim.toml")
    args = {"accounting": report_summary(spec, 1e-5), "title": "t", "not_audited_reason": "x"} | kwargs
    with pytest.raises(ValueError, match=message):
        build_report(spec=spec, **args)


def test_certification_tolerance_is_only_the_rounding_margin():
    from dplens.accountant.conversions import round_up
    from dplens.reports.build import certifies

    for exact in (0.1, 1.5, 2.0, 37.25):
        assert certifies(round_up(exact), exact)  # the accountant's own rounding of the exact value
        assert not certifies(exact * (1 + 3e-12), exact)
        assert not certifies(math.nextafter(exact * 1.0001, math.inf), exact)


def test_a_matrix_factorisation_training_states_its_sampler_not_no_subsampling():
    # it read "no subsampling: every mechanism run uses the whole data set" for BandMF under cyclic Poisson
    from dplens.accountant.compose import Accountant
    from dplens.accountant.mf_accounting import MfTraining

    def words(**options):
        run = MfTraining(noise_multiplier=1.0, dataset_size=60000, batch_size=600, epochs=2, **options)
        return describe_sampling(json.loads(Accountant().compose(run).to_json()))

    cyclic = words(mechanism="bandmf", sampling="cyclic-poisson", bands=4)
    assert cyclic.startswith("bandmf matrix factorisation (correlated noise) on cyclic Poisson sampling")
    assert "4 groups" in cyclic and "probability q = B·b/N = 0.04" in cyclic
    bins = words(mechanism="bsr", sampling="fixed-bins", bands=4)
    assert "on fixed bins: each record in one step of each cycle of ⌈60000/600⌉ steps" in bins
