"""Rendering of training audits: figures and an HTML fragment from an audit result's ``to_dict()``.

Renders, and computes no privacy quantity (every number shown was computed by the audit and is read from its
dictionary, so a report re-rendered from JSON is identical):

- :func:`roc_figure` — the empirical ROC on log–log axes (the low-FPR region is what matters, Carlini et al. 2022),
  with the largest TPR the claimed (ε, δ) allows at each FPR: TPR ≤ min(e^ε·FPR + δ, 1 − e^{−ε}(1 − δ − FPR))
  (Kairouz, Oh, Viswanath 2015 Theorem 2.1) — points above that curve are what a violation looks like;
- :func:`histogram_figure` — the scores of trainings (or canaries) with the canary in and out;
- :func:`epsilon_vs_canaries_figure` — a one-run audit's ε lower bound against the number of canaries;
- :func:`epsilon_vs_trainings_figure` — a many-run audit's ε lower bound against the number of trainings;
- :func:`attribute_figure` — an attribute-inference audit's success rate and interval next to the feature-DP upper
  bound of seed 003 Theorem 4 (Mahloujifar, Guo, Suh, Chaudhuri, IEEE S&P 2025) and the baseline;

each next to the claimed ε (the accountant's, when the claim came from it) and the measurability ceiling. The
inputs are the dictionaries of :class:`dplens.auditing.scores.ScoresAuditResult`,
:class:`dplens.auditing.scores.OneRunAuditResult`, :class:`dplens.auditing.games.AuditResult` (the canary games
return the last two) and :class:`dplens.auditing.attribute.AttributeAuditResult`. Figures are PNG bytes
(matplotlib's Agg canvas, imported on first use; no timestamp in the metadata, so equal inputs give equal bytes);
:func:`html_fragment` returns a ``<section>`` that the report embeds.
"""

from __future__ import annotations

import base64
import html
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dplens._numbers import fmt_short

__all__ = [
    "TrainingAuditSection",
    "attribute_figure",
    "epsilon_vs_canaries_figure",
    "epsilon_vs_trainings_figure",
    "figures",
    "histogram_figure",
    "html_fragment",
    "kind",
    "render",
    "roc_figure",
]

_CLAIM_COLOUR = "#d62728"
_BOUND_COLOUR = "#1f77b4"
_CEILING_COLOUR = "0.5"


def kind(result: dict[str, Any]) -> str:
    """``"two_sample"``, ``"one_run"``, ``"distinguish"`` (a games.AuditResult) or ``"attribute"`` (an
    attribute.AttributeAuditResult); ``ValueError`` otherwise."""
    if not isinstance(result, dict):
        raise ValueError(f"result must be an audit result's to_dict(); got {type(result).__name__}")
    route = result.get("route")
    if route in ("two_sample", "one_run"):
        return route
    if result.get("game") == "attribute-inference":
        return "attribute"
    if "trajectory" in result and "empirical_trade_off" in result:
        return "distinguish"
    raise ValueError(
        "result must be the to_dict() of a ScoresAuditResult, OneRunAuditResult, AuditResult or AttributeAuditResult"
    )


def _figure(width: float = 6.0, height: float = 4.0) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _png(fig: Any) -> bytes:
    from dplens.reports.plots import png_bytes

    return png_bytes(fig)


def _finish(fig: Any, ax: Any, **labels: str) -> bytes:
    from dplens.reports.plots import finish_figure

    return finish_figure(fig, ax, **labels)


def _claim_label(result: dict[str, Any]) -> str:
    source = str(result.get("claim_source", ""))
    who = "the accountant's" if source.startswith("accountant") else "claimed"
    return f"{who} ε = {result['epsilon_claimed']:.4g} (δ = {result['delta']:g})"


def _roc_points(result: dict[str, Any]) -> list[tuple[float, float]]:
    if kind(result) == "attribute":
        return []
    if kind(result) == "distinguish":
        return [(p["fpr"], 1.0 - p["fnr"]) for p in result.get("empirical_trade_off", ())]
    return [(p["fpr"], p["tpr"]) for p in result.get("roc_estimate", ())]


