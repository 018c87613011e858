"""The spec's [deployment] table: the registry's enumerations (allowed values in the message), dates, lists, unknown
keys, the tiers' required keys, the registry's url slug, and the table travelling with the spec."""

from __future__ import annotations

import datetime as dt
import re

import pytest

import dplens
from dplens.registry import fields
from dplens.registry.deployment import (
    DEPLOYMENT_KEYS,
    TIER_FIELDS,
    Deployment,
    load_deployment_file,
    merge_deployment_tables,
    missing_for_tier,
    parse_deployment,
    registry_slug,
    require_tier_one,
)

from .conftest import BASIC

SPEC = {"name": "spec name", "mechanism": [{"type": "gaussian", "noise_multiplier": 2.0}]}


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("data_product_type", fields.DataProductType),
        ("data_product_sector", fields.Sector),
        ("variant_name", fields.VariantName),
        ("model_name", fields.ModelName),
        ("release_type", fields.ReleaseType),
        ("data_source_type", fields.DataSourceType),
        ("access_type", fields.AccessType),
        ("status", fields.RecordStatus),
    ],
)
def test_every_enumeration_is_checked_with_the_allowed_values_in_the_message(key, kind):
    for value in fields.choices(kind):
        assert getattr(parse_deployment({key: value}), key) is kind(value)
    for bad in ("bogus", value.lower() + "x", 3, None, [value]):
        with pytest.raises(ValueError) as err:
            parse_deployment({key: bad})
        message = str(err.value)
        assert message.startswith(f"[deployment] {key} must be one of {fields.choices(kind)}; got {bad!r}")
        assert "\n" not in message


def test_the_enumerations_are_the_registry_schema_documents():
    # the registry schema's documented values at REGISTRY_COMMIT (research note governance.md lists them too)
    assert fields.choices(fields.DataProductType) == [
        "Summary statistics",
        "Machine learning model",
        "Dataset",
        "Synthetic data",
        "Interactive API",
        "SQL queries",
    ]
    assert fields.choices(fields.VariantName) == [
        "Pure DP",
        "Approximate DP",
        "Zero-concentrated DP",
        "Renyi DP",
        "Custom",
    ]
    assert fields.choices(fields.ModelName) == ["Local", "Central", "Shuffle", "Federated", "Varies"]
    assert fields.choices(fields.RecordStatus)[:2] == ["Converted", "Draft"] and len(fields.RecordStatus) == 7
    assert [int(t) for t in fields.Tier] == [1, 2, 3]
    assert re.fullmatch(r"[0-9a-f]{40}", fields.REGISTRY_COMMIT)


def test_dates_lists_texts_and_integers():
    assert parse_deployment({"publication_date": dt.date(2023, 5, 25)}).publication_date == "2023-05-25"
    for bad in ("2023-13-01", "1/1/2026", "2023-05-25T10:00:00", dt.datetime(2023, 5, 25, 1), 20230525, ""):
        with pytest.raises(ValueError, match=r"^\[deployment\] publication_date must be a date YYYY-MM-DD"):
            parse_deployment({"publication_date": bad})
    assert parse_deployment({"data_curators": "One Agency"}).data_curators == ("One Agency",)
    for bad in ([], [""], [3], {"a": 1}):
        with pytest.raises(ValueError, match=r"^\[deployment\] data_curators must"):
            parse_deployment({"data_curators": bad})
    for bad in ("", "   ", 3, None, ["text"]):
        with pytest.raises(ValueError, match=r"^\[deployment\] intended_use must be a non-empty string; got"):
            parse_deployment({"intended_use": bad})
    assert parse_deployment({"dataset_size": 60000.0}).dataset_size == 60000
    for bad in (0, -1, 1.5, True, "60000", 10**16):
        with pytest.raises(ValueError, match=r"^\[deployment\] dataset_size must be an integer in \[1, "):
            parse_deployment({"dataset_size": bad})
    with pytest.raises(ValueError, match=r"is longer than 20000 characters"):
        parse_deployment({"notes": "x" * 20_001})


def test_unknown_keys_are_refused_with_the_allowed_ones():
    with pytest.raises(ValueError) as err:
        parse_deployment({"curators": ["A"], "name": "x"})
    assert str(err.value).startswith("unknown key(s) ['curators'] in [deployment]; allowed: [")
    assert "'data_curators'" in str(err.value)
    with pytest.raises(ValueError, match=r"^\[deployment\] must be a table; got \['a'\]"):
        parse_deployment(["a"])


