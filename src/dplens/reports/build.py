"""Assembling a :class:`~dplens.reports.model.Report` from finished results: the report layer renders, it
computes no privacy quantity.

Data flows one way (DESIGN.md): spec → accountant (:meth:`Accountant.summary`: every route, the curves behind
the figures) → audit (read only through ``AuditResult.to_dict()``) → :func:`build_report` → render. The
orchestration (``dplens report``, :func:`dplens.generate_report`) lives in :mod:`dplens._api`.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import math
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dplens._version import __version__
from dplens.reports.defaults import DEFAULT_PRIVACY_UNIT
from dplens.reports.format import fmt_estimate, fmt_lower, fmt_upper, percent
from dplens.reports.model import (
    Accounting,
    AuditEvidence,
    Claim,
    Definition,
    MechanismSection,
    Provenance,
    Report,
    Status,
    Verdict,
    combined_status,
)
from dplens.reports.nist import evaluate_nist
from dplens.reports.scope import privacy_scope

__all__ = [
    "CERTIFICATION_TOLERANCE",
    "build_report",
    "certifies",
    "describe_neighbouring",
    "describe_sampling",
    "provenance",
]

_DEPENDENCIES = ("numpy", "scipy", "mpmath", "dp-accounting", "matplotlib", "jinja2", "tqdm")


# --------------------------------------------------------------------------------------------
# Plain-language descriptions
# --------------------------------------------------------------------------------------------


def describe_neighbouring(relation: str, unit: str) -> str:
    """The neighbouring relation in plain words, for ``unit`` (the unit of protection)."""
    match relation:  # the values of dplens.accountant.events.NeighboringRelation
        case "add_remove":
            return f"data sets that differ by adding or removing {unit} (add/remove adjacency)"
        case "replace_one":
            return f"data sets that differ by replacing {unit} with another (replace-one adjacency)"
        case "zero_out":
            return f"data sets that differ by replacing {unit} with a special zero record (zero-out adjacency)"
    return f"data sets that are neighbours under the {relation!r} relation, for {unit}"


def _walk(event: Mapping[str, Any], count: int, out: list[tuple[Mapping[str, Any], int]]) -> None:
    match event.get("type"):
        case "SelfComposed":
            _walk(event["event"], count * int(event["count"]), out)
        case "Composed":
            for inner in event["events"]:
                _walk(inner, count, out)
        case _:
            out.append((event, count))


_DP_SGD_SAMPLERS = {
    "poisson": "Poisson sampling (each record in each step independently with probability B/N)",
    "truncated-poisson": "Poisson sampling with batches truncated to at most {max_batch_size} records",
    "balls-and-bins": "balls-and-bins sampling (every epoch each record in one step chosen uniformly at random)",
    "fixed-bins": "fixed bins (each record's step drawn once and repeated every cycle)",
    "shuffle": "shuffled fixed-size batches (a new permutation every epoch)",
    "shuffle-once": "shuffled fixed-size batches (one permutation for the whole training)",
    "fixed-size": "a fixed-size subset of the records drawn afresh at every step",
    "cyclic": "the same fixed-size batches in the same order every epoch",
}


def _dp_sgd_words(event: Mapping[str, Any], count: int) -> str:
    sampler = _DP_SGD_SAMPLERS.get(event["sampling"], event["sampling"]).format(**event)
    runs = f" (x{count})" if count != 1 else ""
    return (
        f"DP-SGD on {event['sampling']} sampling{runs}: {sampler}; {event['epochs']:g} epochs of "
        f"{event['dataset_size']} records in batches of {event['batch_size']}, under {event['neighboring']} "
        "adjacency; the guarantee is for this sampler and no other"
    )


def _mf_words(event: Mapping[str, Any], count: int) -> str:
    """A matrix-factorisation training's sampler (:class:`dplens.accountant.mf_accounting.MfTraining`), in the words
    of :mod:`dplens.accountant.mf_accounting`'s schemas."""
    n, b, bands = event["dataset_size"], event["batch_size"], event.get("bands")
    sampling = event["sampling"]
    schema = {
        "cyclic-poisson": (
            f"cyclic Poisson sampling: the {n} records split into {bands} groups, group t mod {bands} active at step "
            f"t, each of its records included independently with probability q = B·b/N = {b * (bands or 1) / n:.6g}"
            + (f", batches truncated at {event['max_batch_size']}" if event.get("max_batch_size") else "")
        ),
        "poisson": f"Poisson sampling at every step: each record included independently with probability {b / n:.6g}",
        "b-min-sep": (
            f"b-min-separation sampling: random participations at least {event.get('min_separation')} steps apart"
        ),
        "fixed-bins": f"fixed bins: each record in one step of each cycle of ⌈{n}/{b}⌉ steps, drawn once",
        "balls-and-bins": "balls-and-bins: each record in one step of each epoch, a fresh allocation each epoch",
        "cyclic": "the same batches in the same order every epoch (no randomness to amplify)",
        "min-sep": (
            f"any pattern of at most {event.get('max_participations')} participations {event.get('min_separation')} "
            "steps apart (the worst case; no randomness to amplify)"
        ),
        "shuffle": "shuffled batches, a new permutation each epoch",
        "shuffle-once": "shuffled batches, one permutation for every epoch",
    }.get(sampling, sampling)
    return (
        f"{event['mechanism']} matrix factorisation (correlated noise) on {schema}; {event['epochs']:g} epochs of {n} "
        f"records in batches of {b}, under {event['neighboring']} adjacency; the guarantee is for this sampler and "
        "no other"
    )


