"""Rendering a report: canonical JSON, a self-contained HTML page, a plain-text privacy statement.

- JSON is canonical (sorted keys, UTF-8, no NaN), validated against the schema on write and on read.
- HTML is rendered from the report with Jinja2 (autoescaping on, strict undefined): no scripts, no external
  resources (figures are embedded as ``data:`` URIs, the style is inline, and a Content-Security-Policy
  forbids any fetch), so the page is readable offline and makes no network request.
- The privacy statement says what is protected, against what, with which (ε, δ), under which sampling and
  adjacency assumptions, and labels every estimate as one.

Numbers are shown so that rounding never flatters the mechanism: upper bounds are rounded up
(:func:`fmt_upper`), lower bounds down (:func:`fmt_lower`); estimates to nearest and labelled.
Every file is written atomically (temporary file in the same directory + ``os.replace``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dplens.reports.format import fmt_estimate, fmt_lower, fmt_upper, percent
from dplens.reports.model import Figure, Report, Status, validate_report_dict
from dplens.reports.output import atomic_write_bytes, atomic_write_text, raw_number, significant, template_environment
from dplens.reports.risk_card import risk_points, risk_sentence

__all__ = [
    "ReportFiles",
    "atomic_write_bytes",
    "atomic_write_text",
    "read_json",
    "render_html",
    "render_statement",
    "template_environment",
    "to_canonical_json",
    "write_json",
    "write_report",
]

# --------------------------------------------------------------------------------------------
# Atomic files
# --------------------------------------------------------------------------------------------


def to_canonical_json(report: Report) -> str:
    """The canonical JSON text of ``report`` (validated): sorted keys, 2-space indent, UTF-8, final newline."""
    data = report.to_dict()
    validate_report_dict(data)
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(report: Report, path: Path) -> Path:
    """Validate and write ``report`` as canonical JSON (atomically)."""
    return atomic_write_text(path, to_canonical_json(report))


def read_json(path: Path) -> Report:
    """Read and validate a report written by :func:`write_json`.

    Raises:
        ValueError: not JSON, not a dplens report, wrong ``schema_version``, a missing field (named), …
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except FileNotFoundError:
        raise ValueError(f"report file not found: {str(path)!r}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"report file {str(path)!r} is not valid JSON: {err}") from None
    return Report.from_dict(data)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"report JSON must not contain {name} (use null or the string 'Infinity')")


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------


def render_html(report: Report, figures: dict[str, bytes] | None = None, *, sections: list[Any] | None = None) -> str:
    """The self-contained HTML page of ``report``; ``figures`` maps a figure's file name to its PNG bytes, and
    ``sections`` are the rendered additional audits (rendered here when not given)."""
    figures = figures or {}
    embedded = [
        {
            "name": f.name,
            "file": f.file,
            "caption": f.caption,
            "data_uri": "data:image/png;base64," + base64.b64encode(figures[f.file]).decode("ascii"),
        }
        for f in report.figures
        if f.file in figures
    ]
    by_name = {f["name"]: f for f in embedded}
    template = template_environment().get_template("report.html.j2")
    risk = report.accounting.attack_risk
    return template.render(
        report=report,
        data=report.to_dict(),
        figures=by_name,
        risk_points=risk_points(risk) if risk else [],
        risk_sentence=risk_sentence(risk, report.claim.privacy_unit) if risk else "",
        implementation_rows=_implementation_rows(report),
        implementation_assumptions=_implementation_assumptions(report),
        additional_sections=[
            section.html for section in (sections if sections is not None else _additional_sections(report))
        ],
        statement=render_statement(report),
        Status=Status,
    )


def _implementation_assumptions(report: Report) -> list[str]:
    if report.implementation_evidence is None:
        return []
    from dplens.reports.implementation import assumption_lines

    return assumption_lines(report.implementation_evidence)


def _implementation_rows(report: Report) -> list[dict[str, str]]:
    if report.implementation_evidence is None:
        return []
    from dplens.reports.implementation import summary_rows

    return summary_rows(report.implementation_evidence)


def _additional_sections(report: Report) -> list[Any]:
    """The rendered additional audits (HTML with figures embedded, and the figure files)."""
    from dplens.reports.audit_page import render_section

    return [
        render_section(extra["result"], prefix=f"additional_{index + 1}_")
        for index, extra in enumerate(report.additional_audits)
    ]


# --------------------------------------------------------------------------------------------
# Plain-text privacy statement
# --------------------------------------------------------------------------------------------


def _wrap(text: str, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=indent) or [indent]


