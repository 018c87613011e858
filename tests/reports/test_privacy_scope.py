"""What a report's ε covers (issue 49): the privacy unit of its DP-SGD tables and the tuning it includes, in the
JSON, the HTML, the privacy statement, the NIST SP 800-226 section and the registry record; a user-level report never
shows the example-level number."""

from __future__ import annotations

import json
import math

import pytest

import dplens
from dplens.registry.deployment import parse_deployment
from dplens.reports.build import build_report
from dplens.reports.format import fmt_upper
from dplens.reports.model import Report
from dplens.reports.nist import NistStatus
from dplens.reports.registry_entry import export_entry
from dplens.reports.render import render_html, render_statement, to_canonical_json
from dplens.reports.scope import privacy_scope

RUN = {"type": "dp_sgd", "noise_multiplier": 1.5, "dataset_size": 20000, "batch_size": 200, "epochs": 2}
USER = {**RUN, "privacy_unit": "user", "max_examples_per_user": 4}
DELTA = 1e-6
BASIC = {
    "name": "Model",
    "data_curators": ["Example Lab"],
    "description": "A model.",
    "intended_use": "Research.",
    "data_product_type": "Machine learning model",
    "data_product_region": "Atlantis",
    "publication_date": "2026-03-01",
}


def _report(tables, **options):
    spec = dplens.parse_spec({"mechanism": tables})
    return build_report(
        spec=spec, accounting=spec.accountant().summary(DELTA), title="run", not_audited_reason="test", **options
    )


@pytest.fixture(scope="module")
def user_report():
    return _report([USER])


@pytest.fixture(scope="module")
def tuning_report():
    return _report([{"type": "repeat_and_select", "mean": 10, "shape": "geometric", "mechanism": RUN}])


# ---- the section from the tables -----------------------------------------------------------------


def test_scope_of_each_kind_of_table():
    assert privacy_scope([{"type": "gaussian", "noise_multiplier": 1.0}]) is None
    example = privacy_scope([RUN])
    assert example["unit"] == "example" and not example["includes_tuning"]
    assert "No hyperparameter" in example["sentence"]
    user = privacy_scope([USER])
    assert user["unit"] == "user" and user["user_level"][0]["max_examples_per_user"] == 4
    assert "at most 4 per user" in user["unit_words"]
    uls = privacy_scope([{**RUN, "privacy_unit": "user", "user_sampling": True, "users": 5000}])
    assert uls["user_level"][0]["user_sampling"] is True and "5000 users" in uls["unit_words"]
    mixed = privacy_scope([USER, RUN])
    assert mixed["unit"] == "example" and mixed["mixed"] and "not a user-level guarantee" in mixed["sentence"]
    others = privacy_scope([USER, {"type": "gaussian", "noise_multiplier": 2.0}])
    assert others["unit"] == "user" and "(gaussian)" in others["sentence"]


@pytest.mark.parametrize(
    ("shape", "words", "eta"),
    [("geometric", "geometric", 1.0), ("poisson", "poisson", None), (0.5, "truncated negative binomial", 0.5)],
)
def test_scope_of_a_search(shape, words, eta):
    scope = privacy_scope([{"type": "repeat_and_select", "mean": 40, "shape": shape, "count": 2, "mechanism": USER}])
    assert scope["unit"] == "user" and scope["includes_tuning"]
    (row,) = scope["tuning"]
    assert row["distribution"].startswith(words) and row["shape"] == eta and row["mean_runs"] == 40.0
    assert row["count"] == 2 and row["mechanism"] == "dp_sgd (user level)" and row["included_in_epsilon"]
    assert "INCLUDES the tuning" in scope["sentence"] and "40 runs on average" in scope["sentence"]


def test_a_search_declared_only_in_the_deployment_is_outside_the_epsilon():
    scope = privacy_scope([RUN], deployment={"preprocessing_and_hyperparameter_tuning": "grid search, 12 runs"})
    assert scope["tuning_outside_accounting"] == "grid search, 12 runs" and not scope["includes_tuning"]
    assert "does NOT include it" in scope["sentence"]