_SAMPLER_WORDS = {
    "DpSgdRun": _dp_sgd_words,
    "MfTraining": _mf_words,
    "RandomAllocation": lambda event, count: (
        f"balls-and-bins: each record in {event['selected']} of the {event['steps']} steps of an epoch, chosen "
        f"uniformly at random, a fresh allocation for each of {count} epoch{'s' if count != 1 else ''}"
    ),
    "FixedBins": lambda event, count: (
        f"fixed bins: each record in one of {event['steps']} steps drawn once and repeated in each of "
        f"{event['cycles']} cycles"
    ),
    "ShuffledBatches": lambda event, count: (
        f"shuffled batches of {event['batch_size']} from {event['dataset_size']} records, "
        + ("a new permutation each epoch" if event["reshuffle"] else "one permutation")
        + f", {event['epochs']} epochs (upper bound without amplification)"
    ),
    "CyclicBatches": lambda event, count: f"the same batches every epoch, {event['epochs']} epochs (no amplification)",
}


def describe_sampling(ledger: Mapping[str, Any]) -> str:
    """The sampling assumptions of a ledger (as ``Accountant.to_json`` writes it): the guarantee holds only if the
    data are sampled this way."""
    flat: list[tuple[Mapping[str, Any], int]] = []
    for entry in ledger.get("entries", ()):
        _walk(entry["event"], int(entry["count"]), flat)
    parts = []
    for event, count in flat:
        steps = f"{count} step{'s' if count != 1 else ''}"
        if event.get("type") == "PoissonSampled":
            parts.append(
                f"Poisson sampling with rate q = {event['sampling_rate']:.6g} ({steps}): at every step each record is "
                "included independently with probability q; the amplification assumes exactly this sampling "
                "(shuffled fixed-size batches are not covered)"
            )
        elif event.get("type") == "SampledWithoutReplacement":
            parts.append(
                f"batches of {event['sample_size']} records drawn uniformly without replacement from "
                f"{event['dataset_size']} ({steps})"
            )
        elif event.get("type") in _SAMPLER_WORDS:
            parts.append(_SAMPLER_WORDS[event["type"]](event, count))
    if not parts:
        return "no subsampling: every mechanism run uses the whole data set"
    return "; ".join(dict.fromkeys(parts))


# --------------------------------------------------------------------------------------------
# Provenance, claim, verdict
# --------------------------------------------------------------------------------------------


def _git_sha() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        proc = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and len(sha) == 40 else None


def provenance(
    *,
    spec: Any,
    seeds: Mapping[str, Any],
    command: Sequence[str] = (),
    created_utc: str | None = None,
) -> Provenance:
    """Tool and dependency versions, the spec's hash and source, the seeds and the command line."""
    versions = {}
    for name in _DEPENDENCIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return Provenance(
        tool={"name": "dplens", "version": __version__, "git_sha": _git_sha()},
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        dependencies=versions,
        spec_source=spec.source,
        spec_sha256=spec.sha256,
        seeds=dict(seeds),
        created_utc=created_utc or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=tuple(command),
    )


