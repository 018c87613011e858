"""The NIST SP 800-226 section: every layer of the pyramid and every hazard gets a status the facts support, and
each status is backed here by a change of the facts that changes it (shown by this report / declared by the author
/ not assessed by dplens / hazard flagged); the section is in the JSON, the HTML and the privacy statement."""

from __future__ import annotations

import copy
import json
import re

import pytest

import dplens
from dplens._api import report_summary
from dplens.reports.defaults import DEFAULT_PRIVACY_UNIT
from dplens.reports.model import Report
from dplens.reports.nist import DELTA_FACTOR, LARGE_EPSILON, NistStatus, evaluate_nist
from dplens.reports.render import render_html, render_statement, to_canonical_json

SHOWN, DECLARED, NOT_ASSESSED, FLAGGED = (
    NistStatus.SHOWN,
    NistStatus.DECLARED,
    NistStatus.NOT_ASSESSED,
    NistStatus.FLAGGED,
)
BASE = {
    "claim": {
        "definition": "approx-DP",
        "epsilon": 2.0,
        "delta": 1e-6,
        "certified_by_accountant": True,
        "privacy_unit": DEFAULT_PRIVACY_UNIT,
        "neighbouring": "add_remove",
        "neighbouring_description": "data sets that differ by adding or removing one record",
    },
    "accounting": {"epsilon": 1.9, "delta": 1e-6, "tightest": "pld"},
    "audit": None,
    "additional_audits": (),
    "components": ({"type": "gaussian", "noise_multiplier": 2.0},),
    "deployment": None,
    "unit_given": False,
    "not_audited_reason": "the audit was switched off",
}
AUDIT = {"verdict": "CONSISTENT", "trials": 100_000, "epsilon_lower_bound": 1.2, "confidence": 0.95}
LEAK = {"sentence": "3 of 1000 outputs identify D", "unreachable_from_neighbour": 3, "unreachable_from_data": 0}
NO_LEAK = {"sentence": "no output identifies D", "unreachable_from_neighbour": 0, "unreachable_from_data": 0}


def status(key: str, **changes) -> NistStatus:
    facts = copy.deepcopy(BASE)
    for name, value in changes.items():
        if name in ("claim", "accounting") and isinstance(value, dict):
            facts[name] = facts[name] | value
        else:
            facts[name] = value
    return evaluate_nist(**facts).item(key).status


# Each row: an item, the facts before and after a change, and the statuses they give.
CHANGES = [
    ("privacy_parameters", {}, SHOWN, {"claim": {"certified_by_accountant": False}}, FLAGGED),
    ("unit_of_privacy", {}, NOT_ASSESSED, {"unit_given": True, "claim": {"privacy_unit": "one patient"}}, DECLARED),
    ("unit_of_privacy", {}, NOT_ASSESSED, {"deployment": {"privacy_unit": "User-level"}}, DECLARED),
    ("algorithm_test", {}, NOT_ASSESSED, {"audit": AUDIT}, SHOWN),
    ("algorithm_test", {"audit": AUDIT}, SHOWN, {"audit": AUDIT | {"verdict": "VIOLATION"}}, FLAGGED),
    ("algorithm_test", {"audit": AUDIT}, SHOWN, {"audit": AUDIT | {"verdict": "INCONCLUSIVE"}}, NOT_ASSESSED),
    (
        "algorithm_test",
        {"additional_audits": ({"kind": "one run", "verdict": "CONSISTENT", "result": {}},)},
        SHOWN,
        {"additional_audits": ({"kind": "one run", "verdict": "VIOLATION", "result": {}},)},
        FLAGGED,
    ),
    ("floating_point", {}, NOT_ASSESSED, {"deployment": {"floating_point": "exact integer noise"}}, DECLARED),
    (
        "floating_point",
        {"additional_audits": ({"kind": "target", "verdict": "CONSISTENT", "result": {"float_evidence": [NO_LEAK]}},)},
        SHOWN,
        {"additional_audits": ({"kind": "target", "verdict": "VIOLATION", "result": {"float_evidence": [LEAK]}},)},
        FLAGGED,
    ),
    ("side_channels", {}, NOT_ASSESSED, {"deployment": {"side_channels": "constant-time sampler"}}, DECLARED),
    ("security", {}, NOT_ASSESSED, {"deployment": {"security": "an enclave"}}, DECLARED),
    ("data_collection", {}, NOT_ASSESSED, {"deployment": {"data_collection": "collected by the curator"}}, DECLARED),
    ("trust_model", {}, NOT_ASSESSED, {"deployment": {"model_name": "Local"}}, DECLARED),
    ("large_epsilon", {}, SHOWN, {"claim": {"epsilon": LARGE_EPSILON * 1.01}}, FLAGGED),
    ("delta_vs_n", {}, NOT_ASSESSED, {"deployment": {"dataset_size": 1000}}, SHOWN),
    ("delta_vs_n", {"deployment": {"dataset_size": 1000}}, SHOWN, {"deployment": {"dataset_size": 500_000}}, FLAGGED),
    ("delta_vs_n", {"deployment": {"dataset_size": 500_000}}, FLAGGED, {"claim": {"delta": 0.0}}, SHOWN),
    (
        "delta_vs_n",
        {},
        NOT_ASSESSED,
        {"components": ({"type": "dp_sgd_training", "dataset_size": 10**6},)},
        FLAGGED,
    ),
    (
        "delta_exceeds_n",
        {"deployment": {"dataset_size": 500_000}},
        SHOWN,
        {"deployment": {"dataset_size": 1_000_000}},
        FLAGGED,
    ),
    ("delta_exceeds_n", {}, NOT_ASSESSED, {"deployment": {"dataset_size": 10}}, SHOWN),
    ("unit_contributions", {}, FLAGGED, {"deployment": {"records_per_person": 1}}, DECLARED),
    ("unit_contributions", {}, FLAGGED, {"deployment": {"privacy_unit": "Person-level"}}, DECLARED),
    (
        "unit_contributions",
        {"deployment": {"privacy_unit": "Person-level"}},
        DECLARED,
        {"deployment": {"privacy_unit": "Person-level", "records_per_person": 3}},
        FLAGGED,
    ),
    (
        "unit_contributions",
        {"unit_given": True, "claim": {"privacy_unit": "one widget"}},
        NOT_ASSESSED,
        {"unit_given": True, "claim": {"privacy_unit": "one user-day"}},
        FLAGGED,
    ),
    ("releases_over_time", {}, NOT_ASSESSED, {"deployment": {"release_type": "One release"}}, DECLARED),
    (
        "releases_over_time",
        {"deployment": {"release_type": "One release"}},
        DECLARED,
        {"deployment": {"release_type": "Many releases"}},
        NOT_ASSESSED,
    ),
    ("preprocessing", {}, NOT_ASSESSED, {"deployment": {"preprocessing_and_hyperparameter_tuning": "none"}}, DECLARED),
    (
        "batch_sampling",  # a training's item only: the sampler stated (accounted for it) or Poisson assumed
        {"components": ({"type": "dp_sgd", "sampling": "shuffle", "dataset_size": 1000},)},
        SHOWN,
        {"components": ({"type": "poisson_subsampled_gaussian", "sampling_rate": 0.01},)},
        FLAGGED,
    ),
]