# ---- a user-level report -------------------------------------------------------------------------


def test_a_user_level_report_states_the_user_everywhere(user_report):
    report = user_report
    assert report.claim.privacy_unit.startswith("one user") and report.privacy_scope["unit"] == "user"
    data = json.loads(to_canonical_json(report))
    assert data["privacy_scope"]["unit"] == "user" and data["claim"]["privacy_unit"].startswith("one user")
    assert Report.from_dict(data) == report
    html = render_html(report)
    assert 'id="privacy-scope"' in html and "at most 4 examples per user" in html
    statement = render_statement(report)
    assert "Privacy unit and tuning: The ε is accounted for one user" in statement
    assert report.nist.item("unit_of_privacy").status is NistStatus.SHOWN
    assert report.nist.item("unit_contributions").status is NistStatus.SHOWN


def test_a_user_level_report_never_shows_the_example_level_number(user_report):
    example = dplens.parse_spec({"mechanism": [RUN]}).accountant().summary(DELTA)
    user_eps, example_eps = user_report.accounting.epsilon, example.to_dict()["epsilon"]
    assert user_eps > example_eps  # a user with one example is a user with at most K
    texts = (to_canonical_json(user_report), render_html(user_report), render_statement(user_report))
    shown = fmt_upper(example_eps)
    for text in texts:
        assert shown not in text and repr(example_eps) not in text
        assert fmt_upper(user_eps) in text


def test_an_example_level_report_with_a_person_level_unit_is_flagged():
    report = _report([RUN], privacy_unit="one patient")
    item = report.nist.item("unit_of_privacy")
    assert item.status is NistStatus.FLAGGED and "accounted for one training example" in item.finding
    one_each = _report([RUN], privacy_unit="one patient", deployment={"records_per_person": 1})
    assert one_each.nist.item("unit_of_privacy").status is NistStatus.SHOWN
    plain = _report([RUN])
    assert plain.nist.item("unit_of_privacy").status is NistStatus.SHOWN
    assert plain.nist.item("unit_contributions").status is NistStatus.FLAGGED  # a person may hold many examples


def test_the_registry_record_fills_the_privacy_unit(user_report):
    entry = export_entry(user_report, deployment=parse_deployment(BASIC))
    loss = entry.record["deployment"]["privacy_loss"]
    assert loss["privacy_unit"] == "User-level" and "at most 4 per user" in loss["privacy_unit_details"]
    declared = export_entry(user_report, deployment=parse_deployment({**BASIC, "privacy_unit": "Patient-level"}))
    assert declared.record["deployment"]["privacy_loss"]["privacy_unit"] == "Patient-level"
    assert "user-level guarantee" in declared.record["deployment"]["privacy_loss"]["privacy_unit_details"]


# ---- a report of a search ------------------------------------------------------------------------


def test_a_report_of_a_search_says_the_epsilon_includes_it(tuning_report):
    report = tuning_report
    scope = report.privacy_scope
    assert scope["includes_tuning"] and scope["tuning"][0]["mean_runs"] == 10.0 and scope["unit"] == "example"
    item = report.nist.item("preprocessing")
    assert item.status is NistStatus.SHOWN and "10 runs on average (geometric" in item.finding
    assert "The ε INCLUDES the tuning" in render_statement(report)
    assert 'id="scope-includes-tuning">yes' in render_html(report)
    assert report.nist.item("batch_sampling").status is NistStatus.SHOWN  # the run inside the search is read
    entry = export_entry(report, deployment=parse_deployment(BASIC))
    tuning = entry.record["deployment"]["implementation"]["preprocessing_and_hyperparameter_tuning"]
    assert "included in the epsilon" in tuning and "10 runs on average" in tuning
    assert int(entry.tier) == 1  # dplens's tuning text does not stand in for the author's tier-3 declaration


def test_a_report_without_dp_sgd_or_search_has_no_scope():
    report = _report([{"type": "gaussian", "noise_multiplier": 2.0}])
    assert report.privacy_scope is None and "privacy_scope" not in report.to_dict()
    assert math.isfinite(report.accounting.epsilon)
