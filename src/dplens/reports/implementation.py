"""The report's "implementation evidence" section: ``dplens check-dp-sgd`` on the DP-SGD step that ran (issue 46).

The section renders a finished check (``DpSgdCheckResult.to_dict()``, the JSON of ``dplens check-dp-sgd --json``):
the named implementation checks with their verdicts and measured against declared values, the assumption-free
audit's valid ε lower bound, and the **model-based** bound — valid only under its stated assumptions, never called
assumption-free — each beside the report's claim. It computes no privacy quantity: every number is read from the
check's dictionary; the only work here is validating that dictionary and comparing the two lower bounds with the
claimed ε (a bound above the claim refutes it: for the audit whatever the code does, for the model-based bound under
its assumption).

The section's status in the report's terms (:func:`section_status`): VIOLATION when the check's overall verdict is
VIOLATION (any check, the audit or the model-based bound, at the check's Bonferroni split of α) or either lower bound
exceeds the report's claimed ε; CONSISTENT when the check PASSes; INCONCLUSIVE otherwise (a check without power, or a
conservative DEVIATION such as more noise than declared).

Assumptions the user stated to check-dp-sgd (``stated_assumptions``, e.g. ``assume_finite_gradients``: every
per-sample gradient is finite) are shown wherever the checks are: a check they exclude (``excluded_from_overall``)
is rendered with its own verdict and finding, marked "not counted" with the reason, and is not named among the
reasons of a VIOLATION. Evidence that marks a check excluded without a stated assumption naming it is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dplens._numbers import fmt_short
from dplens.reports.format import fmt_lower, fmt_upper
from dplens.reports.schema import IMPLEMENTATION_CHECK_SCHEMA as CHECK_SCHEMA
from dplens.reports.schema import IMPLEMENTATION_SECTION_SCHEMA as SECTION_SCHEMA
from dplens.reports.schema import _check

__all__ = [
    "CHECK_SCHEMA",
    "SECTION_SCHEMA",
    "assumption_lines",
    "counted",
    "implementation_section",
    "section_status",
    "statement_lines",
    "summary_rows",
    "validate_check_dict",
]


def validate_check_dict(data: Any, *, source: str = "implementation evidence") -> dict[str, Any]:
    """``data`` as a check-dp-sgd result's dictionary, or ``ValueError`` in one line naming ``source`` and the field."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{source}: must be the JSON object of dplens check-dp-sgd --json; got {type(data).__name__}")
    data = dict(data)
    problem = _check(data, CHECK_SCHEMA, "")
    if problem:
        raise ValueError(f"{source}: not a dplens check-dp-sgd result: {problem}")
    if "model-based" not in data["model_based"]["assumptions"]:
        raise ValueError(f"{source}: model_based.assumptions must label the bound 'model-based'")
    named = {name for a in data.get("stated_assumptions", ()) for name in a["excludes"]}
    for c in data["checks"]:
        if c.get("excluded_from_overall") and c["name"] not in named:
            raise ValueError(
                f"{source}: check {c['name']!r} is excluded_from_overall but no stated assumption excludes it"
            )
    return data


def counted(check: Mapping[str, Any]) -> bool:
    """Whether a check's verdict counts in the overall verdict (not excluded by an assumption the user stated)."""
    return not check.get("excluded_from_overall", False)


def section_status(data: Mapping[str, Any], claim_epsilon: float) -> tuple[str, bool, bool]:
    """The section's status in the report's terms, and whether the audit's and the model-based bound exceed the
    report's claimed ε."""
    audit = data["audit"]["epsilon_lower_bound"] > claim_epsilon
    model = data["model_based"]["epsilon_lower_bound"] > claim_epsilon
    if data["verdict"] == "VIOLATION" or audit or model:
        return "VIOLATION", audit, model
    return ("CONSISTENT" if data["verdict"] == "PASS" else "INCONCLUSIVE"), audit, model


def implementation_section(
    data: Any, *, claim: Mapping[str, Any], source: str = "dplens.check_dp_sgd result"
) -> dict[str, Any]:
    """The report's section from a check's dictionary and the report's claim (``Claim.to_dict()``).

    The check must state the claim's δ: its two lower bounds are bounds on ε at that δ.
    """
    data = validate_check_dict(data, source=f"implementation evidence {source}")
    epsilon, delta = claim.get("epsilon"), claim.get("delta") or 0.0
    if not isinstance(epsilon, int | float) or not math.isfinite(epsilon):
        raise ValueError(f"implementation evidence needs a claim with a finite epsilon; got {epsilon!r}")
    if data["declared"]["delta"] != delta:
        raise ValueError(
            f"implementation evidence {source}: its delta {data['declared']['delta']:g} differs from the report's "
            f"claim delta {delta:g} (rerun dplens check-dp-sgd with --delta {delta:g})"
        )
    status, audit, model = section_status(data, float(epsilon))
    return data | {
        "source": source,
        "report_status": status,
        "claim_comparison": {
            "claim_epsilon": float(epsilon),
            "claim_delta": float(delta),
            "audit_exceeds_claim": audit,
            "model_based_exceeds_claim": model,
        },
    }