#: The accountant rounds every ε up by a relative 1e-12 (``conversions.round_up``) to absorb floating-point error.
#: A claim equal to the exact value (e.g. 2 × randomized response with ε = 1 claimed as ε = 2) is certified up to
#: twice that margin; anything larger is not.
CERTIFICATION_TOLERANCE = 2e-12


def certifies(upper_bound: float, claimed_epsilon: float) -> bool:
    """Whether an accountant's upper bound supports a claimed ε (up to the accountant's rounding margin)."""
    return upper_bound <= claimed_epsilon * (1 + CERTIFICATION_TOLERANCE)


def _claim(spec: Any, accounting: Accounting, *, relation: str, unit: str, source: str | None) -> Claim:
    common = {
        "neighbouring": relation,
        "neighbouring_description": describe_neighbouring(relation, unit),
        "privacy_unit": unit,
        "mu": accounting.mu,
    }
    if spec.claim is None:
        tight = accounting.tightest
        return Claim(
            definition=Definition.APPROX_DP if accounting.delta > 0 else Definition.PURE_DP,
            epsilon=tight.epsilon,
            delta=accounting.delta,
            source=source or f"accountant ({tight.method}): its tightest upper bound",
            certified_by_accountant=math.isfinite(tight.epsilon),
            **common,
        )
    claim = spec.claim
    bound = accounting.epsilon_for(claim.delta)
    if bound is None:
        raise ValueError(
            f"the accounting summary has no epsilon at the claim's delta {claim.delta!r}; summarise with "
            "extra_deltas=(claim delta,)"
        )
    return Claim(
        definition=Definition.APPROX_DP if claim.delta > 0 else Definition.PURE_DP,
        epsilon=claim.epsilon,
        delta=claim.delta,
        source=source or "spec [claim]",
        certified_by_accountant=certifies(bound, claim.epsilon),
        **common,
    )


def _delta_text(delta: float) -> str:
    return f"{delta:g}"


def _with_additional(verdict: Verdict, additional: tuple[dict[str, Any], ...], certifies: str) -> Verdict:
    """The verdict once the additional audits (training, attribute, one-run games) are taken into account."""
    if not additional:
        return verdict
    reasons = list(verdict.reasons)
    for extra in additional:
        result = extra["result"]
        bound = result.get("epsilon_lower_bound")
        shown = fmt_lower(bound) if isinstance(bound, int | float) else "n/a"
        reasons.append(
            f"Additional audit ({extra['kind']}): {extra['verdict']}, ε ≥ {shown} (a valid lower bound). "
            f"{result.get('verdict_reason', '')}".rstrip()
        )
    status = combined_status(None if verdict.status is Status.NOT_AUDITED else verdict.status, additional)
    sentence = verdict.sentence
    if status is Status.VIOLATION and verdict.status is not Status.VIOLATION:
        kinds = ", ".join(e["kind"] for e in additional if e["verdict"] == Status.VIOLATION.value)
        sentence = (
            f"Violation: the additional audit ({kinds}) gives a valid lower bound on ε above the claim; the claim is "
            f"false for this mechanism, whatever the accountant certifies ({certifies})."
        )
    elif verdict.status is Status.NOT_AUDITED:
        sentence = (
            f"{status.value.capitalize()}: only the additional audit(s) ran; see below. The guarantee rests on "
            f"accounting ({certifies})."
        )
    return Verdict(status=status, sentence=sentence, reasons=tuple(reasons))


