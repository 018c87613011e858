"""The HTML report rendered in a real headless Chromium: screenshot, key numbers in the DOM, no console errors,
no network requests. Negative controls show that the harness does detect requests and console errors."""

from __future__ import annotations

import base64
import struct
import types

import pytest

from dplens.reports.format import fmt_lower, fmt_upper
from dplens.reports.render import write_report

# a 1 x 1 transparent PNG
_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_report_renders_in_chromium(tmp_path, render, audited_report):
    files = write_report(audited_report, tmp_path / "report")
    page = render(files.html)
    report = files.report

    # screenshot taken: a real, full-page PNG
    width, height = _png_size(page.screenshot)
    assert width >= 1000 and height > 2000
    (tmp_path / "screenshot.png").write_bytes(page.screenshot)

    # the page is self-contained: nothing but the page itself and data: URIs was requested; nothing failed
    assert page.network_requests == []
    assert page.console_errors == []
    assert len(page.images) == len(report.figures) == 5
    assert "attack_risk" in {figure.name for figure in report.figures}  # the attack-risk card's plot (issue 38)
    assert all(image["complete"] and image["width"] > 0 for image in page.images)
    assert all(image["src"].startswith("data:image/png;base64,") for image in page.images)

    # key numbers in the rendered DOM: exact values in data-value, rounded text shown as bounds
    assert float(page.values["epsilon-upper-bound"]) == report.accounting.epsilon
    assert float(page.values["epsilon-lower-bound"]) == report.audit.epsilon_lower_bound
    assert float(page.values["claim-epsilon"]) == report.claim.epsilon
    assert int(page.values["audit-trials"]) == report.audit.trials
    assert f"ε ≤ {fmt_upper(report.accounting.epsilon)}" in page.text
    assert f"ε ≥ {fmt_lower(report.audit.epsilon_lower_bound)}" in page.text
    assert "VIOLATION" in page.text and "UPPER BOUND" in page.text and "LOWER BOUND" in page.text
    assert page.text.count("ESTIMATE — NOT A BOUND") == len(report.audit.estimates)

    # hostile text in the title and unit is shown literally and never becomes markup
    assert 'Gaussian <script>alert("x")</script> & "quotes"' in page.text
    assert "one patient <record> & their visits" in page.text
    assert "<script>alert" not in page.dom and "<record>" not in page.dom


def test_unaudited_report_renders_in_chromium(tmp_path, render, unaudited_report):
    files = write_report(unaudited_report, tmp_path / "report")
    page = render(files.html)
    assert page.network_requests == [] and page.console_errors == []
    assert "NOT AUDITED" in page.text and "not audited" in page.text
    assert "epsilon-lower-bound" not in page.values
    assert float(page.values["epsilon-upper-bound"]) == files.report.accounting.epsilon


def test_harness_detects_network_requests_and_console_errors(tmp_path, render):
    # Negative control: without these detections a passing test above would mean nothing.
    page_path = tmp_path / "leaky.html"
    page_path.write_text(
        "<!doctype html><html><head><link rel='icon' href='data:,'></head><body>"
        "<img src='http://127.0.0.1:9/pixel.png'><script>console.error('boom')</script></body></html>",
        encoding="utf-8",
    )
    page = render(page_path)
    assert "http://127.0.0.1:9/pixel.png" in page.network_requests
    assert any("boom" in e for e in page.console_errors)


def test_missing_chromium_skips_locally_but_fails_under_ci(monkeypatch):
    from .conftest import require_chromium

    monkeypatch.delenv("DPLENS_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_chromium()


def test_reproductions_index_renders_in_chromium(tmp_path, render, monkeypatch, capsys):
    from dplens import cli

    def fake(out_dir, *, quick=False):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "README.md").write_text("# Fake <b>reproduction</b>\n\nSummary.\n\n## Part\n")
        (out_dir / "fig.png").write_bytes(base64.b64decode(_PIXEL))
        return [out_dir / "README.md", out_dir / "fig.png"]

    monkeypatch.setattr(cli, "_available_reproductions", lambda: {"fake": types.SimpleNamespace(run=fake)})
    assert cli.main(["reproduce", "all", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    page = render(tmp_path / "index.html")
    assert page.console_errors == []
    assert [u for u in page.network_requests if not u.startswith("file://")] == []
    assert page.images and all(image["complete"] and image["width"] == 1 for image in page.images)
    assert "Fake <b>reproduction</b>" in page.text
