"""The report's figures: which apply, deterministic PNG bytes, and the data they are drawn from."""

from __future__ import annotations

import dataclasses

from dplens.reports import plots


def _is_png(data: bytes) -> bool:
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000


def test_all_five_figures_for_an_audited_report_and_deterministic(audited_report):
    first = plots.figures_for(audited_report)
    assert [name for name, *_ in first] == ["attack_risk", "rdp_curve", "trade_off", "epsilon_delta", "audit_trials"]
    assert all(_is_png(data) for *_, data in first)
    second = plots.figures_for(audited_report)
    assert [data for *_, data in first] == [data for *_, data in second]  # byte-identical: no timestamps


def test_no_audit_figure_without_an_audit(unaudited_report):
    names = [name for name, *_ in plots.figures_for(unaudited_report)]
    assert names == ["attack_risk", "rdp_curve", "trade_off", "epsilon_delta"]
    assert plots.audit_trials_figure(unaudited_report) is None


def test_figures_follow_the_data(audited_report):
    # The trade-off figure draws the audit's points: other operating points give other bytes.
    base = plots.trade_off_figure(audited_report)
    audit = audited_report.audit
    moved = dataclasses.replace(audit, operating_point=dataclasses.replace(audit.operating_point, fpr=0.2, fnr=0.3))
    other = dataclasses.replace(audited_report, audit=moved)
    assert plots.trade_off_figure(other) != base
    no_rdp = dataclasses.replace(
        audited_report, accounting=dataclasses.replace(audited_report.accounting, rdp_curve=())
    )
    assert plots.rdp_figure(no_rdp) is None