def _with_implementation(
    verdict: Verdict,
    section: Mapping[str, Any] | None,
    certifies: str,
    *,
    main: Status | None,
    additional: tuple[dict[str, Any], ...],
) -> Verdict:
    """The verdict once the implementation evidence (``dplens check-dp-sgd`` of the step that ran) is taken in."""
    from dplens.reports.implementation import assumption_lines, counted

    if section is None:
        return verdict
    audit, model = section["audit"], section["model_based"]
    # a check excluded by an assumption the user stated is reported in the section, not a reason of the verdict
    bad = [f"{c['name']} ({c['finding']})" for c in section["checks"] if c["verdict"] == "VIOLATION" and counted(c)]
    if section["claim_comparison"]["audit_exceeds_claim"] or audit["verdict"] == "VIOLATION":
        bad.append(f"the assumption-free audit (ε ≥ {fmt_lower(audit['epsilon_lower_bound'])}, a valid lower bound)")
    if section["claim_comparison"]["model_based_exceeds_claim"] or model["verdict"] == "VIOLATION":
        bad.append(
            f"the model-based bound (ε ≥ {fmt_lower(model['epsilon_lower_bound'])}, valid only under its assumptions)"
        )
    reasons = [
        *verdict.reasons,
        f"Implementation evidence (dplens check-dp-sgd of {section['subject']}): {section['verdict']}; "
        f"audit ε ≥ {fmt_lower(audit['epsilon_lower_bound'])} (assumption-free lower bound), model-based ε ≥ "
        f"{fmt_lower(model['epsilon_lower_bound'])} (model-based), against the claimed ε = "
        f"{fmt_upper(section['claim_comparison']['claim_epsilon'])}.",
        *(f"Implementation evidence assumption {line}." for line in assumption_lines(section)),
    ]
    status = combined_status(main, additional, section)
    sentence = verdict.sentence
    under = " under an assumption the user stated" if section.get("stated_assumptions") else ""
    if status is Status.VIOLATION and verdict.status is not Status.VIOLATION:
        sentence = (
            "Violation: the implementation evidence shows that the DP-SGD step that ran does not implement the "
            f"accounted mechanism: {'; '.join(bad)}. The claim does not hold for the code that ran, whatever the "
            f"accountant certifies ({certifies})."
        )
    elif status is not verdict.status:
        which = "only" if verdict.status is Status.NOT_AUDITED else "the additional audit(s) and"
        sentence = (
            f"{status.value.capitalize()}: {which} the implementation checks of the DP-SGD step that ran (dplens "
            f"check-dp-sgd: {section['verdict']}{under}) decide this verdict; see the implementation evidence. The "
            f"guarantee rests on accounting ({certifies})."
        )
    return Verdict(status=status, sentence=sentence, reasons=tuple(reasons))


def _verdict(claim: Claim, accounting: Accounting, audit: AuditEvidence | None, not_audited: str | None) -> Verdict:
    ub = fmt_upper(accounting.epsilon)
    certifies = (
        f"the accountant certifies ε ≤ {ub} at δ = {_delta_text(accounting.delta)} "
        f"(an upper bound; tightest route: {accounting.tightest.method})"
    )
    reasons = [certifies[0].upper() + certifies[1:] + "."]
    if claim.certified_by_accountant is False:
        reasons.append(
            f"The accountant's upper bound does not support the claimed ε = {fmt_upper(claim.epsilon)} at "
            f"δ = {_delta_text(claim.delta or 0.0)}: accounting cannot certify the claim."
        )
    if audit is None:
        sentence = (
            f"Not audited: no empirical test was run ({not_audited}); the statement rests on accounting alone: "
            f"{certifies}"
        )
        if claim.certified_by_accountant is False:
            sentence += f", which does NOT support the claimed ε = {fmt_upper(claim.epsilon)}"
        sentence += "."
        return Verdict(status=Status.NOT_AUDITED, sentence=sentence, reasons=tuple(reasons))
    conf = percent(audit.confidence)
    lb = fmt_lower(audit.epsilon_lower_bound)
    claimed = fmt_upper(audit.epsilon_claimed)
    delta = _delta_text(audit.delta)
    match audit.verdict:
        case Status.VIOLATION:
            sentence = (
                f"Violation: with {conf} confidence the true ε at δ = {delta} is at least {lb}, above the claimed "
                f"ε = {claimed}; the claim is false for this mechanism."
            )
        case Status.INCONCLUSIVE:
            sentence = (
                f"Inconclusive: with {audit.trials} trials per side no audit could measure an ε above "
                f"{fmt_lower(audit.ceiling)} at {conf} confidence, which is below the claimed ε = {claimed}; "
                "more trials are needed to test this claim."
            )
        case _:
            sentence = (
                f"Consistent: the audit's {conf} lower bound ε ≥ {lb} does not exceed the claimed ε = {claimed} "
                f"(δ = {delta}); no evidence against the claim was found. An audit can only refute a claim, not "
                f"prove it: the guarantee rests on accounting ({certifies})."
            )
    reasons.append(f"Audit: {audit.verdict_reason}")
    estimates = ", ".join(f"{e.name} ε ≈ {fmt_estimate(e.epsilon)}" for e in audit.estimates if e.epsilon is not None)
    if estimates:
        reasons.append(f"Estimates (not bounds): {estimates}.")
    return Verdict(status=audit.verdict, sentence=sentence, reasons=tuple(reasons))