def roc_figure(result: dict[str, Any]) -> bytes | None:
    """The empirical ROC on log–log axes, the diagonal, and the largest TPR the claimed (ε, δ) allows."""
    points = [(f, t) for f, t in _roc_points(result) if f > 0 and t > 0]
    if len(points) < 2:
        return None
    points.sort()
    fpr = [f for f, _ in points]
    tpr = [t for _, t in points]
    low = max(min(fpr), 1e-12)
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(fpr, tpr, color=_BOUND_COLOUR, label="empirical ROC (an estimate)")
    ax.plot([low, 1.0], [low, 1.0], color="0.6", linestyle=":", label="no information (TPR = FPR)")
    # The audit sampled its claim's trade-off curve f (DRS 2022 Prop. 2.5); the largest TPR allowed is 1 − f(FPR).
    region = [p for p in result.get("claim_region", ()) if p["alpha"] >= low]
    if region:
        ax.plot(
            [p["alpha"] for p in region],
            [1.0 - p["beta"] for p in region],
            color=_CLAIM_COLOUR,
            linestyle="--",
            label=f"largest TPR allowed by {_claim_label(result)}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, 1.0)
    ax.set_ylim(max(min(tpr), 1e-12) / 2, 1.05)
    return _finish(
        fig,
        ax,
        x="false-positive rate",
        y="true-positive rate",
        title="Membership test of the canary (log–log ROC)",
        legend="lower right",
    )


def _histogram_data(result: dict[str, Any]) -> tuple[list[float], list[float], list[float]] | None:
    if kind(result) == "attribute":
        return None
    if kind(result) != "distinguish":
        hist = result.get("histogram") or {}
        if not hist.get("edges"):
            return None
        return list(hist["edges"]), list(hist["members"]), list(hist["non_members"])
    strategy = result.get("threshold_strategy") or {}
    counts = result.get("counts") or {}
    size = strategy.get("size")
    if "lower" not in strategy or "upper" not in strategy or not size or size < 3 or not counts:
        return None
    lower, upper = float(strategy["lower"]), float(strategy["upper"])
    edges = [lower + (upper - lower) * j / (size - 1) for j in range(size)]
    # Bin j of the counts is [t_{j−1}, t_j); the first and last are open-ended and left out of the picture.
    return edges, list(counts["positives"][1:size]), list(counts["negatives"][1:size])


def histogram_figure(result: dict[str, Any]) -> bytes | None:
    """The scores with the canary in and out, on the audit's own bins (normalised to densities)."""
    data = _histogram_data(result)
    if data is None:
        return None
    edges, members, non_members = data
    widths = [b - a for a, b in itertools.pairwise(edges)]
    fig = _figure()
    ax = fig.add_subplot()
    for counts, colour, label in (
        (members, _CLAIM_COLOUR, "canary in"),
        (non_members, _BOUND_COLOUR, "canary out"),
    ):
        total = sum(counts) or 1
        density = [c / (total * w) if w > 0 else 0.0 for c, w in zip(counts, widths, strict=True)]
        ax.stairs(density, edges, fill=True, color=colour, alpha=0.45, label=f"{label} ({sum(counts)} scores)")
    used = [i for i, (a, b) in enumerate(zip(members, non_members, strict=True)) if a or b]
    if used:  # the audit's grid may reach far past the scores: show the bins that hold some
        ax.set_xlim(edges[used[0]], edges[used[-1] + 1])
    unit = "canaries" if kind(result) == "one_run" else "trainings"
    title = f"Scores of {unit} with the canary in and out"
    return _finish(fig, ax, x="score (higher ⇒ canary in)", y="density", title=title)


def _trajectory_figure(result: dict[str, Any], x_key: str, x_label: str, title: str) -> bytes | None:
    points = [(p[x_key], p["epsilon_lower_bound"]) for p in result.get("trajectory", ()) if x_key in p]
    if not points:
        return None
    fig = _figure()
    ax = fig.add_subplot()
    xs, ys = [x for x, _ in points], [y for _, y in points]
    level = f"{result['confidence']:.0%}"
    ax.plot(xs, ys, "o-", color=_BOUND_COLOUR, label=f"ε lower bound (valid at {level} for each point)")
    ax.axhline(result["epsilon_claimed"], color=_CLAIM_COLOUR, linestyle="--", label=_claim_label(result))
    ceiling = result.get("ceiling")
    if isinstance(ceiling, int | float) and math.isfinite(ceiling) and ceiling <= 3 * max(result["epsilon_claimed"], 1):
        ax.axhline(ceiling, color=_CEILING_COLOUR, linestyle=":", label=f"measurability ceiling {ceiling:.3g}")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0.0)
    return _finish(fig, ax, x=x_label, y="ε", title=title, grid="both")


