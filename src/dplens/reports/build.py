"""Building a :class:`~dplens.reports.model.Report` from a spec: account every route, optionally audit.

Data flows one way (DESIGN.md): spec → accountant (every route, the curves behind the figures) → audit
(``dplens.auditing.games.audit_spec``, read only through ``AuditResult.to_dict()``) → report.
"""

from __future__ import annotations

import datetime as dt
import enum
import importlib.metadata
import math
import platform
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dplens import __version__
from dplens.accountant import conversions, pld
from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method
from dplens.accountant.curves import RdpConversion
from dplens.accountant.rdp import UnsupportedEventError
from dplens.reports.defaults import DEFAULT_CONFIDENCE, DEFAULT_DELTA, DEFAULT_PRIVACY_UNIT, DEFAULT_TRIALS
from dplens.reports.format import fmt_estimate, fmt_lower, fmt_upper, percent
from dplens.reports.model import (
    Accounting,
    AccountingRoute,
    AuditEvidence,
    Claim,
    Definition,
    MechanismSection,
    Provenance,
    Report,
    Status,
    Verdict,
)
from dplens.spec import Spec

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_DELTA",
    "DEFAULT_PRIVACY_UNIT",
    "DEFAULT_TRIALS",
    "AuditMode",
    "account",
    "audit_evidence",
    "build_report",
    "default_delta",
    "describe_neighbouring",
    "describe_sampling",
    "generate_report",
    "provenance",
]

#: δ of the report when neither ``--delta`` nor the spec's claim gives one.

#: δ grid of the ε(δ) table and figure (each ε on it is an upper bound).
_DELTA_GRID = tuple(10.0**-k for k in range(12, 0, -1))
_DEPENDENCIES = ("numpy", "scipy", "mpmath", "dp-accounting", "matplotlib", "jinja2", "tqdm")


# --------------------------------------------------------------------------------------------
# Plain-language descriptions
# --------------------------------------------------------------------------------------------


def describe_neighbouring(relation: str, unit: str) -> str:
    """The neighbouring relation in plain words, for ``unit`` (the unit of protection)."""
    match relation:
        case ev.NeighboringRelation.ADD_OR_REMOVE_ONE.value:
            return f"data sets that differ by adding or removing {unit} (add/remove adjacency)"
        case ev.NeighboringRelation.REPLACE_ONE.value:
            return f"data sets that differ by replacing {unit} with another (replace-one adjacency)"
        case ev.NeighboringRelation.REPLACE_SPECIAL.value:
            return f"data sets that differ by replacing {unit} with a special zero record (zero-out adjacency)"
    return f"data sets that are neighbours under the {relation!r} relation, for {unit}"


def _walk(event: ev.Event, count: int, out: list[tuple[ev.Event, int]]) -> None:
    match event:
        case ev.SelfComposed():
            _walk(event.event, count * event.count, out)
        case ev.Composed():
            for inner in event.events:
                _walk(inner, count, out)
        case _:
            out.append((event, count))


def describe_sampling(ledger: Sequence[tuple[ev.Event, int]]) -> str:
    """The sampling assumptions of a ledger: the guarantee holds only if the data are sampled this way."""
    flat: list[tuple[ev.Event, int]] = []
    for event, count in ledger:
        _walk(event, count, flat)
    parts = []
    for event, count in flat:
        steps = f"{count} step{'s' if count != 1 else ''}"
        if isinstance(event, ev.PoissonSampled):
            parts.append(
                f"Poisson sampling with rate q = {event.sampling_rate:.6g} ({steps}): at every step each record is "
                "included independently with probability q; the amplification assumes exactly this sampling "
                "(shuffled fixed-size batches are not covered)"
            )
        elif isinstance(event, ev.SampledWithoutReplacement):
            parts.append(
                f"batches of {event.sample_size} records drawn uniformly without replacement from "
                f"{event.dataset_size} ({steps})"
            )
    if not parts:
        return "no subsampling: every mechanism run uses the whole data set"
    return "; ".join(dict.fromkeys(parts))