def _certifies(accounting: Accounting) -> str:
    return (
        f"the accountant certifies ε ≤ {fmt_upper(accounting.epsilon)} at δ = {_delta_text(accounting.delta)} "
        f"(an upper bound; tightest route: {accounting.tightest.method})"
    )


def _additional(results: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    from dplens.reports.audit_page import audit_kind

    out = []
    for result in results:
        data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
        out.append({"kind": audit_kind(data), "verdict": str(data.get("verdict")), "result": data})
    return tuple(out)


def _evidence(evidence: Any, claim: Claim, source: str) -> dict[str, Any] | None:
    """The implementation evidence section of a check-dp-sgd result (or its dict), or None without one."""
    if evidence is None:
        return None
    from dplens.reports.implementation import implementation_section

    data = evidence.to_dict() if hasattr(evidence, "to_dict") else evidence
    return implementation_section(data, claim=claim.to_dict(), source=source)


def _report_verdict(
    claim: Claim,
    section: Accounting,
    audit: AuditEvidence | None,
    not_audited_reason: str | None,
    extras: tuple[dict[str, Any], ...],
    evidence: dict[str, Any] | None,
) -> Verdict:
    """The verdict from the main audit, the additional audits and the implementation evidence."""
    verdict = _with_additional(_verdict(claim, section, audit, not_audited_reason), extras, _certifies(section))
    main = None if audit is None else audit.verdict
    return _with_implementation(verdict, evidence, _certifies(section), main=main, additional=extras)


def _unit_and_scope(spec: Any, privacy_unit: str, deployment: Mapping[str, Any] | None):
    """(unit in words, whether the author gave it, the deployment table, the privacy scope) of a report."""
    if not isinstance(privacy_unit, str) or not privacy_unit.strip():
        raise ValueError(f"privacy_unit must be a non-empty string; got {privacy_unit!r}")
    unit_given = privacy_unit != DEFAULT_PRIVACY_UNIT
    if deployment is None and getattr(spec, "deployment", None) is not None:
        deployment = spec.deployment.to_dict()
    deployment = None if deployment is None else dict(deployment)
    scope = privacy_scope(spec.mechanisms, deployment=deployment)
    if not unit_given and scope is not None and scope["unit"] == "user":
        privacy_unit = scope["unit_words"]  # the user-level tables' unit (issue 49), never "one record"
    return privacy_unit, unit_given, deployment, scope


def build_report(
    *,
    spec: Any,
    accounting: Any,
    title: str,
    audit: Any = None,
    not_audited_reason: str | None = None,
    privacy_unit: str = DEFAULT_PRIVACY_UNIT,
    claim_source: str | None = None,
    seeds: Mapping[str, Any] | None = None,
    command: Sequence[str] = (),
    created_utc: str | None = None,
    additional_audits: Sequence[Any] = (),
    budget_ledger: Mapping[str, Any] | None = None,
    deployment: Mapping[str, Any] | None = None,
    implementation_evidence: Any = None,
    implementation_source: str = "dplens.check_dp_sgd result",
) -> Report:
    """Assemble the report from finished results (figures are added on writing).

    Args:
        spec: the validated spec (its ``mechanisms``, ``claim``, ``source`` and ``sha256`` are read).
        accounting: the accountant's summary (:meth:`dplens.Accountant.summary`), or its ``to_dict()``.
        title: the report's title.
        audit: the audit's result (``AuditResult``), its ``to_dict()``, or :class:`AuditEvidence`; None when not
            audited (then ``not_audited_reason`` says why).
        privacy_unit: the unit of protection, in words.
        claim_source: overrides the claim's source text (e.g. "calibration target").
        seeds: the seeds used (recorded in the provenance).
        command: the command line (recorded in the provenance).
        created_utc: a fixed timestamp (default: now).
        additional_audits: further audit results (the spec's ``[audit]`` game: one run, many trainings, attribute
            inference, scores); a VIOLATION in any of them makes the report's verdict a VIOLATION.
        budget_ledger: the cumulative section of a budget ledger (:func:`dplens.ledger.report.ledger_section`).
        deployment: the ``[deployment]`` table (``Deployment.to_dict()``; default: the spec's): recorded in the
            report and read by its NIST SP 800-226 section (:func:`dplens.reports.nist.evaluate_nist`).
        implementation_evidence: a finished ``dplens check-dp-sgd`` result (``DpSgdCheckResult`` or its
            ``to_dict()``) of the DP-SGD step that ran, at the claim's δ: the report's implementation evidence
            section (:mod:`dplens.reports.implementation`); a VIOLATION in it makes the report's verdict one.
        implementation_source: where the evidence came from (a file name), recorded in the section.

    Example:
        >>> import dplens
        >>> spec = dplens.parse_spec({"mechanism": [{"type": "laplace", "epsilon": 1.0}]})
        >>> summary = spec.accountant().summary(0.0)
        >>> report = build_report(spec=spec, accounting=summary, title="Laplace", not_audited_reason="example")
        >>> report.verdict.status.value, report.claim.epsilon  # the accountant's ε, rounded up
        ('NOT_AUDITED', 1.000000000001)
    """
    privacy_unit, unit_given, deployment, scope = _unit_and_scope(spec, privacy_unit, deployment)
    if audit is None and not not_audited_reason:
        raise ValueError("not_audited_reason is required when audit is None")
    summary = accounting.to_dict() if hasattr(accounting, "to_dict") else accounting
    if not isinstance(summary, Mapping):
        raise ValueError(f"accounting must be an accounting summary or its dict; got {accounting!r}")
    section = accounting if isinstance(accounting, Accounting) else Accounting.from_dict(summary)
    if audit is not None and not isinstance(audit, AuditEvidence):
        audit = AuditEvidence.from_audit_dict(audit.to_dict() if hasattr(audit, "to_dict") else audit)
    relation = summary.get("neighbouring", "add_remove")
    ledger = dict(summary.get("ledger", {}))
    claim = _claim(spec, section, relation=relation, unit=privacy_unit, source=claim_source)
    extras = _additional(additional_audits)
    evidence = _evidence(implementation_evidence, claim, implementation_source)
    mechanism = MechanismSection(
        name=title,
        components=tuple(dict(t) for t in spec.mechanisms),
        neighbouring=relation,
        sampling=describe_sampling(ledger),
        ledger=ledger,
    )
    nist = evaluate_nist(
        claim=claim.to_dict(),
        accounting=section.to_dict(),
        audit=None if audit is None else audit.to_dict(),
        additional_audits=extras,
        components=mechanism.components,
        deployment=deployment,
        unit_given=unit_given,
        scope=scope,
        not_audited_reason=not_audited_reason,
        budget_ledger=budget_ledger,
        implementation_evidence=evidence,
    )
    return Report(
        title=title,
        claim=claim,
        mechanism=mechanism,
        accounting=section,
        audit=audit,
        nist=nist,
        deployment=deployment,
        not_audited_reason=None if audit is not None else not_audited_reason,
        verdict=_report_verdict(claim, section, audit, not_audited_reason, extras, evidence),
        additional_audits=extras,
        implementation_evidence=evidence,
        budget_ledger=None if budget_ledger is None else dict(budget_ledger),
        privacy_scope=scope,
        provenance=provenance(
            spec=spec,
            seeds=seeds if seeds is not None else ({"audit": audit.seed} if audit is not None else {}),
            command=command or tuple(sys.argv),
            created_utc=created_utc,
        ),
    )