def epsilon_vs_canaries_figure(result: dict[str, Any]) -> bytes | None:
    """A one-run audit's bound on nested random subsets of its canaries, against the claimed ε."""
    if kind(result) != "one_run":
        return None
    return _trajectory_figure(
        result, "canaries", "canaries in the one-run audit", "One-run ε lower bound against the number of canaries"
    )


def epsilon_vs_trainings_figure(result: dict[str, Any]) -> bytes | None:
    """A many-run audit's bound after the first chunks of trainings, against the claimed ε."""
    if kind(result) != "distinguish":
        return None
    return _trajectory_figure(
        result, "trials", "trainings per side", "ε lower bound against the number of trainings (canary in / out)"
    )


def attribute_figure(result: dict[str, Any]) -> bytes | None:
    """An attribute-inference audit: the success rate with its interval, against the baseline (no output) and the
    largest success the claim allows — the feature-DP upper bound of seed 003 Theorem 4 and the exact replace-one
    maximum."""
    if kind(result) != "attribute":
        return None
    low, high = result["confidence_interval"]
    rows = [
        ("baseline (best guess without the output)", result["baseline"], "black"),
        ("replace-one maximum the claim allows", result["replace_one_success_upper_bound"], _CEILING_COLOUR),
        ("feature-DP upper bound (seed 003 Theorem 4)", result["theorem4_success_upper_bound"], _CLAIM_COLOUR),
    ]
    fig = _figure(6.0, 4.2)
    ax = fig.add_subplot()
    for y, (label, value, colour) in enumerate(rows):
        ax.plot([value, value], [y - 0.35, y + 0.35], color=colour, linewidth=2.5, label=f"{label}: {value:.4g}")
    level = f"{result['confidence']:.0%}"
    ax.errorbar(
        [result["success_rate"]],
        [len(rows)],
        xerr=[[result["success_rate"] - low], [high - result["success_rate"]]],
        fmt="o",
        color=_BOUND_COLOUR,
        capsize=4,
        label=f"attack success {result['success_rate']:.4g} ({level} interval [{low:.4g}, {high:.4g}])",
    )
    ax.set_yticks([])
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("probability of guessing the attribute")
    ax.set_title("Attribute inference against what the claim allows")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7)
    ax.grid(True, axis="x", alpha=0.3)
    return _png(fig)


def figures(result: dict[str, Any]) -> dict[str, bytes]:
    """Every figure that applies to ``result``: name → PNG bytes (names are file stems)."""
    makers = {
        "training_audit_roc": roc_figure,
        "training_audit_scores": histogram_figure,
        "training_audit_epsilon_vs_canaries": epsilon_vs_canaries_figure,
        "training_audit_epsilon_vs_trainings": epsilon_vs_trainings_figure,
        "attribute_audit": attribute_figure,
    }
    out = {}
    for name, make in makers.items():
        png = make(result)
        if png is not None:
            out[name] = png
    return out


def _value(value: Any) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, float):
        return fmt_short(value)
    return str(value)


def _attribute_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    level = f"{result['confidence']:.0%}"
    low, high = result["confidence_interval"]
    feature = result.get("reading") == "feature-dp"
    bound = result["feature_dp_epsilon_lower_bound"] if feature else result["epsilon_lower_bound"]
    return [
        ("success rate", f"{result['success_rate']:.4g} ({result['successes']} of {result['trials']} trials)"),
        (f"{level} interval", f"[{low:.4g}, {high:.4g}]"),
        ("baseline (no output)", f"{result['baseline']:.4g}"),
        (
            "ε lower bound",
            f"{_value(bound)} (valid {level} lower bound; "
            + ("feature-DP reading, Theorem 4 inverted)" if feature else "replace-one reading)"),
        ),
        ("feature-DP upper bound on success (Theorem 4)", f"{result['theorem4_success_upper_bound']:.4g}"),
        ("claimed ε", f"{_value(result['epsilon_claimed'])} [{result.get('claim_source', '')}]"),
        ("δ", f"{result['delta']:g}"),
        ("verdict", str(result["verdict"])),
        ("adjacency", str(result.get("adjacency", ""))),
    ]