# --------------------------------------------------------------------------------------------
# Accounting
# --------------------------------------------------------------------------------------------


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def account(accountant: Accountant, *, delta: float, calibration: Mapping[str, Any] | None = None) -> Accounting:
    """Every route that applies at ``delta`` (the tightest marked), and the curves behind the figures.

    Routes: RDP (α optimised continuously, optimal conversion), PLD (pessimistic connect-the-dots), EXACT
    (a closed-form profile) and PURE (basic composition of pure-DP ε, Dwork et al. 2006) where finite.
    Every ε is an upper bound; their minimum is the tightest one. ``delta = 0`` leaves only PURE.
    """
    routes: list[AccountingRoute] = []
    unsupported: list[dict[str, str]] = []
    if delta > 0:
        for method in (Method.RDP, Method.PLD, Method.EXACT):
            try:
                result = accountant.epsilon_result(delta, method=method)
            except UnsupportedEventError as err:
                unsupported.append({"method": method.value, "reason": str(err).splitlines()[0]})
                continue
            routes.append(
                AccountingRoute(
                    method=method.value,
                    epsilon=result.epsilon,
                    delta=delta,
                    details=result.details,
                    optimal_order=_finite_or_none(result.optimal_order),
                    discretisation=result.discretisation,
                )
            )
    pure = accountant.pure_epsilon()
    if math.isfinite(pure) or not routes:
        routes.append(
            AccountingRoute(
                method="pure",
                epsilon=pure,
                delta=delta,
                details=(
                    "pure DP by basic composition (Dwork, McSherry, Nissim, Smith 2006): the sum of the pure-DP "
                    "epsilons; valid at any delta"
                    if math.isfinite(pure)
                    else "no pure-DP guarantee: some mechanism (e.g. Gaussian) is not pure DP, so epsilon is "
                    "unbounded at delta = 0"
                ),
            )
        )
    else:
        unsupported.append({"method": "pure", "reason": "some mechanism in the ledger has no pure-DP guarantee"})
    best = min(range(len(routes)), key=lambda i: routes[i].epsilon)
    routes = [_marked(r, i == best) for i, r in enumerate(routes)]
    trade_off, trade_off_source = _trade_off_samples(accountant)
    return Accounting(
        delta=delta,
        routes=tuple(routes),
        unsupported=tuple(unsupported),
        epsilon_of_delta=tuple(_epsilon_of_delta(accountant, [r.method for r in routes], delta)),
        rdp_curve=tuple(_rdp_samples(accountant, routes)),
        trade_off=tuple(trade_off),
        trade_off_source=trade_off_source,
        calibration=dict(calibration) if calibration is not None else None,
    )


def _marked(route: AccountingRoute, tightest: bool) -> AccountingRoute:
    return AccountingRoute(
        method=route.method,
        epsilon=route.epsilon,
        delta=route.delta,
        details=route.details,
        is_tightest=tightest,
        optimal_order=route.optimal_order,
        discretisation=route.discretisation,
    )


def _epsilon_of_delta(accountant: Accountant, methods: list[str], delta: float) -> list[dict[str, Any]]:
    grid = sorted(set(_DELTA_GRID) | ({delta} if delta > 0 else set()))
    rows: list[dict[str, Any]] = []
    solvers: dict[str, Callable[[float], float]] = {}
    if "rdp" in methods:
        curve = accountant.rdp_curve()
        solvers["rdp"] = lambda d: curve.epsilon(d, conversion=RdpConversion.OPTIMAL)
    if "pld" in methods:
        solvers["pld"] = accountant.pld_profile().epsilon  # one PLD, queried at every δ
    if "exact" in methods:
        solvers["exact"] = accountant.exact_profile().epsilon
    if "pure" in methods:
        pure = accountant.pure_epsilon()
        solvers["pure"] = lambda d: pure
    for method, solve in solvers.items():
        for d in grid:
            rows.append({"method": method, "delta": d, "epsilon": float(solve(d))})
    return rows


def _rdp_samples(accountant: Accountant, routes: list[AccountingRoute]) -> list[dict[str, float]]:
    rdp_route = next((r for r in routes if r.method == "rdp"), None)
    if rdp_route is None:
        return []
    curve = accountant.rdp_curve()
    centre = rdp_route.optimal_order if rdp_route.optimal_order is not None else 8.0
    top = max(centre * 8.0, 64.0)
    if math.isfinite(curve.alpha_max):
        top = min(top, curve.alpha_max * (1 - 1e-9))
    alphas = 1.0 + np.geomspace(1e-2, top - 1.0, 80)
    if rdp_route.optimal_order is not None:
        alphas = np.append(alphas, rdp_route.optimal_order)
    if curve.integer_only:
        alphas = np.arange(2, max(int(top), 3) + 1, dtype=float)
        if alphas.size > 200:
            alphas = np.unique(np.round(np.geomspace(2, alphas[-1], 200)))
    alphas = np.unique(alphas)
    values = np.asarray(curve(alphas), dtype=float)
    return [{"alpha": float(a), "rdp": float(v)} for a, v in zip(alphas, values, strict=True)]


