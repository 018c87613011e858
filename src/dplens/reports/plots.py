"""The report's figures (matplotlib, Agg backend, deterministic PNG bytes).

Every figure is a pure function of the report's data (:class:`~dplens.reports.model.Report`), so a report
re-rendered from its JSON has the same figures:

- :func:`rdp_figure` — the composed RDP curve ε_RDP(α) and the (ε, δ) it converts to at each α, with the
  optimal order marked (conversion: Canonne, Kamath, Steinke 2020, Proposition 12);
- :func:`trade_off_figure` — the accountant's f-DP trade-off curve (Dong, Roth, Su 2022, Definition 2.1),
  the region excluded by the claimed (ε, δ) (DRS 2022 Proposition 2.5: f_{ε,δ}(α) = max(0, 1 − δ − e^ε α,
  e^{−ε}(1 − δ − α))), and the audit's empirical (FPR, FNR) points with its operating point;
- :func:`epsilon_delta_figure` — ε(δ) by every route (each an upper bound);
- :func:`audit_trials_figure` — the audit's lower bound against the number of trials.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dplens.reports.format import fmt_lower, fmt_upper, percent
from dplens.reports.model import AuditEvidence, Report

__all__ = [
    "attack_risk_figure",
    "audit_trials_figure",
    "epsilon_delta_figure",
    "figures_for",
    "finish_figure",
    "ledger_figure",
    "png_bytes",
    "rdp_figure",
    "trade_off_figure",
]

_DPI = 110
_STYLE = {"font.size": 9}
_ROUTE_COLOURS = {"rdp": "#1f77b4", "pld": "#2ca02c", "exact": "#9467bd", "pure": "#8c564b"}


def png_bytes(fig: Figure) -> bytes:
    """PNG bytes without a timestamp or version in the metadata, so equal inputs give equal bytes (every report
    figure, the training audits' too)."""
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    return buffer.getvalue()


def finish_figure(
    fig: Figure, ax: Any, *, x: str, y: str, title: str, legend: str = "best", grid: str = "major"
) -> bytes:
    """How a one-panel figure ends (the report's and the training audits'): axis labels, title, legend (font size 8)
    at ``legend``, grid lines at the ``grid`` ticks, then :func:`png_bytes`."""
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title)
    ax.legend(loc=legend, fontsize=8)
    ax.grid(True, which=grid, alpha=0.3)
    return png_bytes(fig)


def _new(width: float = 6.4, height: float = 4.0) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig


def rdp_figure(report: Report) -> bytes | None:
    """ε_RDP(α) and the converted ε at the report's δ for each α; the optimal order marked. None without RDP."""
    accounting = report.accounting
    samples = accounting.rdp_curve
    route = next((r for r in accounting.routes if r.method == "rdp"), None)
    if not samples or route is None or accounting.delta <= 0:
        return None
    alpha = np.array([p["alpha"] for p in samples])
    rdp = np.array([p["rdp"] for p in samples])
    converted = np.array([p["epsilon"] for p in samples])  # the accountant's conversion at the report's δ
    fig = _new()
    ax = fig.add_subplot()
    ax.plot(alpha, rdp, color="#1f77b4", label="RDP curve ε_RDP(α) of the composition")
    ax.plot(alpha, converted, color="#ff7f0e", label=f"(ε, δ = {accounting.delta:g}) implied at each α")
    if route.optimal_order is not None:
        ax.axvline(route.optimal_order, color="0.4", linestyle=":", linewidth=1)
        ax.plot(
            [route.optimal_order],
            [route.epsilon],
            "o",
            color="#d62728",
            label=f"optimal order α* = {route.optimal_order:.4g}: ε ≤ {fmt_upper(route.epsilon)}",
        )
    ax.set_xscale("log")
    finite = np.concatenate([rdp[np.isfinite(rdp)], converted[np.isfinite(converted)]])
    if finite.size:
        top = min(float(np.max(finite)), 4.0 * max(route.epsilon, 1e-3) + 1.0)
        ax.set_ylim(0.0, top)
    return finish_figure(
        fig, ax, x="Rényi order α", y="ε", title="RDP accounting: the conversion is minimised over α (continuous)"
    )


