"""The HTML report is a page people read: no Python reprs in it, and the calibration table's numbers formatted
like the rest of the page (bounds rounded on their safe side, parameters as the command line prints them)."""

from __future__ import annotations

import html
import re

import pytest

import dplens
from dplens._api import report_summary
from dplens.accountant.rdp import UnsupportedEventError
from dplens.accountant.summary import plain_reason
from dplens.reports.build import build_report
from dplens.reports.format import fmt_lower, fmt_upper
from dplens.reports.render import render_html

from .conftest import EXAMPLES, FIXED_TIME

# What Python syntax looks like when it leaks into a page: a dataclass repr `Name(field=`, an enum repr
# `<Enum.MEMBER: 'value'>`, a tuple/dict repr of strings, or a float with more digits than any shown number.
_REPRS = {
    "dataclass repr": re.compile(r"\b[A-Z][A-Za-z0-9]*\((?:[a-z_]+=)"),
    "enum repr": re.compile(r"<[A-Z][A-Za-z]*\.[A-Z_]+: "),
    "container repr": re.compile(r"[\[(]'[^']*', '"),
}
_FLOAT = re.compile(r"(?<![\w.])\d+\.\d+")


def _unrounded(text: str) -> list[str]:
    """Reals shown with more than 10 significant digits: a float's repr, not a formatted number."""
    return [m for m in _FLOAT.findall(text) if len(m.replace(".", "").lstrip("0")) > 10]


def _visible_text(page: str) -> str:
    """The page's text as a reader sees it: tags, attributes and the embedded ledger JSON removed."""
    page = re.sub(r"<details><summary>ledger.*?</details>", "", page, flags=re.S)
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _leaks(text: str) -> dict[str, list[str]]:
    found = {name: pattern.findall(text) for name, pattern in _REPRS.items() if pattern.search(text)}
    if _unrounded(text):
        found["unrounded float"] = _unrounded(text)
    return found


def test_the_repr_detector_detects_reprs():
    # negative control: the line the report printed before (a raw event repr) is caught
    before = (
        "Routes that do not apply: exact (no exact privacy profile is known for event SelfComposed(event="
        "PoissonSampled(sampling_rate=0.004266666666666667, event=Gaussian(noise_multiplier=1.1, neighboring="
        "<NeighboringRelation.ADD_OR_REMOVE_ONE: 'add_remove'>)), count=14063))"
    )
    assert set(_leaks(before)) == {"dataclass repr", "enum repr", "unrounded float"}
    assert _leaks("ε ≤ 2.383 at δ = 1e-05 (Poisson-sampled Gaussian)") == {}


def test_readable_turns_a_mechanism_repr_into_words():
    from dplens.reports.format import readable

    text = readable("Gaussian(noise_multiplier=1.0, neighboring=<NeighboringRelation.REPLACE_ONE: 'replace_one'>)")
    assert text == "Gaussian (noise_multiplier = 1.0, neighboring = replace_one)"
    assert _leaks(text) == {}
    assert readable("exact log-likelihood ratio") == "exact log-likelihood ratio"


def test_plain_reason_names_the_mechanisms_and_keeps_the_prose():
    err = UnsupportedEventError(
        "no exact privacy profile is known for event SelfComposed(event=PoissonSampled(sampling_rate=0.1, "
        "event=Gaussian(noise_multiplier=1.0, neighboring=<NeighboringRelation.ADD_OR_REMOVE_ONE: 'add_remove'>)), "
        "count=3)\nsecond line"
    )
    assert plain_reason(err) == 'no exact privacy profile is known for event "repeated Poisson-sampled Gaussian"'
    assert (
        plain_reason(ValueError("the ledger is empty (nothing composed)")) == "the ledger is empty (nothing composed)"
    )
    reason = plain_reason(ValueError("got DiscreteLaplace(noise_parameter=0.5, sensitivity=1)"))
    assert reason == 'got "Discrete Laplace"'


@pytest.fixture(scope="module")
def calibrated_page():
    spec = dplens.load_spec(EXAMPLES / "dp_sgd_mnist.toml")
    calibration = dplens.calibrate(spec, param="noise_multiplier", target_epsilon=3.0, delta=1e-5, method="rdp")
    accounting = report_summary(spec, 1e-5, calibration=calibration.to_dict())
    report = build_report(
        spec=spec,
        accounting=accounting,
        title="DP-SGD on MNIST",
        not_audited_reason="the audit was switched off (--no-audit)",
        created_utc=FIXED_TIME,
        command=("dplens", "report"),
    )
    return report, calibration, render_html(report)


def test_routes_that_do_not_apply_are_said_in_words(calibrated_page):
    report, _, page = calibrated_page
    assert [u["method"] for u in report.accounting.unsupported] == ["exact", "pure"]
    line = _visible_text(page).split("Routes that do not apply:")[1].split("\n\n")[0]
    assert "Poisson-sampled Gaussian" in line, line
    assert _leaks(line) == {}, line


@pytest.mark.parametrize("which", ["calibrated", "audited", "unaudited"])
def test_no_python_repr_anywhere_in_the_page(which, calibrated_page, audited_report, unaudited_report):
    page = {
        "calibrated": lambda: calibrated_page[2],
        "audited": lambda: render_html(audited_report),
        "unaudited": lambda: render_html(unaudited_report),
    }[which]()
    assert _leaks(_visible_text(page)) == {}


def test_calibration_table_numbers_are_formatted_like_the_rest(calibrated_page):
    _, calibration, page = calibrated_page
    table = page.split('<table id="calibration">')[1].split("</table>")[0]
    rows = dict(re.findall(r"<tr><th>(.*?)</th><td[^>]*>(.*?)</td></tr>", table, flags=re.S))
    assert rows["calibrated parameter"] == "<code>noise_multiplier</code>"
    assert rows["value"] == f"{calibration.value:.8g}"  # as `dplens calibrate` prints it
    assert rows["ε at that value (upper bound)"].startswith(f"≤ {fmt_upper(calibration.epsilon)}")
    assert rows["target ε"] == "3" and rows["δ"] == "1e-05" and rows["route"] == "<code>rdp</code>"
    assert rows["accountant evaluations"] == str(calibration.evaluations)
    # the exact values stay machine-readable
    assert f'data-value="{calibration.value!r}"' in table and f'data-value="{calibration.epsilon!r}"' in table
    assert repr(calibration.epsilon) not in _visible_text(table)


def test_a_calibration_bracket_is_shown_as_bounds():
    """A PLD calibration carries a certified bracket: its upper end rounded up, its lower end rounded down."""
    spec = dplens.load_spec(EXAMPLES / "gaussian_claim.toml")
    calibration = {
        "param": "noise_multiplier",
        "value": 0.9685264712345,
        "epsilon": 2.999951234,
        "epsilon_lower": 2.997161234,
        "delta": 1e-5,
        "target_epsilon": 3.0,
        "method": "pld",
        "evaluations": 12,
        "details": "PLD (pessimistic)",
    }
    report = build_report(
        spec=spec,
        accounting=report_summary(spec, 1e-5, calibration=calibration),
        title="t",
        not_audited_reason="off",
        created_utc=FIXED_TIME,
        command=("dplens", "report"),
    )
    table = render_html(report).split('<table id="calibration">')[1].split("</table>")[0]
    assert fmt_upper(2.999951234) == "3.000" and fmt_lower(2.997161234) == "2.997"
    assert "≤ 3.000<" in table and "≥ 2.997<" in table
    assert ">0.96852647<" in table
    assert _leaks(_visible_text(table)) == {}