def _trade_off_samples(accountant: Accountant) -> tuple[list[dict[str, float]], str]:
    alphas = np.unique(np.concatenate([[0.0], np.geomspace(1e-6, 1e-2, 40), np.linspace(0.01, 1.0, 100)]))
    try:
        curve = accountant.trade_off()
        source = curve.description + " (DRS 2022 Prop. 2.12 on an epsilon grid: a pointwise lower bound)"
        betas = np.asarray(curve(alphas), dtype=float)
    except UnsupportedEventError:
        try:
            rdp_curve = accountant.rdp_curve()
        except UnsupportedEventError:
            return [], "no trade-off curve: no route supports the whole ledger"
        epsilons = np.concatenate([[0.0], np.geomspace(1e-3, 50.0, 150)])
        deltas = np.array([rdp_curve.delta(float(e)) for e in epsilons])
        betas = conversions.profile_to_trade_off(lambda _e: deltas, alphas, epsilons=epsilons)
        source = "from the RDP curve's delta(epsilon) on 151 epsilons (DRS 2022 Prop. 2.12): a pointwise lower bound"
    betas = np.clip(betas, 0.0, 1.0)
    return [{"alpha": float(a), "beta": float(b)} for a, b in zip(alphas, betas, strict=True)], source


def composed_mu(accountant: Accountant) -> float | None:
    """μ of the ledger when it is exactly μ-GDP (a composition of Gaussians), else None."""
    if not accountant.ledger:
        return None
    parts = tuple(e if c == 1 else ev.SelfComposed(event=e, count=c) for e, c in accountant.ledger)
    return pld.gaussian_mu(parts[0] if len(parts) == 1 else ev.Composed(events=parts))


# --------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------


def audit_evidence(
    spec: Spec,
    *,
    trials: int,
    delta: float,
    confidence: float,
    seed: int,
    workers: int = 1,
    progress: bool = False,
) -> AuditEvidence:
    """Run the audit layer's distinguishing game on ``spec`` and read its result through the contract.

    Raises:
        ValueError: the audit layer rejects the spec or the parameters.
    """
    from dplens.auditing.games import audit_spec  # the report layer reads audits only through AuditResult.to_dict()

    result = audit_spec(
        spec, trials=trials, delta=delta, confidence=confidence, seed=seed, workers=workers, progress=progress
    )
    return AuditEvidence.from_audit_dict(result.to_dict())


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
    spec: Spec,
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