def trade_off_figure(report: Report) -> bytes | None:
    """The f-DP curve, the region the claimed (ε, δ) excludes, and the audit's empirical points."""
    accounting, audit, claim = report.accounting, report.audit, report.claim
    if not accounting.trade_off and audit is None:
        return None
    fig = _new(10.0, 4.2)
    axes = [fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)]
    claim_eps = claim.epsilon if claim.epsilon is not None and math.isfinite(claim.epsilon) else None
    claim_delta = claim.delta or 0.0
    # The accountant sampled the claim's region boundary (DRS 2022 Prop. 2.5); the figure only draws it.
    grid = np.array([p["alpha"] for p in accounting.claim_region])
    region = np.array([p["beta"] for p in accounting.claim_region])
    for index, ax in enumerate(axes):
        if claim_eps is not None and region.size:
            ax.fill_between(
                grid,
                0.0,
                region,
                color="#d62728",
                alpha=0.12,
                label=f"excluded by the claim (ε = {fmt_upper(claim_eps)}, δ = {claim_delta:g})",
            )
            ax.plot(grid, region, color="#d62728", linewidth=1)
        if accounting.trade_off:
            a = np.array([p["alpha"] for p in accounting.trade_off])
            b = np.array([p["beta"] for p in accounting.trade_off])
            ax.plot(a, b, color="#1f77b4", linewidth=1.6, label="accountant's trade-off curve (pessimistic)")
        if audit is not None:
            _audit_points(ax, audit)
        if index == 0:
            ax.plot([0, 1], [1, 0], color="0.6", linestyle="--", linewidth=0.8, label="no privacy loss: β = 1 − α")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_title("Trade-off curve (linear)")
            ax.legend(loc="upper right", fontsize=7)
        else:
            ax.set_xscale("log")
            ax.set_xlim(1e-6, 1.0)
            ax.set_ylim(0, 1)
            ax.set_title("Small false-positive rates (log α)")
        ax.set_xlabel("type-I error α (false-positive rate)")
        ax.set_ylabel("type-II error β (false-negative rate)")
        ax.grid(True, which="major", alpha=0.3)
    return png_bytes(fig)


def _audit_points(ax, audit: AuditEvidence) -> None:
    points = [(p["fpr"], p["fnr"]) for p in audit.empirical_trade_off]
    if points:
        fpr, fnr = np.array(points).T
        ax.scatter(
            np.maximum(fpr, 1e-7), fnr, s=6, color="#7f7f7f", alpha=0.6, label="audit: empirical (FPR, FNR) (estimates)"
        )
    op = audit.operating_point
    boundary = audit.extra.get("bound_region") or []  # sampled by the audit layer (DRS 2022 Prop. 2.5)
    if boundary:
        ax.plot(
            [p["alpha"] for p in boundary],
            [p["beta"] for p in boundary],
            color="#ff7f0e",
            linestyle="--",
            linewidth=1,
            label=f"boundary for ε = {fmt_lower(audit.epsilon_lower_bound)} (the audit's lower bound)",
        )
    ax.plot(
        [max(op.fpr, 1e-7)], [op.fnr], "D", color="#ff7f0e", markersize=6, label="audit: operating point (observed)"
    )
    ax.plot(
        [max(op.fpr_upper, 1e-7)],
        [op.fnr_upper],
        "s",
        markerfacecolor="none",
        color="#ff7f0e",
        markersize=7,
        label=f"operating point, {percent(audit.confidence)} upper limits → ε ≥ {fmt_lower(audit.epsilon_lower_bound)}",
    )


