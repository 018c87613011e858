"""``dplens report SPEC --ledger DB``: the budget ledger's cumulative section in the JSON (validated, round trip),
the privacy statement and the HTML page, rendered in headless Chromium (table values and the spend figure)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dplens
from dplens.cli import main
from dplens.ledger import Ledger, Mode, Period
from dplens.reports.format import fmt_lower, fmt_upper
from dplens.reports.model import Report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _ledger(path: Path) -> Path:
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(name="yearly", unit="one person", epsilon=2.0, delta=1e-6)
        ledger.create_budget(
            name="monthly", unit="one person", epsilon=1.0, delta=1e-6, mode=Mode.ADAPTIVE, period=Period.MONTH
        )
        for day in (3, 9, 17, 30, 40, 52):
            when = dt.datetime(2026, 9, 1, 12, tzinfo=dt.UTC) + dt.timedelta(days=day)
            assert ledger.charge(dplens.Gaussian(noise_multiplier=15.0), release=f"day-{day}", time=when).accepted
    return path


def test_report_with_a_ledger_section(tmp_path, capsys):
    db = _ledger(tmp_path / "ledger.db")
    out = tmp_path / "report"
    code = main(["report", str(EXAMPLES / "gaussian_claim.toml"), "-o", str(out), "--no-audit", "--ledger", str(db)])
    capsys.readouterr()
    assert code == 0
    data = json.loads((out / "report.json").read_text())
    report = Report.from_dict(data)  # validated against the schema
    assert Report.from_dict(report.to_dict()) == report
    book = data["budget_ledger"]
    assert [b["name"] for b in book["budgets"]] == ["monthly", "yearly"]
    monthly, yearly = book["budgets"]
    assert [p["period"] for p in monthly["periods"]] == ["2026-09", "2026-10"]
    assert yearly["releases_count"] == 6 and len(yearly["periods"][0]["history"]) == 6
    history = [p["spent_epsilon"] for p in yearly["periods"][0]["history"]]
    assert history == sorted(history) and history[-1] == yearly["periods"][0]["spent_epsilon"] <= 2.0
    with Ledger.open(db) as ledger:  # the report shows what status says
        assert ledger.status().budgets[1].spent_epsilon == yearly["spent_epsilon"]
    assert any(f["name"] == "budget_ledger" for f in data["figures"]) and (out / "budget_ledger.png").is_file()
    statement = (out / "privacy-statement.txt").read_text()
    assert "Budget ledger" in statement and f"spent ε ≤ {fmt_upper(yearly['spent_epsilon'])} (UPPER BOUND)" in statement


def test_a_report_without_a_ledger_has_no_section(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(EXAMPLES / "gaussian_claim.toml"), "-o", str(out), "--no-audit"]) == 0
    capsys.readouterr()
    assert "budget_ledger" not in json.loads((out / "report.json").read_text())


def test_a_bad_ledger_fails_the_report_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.db"
    bad.write_text("not a ledger")
    out = tmp_path / "report"
    code = main(
        ["report", str(EXAMPLES / "gaussian_claim.toml"), "-o", str(out), "--no-audit", "--quiet", "--ledger", str(bad)]
    )
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "not a dplens budget ledger" in err
    assert not (out / "report.json").exists()


def test_the_ledger_section_renders_in_chromium(tmp_path, capsys, render):
    db = _ledger(tmp_path / "ledger.db")
    out = tmp_path / "report"
    assert (
        main(["report", str(EXAMPLES / "gaussian_claim.toml"), "-o", str(out), "--no-audit", "--ledger", str(db)]) == 0
    )
    capsys.readouterr()
    data = json.loads((out / "report.json").read_text())
    page = render(out / "report.html")
    assert page.network_requests == [] and page.console_errors == []
    assert "Budget ledger: cumulative spend" in page.text
    rows = [(b, p) for b in data["budget_ledger"]["budgets"] for p in b["periods"]]
    for index, (_, period) in enumerate(rows, start=1):
        assert float(page.values[f"ledger-spent-{index}"]) == period["spent_epsilon"]
        assert float(page.values[f"ledger-remaining-{index}"]) == period["remaining_epsilon"]
        assert f"≤ {fmt_upper(period['spent_epsilon'])}" in page.text
        assert f"≥ {fmt_lower(period['remaining_epsilon'])}" in page.text
    assert len(page.images) == len(data["figures"]) and all(i["complete"] and i["width"] > 0 for i in page.images)
    assert "budget_ledger.png" in page.text