def _claim(spec: Spec, accountant: Accountant, accounting: Accounting, *, unit: str, source: str | None) -> Claim:
    relation = accountant.neighboring.value
    common = {
        "neighbouring": relation,
        "neighbouring_description": describe_neighbouring(relation, unit),
        "privacy_unit": unit,
        "mu": composed_mu(accountant),
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
    if claim.delta == accounting.delta:
        bound = accounting.epsilon
    elif claim.delta == 0:
        bound = accountant.pure_epsilon()
    else:
        bound = accountant.epsilon(claim.delta)
    certified = certifies(bound, claim.epsilon)
    return Claim(
        definition=Definition.APPROX_DP if claim.delta > 0 else Definition.PURE_DP,
        epsilon=claim.epsilon,
        delta=claim.delta,
        source=source or "spec [claim]",
        certified_by_accountant=certified,
        **common,
    )


def _delta_text(delta: float) -> str:
    return f"{delta:g}"


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


def build_report(
    *,
    spec: Spec,
    delta: float,
    title: str,
    audit: AuditEvidence | None = None,
    not_audited_reason: str | None = None,
    calibration: Mapping[str, Any] | None = None,
    accounting: Accounting | None = None,
    privacy_unit: str = DEFAULT_PRIVACY_UNIT,
    claim_source: str | None = None,
    seeds: Mapping[str, Any] | None = None,
    command: Sequence[str] = (),
    created_utc: str | None = None,
) -> Report:
    """Account ``spec`` at ``delta`` by every route and assemble the report (figures are added on writing).

    Args:
        spec: the validated spec.
        delta: δ of the (ε, δ) statements (0: pure DP only).
        title: the report's title.
        audit: the audit's evidence, or None (then ``not_audited_reason`` says why).
        calibration: a ``CalibrationResult.to_dict()`` when a parameter was calibrated.
        accounting: the result of :func:`account` for this spec at ``delta`` if already computed.
        privacy_unit: the unit of protection, in words.
        claim_source: overrides the claim's source text (e.g. "calibration target").
        seeds: the seeds used (recorded in the provenance).
        command: the command line (recorded in the provenance).
        created_utc: a fixed timestamp (default: now).
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    if not isinstance(privacy_unit, str) or not privacy_unit.strip():
        raise ValueError(f"privacy_unit must be a non-empty string; got {privacy_unit!r}")
    if audit is None and not not_audited_reason:
        raise ValueError("not_audited_reason is required when audit is None")
    accountant = spec.accountant()
    if accounting is None:
        accounting = account(accountant, delta=float(delta), calibration=calibration)
    elif accounting.delta != delta:
        raise ValueError(f"accounting was computed at delta = {accounting.delta!r}, not at delta = {delta!r}")
    claim = _claim(spec, accountant, accounting, unit=privacy_unit, source=claim_source)
    relation = accountant.neighboring.value
    mechanism = MechanismSection(
        name=title,
        components=tuple(dict(t) for t in spec.mechanisms),
        neighbouring=relation,
        sampling=describe_sampling(accountant.ledger),
        ledger=_ledger_dict(accountant),
    )
    return Report(
        title=title,
        claim=claim,
        mechanism=mechanism,
        accounting=accounting,
        audit=audit,
        not_audited_reason=None if audit is not None else not_audited_reason,
        verdict=_verdict(claim, accounting, audit, not_audited_reason),
        provenance=provenance(
            spec=spec,
            seeds=seeds if seeds is not None else ({"audit": audit.seed} if audit is not None else {}),
            command=command or tuple(sys.argv),
            created_utc=created_utc,
        ),
    )


def _ledger_dict(accountant: Accountant) -> dict[str, Any]:
    import json

    return json.loads(accountant.to_json())


# --------------------------------------------------------------------------------------------
# Spec → files (``dplens report`` and ``dplens demo``)
# --------------------------------------------------------------------------------------------


class AuditMode(enum.Enum):
    """Whether ``generate_report`` audits the spec."""

    AUTO = "auto"  # audit when the audit layer can; otherwise say plainly why the report is not audited
    REQUIRED = "required"  # audit or fail (ValueError)
    OFF = "off"  # accounting only


#: Trials per side of ``dplens report``'s audit when ``--trials`` is not given.


def default_delta(spec: Spec) -> float:
    """The report's δ when none is given: the claim's δ (0 for a pure-DP claim), else ``DEFAULT_DELTA``."""
    return spec.claim.delta if spec.claim is not None else DEFAULT_DELTA


def generate_report(
    spec: Spec,
    out_dir: Path,
    *,
    title: str,
    delta: float | None = None,
    audit_mode: AuditMode = AuditMode.AUTO,
    trials: int = DEFAULT_TRIALS,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    workers: int = 1,
    privacy_unit: str = DEFAULT_PRIVACY_UNIT,
    calibration: Mapping[str, Any] | None = None,
    claim_source: str | None = None,
    progress: Callable[[str], None] | None = None,
    command: Sequence[str] = (),
):
    """Account ``spec`` by every route, audit it (per ``audit_mode``), write the report files into ``out_dir``.

    Returns:
        :class:`dplens.reports.render.ReportFiles`.

    Raises:
        ValueError: bad parameters; with ``AuditMode.REQUIRED`` also when the audit cannot run.
    """
    from dplens.reports.render import write_report

    if not isinstance(audit_mode, AuditMode):
        raise ValueError(f"audit_mode must be an AuditMode; got {audit_mode!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be an integer >= 1; got {trials!r}")
    if not isinstance(confidence, float | int) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    delta = default_delta(spec) if delta is None else delta
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    if not isinstance(privacy_unit, str) or not privacy_unit.strip():
        raise ValueError(f"privacy_unit must be a non-empty string; got {privacy_unit!r}")
    say = progress or (lambda _message: None)
    audit: AuditEvidence | None = None
    reason: str | None = None
    if audit_mode is AuditMode.OFF:
        reason = "the audit was switched off (--no-audit)"
    else:
        say(
            f"auditing: {trials} trials per side at delta = {delta:g}, confidence {percent(confidence)}, "
            f"seed {seed} ..."
        )
        try:
            audit = audit_evidence(
                spec,
                trials=trials,
                delta=delta,
                confidence=confidence,
                seed=seed,
                workers=workers,
                progress=progress is not None,
            )
        except ValueError as err:
            if audit_mode is AuditMode.REQUIRED:
                raise
            reason = f"the audit layer cannot audit this spec: {str(err).splitlines()[0]}"
        if audit is not None:
            say(
                f"audit: epsilon >= {fmt_lower(audit.epsilon_lower_bound)} (lower bound, {percent(audit.confidence)}), "
                f"verdict {audit.verdict.value}, {audit.elapsed_seconds:.1f} s"
            )
        else:
            say(f"not audited: {reason}")
    say("accounting every route and writing the report (figures, JSON, HTML, privacy statement) ...")
    report = build_report(
        spec=spec,
        delta=delta,
        title=title,
        audit=audit,
        not_audited_reason=reason,
        calibration=calibration,
        privacy_unit=privacy_unit,
        claim_source=claim_source,
        seeds={"audit": seed} if audit is not None else {},
        command=command,
    )
    return write_report(report, out_dir)