def render_statement(report: Report) -> str:
    """The plain-text privacy statement: what is protected, against what, with which ε/δ, under which
    sampling and adjacency assumptions; the audit's bound and its labelled estimates."""
    claim, acc, mech = report.claim, report.accounting, report.mechanism
    lines = [f"PRIVACY STATEMENT — {report.title}", ""]
    tight = acc.tightest
    lines += _wrap(
        f"What is protected: {claim.privacy_unit}. The released outputs, taken together, change little between "
        f"{claim.neighbouring_description}."
    )
    lines.append("")
    if report.privacy_scope:
        lines += _wrap(f"Privacy unit and tuning: {report.privacy_scope['sentence']}")
        lines.append("")
    lines += _wrap(
        "Against what: any adversary who sees every released output, whatever else they know about the data; "
        "the guarantee bounds how much any such adversary can learn about whether the protected unit is in the "
        "data (or what it is). It does not cover side channels (timing, floating-point artefacts), data-"
        "dependent choices made outside the accounted mechanisms, or outputs released by other systems."
    )
    lines.append("")
    guarantee = (
        f"Guarantee (accounting): ({fmt_upper(acc.epsilon)}, {acc.delta:g})-differential privacy, i.e. "
        f"ε ≤ {fmt_upper(acc.epsilon)} at δ = {acc.delta:g}. This ε is an UPPER BOUND on the true ε of the "
        f"mechanism (tightest of {len(acc.routes)} route(s): {tight.method} — {tight.details})."
    )
    lines += _wrap(guarantee)
    for route in acc.routes:
        mark = "  <- tightest" if route.is_tightest else ""
        lines += _wrap(f"- {route.method}: ε ≤ {fmt_upper(route.epsilon)} (upper bound){mark}", "  ")
    if claim.mu is not None:
        lines += _wrap(
            f"Equivalently the composition is exactly μ-GDP with μ = {fmt_upper(claim.mu)} (Dong, Roth, Su 2022).",
            "  ",
        )
    lines.append("")
    if acc.attack_risk:
        lines += _wrap(risk_sentence(acc.attack_risk, claim.privacy_unit))
        lines.append("")
    eps_text = "n/a" if claim.epsilon is None else fmt_upper(claim.epsilon)
    certified = {
        True: "the accountant certifies it",
        False: "the accountant does NOT certify it (its upper bound is larger)",
        None: "not checked by the accountant",
    }[claim.certified_by_accountant]
    lines += _wrap(
        f"Claim under review ({claim.source}): {claim.definition.value} with ε = {eps_text}, δ = {claim.delta or 0:g}; "
        f"{certified}."
    )
    lines.append("")
    lines += _wrap(f"Mechanism: {mech.name}. Components (composed in order):")
    for component in mech.components:
        params = ", ".join(f"{k} = {significant(v)}" for k, v in component.items() if k != "type")
        lines += _wrap(f"- {component.get('type', '?')}: {params}", "  ")
    lines.append("")
    lines += _wrap(f"Sampling assumption: {mech.sampling}.")
    lines += _wrap(
        f"Adjacency assumption: neighbouring data sets are {claim.neighbouring_description}. A guarantee under "
        "another relation (e.g. replace-one instead of add/remove) can be up to twice as large."
    )
    lines.append("")
    lines += _audit_statement_lines(report)
    lines += _implementation_statement_lines(report)
    lines += _ledger_statement_lines(report)
    lines.append("")
    lines += _nist_lines(report)
    lines.append("")
    lines += _wrap(f"Verdict: {report.verdict.status.value}. {report.verdict.sentence}")
    lines.append("")
    prov = report.provenance
    lines += _wrap(
        f"Provenance: dplens {prov.tool.get('version')} (git {prov.tool.get('git_sha') or 'unknown'}), spec "
        f"{prov.spec_source} (sha256 {prov.spec_sha256}), seeds {json.dumps(prov.seeds, sort_keys=True)}, "
        f"created {prov.created_utc}."
    )
    return "\n".join(lines) + "\n"


def _audit_statement_lines(report: Report) -> list[str]:
    """The statement's audit paragraph: the lower bound, its ceiling, the operating point, the labelled estimates."""
    audit = report.audit
    lines: list[str] = []
    if audit is None:
        lines += _wrap(f"Empirical audit: NOT AUDITED ({report.not_audited_reason}).")
    else:
        lines += _wrap(
            f"Empirical audit ({audit.trials} trials per side, seed {audit.seed}): with {percent(audit.confidence)} "
            f"confidence the true ε at δ = {audit.delta:g} is AT LEAST {fmt_lower(audit.epsilon_lower_bound)} "
            f"(a LOWER BOUND; direction {audit.bound_direction}; {audit.method}). The audit could not have measured "
            f"more than ε = {fmt_lower(audit.ceiling)} with this many trials (measurability ceiling)."
        )
        op = audit.operating_point
        lines += _wrap(
            f"Operating point: threshold {raw_number(op.threshold)}, false positives {op.false_positives} of "
            f"{op.negatives}, false negatives {op.false_negatives} of {op.positives} "
            f"(FPR {op.fpr:.4g} ≤ {op.fpr_upper:.4g}, FNR {op.fnr:.4g} ≤ {op.fnr_upper:.4g} at the stated confidence).",
            "  ",
        )
        for estimate in audit.estimates:
            lines += _wrap(
                f"- ESTIMATE, not a bound: {estimate.name} ε ≈ {fmt_estimate(estimate.epsilon)} "
                f"({estimate.assumption})",
                "  ",
            )
    return lines