# The budget-ledger section a report gets from ``dplens report --ledger DB`` (its shape, as dplens.ledger writes it).
LEDGER = {
    "ledger": "budget.db",
    "schema_version": 1,
    "time_utc": "2026-01-01T00:00:00Z",
    "is_upper_bound": True,
    "budgets": [
        {
            "name": "monthly",
            "unit": "one user",
            "mode": "planned",
            "rule": "pld",
            "theorem": "PLD composition",
            "target_epsilon": 3.0,
            "delta": 1e-6,
            "period": "month",
            "current_period": "2026-01",
            "spent_epsilon": 1.25,
            "remaining_epsilon": 1.75,
            "releases_count": 6,
            "periods": [
                {"period": "2025-12", "releases": 2, "spent_epsilon": 0.8, "remaining_epsilon": 2.2},
                {"period": "2026-01", "releases": 4, "spent_epsilon": 1.25, "remaining_epsilon": 1.75},
            ],
        }
    ],
}


@pytest.mark.parametrize(
    ("key", "before", "first", "after", "second"), CHANGES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_changing_the_facts_changes_the_status(key, before, first, after, second):
    assert status(key, **before) is first
    assert status(key, **after) is second


def test_every_status_of_every_item_that_can_vary_is_exercised():
    seen: dict[str, set[NistStatus]] = {}
    for key, _, first, _, second in CHANGES:
        seen.setdefault(key, set()).update({first, second})
    # items whose status never varies: the relation and the analysis are always shown (the accountant's),
    # bias is never assessed
    items = {item.key for item in evaluate_nist(**BASE).items} | {"batch_sampling"}  # + a training's own item
    assert set(seen) | {"neighbouring_relation", "algorithm_analysis", "bias"} == items
    assert seen["algorithm_test"] == {SHOWN, FLAGGED, NOT_ASSESSED}
    assert seen["floating_point"] == {SHOWN, FLAGGED, DECLARED, NOT_ASSESSED}
    assert seen["unit_contributions"] == {FLAGGED, DECLARED, NOT_ASSESSED}
    assert seen["delta_vs_n"] == {SHOWN, FLAGGED, NOT_ASSESSED}


def test_fixed_statuses_still_follow_the_facts():
    relation = evaluate_nist(**BASE).item("neighbouring_relation")
    assert relation.status is SHOWN and "add_remove" in relation.finding
    other = copy.deepcopy(BASE)
    other["claim"] |= {"neighbouring": "replace_one", "neighbouring_description": "data sets that differ in one record"}
    assert "replace_one" in evaluate_nist(**other).item("neighbouring_relation").finding
    analysis = evaluate_nist(**(BASE | {"components": BASE["components"] * 3})).item("algorithm_analysis")
    assert analysis.status is SHOWN and "the 3 mechanism component(s)" in analysis.finding
    assert evaluate_nist(**BASE).item("bias").status is NOT_ASSESSED


def test_thresholds_are_dplens_and_configurable():
    assert (LARGE_EPSILON, DELTA_FACTOR) == (10.0, 0.1)
    facts = copy.deepcopy(BASE)
    assert evaluate_nist(**facts, large_epsilon=1.5).item("large_epsilon").status is FLAGGED
    facts["deployment"] = {"dataset_size": 1000}  # delta * n = 1e-3
    assert evaluate_nist(**facts, delta_factor=1e-4).item("delta_vs_n").status is FLAGGED
    evaluation = evaluate_nist(**BASE)
    assert evaluation.thresholds == {"large_epsilon": 10.0, "delta_factor": 0.1}
    assert "dplens threshold" in evaluation.item("large_epsilon").finding


def test_nothing_is_shown_that_dplens_does_not_check():
    """Without an audit, a float check or a [deployment] table, the lower layers are all 'not assessed'."""
    evaluation = evaluate_nist(**BASE)
    shown = {item.key for item in evaluation.items if item.status is SHOWN}
    assert shown == {"privacy_parameters", "neighbouring_relation", "algorithm_analysis", "large_epsilon"}
    for key in ("floating_point", "side_channels", "security", "trust_model", "data_collection", "bias"):
        assert evaluation.item(key).status is NOT_ASSESSED
    assert all(item.where for item in evaluation.items if item.status in (SHOWN, FLAGGED, DECLARED))
    assert all(item.section for item in evaluation.items)


# ---- through a report, in the three formats ------------------------------------------------------------


def report(deployment=None, **table):
    spec = dplens.parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 0.25}], **table})
    return dplens.build_report(
        spec=spec,
        accounting=report_summary(spec, 1e-5),
        title="nist",
        not_audited_reason="test",
        deployment=deployment,
        created_utc="2025-01-01T00:00:00Z",
    )