def _rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    level = f"{result['confidence']:.0%}"
    which = kind(result)
    if which == "attribute":
        return _attribute_rows(result)
    rows = [
        ("ε lower bound", f"{_value(result['epsilon_lower_bound'])} (valid {level} lower bound, a bound)"),
        ("claimed ε", f"{_value(result['epsilon_claimed'])} [{result.get('claim_source', '')}]"),
        ("δ", f"{result['delta']:g}"),
        ("verdict", str(result["verdict"])),
        ("measurability ceiling", _value(result.get("ceiling"))),
    ]
    if which == "two_sample":
        rows += [
            ("scores in / out", f"{result['members']} / {result['non_members']}"),
            ("threshold", str(result.get("method", ""))),
            ("GDP μ (ESTIMATE)", _value(result.get("gdp_mu_estimate"))),
            ("GDP ε (ESTIMATE)", _value(result.get("gdp_epsilon_estimate"))),
        ]
    elif which == "one_run":
        analysis = result.get("analysis", {})
        rows += [
            ("canaries (included)", f"{result['canaries']} ({result['included']})"),
            ("guesses / correct", f"{analysis.get('guesses')} / {analysis.get('correct')}"),
        ]
        for part in analysis.get("components", ()):  # the combined analysis: each bound at its share of α
            rows.append(
                (
                    f"{part['analysis']} (a bound at {part['share']:g} of α)",
                    f"{_value(part['epsilon_lower_bound'])} [{part['reference']}]",
                )
            )
        rows.append(("f-DP one-run ε, Gaussian family (ESTIMATE)", _value(result.get("fdp_epsilon_estimate"))))
        game = result.get("game") or {}
        if game.get("description"):
            rows.append(("game", str(game["description"])))
    else:
        rows += [
            ("trainings per side", _value(result.get("trials"))),
            ("game", str(result.get("mechanism", ""))),
            ("score", str(result.get("score", ""))),
        ]
        for estimate in result.get("estimates", ()):
            rows.append((f"{estimate.get('name')} ε (ESTIMATE)", _value(estimate.get("epsilon"))))
    if "auc_estimate" in result:
        rows.append(("AUC (ESTIMATE)", _value(result["auc_estimate"])))
    for point in result.get("tpr_at_fpr_estimates", ()):
        rows.append((f"TPR at FPR {point['fpr']:g} (ESTIMATE)", _value(point["tpr_estimate"])))
    return rows


_CAPTIONS = {
    "training_audit_roc": "Empirical ROC (log–log) with the largest TPR the claim allows.",
    "training_audit_scores": "Scores with the canary in and out.",
    "training_audit_epsilon_vs_canaries": "ε lower bound against the number of canaries (one run).",
    "training_audit_epsilon_vs_trainings": "ε lower bound against the number of trainings.",
    "attribute_audit": "Attribute-inference success against the feature-DP upper bound (seed 003 Theorem 4).",
}


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def html_fragment(
    result: dict[str, Any],
    figure_pngs: dict[str, bytes] | None = None,
    *,
    figure_src: Callable[[str], str] | None = None,
) -> str:
    """A ``<section>``: the summary table (estimates labelled) and the figures.

    ``figure_src(name)`` gives each figure's ``src`` (e.g. ``lambda name: f"{name}.png"`` for files written next to
    the report); by default the PNGs are embedded as data URIs.
    """
    figure_pngs = figures(result) if figure_pngs is None else figure_pngs
    title = {
        "two_sample": "from scores (two samples)",
        "one_run": "in one run",
        "distinguish": "over many trainings",
        "attribute": "by attribute inference",
    }
    rows = "".join(
        f"<tr><th>{html.escape(name)}</th><td>{html.escape(value)}</td></tr>" for name, value in _rows(result)
    )
    parts = [
        '<section class="training-audit">',
        f"<h2>Training audit {html.escape(title[kind(result)])}</h2>",
        f'<table class="training-audit-summary">{rows}</table>',
        f"<p>{html.escape(str(result.get('verdict_reason', '')))}</p>",
        "<p>Numbers marked ESTIMATE are not bounds; the ε lower bound is.</p>",
    ]
    for name, png in figure_pngs.items():
        src = figure_src(name) if figure_src is not None else _data_uri(png)
        caption = _CAPTIONS.get(name, name)
        parts.append(
            f'<figure><img src="{html.escape(src, quote=True)}" alt="{html.escape(caption, quote=True)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    parts.append("</section>")
    return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class TrainingAuditSection:
    """The figures (file stem → PNG bytes) and the HTML fragment of one training audit."""

    figures: dict[str, bytes] = field(default_factory=dict)
    html: str = ""


def render(result: dict[str, Any], *, figure_src: Callable[[str], str] | None = None) -> TrainingAuditSection:
    """Figures and HTML of ``result`` (an audit result's ``to_dict()``) in one call."""
    pngs = figures(result)
    return TrainingAuditSection(figures=pngs, html=html_fragment(result, pngs, figure_src=figure_src))