def attack_risk_figure(report: Report) -> bytes | None:
    """The trade-off curve as an attack's ROC (TPR = 1 − β at each FPR, an upper bound) with the card's points and
    the audit's attack: its observed operating point and its confidence corner, which lies below the curve."""
    risk = report.accounting.attack_risk
    if not risk or not risk.get("curve"):
        return None
    curve = risk["curve"]
    fpr = np.array([p["fpr"] for p in curve])
    upper = np.array([p["tpr_upper"] for p in curve])
    lows = [p["tpr_lower"] for p in curve]
    fig = _new(10.0, 4.2)
    for index, ax in enumerate((fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2))):
        ax.plot(fpr, fpr, color="0.6", linestyle="--", linewidth=0.8, label="random guessing: TPR = FPR")
        if all(v is not None for v in lows):
            ax.fill_between(fpr, np.array(lows, dtype=float), upper, color="#1f77b4", alpha=0.25, linewidth=0)
        ax.plot(
            fpr,
            upper,
            color="#1f77b4",
            linewidth=1.6,
            label=f"largest TPR of any attack (upper bound, {risk['method']})",
        )
        for key, value in risk["tpr_upper"].items():
            ax.plot([float(key)], [value], "o", color="#1f77b4", markersize=4)
            if index == 0:
                ax.annotate(f"≤ {fmt_upper(100 * value, 3)} %", (float(key), value), textcoords="offset points",
                            xytext=(4, -10), fontsize=7, color="#1f77b4")  # fmt: skip
        if report.audit is not None:
            op = report.audit.operating_point
            ax.plot([max(op.fpr, 1e-6)], [max(1 - op.fnr, 1e-6)], "D", color="#ff7f0e", markersize=5,
                    label="audit: observed (FPR, TPR) (estimate)")  # fmt: skip
            ax.plot([max(op.fpr_upper, 1e-6)], [max(1 - op.fnr_upper, 1e-6)], "s", markerfacecolor="none",
                    color="#ff7f0e", markersize=7,
                    label=f"audit: FPR ≤, TPR ≥ this corner ({percent(report.audit.confidence)})")  # fmt: skip
        if index == 0:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(1e-6, 1.0)
            ax.set_ylim(1e-6, 1.0)
            ax.set_title("Attack ROC, log scales (low false-positive rates)")
            ax.legend(loc="lower right", fontsize=7)
        else:
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_title("Attack ROC, linear scales")
        ax.set_xlabel("false-positive rate (non-members flagged)")
        ax.set_ylabel("true-positive rate (members flagged)")
        ax.grid(True, which="major", alpha=0.3)
    return png_bytes(fig)


def epsilon_delta_figure(report: Report) -> bytes | None:
    """ε(δ) by every route (each an upper bound); the report's δ marked."""
    rows = report.accounting.epsilon_of_delta
    if not rows:
        return None
    fig = _new()
    ax = fig.add_subplot()
    tightest = report.accounting.tightest.method
    for method in dict.fromkeys(r["method"] for r in rows):
        pts = sorted((r["delta"], r["epsilon"]) for r in rows if r["method"] == method and math.isfinite(r["epsilon"]))
        if not pts:
            continue
        d, e = np.array(pts).T
        label = f"{method}{' (tightest at the report δ)' if method == tightest else ''}"
        ax.plot(d, e, marker="o", markersize=3, color=_ROUTE_COLOURS.get(method), label=label)
    if report.accounting.delta > 0:
        ax.axvline(
            report.accounting.delta,
            color="0.4",
            linestyle=":",
            linewidth=1,
            label=f"report δ = {report.accounting.delta:g}",
        )
    ax.set_xscale("log")
    return finish_figure(fig, ax, x="δ", y="ε (upper bound)", title="ε as a function of δ, by accounting route")


def audit_trials_figure(report: Report) -> bytes | None:
    """The audit's valid lower bound against the number of trials, with the claim and the accountant's ε."""
    audit = report.audit
    if audit is None or not audit.trajectory:
        return None
    rows = sorted((int(p["trials"]), p["epsilon_lower_bound"]) for p in audit.trajectory)
    trials = np.array([r[0] for r in rows], dtype=float)
    bound = np.array([r[1] if r[1] is not None else np.nan for r in rows], dtype=float)
    fig = _new()
    ax = fig.add_subplot()
    ax.plot(
        trials,
        np.maximum(bound, 0.0),
        marker="o",
        markersize=3,
        color="#ff7f0e",
        label=f"ε lower bound ({percent(audit.confidence)})",
    )
    ceilings = [(int(p["trials"]), p["ceiling"]) for p in audit.trajectory if isinstance(p.get("ceiling"), int | float)]
    if ceilings:
        c_trials, c_values = np.array(sorted(ceilings), dtype=float).T
        ax.plot(c_trials, c_values, color="0.5", linestyle="--", linewidth=1, label="measurability ceiling")
    elif math.isfinite(audit.ceiling):
        ax.plot([audit.trials], [audit.ceiling], "v", color="0.4", label=f"measurability ceiling at N = {audit.trials}")
    if math.isfinite(audit.epsilon_claimed):
        ax.axhline(
            audit.epsilon_claimed, color="#d62728", linewidth=1, label=f"claimed ε = {fmt_upper(audit.epsilon_claimed)}"
        )
    eps_ub = report.accounting.epsilon
    if math.isfinite(eps_ub) and report.accounting.delta == audit.delta:
        ax.axhline(
            eps_ub,
            color="#1f77b4",
            linestyle="-.",
            linewidth=1,
            label=f"accountant's upper bound ε ≤ {fmt_upper(eps_ub)}",
        )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0.0)
    return finish_figure(
        fig, ax, x="trials per side", y="ε", title=f"Audit lower bound vs trials (δ = {audit.delta:g})"
    )