def test_to_dict_round_trips_and_omits_what_was_not_given():
    table = BASIC | {"release_type": "Many releases", "dataset_size": 10, "registry_authors": ["A", "B"]}
    deployment = parse_deployment(table)
    assert deployment.to_dict() == table
    assert parse_deployment(deployment.to_dict()) == deployment
    assert Deployment().to_dict() == {}
    assert sorted(DEPLOYMENT_KEYS) == sorted(f.name for f in __import__("dataclasses").fields(Deployment))


def test_tiers_name_what_is_missing_in_order():
    assert missing_for_tier(None, fields.Tier.BASIC) == list(TIER_FIELDS[fields.Tier.BASIC])
    deployment = parse_deployment(BASIC)
    assert missing_for_tier(deployment, fields.Tier.BASIC) == []
    assert missing_for_tier(deployment, fields.Tier.INTERMEDIATE) == list(TIER_FIELDS[fields.Tier.INTERMEDIATE])
    require_tier_one(deployment)
    without = {k: v for k, v in BASIC.items() if k not in ("intended_use", "publication_date")}
    with pytest.raises(ValueError) as err:
        require_tier_one(parse_deployment(without))
    assert str(err.value) == (
        "the registry record needs [deployment] intended_use (and 1 more: publication_date); "
        "registry-entry.yaml was not written"
    )


def test_slug_follows_the_registry_rule():
    # the rule of the registry's scripts/update_slug.py (its test keeps every record's slug in sync with it)
    assert (
        registry_slug(
            "Disclosure Avoidance System for Demographic and Housing Data", ("U.S. Census Bureau",), "2023-05-25"
        )
        == "disclosure-avoidance-system-for-demographic-and-housing-data-u-s-census-bureau-2023"
    )
    assert registry_slug("A (b)", ("X", "Y"), "2020-01-01") == "a-b--x-y-2020"  # "a (b)" → "a_b_", joined by "_"


def test_the_table_travels_with_the_spec():
    spec = dplens.parse_spec(SPEC | {"description": "spec text", "deployment": {"release_type": "One release"}})
    assert spec.deployment.name == "spec name" and spec.deployment.description == "spec text"  # the defaults
    assert spec.deployment.release_type is fields.ReleaseType.ONE
    again = spec.with_param("noise_multiplier", 3.0)
    assert again.deployment == spec.deployment
    assert dplens.parse_spec(SPEC).deployment is None
    assert dplens.parse_spec(SPEC | {"deployment": {"name": "own"}}).deployment.name == "own"
    with pytest.raises(ValueError, match=r"^\[deployment\] access_type must be one of \['Interactive'"):
        dplens.parse_spec(SPEC | {"deployment": {"access_type": "interactive"}})


def test_a_toml_spec_with_a_deployment_table(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(
        '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 2.0\n\n'
        '[deployment]\npublication_date = 2024-02-29\ndata_curators = ["A"]\n',
        encoding="utf-8",
    )
    spec = dplens.load_spec(path)
    assert spec.deployment.publication_date == "2024-02-29" and spec.deployment.data_curators == ("A",)


def test_deployment_files(tmp_path):
    toml = tmp_path / "d.toml"
    toml.write_text('[deployment]\nrelease_type = "One release"\n', encoding="utf-8")
    assert load_deployment_file(str(toml)) == {"release_type": "One release"}
    flat = tmp_path / "d.json"
    flat.write_text('{"access_type": "Interactive"}', encoding="utf-8")
    assert load_deployment_file(str(flat)) == {"access_type": "Interactive"}
    bad = tmp_path / "bad.toml"
    bad.write_text('[deployment]\naccess_type = "sometimes"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"^\[deployment\] of '.*bad.toml' access_type must be one of"):
        load_deployment_file(str(bad))
    broken = tmp_path / "broken.toml"
    broken.write_text("[deployment\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^deployment file '.*broken.toml' is not valid TOML"):
        load_deployment_file(str(broken))
    assert merge_deployment_tables({"a": 1, "b": 2}, None, {"b": 3}) == {"a": 1, "b": 3}
