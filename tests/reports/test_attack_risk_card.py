"""The report's attack-risk card: the accountant's numbers (never the report's own), rounded up, in the HTML card, the
figure with the audit's point, the privacy statement, the NIST section and the registry record; old reports without
it still read."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser

import pytest

from dplens._api import report_summary
from dplens.accountant.risk import DEFAULT_FPRS, attack_risk
from dplens.reports import plots
from dplens.reports.build import build_report
from dplens.reports.model import Report
from dplens.reports.render import render_html, render_statement, to_canonical_json
from dplens.reports.risk_card import percent_upper, risk_points
from dplens.spec import load_spec

from .conftest import EXAMPLES, FIXED_TIME


class _Values(HTMLParser):
    """id → data-value of every element that has both."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "id" in attributes and "data-value" in attributes:
            self.values[attributes["id"]] = attributes["data-value"]


@pytest.fixture(scope="module")
def mnist_report() -> Report:
    spec = load_spec(EXAMPLES / "dp_sgd_mnist.toml")
    return build_report(
        spec=spec,
        accounting=report_summary(spec, 1e-5),
        title="MNIST",
        not_audited_reason="test",
        created_utc=FIXED_TIME,
        command=("dplens", "report"),
    )


def test_the_card_holds_the_accountants_numbers(mnist_report):
    risk = mnist_report.accounting.attack_risk
    expected = attack_risk(load_spec(EXAMPLES / "dp_sgd_mnist.toml").accountant(), fprs=DEFAULT_FPRS)
    assert risk["fprs"] == list(DEFAULT_FPRS)
    assert [risk["tpr_upper"][repr(f)] for f in DEFAULT_FPRS] == list(expected.tpr_upper)
    assert risk["advantage_upper"] == expected.advantage_upper and risk["is_upper_bound"] is True
    assert len(risk["curve"]) > 50 and all(p["tpr_lower"] <= p["tpr_upper"] for p in risk["curve"])
    again = Report.from_dict(json.loads(to_canonical_json(mnist_report)))
    assert again.accounting.attack_risk == risk


def test_html_card_shows_upper_bounds_rounded_up(mnist_report):
    html = render_html(mnist_report)
    assert 'id="attack-risk-card"' in html and "Attack risk" in html
    parser = _Values()
    parser.feed(html)
    risk = mnist_report.accounting.attack_risk
    for index, point in enumerate(risk_points(risk), start=1):
        assert float(parser.values[f"tpr-upper-{index}"]) == point["tpr_upper"]
        shown = percent_upper(point["tpr_upper"])
        assert shown in html and float(shown.rstrip(" %")) / 100 >= point["tpr_upper"]
    assert float(parser.values["advantage-upper"]) == risk["advantage_upper"]
    assert "4.022 %" in html and "0.6053 %" in html and "23.97 %" in html  # rounded up, never down


def test_statement_and_nist_say_it_in_words(mnist_report):
    statement = render_statement(mnist_report)
    flat = " ".join(statement.split())
    assert "Attack risk (what the guarantee means for membership inference)" in flat
    assert "wrongly flags 0.1 % of the units that are not, flags at most 0.6053 % of those that are" in flat
    assert "at 1 % false positives, at most 4.022 %" in flat and "at most 0.2246" in flat
    finding = mnist_report.nist.item("privacy_parameters").finding
    assert "in terms of attacks: no membership attack reaches a true-positive rate above 0.6053 %" in finding
    assert "Attack risk" in mnist_report.nist.item("privacy_parameters").where


def test_figure_draws_the_curve_and_the_audits_point(audited_report):
    assert plots._FIGURES[0][:2] == ("attack_risk", "attack_risk.png")
    data = plots.attack_risk_figure(audited_report)
    assert data is not None and data.startswith(b"\x89PNG")
    assert plots.attack_risk_figure(audited_report) == data  # deterministic bytes


def test_a_report_without_the_card_still_reads_and_renders(unaudited_report):
    data = copy.deepcopy(unaudited_report.to_dict())
    del data["accounting"]["attack_risk"]
    old = Report.from_dict(data)
    assert old.accounting.attack_risk is None
    html = render_html(old)
    assert 'id="attack-risk-card"' not in html and "Attack risk (what" not in render_statement(old)
    assert plots.attack_risk_figure(old) is None


def test_a_report_with_a_broken_card_is_refused(mnist_report):
    data = copy.deepcopy(mnist_report.to_dict())
    data["accounting"]["attack_risk"]["is_upper_bound"] = False
    with pytest.raises(ValueError, match=re.escape("attack_risk.is_upper_bound")):
        Report.from_dict(data)
    data["accounting"]["attack_risk"]["is_upper_bound"] = True
    data["accounting"]["attack_risk"]["tpr_upper"]["0.01"] = 1.5
    with pytest.raises(ValueError, match=re.escape("attack_risk.tpr_upper.0.01")):
        Report.from_dict(data)