def ledger_figure(report: Report) -> bytes | None:
    """Cumulative spent ε of each budget of a ledger over time (one line per budget, restarting each period), with
    each budget's target; None without a ledger section (``dplens report --ledger DB``)."""
    import datetime as dt

    section = report.budget_ledger
    if not section or not any(p.get("history") for b in section["budgets"] for p in b["periods"]):
        return None
    fig = _new()
    ax = fig.add_subplot()
    colours = ("#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e", "#8c564b")
    for index, budget in enumerate(section["budgets"]):
        colour = colours[index % len(colours)]
        label = f"{budget['name']} ({budget['mode']}, target ε ≤ {fmt_upper(budget['target_epsilon'])})"
        for period in budget["periods"]:
            points = period.get("history") or []
            if not points:
                continue
            times = [dt.datetime.fromisoformat(p["time_utc"].replace("Z", "+00:00")) for p in points]
            spent = [p["spent_epsilon"] if isinstance(p["spent_epsilon"], float | int) else math.inf for p in points]
            ax.step(times, spent, where="post", color=colour, marker="o", markersize=3, label=label)
            label = None
        ax.axhline(budget["target_epsilon"], color=colour, linestyle="--", linewidth=1)
    ax.set_xlabel("release time (UTC)")
    ax.set_ylabel(f"spent ε (upper bound) at δ = {section['budgets'][0]['delta']:g}")
    ax.set_title("Budget ledger: cumulative spend (dashed: each budget)")
    ax.set_ylim(bottom=0.0)
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.autofmt_xdate()
    return png_bytes(fig)


#: name → (file, caption, function)
_FIGURES = (
    (
        "attack_risk",
        "attack_risk.png",
        "Attack risk: the accountant's trade-off curve read as an attack's ROC — the largest true-positive rate any "
        "membership attack can reach at each false-positive rate (an upper bound; the band is the certified "
        "bracket) — with the card's points and, when audited, the audit's attack: its observed operating point and "
        "the corner its confidence limits give (FPR at most, TPR at least), which lies on or below the curve.",
        attack_risk_figure,
    ),
    (
        "rdp_curve",
        "rdp_curve.png",
        "RDP curve of the composition with the optimal order α* marked; the orange curve is the (ε, δ) each "
        "order implies (every point on it is an upper bound; α* gives the smallest).",
        rdp_figure,
    ),
    (
        "trade_off",
        "trade_off.png",
        "f-DP trade-off curve from the accountant (a pointwise lower bound on the exact curve), the region the "
        "claimed (ε, δ) excludes (red), and the audit's empirical (FPR, FNR) points (estimates) with its "
        "operating point and the confidence-adjusted corner that gives the ε lower bound.",
        trade_off_figure,
    ),
    (
        "epsilon_delta",
        "epsilon_delta.png",
        "ε as a function of δ for every accounting route (each value an upper bound).",
        epsilon_delta_figure,
    ),
    (
        "audit_trials",
        "audit_trials.png",
        "The audit's valid lower bound on ε as the number of trials grows, against the claimed ε and the "
        "accountant's upper bound.",
        audit_trials_figure,
    ),
    (
        "budget_ledger",
        "budget_ledger.png",
        "Cumulative spent ε of each budget of the ledger after its releases (each point an upper bound by the "
        "budget's rule; a new period starts from zero), against the budget (dashed).",
        ledger_figure,
    ),
)


def figures_for(report: Report) -> list[tuple[str, str, str, bytes]]:
    """Every figure that applies to ``report``: ``(name, file, caption, png_bytes)``."""
    import matplotlib

    out = []
    with matplotlib.rc_context(_STYLE):
        for name, file, caption, make in _FIGURES:
            data = make(report)
            if data is not None:
                out.append((name, file, caption, data))
    return out