def _html_status(html: str, key: str) -> str:
    match = re.search(rf'<tr id="nist-{key}" data-status="(\w+)">', html)
    assert match, key
    return match.group(1)


def test_the_section_is_in_json_html_and_statement_and_follows_the_facts():
    plain = report()
    declared = report(deployment={"model_name": "Central", "dataset_size": 10**7, "records_per_person": 1})
    for rep, trust, unit in ((plain, "not_assessed", "flagged"), (declared, "declared", "declared")):
        data = json.loads(to_canonical_json(rep))
        items = {i["key"]: i for i in data["nist"]["items"]}
        assert items["trust_model"]["status"] == trust and items["unit_contributions"]["status"] == unit
        assert items["large_epsilon"]["status"] == "flagged"  # sigma = 0.25: epsilon ~ 20 at 1e-5
        assert (
            data["nist"]["publication"].startswith("NIST SP 800-226")
            and "10.6028/NIST.SP.800-226" in data["nist"]["publication"]
        )
        html = render_html(rep)
        assert 'id="nist"' in html and _html_status(html, "trust_model") == trust
        assert _html_status(html, "unit_contributions") == unit
        assert len(re.findall(r'<tr id="nist-', html)) == len(items)
        statement = render_statement(rep)
        assert "NIST SP 800-226 evaluation" in statement
        label = {"not_assessed": "NOT ASSESSED BY DPLENS", "declared": "DECLARED BY THE AUTHOR"}[trust]
        assert re.search(rf"- {label}: Trust model", statement)
        assert Report.from_dict(rep.to_dict()) == rep
    assert declared.deployment == {"model_name": "Central", "dataset_size": 10**7, "records_per_person": 1}
    assert plain.deployment is None


def test_the_spec_table_reaches_the_section():
    rep = report(**{"deployment": {"release_type": "One release", "side_channels": "no timing measurement"}})
    assert rep.nist.item("releases_over_time").status is DECLARED
    assert rep.nist.item("side_channels").finding == "no timing measurement"


def test_the_schema_holds_the_section():
    data = report().to_dict()
    bad = copy.deepcopy(data)
    bad["nist"]["items"][0]["status"] = "ticked"
    with pytest.raises(ValueError, match=r"field 'nist.items\[0\].status' must be one of"):
        Report.from_dict(bad)
    missing = copy.deepcopy(data)
    del missing["nist"]
    with pytest.raises(ValueError, match=r"missing required field 'nist'"):
        Report.from_dict(missing)


def test_a_budget_ledger_shows_the_loss_across_releases():
    before = status("releases_over_time", deployment={"release_type": "Many releases"})
    facts = copy.deepcopy(BASE) | {"deployment": {"release_type": "Many releases"}, "budget_ledger": LEDGER}
    item = evaluate_nist(**facts).item("releases_over_time")
    assert (before, item.status) == (NOT_ASSESSED, SHOWN)
    assert "budget 'monthly'" in item.finding and "spent ε ≤ 1.250 of 3.000" in item.finding
    assert "(current period 2026-01: 4 release(s); 6 in all periods), remaining ≥ 1.750" in item.finding
    assert item.where.startswith("Budget ledger")
    empty = evaluate_nist(**(facts | {"budget_ledger": LEDGER | {"budgets": []}})).item("releases_over_time")
    assert empty.status is NOT_ASSESSED
