"""The command line: ``dplens registry check`` (a line per record, ``--json``, ``--strict``, ``--schema``),
``dplens registry export``, and ``dplens report`` writing ``registry-entry.yaml``. Bad input — malformed YAML, wrong
types, unknown enumeration values, a 100 MB file, a directory of mixed files, an incomplete [deployment] table —
gives one line each on stderr, exit 2, nothing on stdout and no file written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dplens import cli
from dplens.cli import main
from dplens.registry.check import DEFAULT_DERIVE_DELTA
from dplens.registry.schema import RECORD_SCHEMA, validate_record
from dplens.registry.yamlio import parse_yaml_text

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
MALFORMED = HERE / "malformed"
EXAMPLES = HERE.parents[1] / "examples"

SPEC = """name = "Counts"
description = "Noisy counts."

[[mechanism]]
type = "gaussian"
noise_multiplier = 2.0
count = 4
"""
DEPLOYMENT = """
[deployment]
data_curators = ["Example Agency"]
intended_use = "Planning."
data_product_type = "Summary statistics"
data_product_region = "Atlantis"
publication_date = 2025-03-01
"""


def run(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def refused(code, out, err, lines=1):
    """Exit 2, nothing on stdout, exactly ``lines`` lines on stderr, each one error, no traceback."""
    errors = err.splitlines()
    return (
        code == 2
        and out == ""
        and len(errors) == lines
        and all(line.startswith("dplens: error: ") for line in errors)
        and "Traceback" not in err
    )


def test_the_command_line_default_delta_is_the_library_s():
    assert cli.DEFAULT_DERIVE_DELTA == DEFAULT_DERIVE_DELTA


# ---- registry check --------------------------------------------------------------------------------


def test_a_line_per_record_and_a_summary(capsys):
    code, out, err = run(capsys, ["registry", "check", RECORDS])
    lines = out.splitlines()
    names = sorted(p.name for p in RECORDS.glob("*.yaml"))
    assert code == 0 and err == ""
    assert [line.split(":")[0] for line in lines[:-1]] == names
    assert lines[-1].startswith(f"dplens registry check: {len(names)} record(s): 3 inconsistent, 1 needs citation")
    dhc = next(line for line in lines if line.startswith("zcdp_rho_epsilon_delta.yaml"))
    assert "VALID" in dhc and "stated epsilon = 26.34" in dhc and "epsilon <= 25.42" in dhc


def test_json_strict_delta_and_schema(capsys, tmp_path):
    code, out, _ = run(capsys, ["registry", "check", RECORDS / "zcdp_rho_only.yaml", "--json", "--delta", "1e-5"])
    data = json.loads(out)
    assert code == 0 and data["delta_for_derived_epsilon"] == 1e-5
    (record,) = data["records"]
    assert record["status"] == "derived" and record["checks"][0]["values"]["delta"] == 1e-5
    assert data["counts"]["derived"] == 1 and data["errors"] == []
    assert run(capsys, ["registry", "check", RECORDS, "--strict"])[0] == 1  # inconsistent records
    assert run(capsys, ["registry", "check", RECORDS / "zcdp_rho_only.yaml", "--strict"])[0] == 0
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(RECORD_SCHEMA), encoding="utf-8")
    code, out, _ = run(capsys, ["registry", "check", RECORDS, "--schema", schema, "--json"])
    assert code == 0 and json.loads(out)["schema"] == "custom schema"
    schema.write_text(json.dumps({"type": "object", "required": ["nope"]}), encoding="utf-8")
    code, out, err = run(capsys, ["registry", "check", RECORDS / "zcdp_rho_only.yaml", "--schema", schema])
    assert refused(code, out, err) and "'nope' is a required property" in err


@pytest.mark.parametrize("path", sorted(MALFORMED.iterdir()), ids=lambda p: p.name)
def test_each_malformed_file_is_one_line(capsys, path):
    code, out, err = run(capsys, ["registry", "check", path])
    assert refused(code, out, err)
    assert repr(str(path)) in err


def test_the_messages_say_what_is_wrong(capsys):
    expected = {
        "unclosed_bracket.yaml": "is not a valid registry record: expected ',' or ']'",
        "tier_is_text.yaml": "does not match the registry schema: tier: 'two' is not of type 'integer'",
        "unknown_product_type.yaml": (
            "deployment.basic.data_product_type: 'Spreadsheet' is not one of ['Summary statistics', "
            "'Machine learning model'"
        ),
        "unquoted_date.yaml": "publication_date: datetime.date(2025, 1, 1) is not of type 'string'",
        "epsilon_is_text.yaml": "privacy_parameters.epsilon: 'about one' is not of type 'number'",
        "aliases.yaml": "YAML aliases are not allowed",
        "duplicate_key.yaml": "duplicate key 'url_slug' (line 2)",
        "not_a_mapping.yaml": "its top level is not a mapping",
        "not_utf8.yaml": "is not UTF-8 text",
    }
    assert sorted(expected) == sorted(p.name for p in MALFORMED.iterdir())
    for name, words in expected.items():
        _, _, err = run(capsys, ["registry", "check", MALFORMED / name])
        assert words in err, (name, err)


def test_a_100_mb_file_is_refused_by_its_size_before_parsing(capsys, tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:  # sparse: 100 MB on paper, nothing on disk, and never read
        handle.truncate(100 * 2**20)
    code, out, err = run(capsys, ["registry", "check", big])
    assert refused(code, out, err) and "is larger than 1 MiB" in err


def test_a_directory_of_mixed_files_gives_a_line_per_bad_file(capsys, tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in ("zcdp_rho_only.yaml", "pure_dp_with_delta.yaml"):
        (mixed / name).write_bytes((RECORDS / name).read_bytes())
    (mixed / "broken.yaml").write_bytes((MALFORMED / "unclosed_bracket.yaml").read_bytes())
    (mixed / "enum.yml").write_bytes((MALFORMED / "unknown_product_type.yaml").read_bytes())
    (mixed / "notes.txt").write_text("not a record", encoding="utf-8")
    with open(mixed / "huge.yaml", "wb") as handle:
        handle.truncate(100 * 2**20)
    (mixed / ".hidden").write_text("ignored", encoding="utf-8")
    (mixed / "sub").mkdir()
    before = sorted(p.name for p in mixed.iterdir())
    code, out, err = run(capsys, ["registry", "check", mixed, "--json"])
    assert refused(code, out, err, lines=4)
    for name in ("broken.yaml", "enum.yml", "notes.txt", "huge.yaml"):
        assert sum(name in line for line in err.splitlines()) == 1, name
    assert sorted(p.name for p in mixed.iterdir()) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(capsys, ["registry", "check", empty])
    assert refused(code, out, err) and "holds no .yaml/.yml record" in err
    code, out, err = run(capsys, ["registry", "check", tmp_path / "missing.yaml"])
    assert refused(code, out, err) and "registry record not found" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["registry"],
        ["registry", "check"],
        ["registry", "check", "x.yaml", "--delta", "0"],
        ["registry", "check", "x.yaml", "--delta", "abc"],
        ["registry", "frobnicate"],
        ["registry", "export"],
    ],
)
def test_argument_errors(capsys, argv):
    assert refused(*run(capsys, argv))


def test_a_real_process_reads_a_bad_record_without_a_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "dplens.cli", "registry", "check", str(MALFORMED / "unclosed_bracket.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.stderr


# ---- dplens report and registry export --------------------------------------------------------------


@pytest.fixture
def specs(tmp_path):
    (tmp_path / "with.toml").write_text(SPEC + DEPLOYMENT, encoding="utf-8")
    (tmp_path / "without.toml").write_text(SPEC, encoding="utf-8")
    partial = DEPLOYMENT.replace('intended_use = "Planning."\n', "")
    (tmp_path / "partial.toml").write_text(SPEC + partial, encoding="utf-8")
    (tmp_path / "enum.toml").write_text(SPEC + DEPLOYMENT + 'access_type = "sometimes"\n', encoding="utf-8")
    (tmp_path / "notes.toml").write_text(SPEC + DEPLOYMENT + 'notes = "n"\n', encoding="utf-8")
    laplace = SPEC.replace('type = "gaussian"\nnoise_multiplier = 2.0', 'type = "laplace"\nscale = 2.0')
    (tmp_path / "zcdp.toml").write_text(laplace + DEPLOYMENT + 'variant_name = "Zero-concentrated DP"\n', "utf-8")
    return tmp_path


def test_report_writes_the_record_with_its_tier(capsys, specs):
    out_dir = specs / "out"
    code, out, err = run(capsys, ["report", specs / "with.toml", "-o", out_dir, "--no-audit", "--quiet"])
    assert code == 0, err
    line, last = out.splitlines()[-2:]
    assert line.startswith("dplens report: wrote ") and "registry-entry.yaml (registry tier 1; tier 2 needs" in line
    assert last == f"dplens report: wrote {(out_dir / 'report.html').resolve()}"
    record = parse_yaml_text((out_dir / "registry-entry.yaml").read_text(encoding="utf-8"), name="r")
    assert validate_record(record) == [] and record["tier"] == 1
    assert record["deployment"]["basic"]["name"] == "Counts"  # the spec's name
    assert record["deployment"]["privacy_loss"]["privacy_parameters"]["rho"] == 0.5
    report = json.loads((out_dir / "report.json").read_text(encoding="utf-8"))
    assert report["deployment"]["data_curators"] == ["Example Agency"]
    # the same record from the saved report
    code, exported, _ = run(capsys, ["registry", "export", out_dir / "report.json"])
    assert code == 0 and exported == (out_dir / "registry-entry.yaml").read_text(encoding="utf-8")


def test_report_without_the_table_says_why_no_record(capsys, specs):
    out_dir = specs / "out"
    code, out, _ = run(capsys, ["report", specs / "without.toml", "-o", out_dir, "--no-audit", "--quiet"])
    assert code == 0
    assert "registry-entry.yaml not written: the spec has no [deployment] table (a registry record needs name" in out
    assert (out_dir / "report.json").exists() and not (out_dir / "registry-entry.yaml").exists()
    code, out, err = run(capsys, ["registry", "export", out_dir / "report.json", "-o", specs / "entry.yaml"])
    assert refused(code, out, err) and "the report has no [deployment] table" in err
    assert not (specs / "entry.yaml").exists()


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("partial.toml", "the registry record needs [deployment] intended_use; registry-entry.yaml was not written"),
        ("enum.toml", "[deployment] access_type must be one of ['Interactive', 'Non-interactive']; got 'sometimes'"),
        ("notes.toml", "the registry record needs [deployment] registry_authors (who wrote this record)"),
        ("zcdp.toml", "variant_name 'Zero-concentrated DP' needs rho, which dplens derives only for"),
    ],
)
def test_report_with_a_bad_table_writes_nothing(capsys, specs, spec, words):
    out_dir = specs / "out"
    # refused before any work: with an audit requested, nothing runs either
    code, out, err = run(capsys, ["report", specs / spec, "-o", out_dir, "--trials", "10000000", "--quiet"])
    assert refused(code, out, err) and words in err
    assert not out_dir.exists()


def test_deployment_files_fill_in_the_record(capsys, specs):
    extra = specs / "extra.toml"
    extra.write_text(
        '[deployment]\nmodel_name = "Central"\nrelease_type = "One release"\n'
        'data_source_type = "Static"\naccess_type = "Non-interactive"\n',
        encoding="utf-8",
    )
    out_dir = specs / "out"
    code, out, _ = run(
        capsys, ["report", specs / "partial.toml", "-o", out_dir, "--no-audit", "--quiet", "--deployment", extra]
    )
    assert code != 0  # intended_use is still missing
    (specs / "use.json").write_text('{"intended_use": "Planning."}', encoding="utf-8")
    code, out, err = run(
        capsys,
        ["report", specs / "partial.toml", "-o", out_dir, "--no-audit", "--quiet", "--deployment", specs / "use.json"],
    )
    assert code == 0, err
    code, out, err = run(
        capsys, ["registry", "export", out_dir / "report.json", "--deployment", extra, "-o", specs / "entry.yaml"]
    )
    assert code == 0 and "(tier 2; tier 3 needs [deployment] data_domain" in out, err
    record = yaml.safe_load((specs / "entry.yaml").read_text(encoding="utf-8"))
    assert record["tier"] == 2 and record["deployment"]["deployment_model"]["model_name"] == "Central"
    bad = specs / "bad.toml"
    bad.write_text('[deployment]\nrelease_type = "twice"\n', encoding="utf-8")
    code, out, err = run(
        capsys, ["registry", "export", out_dir / "report.json", "--deployment", bad, "-o", specs / "e2.yaml"]
    )
    assert refused(code, out, err) and "release_type must be one of ['One release', 'Many releases']" in err
    assert not (specs / "e2.yaml").exists()


def test_export_refuses_bad_reports_and_outputs(capsys, specs):
    for content, words in (("{", "is not valid JSON"), ('{"format": "x"}', "not a dplens report")):
        (specs / "r.json").write_text(content, encoding="utf-8")
        code, out, err = run(capsys, ["registry", "export", specs / "r.json"])
        assert refused(code, out, err) and words in err
    code, out, err = run(capsys, ["registry", "export", specs / "nope.json"])
    assert refused(code, out, err) and "report file not found" in err
    code, out, err = run(capsys, ["registry", "export", specs / "r.json", "-o", specs / "missing" / "e.yaml"])
    assert refused(code, out, err) and "does not exist" in err


def test_the_parser_and_the_deployment_table_load_no_numpy():
    code = (
        "import sys\n"
        "from dplens.cli import main\n"
        "for argv in (['registry', '--help'], ['registry', 'check'], ['registry', 'export', '--frobnicate']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "import dplens.registry.deployment, dplens.registry.fields\n"
        "print(' '.join(m for m in ('numpy', 'scipy', 'yaml', 'jsonschema') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.splitlines()[-1].strip() == ""
