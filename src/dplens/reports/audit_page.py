"""Audit sections and the standalone audit report: user-code (target) audits and training audits, rendered.

An audit that has no spec behind it (``dplens audit --target``, ``dplens audit-scores``, a canary game run from
Python) is written as its result's ``to_dict()``; :func:`write_audit_report` turns that JSON into a report folder
(``report.json``, ``report.html``, figures), and :func:`render_section` gives the HTML section and figures that the
spec report embeds for its additional audits. Nothing here computes a privacy quantity: every number shown was
computed by the audit and is read from its dictionary.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AuditReportFiles", "AuditSection", "audit_kind", "render_section", "write_audit_report"]

AUDIT_REPORT_FORMAT = "dplens-audit-report"
AUDIT_REPORT_VERSION = 1
_VERDICTS = ("CONSISTENT", "VIOLATION", "INCONCLUSIVE")


def audit_kind(result: Mapping[str, Any]) -> str:
    """``"target"``, or the training audit's kind (``"two_sample"``, ``"one_run"``, ``"distinguish"``,
    ``"attribute"``); ``ValueError`` for anything else."""
    if not isinstance(result, Mapping):
        raise ValueError(f"an audit result must be a JSON object; got {type(result).__name__}")
    if result.get("format") == "dplens-target-audit":
        return "target"
    from dplens.reports import training_audit

    return training_audit.kind(dict(result))


@dataclass(frozen=True, slots=True)
class AuditSection:
    """One rendered audit: its kind, verdict, HTML ``<section>`` and figures (file name → PNG bytes)."""

    kind: str
    verdict: str
    html: str
    figures: dict[str, bytes]


def render_section(result: Mapping[str, Any], *, prefix: str = "") -> AuditSection:
    """The HTML section (figures embedded) and the figure files (named ``prefix + stem.png``) of one audit result.

    Example:
        >>> section = render_section({
        ...     "format": "dplens-target-audit", "verdict": "CONSISTENT", "verdict_reason": "no evidence",
        ...     "epsilon_lower_bound": 0.9, "epsilon_claimed": 1.0, "delta": 0.0, "confidence": 0.95,
        ...     "trials": 1000, "target": {"name": "m.f", "call": "f(data, rng)"}, "pair": {}, "scores": [],
        ...     "float_evidence": [], "reproducible": True, "reproducibility_note": "reproducible"})
        >>> section.kind, section.verdict, "m.f" in section.html
        ('target', 'CONSISTENT', True)
    """
    kind = audit_kind(result)
    verdict = str(result.get("verdict", ""))
    if verdict not in _VERDICTS:
        raise ValueError(f"audit result verdict must be one of {list(_VERDICTS)}; got {verdict!r}")
    if kind == "target":
        from dplens.reports.target_audit import render_target_audit

        return AuditSection(kind=kind, verdict=verdict, html=render_target_audit(dict(result)), figures={})
    from dplens.reports import training_audit

    pngs = training_audit.figures(dict(result))
    # The page's content security policy admits data: images only, so the figures are embedded (and also written).
    fragment = training_audit.html_fragment(dict(result), pngs)
    return AuditSection(
        kind=kind, verdict=verdict, html=fragment, figures={f"{prefix}{name}.png": png for name, png in pngs.items()}
    )


@dataclass(frozen=True, slots=True)
class AuditReportFiles:
    """The files :func:`write_audit_report` wrote."""

    json: Path
    html: Path
    figures: tuple[Path, ...]
    verdict: str


def _provenance(result: Mapping[str, Any], source: str, command: Sequence[str]) -> dict[str, Any]:
    from dplens._version import __version__

    canonical = json.dumps(result, sort_keys=True, default=str).encode()
    return {
        "tool": {"name": "dplens", "version": __version__},
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "source": source,
        "result_sha256": hashlib.sha256(canonical).hexdigest(),
        "created_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": list(command),
    }


def write_audit_report(
    result: Mapping[str, Any],
    out_dir: str | Path,
    *,
    title: str = "Audit report",
    source: str = "",
    command: Sequence[str] = (),
) -> AuditReportFiles:
    """Write ``out_dir/report.json`` (the audit's result with provenance), ``report.html`` and the figures.

    ``result`` is a target or training audit's ``to_dict()``. Everything is rendered before anything is written, and
    each file is written atomically.
    """
    from dplens.reports.output import atomic_write_bytes, atomic_write_text, template_environment

    section = render_section(result)
    provenance = _provenance(result, source, command)
    document = {
        "format": AUDIT_REPORT_FORMAT,
        "schema_version": AUDIT_REPORT_VERSION,
        "title": title,
        "kind": section.kind,
        "verdict": section.verdict,
        "result": dict(result),
        "figures": sorted(section.figures),
        "provenance": provenance,
    }
    json_text = json.dumps(document, indent=2, sort_keys=True, allow_nan=False, default=str) + "\n"
    page = (
        template_environment()
        .get_template("audit_report.html.j2")
        .render(title=title, section=section, provenance=provenance)
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = tuple(atomic_write_bytes(out / name, png) for name, png in sorted(section.figures.items()))
    html_path = atomic_write_text(out / "report.html", page)
    json_path = atomic_write_text(out / "report.json", json_text)
    return AuditReportFiles(json=json_path, html=html_path, figures=figures, verdict=section.verdict)
