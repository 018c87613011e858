"""Against a copy of the real registry (``opendp/deployments-registry-data``): its own schema, every public record,
its good and bad examples. CI has no network, so these run when ``DPLENS_REGISTRY_DATA`` names a checkout (or an
export: ``git archive HEAD | tar -x -C DIR``) and are skipped with one line otherwise.

- dplens's schema is the registry's, field for field (types, enumerations, required fields, closed objects), so a
  record one accepts the other accepts;
- every record dplens exports from the examples validates against the registry's own schema with its format checker;
- ``dplens registry check`` reads every public record without a traceback, a line per record; the 2020 Census DHC
  person tables (rho = 4.96, stated epsilon = 26.34 at delta = 1e-10) are valid, with the tighter 25.41;
- the registry's own test suite (``tests/``: its schema, ``test_updated_slugs``, ``test_real_yaml``'s YAML checks, key
  order) passes on a copy of it with the two examples' records added under the file names dplens suggests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from jsonschema import Draft7Validator

import dplens
from dplens._api import default_delta, report_summary
from dplens.registry.check import CheckStatus, check_records
from dplens.registry.schema import RECORD_SCHEMA, load_schema_file, validate_record
from dplens.reports.registry_entry import export_entry, registry_file_name

ENV = "DPLENS_REGISTRY_DATA"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def registry() -> Path:
    root = os.environ.get(ENV)
    if not root:
        pytest.skip(f"{ENV} is not set: point it to a copy of opendp/deployments-registry-data to run these")
    path = Path(root)
    if not (path / "schemas" / "deployments-schema.yaml").is_file():
        pytest.fail(f"{ENV}={root!r} holds no schemas/deployments-schema.yaml")
    return path


@pytest.fixture(scope="module")
def schema(registry) -> dict:
    return load_schema_file(registry / "schemas" / "deployments-schema.yaml")


def _shape(schema: dict, path: str = "") -> dict[str, tuple]:
    """Each property path of a schema with what a validator checks there (annotations such as tier are not)."""
    types = schema.get("type")
    out = {
        path: (
            tuple(types) if isinstance(types, list) else types,
            tuple(schema.get("enum", ())),
            tuple(schema.get("required", ())),
            schema.get("additionalProperties", True),
            schema.get("format"),
            schema.get("minItems"),
            None if "items" not in schema else schema["items"].get("type"),
        )
    }
    for key, sub in schema.get("properties", {}).items():
        out |= _shape(sub, f"{path}/{key}")
    return out


def test_dplens_schema_is_the_registry_schema_field_for_field(schema):
    theirs, ours = _shape(schema), _shape(RECORD_SCHEMA)
    assert sorted(theirs) == sorted(ours)
    for path, (types, enum, required, additional, fmt, min_items, items) in theirs.items():
        our = ours[path]
        # where the registry leaves a field untyped, dplens says string: stricter, never looser
        assert our[0] == types or (types is None and our[0] == "string"), path
        assert (our[1], sorted(our[2]), our[3], our[4], our[5], our[6]) == (
            enum,
            sorted(required),
            additional,
            fmt,
            min_items,
            items,
        ), path


def test_every_public_record_is_checked_without_a_traceback(registry):
    records = sorted((registry / "deployments").glob("*.yaml"))
    assert len(records) >= 40
    done = subprocess.run(
        [sys.executable, "-m", "dplens.cli", "registry", "check", str(registry / "deployments")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(records) + 1  # a line per record and the summary
    assert [line.split(":")[0] for line in lines[:-1]] == [p.name for p in records]
    assert "Traceback" not in done.stdout
    # with the registry's own schema too
    result = check_records(
        [registry / "deployments"], schema=load_schema_file(registry / "schemas" / "deployments-schema.yaml")
    )
    assert not result.errors and len(result.records) == len(records)


def test_census_dhc_person_tables_are_valid_with_the_tighter_epsilon(registry):
    (result,) = check_records([registry / "deployments" / "census_demographic_and_housing.yaml"]).records
    assert result.status is CheckStatus.VALID
    person = next(c for c in result.checks if c.label == "Person Tables")
    assert person.status is CheckStatus.VALID
    assert (person.values["rho"], person.values["epsilon_stated"], person.values["delta"]) == (4.96, 26.34, 1e-10)
    assert round(person.values["epsilon_optimal"], 2) == 25.41 and round(person.values["epsilon_classic"], 2) == 26.33


def test_exported_example_records_pass_the_registry_schema(schema):
    validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
    paths = [p for p in sorted(EXAMPLES.glob("*.toml")) if "deployment" in tomllib.loads(p.read_text())]
    assert len(paths) >= 2
    for path in paths:
        spec = dplens.load_spec(path)
        report = dplens.build_report(
            spec=spec, accounting=report_summary(spec, default_delta(spec)), title=path.stem, not_audited_reason="test"
        )
        record = export_entry(report).record
        assert list(validator.iter_errors(record)) == [], path.name


def test_the_registry_examples_agree_with_dplens_validation(registry, schema):
    # its good examples pass both schemas; its bad examples that are schema errors fail both
    for path in sorted((registry / "tests" / "good_deployments").glob("*.yaml")):
        result = check_records([path])
        assert not result.errors, result.errors
    for path in sorted((registry / "tests" / "bad_deployments").glob("check_schema_*.yaml")):
        assert check_records([path]).errors, path.name
        assert check_records([path], schema=schema).errors, path.name
    assert validate_record({}) and validate_record({}, schema=schema)


def _example_entries() -> list:
    paths = [p for p in sorted(EXAMPLES.glob("*.toml")) if "deployment" in tomllib.loads(p.read_text())]
    assert len(paths) >= 2
    entries = []
    for path in paths:
        spec = dplens.load_spec(path)
        report = dplens.build_report(
            spec=spec, accounting=report_summary(spec, default_delta(spec)), title=path.stem, not_audited_reason="test"
        )
        entries.append(export_entry(report))
    return entries


def test_exported_records_start_with_their_slug_line():
    # the registry's update_slug reads `^url_slug: (.*)` from the start of the file (no comment may come first)
    for entry in _example_entries():
        text = entry.to_yaml()
        first, second = text.splitlines()[:2]
        assert first == f"url_slug: {entry.record['url_slug']}" and second.startswith("# Written by dplens")
        assert f"deployments/{registry_file_name(entry.record['url_slug'])}" in text


def test_the_registrys_own_suite_passes_with_the_examples_records(registry, tmp_path):
    """The registry's CI (``.github/workflows/test.yml``) on a copy with the examples' records added: its pre-commit
    file hooks (check-yaml, end-of-file-fixer, trailing-whitespace; checked here, the hooks need the network), then
    ``python scripts/check.py --skip check_urls`` and ``pytest``."""
    import yaml

    copy = tmp_path / "registry"
    shutil.copytree(registry, copy, ignore=shutil.ignore_patterns(".git"))
    for entry in _example_entries():
        path = copy / "deployments" / registry_file_name(entry.record["url_slug"])
        text = entry.to_yaml()
        assert text.endswith("\n") and not text.endswith("\n\n"), path.name  # end-of-file-fixer
        assert not [line for line in text.splitlines() if line != line.rstrip()], path.name  # trailing-whitespace
        assert yaml.safe_load(text)["url_slug"] == entry.record["url_slug"]  # check-yaml
        path.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    for command in (
        [sys.executable, "scripts/check.py", "--skip", "check_urls"],
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
    ):
        done = subprocess.run(command, cwd=copy, capture_output=True, text=True, timeout=600, check=False, env=env)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-2000:])
