"""Registry records dplens writes: dplens's own schema (Draft 7, no extra properties anywhere, the registry's
required fields and enumerations), every example with a [deployment] table exporting a record the schema accepts
(with its format checker) in the quoting the registry's checks ask for, the tier a record reaches, rho of zCDP
compositions, and refusals naming what is missing."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator

import dplens
from dplens._api import default_delta, report_summary
from dplens.registry import fields
from dplens.registry.check import CheckStatus, check_record
from dplens.registry.deployment import TIER_FIELDS, parse_deployment, registry_slug
from dplens.registry.export import composed_rho
from dplens.registry.schema import RECORD_SCHEMA, load_schema_file, validate_record
from dplens.registry.yamlio import dump_record, parse_yaml_text
from dplens.reports.registry_entry import export_entry, read_report, write_entry
from dplens.reports.render import to_canonical_json

from .conftest import BASIC

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEPLOYMENT_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.toml") if "deployment" in tomllib.loads(p.read_text()))


def report_of(spec, **options):
    """A report of ``spec`` without an audit (the audit is not what the export is about)."""
    summary = report_summary(spec, default_delta(spec))
    return dplens.build_report(
        spec=spec, accounting=summary, title=spec.source or "spec", not_audited_reason="test", **options
    )


def objects(schema, path=""):
    """Every object schema inside ``schema`` with its path."""
    if schema.get("type") == "object":
        yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from objects(sub, f"{path}/{key}")


# ---- the schema ----------------------------------------------------------------------------------


def test_the_schema_is_draft_7_and_closed_everywhere():
    Draft7Validator.check_schema(RECORD_SCHEMA)
    found = list(objects(RECORD_SCHEMA))
    assert len(found) == 10  # the record, deployment, its seven sections, privacy_parameters
    for path, schema in found:
        assert schema["additionalProperties"] is False, path
    assert RECORD_SCHEMA["required"] == ["url_slug", "status", "tier", "deployment"]
    basic = RECORD_SCHEMA["properties"]["deployment"]["properties"]["basic"]
    assert basic["required"] == list(TIER_FIELDS[fields.Tier.BASIC])
    assert basic["properties"]["publication_date"] == {"type": "string", "format": "date"}
    assert fields.REGISTRY_COMMIT in RECORD_SCHEMA["$comment"]


def test_the_schema_rejects_what_the_registry_rejects():
    record = parse_yaml_text((ROOT / "tests/registry/records/zcdp_rho_only.yaml").read_text(), name="r")
    assert validate_record(record) == []
    cases = {
        "extra top-level key": (lambda r: r.update(surprise=1), "(record): Additional properties are not allowed"),
        "tier 0": (lambda r: r.update(tier=0), "tier: 0 is not one of [1, 2, 3]"),
        "no status": (lambda r: r.pop("status"), "(record): 'status' is a required property"),
        "a date that is no date": (
            lambda r: r["deployment"]["basic"].update(publication_date="1/1/2026"),
            "deployment.basic.publication_date: '1/1/2026' is not a 'date'",
        ),
        "no curators": (
            lambda r: r["deployment"]["basic"].update(data_curators=[]),
            "deployment.basic.data_curators: [] should be non-empty",
        ),
        "unknown variant": (
            lambda r: r["deployment"]["dp_variant"].update(variant_name="zCDP"),
            "deployment.dp_variant.variant_name: 'zCDP' is not one of",
        ),
        "extra parameter": (
            lambda r: r["deployment"]["privacy_loss"]["privacy_parameters"].update(mu=1.0),
            "deployment.privacy_loss.privacy_parameters: Additional properties are not allowed ('mu' was unexpected)",
        ),
        "authors missing": (
            lambda r: r["deployment"].update(administrative={"notes": "x"}),
            "deployment.administrative: 'registry_authors' is a required property",
        ),
    }
    for name, (change, message) in cases.items():
        broken = copy.deepcopy(record)
        change(broken)
        problems = validate_record(broken)
        assert problems and problems[0].startswith(message), (name, problems)


def test_a_schema_file_can_replace_dplens_s(tmp_path):
    path = tmp_path / "schema.yaml"

    class NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    path.write_text(yaml.dump(RECORD_SCHEMA, Dumper=NoAliases), encoding="utf-8")
    assert load_schema_file(path) == RECORD_SCHEMA
    (tmp_path / "bad.yaml").write_text("type: 3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^schema file '.*bad.yaml' is not a valid Draft-7 schema"):
        load_schema_file(tmp_path / "bad.yaml")
    (tmp_path / "list.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(ValueError, match=r"must hold a JSON schema object; got list"):
        load_schema_file(tmp_path / "list.json")


# ---- the examples --------------------------------------------------------------------------------


def test_two_examples_carry_a_deployment_table_a_training_and_a_statistics_release():
    kinds = {tomllib.loads(p.read_text())["deployment"].get("data_product_type") for p in DEPLOYMENT_EXAMPLES}
    assert {"Machine learning model", "Summary statistics"} <= kinds


@pytest.mark.parametrize("path", DEPLOYMENT_EXAMPLES, ids=lambda p: p.name)
def test_every_example_with_a_deployment_table_exports_a_valid_record(path, tmp_path):
    spec = dplens.load_spec(path)
    entry = export_entry(report_of(spec))
    assert validate_record(entry.record) == []
    text = write_entry(entry, tmp_path / "registry-entry.yaml").read_text(encoding="utf-8")
    record = parse_yaml_text(text, name=path.name)
    assert record == entry.record  # the YAML says what the record says
    assert validate_record(record) == []
    # the registry's own text checks: block or quoted scalars only (no folded '>'), no doubled backslash escapes
    styles = {getattr(token, "style", None) for token in yaml.scan(text)} - {None}
    assert styles <= {"|", '"', "'"}, styles
    assert "\\\\" not in text
    basic = record["deployment"]["basic"]
    assert record["url_slug"] == registry_slug(basic["name"], tuple(basic["data_curators"]), basic["publication_date"])
    assert record["tier"] == 3 and entry.missing_for_next_tier == ()
    # the record's parameters are upper bounds the accountant certifies
    params = record["deployment"]["privacy_loss"]["privacy_parameters"]
    assert params["epsilon"] >= spec.accountant().epsilon(params["delta"]) and params["epsilon"] == spec.claim.epsilon
    # dplens's own check agrees with what it wrote
    assert check_record(record, name=path.name).status in {CheckStatus.VALID, CheckStatus.NOT_CHECKABLE}


def test_the_zcdp_example_states_rho_and_checks_valid():
    spec = dplens.load_spec(EXAMPLES / "registry_census_tables.toml")
    entry = export_entry(report_of(spec))
    params = entry.record["deployment"]["privacy_loss"]["privacy_parameters"]
    assert params == {"epsilon": 15.0, "delta": 1e-10, "rho": 2.0}  # 4 levels x 1/(2 sigma^2), sigma = 1: exact
    assert entry.record["deployment"]["dp_variant"]["variant_name"] == "Zero-concentrated DP"
    result = check_record(entry.record, name="census")
    assert result.status is CheckStatus.VALID
    assert result.checks[0].values["epsilon_optimal"] <= 15.0


# ---- tiers, numbers, refusals ----------------------------------------------------------------------

TIER2 = {
    "model_name": "Central",
    "release_type": "One release",
    "data_source_type": "Static",
    "access_type": "Interactive",
}
TIER3 = {
    "data_domain": "d",
    "unprotected_quantities": "none",
    "actors": "a",
    "post_processing": "none",
    "preprocessing_and_hyperparameter_tuning": "none",
}
GAUSSIANS = {"mechanism": [{"type": "gaussian", "noise_multiplier": 2.0, "count": 4}]}


@pytest.mark.parametrize(("table", "tier"), [(BASIC, 1), (BASIC | TIER2, 2), (BASIC | TIER2 | TIER3, 3)])
def test_the_record_reaches_the_tier_its_fields_allow(table, tier):
    entry = export_entry(report_of(dplens.parse_spec(GAUSSIANS | {"deployment": table})))
    assert int(entry.tier) == entry.record["tier"] == tier
    assert validate_record(entry.record) == []
    if tier < 3:
        assert entry.missing_for_next_tier and f"tier {tier + 1} needs [deployment]" in entry.to_yaml()


def test_a_spec_without_the_table_or_a_tier_one_field_writes_no_record():
    with pytest.raises(ValueError, match=r"^the report has no \[deployment\] table: a registry record needs name"):
        export_entry(report_of(dplens.parse_spec(GAUSSIANS)))
    partial = {k: v for k, v in BASIC.items() if k != "data_product_region"}
    with pytest.raises(ValueError) as err:
        export_entry(report_of(dplens.parse_spec(GAUSSIANS | {"deployment": partial})))
    assert str(err.value) == (
        "the registry record needs [deployment] data_product_region; registry-entry.yaml was not written"
    )
    # an override supplies it
    report = report_of(dplens.parse_spec(GAUSSIANS | {"deployment": partial}))
    assert export_entry(report, override={"data_product_region": "Atlantis"}).tier == fields.Tier.BASIC


def test_variant_and_parameters_from_the_claim_and_the_accountant():
    spec = dplens.parse_spec(GAUSSIANS | {"deployment": BASIC})  # four Gaussians, sigma = 2: rho = 0.5, 1-GDP
    record = export_entry(report_of(spec)).record["deployment"]
    assert record["dp_variant"]["variant_name"] == "Approximate DP"
    params = record["privacy_loss"]["privacy_parameters"]
    assert params["delta"] == 1e-5 and params["rho"] == 0.5
    assert params["epsilon"] >= spec.accountant().epsilon(1e-5) and params["epsilon"] < 4.378 + 1e-3
    assert "upper bound" in record["privacy_loss"]["privacy_parameters_details"]
    pure = dplens.parse_spec(
        {"mechanism": [{"type": "laplace", "epsilon": 0.5}], "claim": {"epsilon": 0.5}} | {"deployment": BASIC}
    )
    record = export_entry(report_of(pure)).record["deployment"]
    assert record["dp_variant"]["variant_name"] == "Pure DP"
    assert record["privacy_loss"]["privacy_parameters"] == {"epsilon": 0.5}  # no delta, no rho for Laplace


def test_a_claim_the_accountant_does_not_certify_is_not_exported():
    spec = dplens.load_spec(EXAMPLES / "gaussian_claim.toml")  # sigma = 1 claimed as epsilon = 1
    report = report_of(spec, deployment=BASIC)
    entry = export_entry(report)
    params = entry.record["deployment"]["privacy_loss"]["privacy_parameters"]
    assert params["epsilon"] >= spec.accountant().epsilon(1e-5) > 1.0  # the bound, not the claim
    assert "NOT certified" in entry.record["deployment"]["privacy_loss"]["privacy_parameters_details"]


def test_declared_variants_must_fit():
    laplace = {"mechanism": [{"type": "laplace", "epsilon": 0.5}]}
    with pytest.raises(ValueError, match=r"variant_name 'Zero-concentrated DP' needs rho"):
        export_entry(
            report_of(dplens.parse_spec(laplace | {"deployment": BASIC | {"variant_name": "Zero-concentrated DP"}}))
        )
    with pytest.raises(ValueError, match=r"variant_name 'Pure DP' but the report's claim has delta > 0"):
        export_entry(report_of(dplens.parse_spec(GAUSSIANS | {"deployment": BASIC | {"variant_name": "Pure DP"}})))
    with pytest.raises(ValueError, match=r"needs \[deployment\] registry_authors"):
        export_entry(report_of(dplens.parse_spec(GAUSSIANS | {"deployment": BASIC | {"notes": "n"}})))


def test_rho_is_exact_for_gaussian_and_zcdp_compositions_and_absent_otherwise():
    def rho_of(mechanisms):
        return composed_rho(dplens.parse_spec({"mechanism": mechanisms}).accountant().summary(1e-5).ledger)

    assert rho_of([{"type": "gaussian", "noise_multiplier": 1.0, "count": 3}]) == 1.5
    assert (
        rho_of([{"type": "zcdp", "rho": 0.25}, {"type": "discrete_gaussian", "sigma": 2.0, "sensitivity": 2}]) == 0.75
    )
    sigma = 0.3  # 1 / (2 * 0.09) is not a float: rounded up, never down
    value = rho_of([{"type": "gaussian", "noise_multiplier": sigma}])
    from fractions import Fraction

    assert Fraction(value) >= 1 / (2 * Fraction(sigma) ** 2) and value - 1 / (2 * sigma**2) < 1e-14
    assert rho_of([{"type": "laplace", "epsilon": 1.0}]) is None
    assert rho_of([{"type": "poisson_subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 0.1}]) is None
    assert rho_of([{"type": "zcdp", "rho": 0.25, "xi": 0.1}]) is None
    assert composed_rho({}) is None


def test_reading_a_report_file(tmp_path):
    report = report_of(dplens.parse_spec(GAUSSIANS | {"deployment": BASIC}))
    path = tmp_path / "report.json"
    path.write_text(to_canonical_json(report), encoding="utf-8")
    assert read_report(path).deployment == parse_deployment(BASIC).to_dict()
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^report file '.*report.json' is not valid JSON"):
        read_report(path)
    path.write_text('{"format": "dplens-report", "schema_version": 2}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"unsupported report schema_version 2"):
        read_report(path)


def test_yaml_dump_keeps_order_and_writes_multiline_text_as_blocks():
    record = {"b": "one line", "a": "two\nlines", "n": [1, 2.5, math.pi], "d": "2025-01-01"}
    text = dump_record(record)
    assert text.index("b:") < text.index("a:") and "a: |-\n  two\n  lines\n" in text and "d: '2025-01-01'" in text
    assert parse_yaml_text(text, name="x") == record


def test_a_budget_ledger_makes_the_record_many_releases(tmp_path):
    import datetime as dt

    from dplens.ledger import Ledger, Period
    from dplens.ledger.report import ledger_section
    from dplens.reports.format import fmt_upper
    from dplens.reports.registry_entry import build_registry_entry

    path = tmp_path / "budget.db"
    with Ledger.open(path, create=True) as book:
        book.create_budget(name="monthly", unit="one person", epsilon=3.0, delta=1e-6, period=Period.MONTH)
        last_month = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
        assert book.charge(dplens.Gaussian(noise_multiplier=4.0), release="old", time=last_month).accepted
        for i in range(4):
            assert book.charge(dplens.Gaussian(noise_multiplier=4.0), release=f"table-{i}").accepted
    section = ledger_section(path)
    spec = dplens.parse_spec(GAUSSIANS | {"deployment": BASIC | TIER2 | {"release_type": "One release"}})
    with_ledger = report_of(spec, budget_ledger=section)  # the report as `dplens report --ledger DB` builds it
    spent = section["budgets"][0]["spent_epsilon"]
    deployment = parse_deployment({k: v for k, v in (BASIC | TIER2).items() if k != "release_type"})
    record = build_registry_entry(with_ledger, deployment, rho=0.5, tool="dplens").record["deployment"]
    assert record["deployment_model"]["release_type"] == "Many releases"
    assert "budget 'monthly'" in record["deployment_model"]["release_type_details"]
    assert 0 < spent < 3
    composition = record["accounting"]["composition"]
    assert f"spent ε ≤ {fmt_upper(spent)} of 3.000" in composition and "4 release(s); 5 in all periods" in composition
    assert validate_record({"url_slug": "x", "status": "Draft", "tier": 2, "deployment": record}) == []
    declared = parse_deployment(BASIC | TIER2)  # the author's own release type stays
    record = build_registry_entry(with_ledger, declared, rho=0.5, tool="dplens").record["deployment"]
    assert record["deployment_model"]["release_type"] == "One release"
