"""The report model: to_dict / from_dict round trip, the versioned schema, tamper tests, the audit contract."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.reports.model import (
    REPORT_SCHEMA,
    SCHEMA_VERSION,
    AccountingRoute,
    AuditEvidence,
    Estimate,
    Report,
    Status,
    validate_report_dict,
)


def _through_json(data):
    return json.loads(json.dumps(data, allow_nan=False))


@pytest.mark.parametrize("which", ["audited_report", "unaudited_report"])
def test_round_trip_through_json(request, which):
    report = request.getfixturevalue(which)
    data = _through_json(report.to_dict())
    again = Report.from_dict(data)
    assert again == report
    assert _through_json(again.to_dict()) == data


def test_audit_contract_round_trip_keeps_every_key(audit_dict):
    original = audit_dict(extra_statistic={"name": "auroc", "value": 0.71})  # a key the audit layer may add
    evidence = AuditEvidence.from_audit_dict(original)
    assert evidence.extra == {"extra_statistic": {"name": "auroc", "value": 0.71}}
    written = _through_json(evidence.to_dict())
    assert AuditEvidence.from_dict(written) == evidence
    for key, value in original.items():
        if key != "extra_statistic":
            assert written[key] == value, key
    assert written["ratio_to_claim"] == pytest.approx(2.546 / 1.0)
    assert written["is_lower_bound"] is True


@pytest.mark.parametrize(
    "missing", ["epsilon_lower_bound", "operating_point", "ceiling", "estimates", "trajectory", "verdict", "seed"]
)
def test_audit_contract_missing_key_is_named(audit_dict, missing):
    data = audit_dict()
    del data[missing]
    with pytest.raises(ValueError, match=f"missing required field '{missing}'"):
        AuditEvidence.from_audit_dict(data)


def test_wrong_schema_version_is_rejected_clearly(audited_report):
    for version in (SCHEMA_VERSION + 1, 0, "1", True):
        data = audited_report.to_dict() | {"schema_version": version}
        with pytest.raises(
            ValueError, match=rf"unsupported report schema_version .*reads schema_version {SCHEMA_VERSION}"
        ):
            Report.from_dict(data)


def test_not_a_report_is_rejected():
    with pytest.raises(ValueError, match="not a dplens report"):
        Report.from_dict({"schema_version": SCHEMA_VERSION})
    with pytest.raises(ValueError, match="must be a JSON object"):
        Report.from_dict([1, 2])


# Every required field, at every level, removed in turn: the error names the dotted path.
REQUIRED_PATHS = [
    ("schema_version",),
    ("title",),
    ("claim",),
    ("claim", "epsilon"),
    ("claim", "neighbouring"),
    ("claim", "privacy_unit"),
    ("mechanism", "sampling"),
    ("accounting",),
    ("accounting", "routes"),
    ("accounting", "tightest"),
    ("accounting", "delta"),
    ("audit", "epsilon_lower_bound"),
    ("audit", "confidence"),
    ("audit", "operating_point"),
    ("audit", "operating_point", "false_positives"),
    ("audit", "ceiling"),
    ("audit", "trials"),
    ("verdict", "sentence"),
    ("verdict", "status"),
    ("provenance", "spec_sha256"),
    ("provenance", "seeds"),
    ("provenance", "dependencies"),
]


@pytest.mark.parametrize("path", REQUIRED_PATHS, ids=".".join)
def test_missing_required_field_is_named(audited_report, path):
    data = copy.deepcopy(audited_report.to_dict())
    node = data
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    name = ".".join(path)
    with pytest.raises(ValueError, match=f"missing required field '{name}'"):
        Report.from_dict(data)


def test_missing_field_inside_a_list_is_named(audited_report):
    data = copy.deepcopy(audited_report.to_dict())
    del data["accounting"]["routes"][1]["details"]
    with pytest.raises(ValueError, match=r"missing required field 'accounting.routes\[1\].details'"):
        Report.from_dict(data)


def _tamper(report, mutate):
    data = copy.deepcopy(report.to_dict())
    mutate(data)
    return data


TAMPERING = {
    "estimate presented as a bound": (
        lambda d: d["audit"]["estimates"][0].update(is_estimate=False),
        r"audit.estimates\[0\].is_estimate' must be True",
    ),
    "route not an upper bound": (
        lambda d: d["accounting"]["routes"][0].update(is_upper_bound=False),
        r"accounting.routes\[0\].is_upper_bound' must be True",
    ),
    "audit bound not a lower bound": (lambda d: d["audit"].update(is_lower_bound=False), "is_lower_bound"),
    "epsilon as text": (lambda d: d["accounting"]["routes"][0].update(epsilon="2.0"), "epsilon"),
    "NaN-like epsilon": (lambda d: d["accounting"].update(epsilon="NaN"), "accounting.epsilon"),
    "negative counts": (lambda d: d["audit"]["operating_point"].update(false_positives=-1), "false_positives"),
    "probability above 1": (lambda d: d["audit"]["operating_point"].update(fpr=1.5), "fpr"),
    "unknown field": (lambda d: d["claim"].update(epsilon_estimate=0.1), "unknown field 'claim.epsilon_estimate'"),
    "unknown verdict": (lambda d: d["verdict"].update(status="PASS"), "verdict.status"),
    "tightest not the smallest": (
        lambda d: [r.update(is_tightest=(r["method"] == "rdp")) for r in d["accounting"]["routes"]],
        "tightest",
    ),
    "tightest name mismatch": (lambda d: d["accounting"].update(tightest="rdp"), "accounting.tightest"),
    "verdict disagrees with the audit": (lambda d: d["verdict"].update(status="CONSISTENT"), "differs from the audit"),
    "audit removed but verdict kept": (lambda d: d.update(audit=None), "has no audit"),
    "confidence of 1": (lambda d: d["audit"].update(confidence=1.0), "confidence"),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_tampered_report_is_rejected(audited_report, case):
    mutate, message = TAMPERING[case]
    with pytest.raises(ValueError, match=message):
        Report.from_dict(_tamper(audited_report, mutate))


def test_invariants_hold_in_python_too():
    with pytest.raises(ValueError, match="upper bound"):
        AccountingRoute(method="rdp", epsilon=1.0, delta=1e-5, details="", is_upper_bound=False)
    with pytest.raises(ValueError, match="is_estimate"):
        Estimate(name="gdp", epsilon=1.0, assumption="GDP shape", is_estimate=False)


def test_schema_is_valid_json_schema_and_agrees_with_ours(audited_report, unaudited_report):
    jsonschema = pytest.importorskip("jsonschema")  # an independent validator, used only as a cross-check
    validator = jsonschema.Draft202012Validator(REPORT_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(REPORT_SCHEMA)
    for report in (audited_report, unaudited_report):
        data = _through_json(report.to_dict())
        validate_report_dict(data)
        assert list(validator.iter_errors(data)) == []
    for case in sorted(TAMPERING):
        data = _tamper(audited_report, TAMPERING[case][0])
        if not list(validator.iter_errors(data)):
            # only semantic invariants (tightest, verdict consistency) are beyond a JSON schema
            assert case in {
                "tightest not the smallest",
                "tightest name mismatch",
                "verdict disagrees with the audit",
                "audit removed but verdict kept",
            }, case


@settings(max_examples=60, deadline=None)
@given(
    lower=st.one_of(st.floats(0, 50, allow_nan=False), st.just(math.inf)),
    ceiling=st.floats(0.1, 30, allow_nan=False),
    trials=st.integers(1, 10**9),
    threshold=st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False), st.just(-math.inf)),
    verdict=st.sampled_from(["CONSISTENT", "VIOLATION", "INCONCLUSIVE"]),
)
def test_audit_values_round_trip(audit_dict, lower, ceiling, trials, threshold, verdict):
    data = audit_dict(epsilon_lower_bound=lower, ceiling=ceiling, trials=trials, verdict=verdict)
    data["operating_point"] = data["operating_point"] | {"threshold": threshold}
    evidence = AuditEvidence.from_audit_dict(data)
    again = AuditEvidence.from_dict(_through_json(evidence.to_dict()))
    assert again == evidence
    assert again.verdict is Status(verdict)