def _value(value: Any) -> str:
    return "—" if value is None else fmt_short(value) if isinstance(value, float) else str(value)


def summary_rows(section: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per check, then the audit and the model-based bound (name, verdict, measured, declared, finding)."""
    rows = [
        {
            "name": c["name"],
            "verdict": c["verdict"],
            "measured": _value(c.get("measured")),
            "declared": _value(c.get("declared")),
            "quantity": str(c.get("quantity", "")),
            "finding": c["finding"],
            "not_counted": "" if counted(c) else f"not counted in the verdict: {c.get('exclusion_reason') or ''}",
        }
        for c in section["checks"]
    ]
    audit, model, claim = section["audit"], section["model_based"], section["claim_comparison"]
    rows.append(
        {
            "name": "audit (assumption-free)",
            "verdict": audit["verdict"],
            "measured": f"ε ≥ {fmt_lower(audit['epsilon_lower_bound'])}",
            "declared": f"ε = {fmt_upper(claim['claim_epsilon'])}",
            "quantity": "valid ε lower bound (no assumption on the code)",
            "finding": f"{audit.get('statistic', '')}; {audit['trials_per_side']} trainings per side",
            "not_counted": "",
        }
    )
    rows.append(
        {
            "name": "model-based bound",
            "verdict": model["verdict"],
            "measured": f"ε ≥ {fmt_lower(model['epsilon_lower_bound'])}",
            "declared": f"ε = {fmt_upper(claim['claim_epsilon'])}",
            "quantity": "model-based ε lower bound (valid only under its assumptions)",
            "finding": model["assumptions"],
            "not_counted": "",
        }
    )
    return rows


def assumption_lines(section: Mapping[str, Any]) -> list[str]:
    """One sentence per assumption the user stated to check-dp-sgd (none by default), naming the checks not counted."""
    return [
        f"stated by the user, not checked by dplens: {a['statement']} ({a['option']}); "
        f"{', '.join(a['excludes'])} ran and {'is' if len(a['excludes']) == 1 else 'are'} reported but not counted "
        "in the verdict"
        for a in section.get("stated_assumptions", ())
    ]


def statement_lines(section: Mapping[str, Any]) -> list[str]:
    """The privacy statement's paragraph on the implementation evidence (unwrapped sentences)."""
    audit, model, claim, decl = (
        section["audit"],
        section["model_based"],
        section["claim_comparison"],
        section["declared"],
    )
    counts = {v: sum(c["verdict"] == v for c in section["checks"]) for v in ("PASS", "DEVIATION", "VIOLATION")}
    excluded = sum(not counted(c) for c in section["checks"])
    uncounted = f", {excluded} not counted under a stated assumption" if excluded else ""
    lines = [
        f"Implementation evidence (dplens check-dp-sgd of {section['subject']}, {section['source']}): "
        f"{section['verdict']}. The DP-SGD step that ran was checked against the declared mechanism (noise "
        f"multiplier {decl['noise_multiplier']:g}, clip {decl['max_grad_norm']:g}, batch size {decl['batch_size']}, "
        f"{decl['dataset_size']} records, {decl['steps']} steps, {decl['sampler']} sampler, normalise "
        f"{decl['normalise']}): {len(section['checks'])} checks ({counts['PASS']} PASS, {counts['DEVIATION']} "
        f"DEVIATION, {counts['VIOLATION']} VIOLATION{uncounted}), alpha = {section['alpha']:g} split over the checks, "
        "the audit and the model-based bound.",
    ]
    lines += [f"- Assumption {line}." for line in assumption_lines(section)]
    lines += [
        f"- {c['verdict']}{'' if counted(c) else ' (not counted: ' + str(c.get('exclusion_reason')) + ')'}: "
        f"{c['name']}: {c['finding']}"
        for c in section["checks"]
        if c["verdict"] != "PASS" or not counted(c)
    ]
    lines.append(
        f"- Assumption-free audit: the true ε at δ = {claim['claim_delta']:g} is AT LEAST "
        f"{fmt_lower(audit['epsilon_lower_bound'])} (a LOWER BOUND, valid whatever the code does), against the "
        f"claimed ε = {fmt_upper(claim['claim_epsilon'])}"
        + (": the claim is refuted." if section["claim_comparison"]["audit_exceeds_claim"] else ".")
    )
    lines.append(
        f"- Model-based bound (NOT assumption-free): ε ≥ {fmt_lower(model['epsilon_lower_bound'])} against the "
        f"claimed ε = {fmt_upper(claim['claim_epsilon'])}"
        + (", above the claim" if section["claim_comparison"]["model_based_exceeds_claim"] else "")
        + f"; {model['assumptions']}."
    )
    lines += [f"- Note: {note}." for note in section.get("notes", ())]
    return lines