def _implementation_statement_lines(report: Report) -> list[str]:
    """The statement's implementation-evidence paragraph (none without it): dplens check-dp-sgd of the step that ran."""
    if report.implementation_evidence is None:
        return []
    from dplens.reports.implementation import statement_lines

    first, *rest = statement_lines(report.implementation_evidence)
    lines = ["", *_wrap(first)]
    for line in rest:
        lines += _wrap(line, "  ")
    return lines


def _ledger_statement_lines(report: Report) -> list[str]:
    """The statement's budget-ledger paragraph (none without a ledger)."""
    lines: list[str] = []
    if report.budget_ledger:
        lines.append("")
        book = report.budget_ledger
        lines += _wrap(
            f"Budget ledger {book['ledger']} (read {book['time_utc']}): cumulative spend per budget and period."
        )
        for budget in book["budgets"]:
            for period in budget["periods"]:
                lines += _wrap(
                    f"- {budget['name']} ({budget['mode']}; {budget['unit']}), period {period['period']}: "
                    f"{period['releases']} release(s), spent ε ≤ {fmt_upper(period['spent_epsilon'])} (UPPER BOUND) "
                    f"of {fmt_upper(budget['target_epsilon'])} at δ = {budget['delta']:g}, remaining ≥ "
                    f"{fmt_lower(period['remaining_epsilon'])} (LOWER BOUND).",
                    "  ",
                )
            count = budget.get("tuning_studies") or 0
            if count:
                shown = list(budget.get("tuning_study_releases") or {})[:10]
                more = f" and {count - len(shown)} more" if count > len(shown) else ""
                lines += _wrap(
                    f"- {budget['name']}: {count} release(s) are tuning studies, each charged as one release with its "
                    f"selection included: {', '.join(shown)}{more}.",
                    "  ",
                )
    return lines


def _nist_lines(report: Report) -> list[str]:
    """The NIST SP 800-226 section as text: every layer and hazard with its status, section, finding and where."""
    nist = report.nist
    lines = _wrap(
        f"NIST SP 800-226 evaluation ({nist.publication}): each layer of the pyramid and each privacy hazard, "
        "marked SHOWN BY THIS REPORT, DECLARED BY THE AUTHOR (not checked), NOT ASSESSED BY DPLENS, or HAZARD FLAGGED."
    )
    for group, items in (("Layers", nist.layers), ("Hazards", nist.hazards)):
        lines += _wrap(f"{group}:", "  ")
        for item in items:
            where = f" [where: {item.where}]" if item.where else ""
            lines += _wrap(
                f"- {item.status.label.upper()}: {item.title} ({item.section}): {item.finding}{where}", "    "
            )
    return lines


# --------------------------------------------------------------------------------------------
# Everything at once
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """The files of a written report."""

    json: Path
    html: Path
    statement: Path
    figures: tuple[Path, ...]
    report: Report
    registry_entry: Path | None = None  # registry-entry.yaml, when the spec has a [deployment] table
    registry: Any = None  # its dplens.reports.registry_entry.RegistryEntry (the tier it reaches)


def write_report(report: Report, out_dir: Path, *, with_figures: bool = True) -> ReportFiles:
    """Write ``out_dir/report.json``, ``report.html``, ``privacy-statement.txt`` and the figures (``*.png``).

    Each file is written atomically; the JSON is validated before anything is written.
    """
    from dplens.reports import plots

    out_dir = Path(out_dir)
    figure_bytes: dict[str, bytes] = {}
    figure_records = []
    if with_figures:
        for name, file, caption, data in plots.figures_for(report):
            figure_bytes[file] = data
            figure_records.append(Figure(name=name, file=file, caption=caption))
    sections = _additional_sections(report)
    if with_figures:
        for section in sections:
            figure_bytes.update(section.figures)
    report = report.with_figures(tuple(figure_records))
    json_text = to_canonical_json(report)  # validates before any file is written
    html_text = render_html(report, figure_bytes, sections=sections)
    statement = render_statement(report)
    out_dir.mkdir(parents=True, exist_ok=True)
    figure_paths = tuple(atomic_write_bytes(out_dir / file, data) for file, data in figure_bytes.items())
    statement_path = atomic_write_text(out_dir / "privacy-statement.txt", statement)
    html_path = atomic_write_text(out_dir / "report.html", html_text)
    json_path = atomic_write_text(out_dir / "report.json", json_text)
    return ReportFiles(json=json_path, html=html_path, statement=statement_path, figures=figure_paths, report=report)
