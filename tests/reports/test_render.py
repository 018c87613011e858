"""Rendering: canonical JSON (validated on write and read), atomic files, escaped self-contained HTML, the
plain-text privacy statement, rounding that never flatters, and the template shipped as package data."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dplens.reports import render
from dplens.reports.format import fmt_estimate, fmt_lower, fmt_upper
from dplens.reports.render import (
    atomic_write_text,
    read_json,
    render_html,
    render_statement,
    to_canonical_json,
    write_json,
    write_report,
)
from dplens.reports.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]


# ---- rounding ---------------------------------------------------------------------------------


@given(st.floats(min_value=1e-12, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_upper_bounds_round_up_and_lower_bounds_round_down(value):
    assert Decimal(fmt_upper(value)) >= Decimal(repr(value))
    assert Decimal(fmt_lower(value)) <= Decimal(repr(value))
    assert abs(Decimal(fmt_estimate(value)) - Decimal(repr(value))) <= abs(Decimal(repr(value))) * Decimal("1e-3")


def test_formatting_examples():
    assert fmt_upper(1.9997251) == "2.000"
    assert fmt_upper(4.377178) == "4.378"  # 4.377 would understate the bound
    assert fmt_lower(2.5469) == "2.546"  # 2.547 would overstate the lower bound
    assert fmt_upper(float("inf")) == "∞" and fmt_upper(None) == "n/a" and fmt_upper(0.0) == "0"
    assert render.percent(0.95) == "95%" and render.percent(0.999) == "99.9%"


# ---- JSON ----------------------------------------------------------------------------------


def test_canonical_json_is_sorted_deterministic_and_strict(audited_report, tmp_path):
    text = to_canonical_json(audited_report)
    assert text == to_canonical_json(audited_report)
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert "NaN" not in text and text.endswith("\n")
    path = write_json(audited_report, tmp_path / "r.json")
    assert read_json(path) == audited_report


def test_read_rejects_bad_files_clearly(audited_report, tmp_path):
    good = json.loads(to_canonical_json(audited_report))
    cases = {
        "version.json": (json.dumps(good | {"schema_version": 99}), "unsupported report schema_version 99"),
        "missing.json": (json.dumps({k: v for k, v in good.items() if k != "verdict"}), "'verdict'"),
        "broken.json": ("{not json", "not valid JSON"),
        "nan.json": (to_canonical_json(audited_report).replace('"ceiling": 10.21', '"ceiling": NaN'), "NaN"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            read_json(tmp_path / name)
    with pytest.raises(ValueError, match="not found"):
        read_json(tmp_path / "absent.json")


def test_write_validates_before_writing(audited_report, tmp_path, monkeypatch):
    bad = audited_report.to_dict()
    bad["schema_version"] = SCHEMA_VERSION + 1
    monkeypatch.setattr(type(audited_report), "to_dict", lambda self: bad)
    with pytest.raises(ValueError, match="schema_version"):
        write_report(audited_report, tmp_path / "out", with_figures=False)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    atomic_write_text(target, "old complete report\n")

    def interrupted(fd):
        raise KeyboardInterrupt  # e.g. Ctrl-C after the bytes were handed to the OS, before the rename

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "new report " * 10_000)
    assert target.read_text() == "old complete report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_written_files_are_readable_by_others(audited_report, tmp_path):
    old = os.umask(0o022)
    try:
        files = write_report(audited_report, tmp_path / "out", with_figures=False)
    finally:
        os.umask(old)
    assert files.json.stat().st_mode & 0o777 == 0o644


# ---- HTML ----------------------------------------------------------------------------------


def test_html_escapes_special_characters(audited_report):
    page = render_html(audited_report)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#34;quotes&#34;" in page
    assert "one patient &lt;record&gt; &amp; their visits" in page


def test_html_is_self_contained(audited_report, tmp_path):
    files = write_report(audited_report, tmp_path)
    page = files.html.read_text(encoding="utf-8")
    # every URL-bearing attribute is a data: URI or an in-page anchor; a CSP forbids anything else
    urls = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page)
    assert urls and all(u.startswith(("data:", "#")) for u in urls), urls
    assert "default-src 'none'" in page and "<script" not in page
    assert "@import" not in page and "url(" not in page
    assert page.count('src="data:image/png;base64,') == len(files.report.figures) == 5


def test_html_labels_bounds_and_estimates(audited_report):
    page = render_html(audited_report)
    assert "ε (upper bound)" in page and "TIGHTEST" in page
    assert page.count("ESTIMATE — NOT A BOUND") == 2
    assert "LOWER BOUND, 95%" in page


# ---- privacy statement -----------------------------------------------------------------------


def test_statement_says_what_against_what_and_under_which_assumptions(audited_report, unaudited_report):
    text = " ".join(render_statement(audited_report).split())  # ignore line wrapping
    acc = audited_report.accounting
    assert "What is protected: one patient <record> & their visits" in text
    assert "Against what: any adversary" in text
    assert f"ε ≤ {fmt_upper(acc.epsilon)} at δ = 1e-05" in text and "UPPER BOUND" in text
    assert "Sampling assumption: no subsampling" in text
    assert "Adjacency assumption" in text and "add/remove adjacency" in text
    assert f"AT LEAST {fmt_lower(audited_report.audit.epsilon_lower_bound)}" in text and "LOWER BOUND" in text
    assert text.count("ESTIMATE, not a bound") == 2
    assert "does NOT certify" in text and "VIOLATION" in text
    other = " ".join(render_statement(unaudited_report).split())
    assert "NOT AUDITED" in other and "Poisson sampling with rate q = 0.005" in other


def test_write_report_files(audited_report, tmp_path):
    files = write_report(audited_report, tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == sorted(
        ["report.json", "report.html", "privacy-statement.txt"] + [f.file for f in files.report.figures]
    )
    assert read_json(files.json) == files.report
    assert files.statement.read_text(encoding="utf-8") == render_statement(files.report)


# ---- packaging -------------------------------------------------------------------------------


def test_templates_ship_as_package_data(tmp_path):
    # The report's and the reproductions' templates. What a non-editable `pip install .` installs is what
    # setuptools' build_py collects from pyproject.toml (packages + package-data). Run it on a copy of the project
    # so the checkout is untouched.
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    proc = subprocess.run(
        [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py", "--build-lib", "built"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    built = tmp_path / "built" / "dplens"
    assert (built / "reports" / "templates" / "report.html.j2").is_file()
    assert (built / "reports" / "templates" / "reproductions_index.html.j2").is_file()
    assert (built / "reports" / "render.py").is_file()
    for mechanism in ("bcdp", "corrdp", "dp_ftrl", "feature_dp", "gaussmix"):  # the reproductions' README templates
        assert (built / "research" / mechanism / "templates" / "README.md.j2").is_file()
