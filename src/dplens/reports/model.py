"""The compliance report as data: dataclasses, a versioned schema, ``to_dict`` / ``from_dict``.

The JSON form (``Report.to_dict()``) is canonical; HTML and the plain-text privacy statement are rendered
from it (:mod:`dplens.reports.render`). The fields follow what real privacy reports and the users of
auditors ask for (research note ``auditing-anchors.md`` §7.2): the claim with its neighbouring relation and
unit of privacy (dp-wizard #857, dp_mobility_report #3), every accounting route with its method and
discretisation, the audit's bound with its raw counts and realised operating point (LeakPro #438), estimates
labelled as estimates, a verdict with a plain-language sentence (SACRO-ML #110) and the provenance needed to
rerun it (seeds, versions, spec hash; SACRO-ML #222).

The schema, its version and the validator live in :mod:`dplens.reports.schema` (re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from dplens._numbers import AccountingSection, RouteSection, accounting_section, from_json_number, json_number
from dplens.reports.nist import NistEvaluation
from dplens.reports.schema import (
    REPORT_FORMAT,
    REPORT_SCHEMA,
    SCHEMA_VERSION,
    Definition,
    Status,
    validate_report_dict,
    version_message,
)

__all__ = [
    "REPORT_FORMAT",
    "REPORT_SCHEMA",
    "SCHEMA_VERSION",
    "Accounting",
    "AccountingRoute",
    "AuditEvidence",
    "Claim",
    "Definition",
    "Estimate",
    "Figure",
    "MechanismSection",
    "NistEvaluation",
    "OperatingPoint",
    "Provenance",
    "Report",
    "Status",
    "Verdict",
    "combined_status",
    "validate_report_dict",
]

# --------------------------------------------------------------------------------------------
# JSON helpers: ±∞ cannot be a JSON number, so it is the string "Infinity"; NaN/undefined is null
# (dplens._numbers.json_number / from_json_number, shared with the accounting summary).
# --------------------------------------------------------------------------------------------


def _opt(value: Any, convert=float) -> Any:
    return None if value is None else convert(value)


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The privacy guarantee the report is about.

    Args:
        definition: the definition it is stated in.
        epsilon, delta: for (approx-/pure-) DP; ``delta`` is 0 for pure DP.
        rho: ρ of ρ-zCDP; mu: μ of μ-GDP (also given as exact equivalents of an (ε, δ) claim when known).
        neighbouring: the neighbouring relation (``add_remove``, ``replace_one``, ``zero_out``, …).
        neighbouring_description: the relation in plain words.
        privacy_unit: what one "record" is (the unit of protection), e.g. "one training example".
        source: where the claim comes from ("spec [claim]", "calibration target", "accountant (pld)").
        certified_by_accountant: whether the accountant's tightest upper bound at the claim's δ is at most
            the claimed ε, up to the accountant's own floating-point safety margin (relative 2e-12; see
            ``dplens.reports.build.certifies``); None when it could not be checked.
    """

    definition: Definition
    neighbouring: str
    neighbouring_description: str
    privacy_unit: str
    source: str
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    mu: float | None = None
    certified_by_accountant: bool | None = None

    def __post_init__(self) -> None:
        needs = {
            Definition.APPROX_DP: ("epsilon", "delta"),
            Definition.PURE_DP: ("epsilon",),
            Definition.ZCDP: ("rho",),
            Definition.GDP: ("mu",),
        }[self.definition]
        for name in needs:
            if getattr(self, name) is None:
                raise ValueError(f"claim.{name} is required for a {self.definition.value} claim")
        if self.definition is Definition.PURE_DP and self.delta not in (None, 0.0):
            raise ValueError(f"claim.delta must be 0 for a pure-DP claim; got {self.delta!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "definition": self.definition.value,
            "epsilon": json_number(self.epsilon),
            "delta": self.delta,
            "rho": self.rho,
            "mu": self.mu,
            "neighbouring": self.neighbouring,
            "neighbouring_description": self.neighbouring_description,
            "privacy_unit": self.privacy_unit,
            "source": self.source,
            "certified_by_accountant": self.certified_by_accountant,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Claim:
        return cls(
            definition=Definition(data["definition"]),
            epsilon=from_json_number(data.get("epsilon")),
            delta=_opt(data.get("delta")),
            rho=_opt(data.get("rho")),
            mu=_opt(data.get("mu")),
            neighbouring=data["neighbouring"],
            neighbouring_description=data["neighbouring_description"],
            privacy_unit=data["privacy_unit"],
            source=data["source"],
            certified_by_accountant=data.get("certified_by_accountant"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MechanismSection:
    """What runs: the spec's mechanism tables (type + parameters), composed in order, and the ledger."""

    name: str
    components: tuple[dict[str, Any], ...]
    neighbouring: str
    sampling: str
    ledger: dict[str, Any]
    implementation: str = "dplens.spec → dplens.accountant.events"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "components": [dict(c) for c in self.components],
            "neighbouring": self.neighbouring,
            "sampling": self.sampling,
            "ledger": self.ledger,
            "implementation": self.implementation,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MechanismSection:
        return cls(
            name=data["name"],
            components=tuple(dict(c) for c in data["components"]),
            neighbouring=data["neighbouring"],
            sampling=data["sampling"],
            ledger=dict(data["ledger"]),
            implementation=data["implementation"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountingRoute(RouteSection):
    """ε at δ by one accounting route: always an upper bound on the true ε (pessimistic, rounded up).

    ``method``, ``epsilon``, ``delta``, ``details``, ``is_tightest``, ``optimal_order`` and ``discretisation`` are
    :class:`dplens._numbers.RouteSection`'s fields, shared with the accountant's route.
    """

    is_upper_bound: bool = True
    epsilon_lower: float | None = None  # a certified lower end of the route's bracket, where it has one

    def __post_init__(self) -> None:
        if self.is_upper_bound is not True:
            raise ValueError(f"accounting route {self.method!r}: every accounting epsilon must be an upper bound")

    def to_dict(self) -> dict[str, Any]:
        return self._route_dict(is_upper_bound=self.is_upper_bound) | {"epsilon_lower": json_number(self.epsilon_lower)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AccountingRoute:
        return cls(
            method=data["method"],
            epsilon=from_json_number(data["epsilon"]),
            delta=float(data["delta"]),
            details=data["details"],
            is_tightest=data["is_tightest"],
            optimal_order=from_json_number(data.get("optimal_order")),
            discretisation=data.get("discretisation"),
            is_upper_bound=data["is_upper_bound"],
            epsilon_lower=from_json_number(data.get("epsilon_lower")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Accounting(AccountingSection[AccountingRoute]):
    """Every accounting route that applies, the tightest marked, plus the curves behind the figures.

    The accountant computes all of it (:class:`dplens.accountant.summary.AccountingSummary`, whose ``to_dict()``
    this reads); the report only renders it. The fields up to ``claim_region`` (and ``tightest``,
    ``epsilon``) are :class:`dplens._numbers.AccountingSection`'s, shared with the summary.

    Args:
        delta: the δ of the (ε, δ) statements.
        routes: one entry per applicable route (exactly one ``is_tightest``).
        unsupported: routes that do not apply, ``{"method", "reason"}``.
        pure_epsilon: ε of (ε, 0)-DP by basic composition (∞ without a pure-DP guarantee).
        mu: μ when the ledger is exactly μ-GDP, else None.
        epsilon_at: ``{"delta", "epsilon"}``: the tightest ε at further δ values (e.g. a claim's δ).
        epsilon_of_delta: ``{"method", "delta", "epsilon"}`` rows, each ε an upper bound (the ε(δ) figure).
        rdp_curve: ``{"alpha", "rdp", "epsilon"}`` samples of the composed RDP curve and the ε it implies at
            ``delta`` (empty without an RDP route).
        trade_off: ``{"alpha", "beta"}`` samples of the f-DP curve; a pointwise *lower* bound on the exact
            trade-off curve (pessimistic), from ``trade_off_source``.
        claim_region: ``{"alpha", "beta"}`` samples of the trade-off curve of the claimed (ε, δ) (DRS 2022
            Prop. 2.5): the boundary of the region the claim excludes.
        calibration: a ``CalibrationResult.to_dict()`` when a parameter was calibrated.
        attack_risk: the accountant's attack risk (``AttackRisk.to_dict()``): upper bounds on any membership
            attack's TPR at the card's FPRs and on its advantage, with the certified bracket, the route and the curve
            for the figure; None where no route gives one (and in reports written before it existed).
    """

    calibration: dict[str, Any] | None = None
    attack_risk: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.routes:
            raise ValueError("accounting.routes must contain at least one route")
        tight = [r for r in self.routes if r.is_tightest]
        if len(tight) != 1:
            raise ValueError(f"accounting.routes must mark exactly one route as tightest; got {len(tight)}")
        if any(r.epsilon < tight[0].epsilon for r in self.routes):
            raise ValueError("accounting.routes: the route marked tightest does not have the smallest epsilon")

    def epsilon_for(self, delta: float) -> float | None:
        """The tightest upper bound at ``delta`` if the accountant summarised it (its δ, 0, or ``epsilon_at``)."""
        if delta == self.delta:
            return self.epsilon
        if delta == 0:
            return self.pure_epsilon
        return next((row["epsilon"] for row in self.epsilon_at if row["delta"] == delta), None)

    def to_dict(self) -> dict[str, Any]:
        return accounting_section(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Accounting:
        accounting = cls(
            delta=float(data["delta"]),
            routes=tuple(AccountingRoute.from_dict(r) for r in data["routes"]),
            unsupported=tuple(dict(u) for u in data["unsupported"]),
            pure_epsilon=from_json_number(data["pure_epsilon"]),
            mu=_opt(data.get("mu")),
            epsilon_at=tuple(
                {"delta": float(r["delta"]), "epsilon": from_json_number(r["epsilon"])}
                for r in data.get("epsilon_at", ())
            ),
            epsilon_of_delta=tuple(
                {"method": r["method"], "delta": float(r["delta"]), "epsilon": from_json_number(r["epsilon"])}
                for r in data["epsilon_of_delta"]
            ),
            rdp_curve=tuple(
                {
                    "alpha": float(p["alpha"]),
                    "rdp": from_json_number(p["rdp"]),
                    "epsilon": from_json_number(p["epsilon"]),
                }
                for p in data["rdp_curve"]
            ),
            trade_off=tuple({"alpha": float(p["alpha"]), "beta": float(p["beta"])} for p in data["trade_off"]),
            trade_off_source=data["trade_off_source"],
            claim_region=tuple(
                {"alpha": float(p["alpha"]), "beta": float(p["beta"])} for p in data.get("claim_region", ())
            ),
            calibration=data.get("calibration"),
            attack_risk=data.get("attack_risk"),
        )
        if data["tightest"] != accounting.tightest.method:
            raise ValueError(
                f"accounting.tightest is {data['tightest']!r} but the route marked tightest is "
                f"{accounting.tightest.method!r}"
            )
        return accounting


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatingPoint:
    """The realised operating point of the audit's test: threshold, raw counts, rates and their upper limits."""

    threshold: float | None
    false_positives: int
    false_negatives: int
    negatives: int
    positives: int
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float

    _FIELDS = (
        "threshold",
        "false_positives",
        "false_negatives",
        "negatives",
        "positives",
        "fpr",
        "fnr",
        "fpr_upper",
        "fnr_upper",
    )

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self._FIELDS}
        out["threshold"] = json_number(self.threshold)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OperatingPoint:
        return cls(
            threshold=from_json_number(data.get("threshold")),
            false_positives=int(data["false_positives"]),
            false_negatives=int(data["false_negatives"]),
            negatives=int(data["negatives"]),
            positives=int(data["positives"]),
            fpr=float(data["fpr"]),
            fnr=float(data["fnr"]),
            fpr_upper=float(data["fpr_upper"]),
            fnr_upper=float(data["fnr_upper"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """A number from the audit that is NOT a bound (raw-count ε, GDP-shape ε, …); always labelled."""

    name: str
    epsilon: float | None
    assumption: str
    is_estimate: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.is_estimate is not True:
            raise ValueError(f"audit estimate {self.name!r} must be labelled is_estimate=true")

    def to_dict(self) -> dict[str, Any]:
        return self.extra | {
            "name": self.name,
            "epsilon": json_number(self.epsilon),
            "is_estimate": self.is_estimate,
            "assumption": self.assumption,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Estimate:
        known = {"name", "epsilon", "is_estimate", "assumption"}
        return cls(
            name=data["name"],
            epsilon=from_json_number(data.get("epsilon")),
            assumption=data["assumption"],
            is_estimate=data["is_estimate"],
            extra={k: v for k, v in data.items() if k not in known},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEvidence:
    """The audit's evidence, read from ``AuditResult.to_dict()``.

    ``epsilon_lower_bound`` is a valid lower bound at ``confidence`` (a bound, not an estimate); the
    ``estimates`` are not bounds and are labelled so. Keys the audit layer adds beyond the contract are kept
    in ``extra`` and written back unchanged.
    """

    epsilon_lower_bound: float
    bound_direction: str
    epsilon_claimed: float
    delta: float
    confidence: float
    claim_source: str
    trials: int
    method: str
    threshold_strategy: dict[str, Any]
    score: str
    mechanism: str
    pair: str
    operating_point: OperatingPoint
    ceiling: float
    estimates: tuple[Estimate, ...]
    empirical_trade_off: tuple[dict[str, Any], ...]
    trajectory: tuple[dict[str, Any], ...]
    verdict: Status
    verdict_reason: str
    seed: int
    chunks: int
    backend: str
    elapsed_seconds: float
    is_lower_bound: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict is Status.NOT_AUDITED:
            raise ValueError("audit.verdict cannot be NOT_AUDITED for an audit that ran")
        if self.is_lower_bound is not True:
            raise ValueError("audit.is_lower_bound must be true: epsilon_lower_bound is a valid lower bound")
        if not 0 < self.confidence < 1:
            raise ValueError(f"audit.confidence must be in (0, 1); got {self.confidence!r}")

    @property
    def ratio_to_claim(self) -> float | None:
        """ε_lb / claimed ε (> 1 means the claim is refuted at the stated confidence)."""
        if self.epsilon_claimed > 0 and math.isfinite(self.epsilon_claimed):
            return self.epsilon_lower_bound / self.epsilon_claimed
        return None

    @classmethod
    def from_audit_dict(cls, data: Mapping[str, Any]) -> AuditEvidence:
        """From ``AuditResult.to_dict()``; a missing contract key raises ``ValueError`` naming it."""
        if not isinstance(data, Mapping):
            raise ValueError(f"audit result must be a mapping; got {type(data).__name__}")
        missing = [k for k in _AUDIT_KEYS if k not in data]
        if missing:
            raise ValueError(f"audit result is missing required field {missing[0]!r}")
        return cls(
            epsilon_lower_bound=from_json_number(data["epsilon_lower_bound"]),
            bound_direction=data["bound_direction"],
            epsilon_claimed=from_json_number(data["epsilon_claimed"]),
            delta=float(data["delta"]),
            confidence=float(data["confidence"]),
            claim_source=data["claim_source"],
            trials=int(data["trials"]),
            method=data["method"],
            threshold_strategy=dict(data["threshold_strategy"]),
            score=data["score"],
            mechanism=data["mechanism"],
            pair=data["pair"],
            operating_point=OperatingPoint.from_dict(data["operating_point"]),
            ceiling=from_json_number(data["ceiling"]),
            estimates=tuple(Estimate.from_dict(e) for e in data["estimates"]),
            empirical_trade_off=tuple(dict(p) for p in data["empirical_trade_off"]),
            trajectory=tuple(dict(p) for p in data["trajectory"]),
            verdict=Status(data["verdict"]),
            verdict_reason=data["verdict_reason"],
            seed=int(data["seed"]),
            chunks=int(data["chunks"]),
            backend=data["backend"],
            elapsed_seconds=float(data["elapsed_seconds"]),
            is_lower_bound=data.get("is_lower_bound", True),
            extra={k: v for k, v in data.items() if k not in _AUDIT_KEYS and k not in {"is_lower_bound", "extra"}}
            | dict(data.get("extra", {})),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon_lower_bound": json_number(self.epsilon_lower_bound),
            "is_lower_bound": self.is_lower_bound,
            "bound_direction": self.bound_direction,
            "epsilon_claimed": json_number(self.epsilon_claimed),
            "ratio_to_claim": json_number(self.ratio_to_claim),
            "delta": self.delta,
            "confidence": self.confidence,
            "claim_source": self.claim_source,
            "trials": self.trials,
            "method": self.method,
            "threshold_strategy": dict(self.threshold_strategy),
            "score": self.score,
            "mechanism": self.mechanism,
            "pair": self.pair,
            "operating_point": self.operating_point.to_dict(),
            "ceiling": json_number(self.ceiling),
            "estimates": [e.to_dict() for e in self.estimates],
            "empirical_trade_off": [dict(p) for p in self.empirical_trade_off],
            "trajectory": [dict(p) for p in self.trajectory],
            "verdict": self.verdict.value,
            "verdict_reason": self.verdict_reason,
            "seed": self.seed,
            "chunks": self.chunks,
            "backend": self.backend,
            "elapsed_seconds": self.elapsed_seconds,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditEvidence:
        """Inverse of :meth:`to_dict` (the report's own form)."""
        return cls.from_audit_dict({k: v for k, v in data.items() if k != "ratio_to_claim"})


#: Keys of ``AuditResult.to_dict()`` that the report reads: the evidence's own fields, less its markers.
_AUDIT_KEYS = tuple(f.name for f in fields(AuditEvidence) if f.name not in ("is_lower_bound", "extra"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The bottom line: a status, one plain-language sentence, and the reasons behind it."""

    status: Status
    sentence: str
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "sentence": self.sentence, "reasons": list(self.reasons)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(status=Status(data["status"]), sentence=data["sentence"], reasons=tuple(data["reasons"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """A figure written next to the report (and embedded in the HTML)."""

    name: str
    file: str
    caption: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "file": self.file, "caption": self.caption}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figure:
        return cls(name=data["name"], file=data["file"], caption=data["caption"])


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Enough to rerun the report: tool and dependency versions, the spec's hash, the seeds, the command."""

    tool: dict[str, Any]
    python: str
    platform: str
    dependencies: dict[str, str]
    spec_source: str
    spec_sha256: str
    seeds: dict[str, Any]
    created_utc: str
    command: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": dict(self.tool),
            "python": self.python,
            "platform": self.platform,
            "dependencies": dict(self.dependencies),
            "spec_source": self.spec_source,
            "spec_sha256": self.spec_sha256,
            "seeds": dict(self.seeds),
            "created_utc": self.created_utc,
            "command": list(self.command),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        return cls(
            tool=dict(data["tool"]),
            python=data["python"],
            platform=data["platform"],
            dependencies=dict(data["dependencies"]),
            spec_source=data["spec_source"],
            spec_sha256=data["spec_sha256"],
            seeds=dict(data["seeds"]),
            created_utc=data["created_utc"],
            command=tuple(data["command"]),
        )


def combined_status(
    main: Status | None, additional: tuple[dict[str, Any], ...] = (), implementation: Mapping[str, Any] | None = None
) -> Status:
    """The report's status from its audits: VIOLATION if any audit (or the implementation evidence) refutes the claim;
    otherwise the main audit's verdict, or (without one) the others' (INCONCLUSIVE unless all are CONSISTENT)."""
    verdicts = [Status(a["verdict"]) for a in additional]
    if implementation is not None:
        verdicts.append(Status(implementation["report_status"]))
    if Status.VIOLATION in verdicts:
        return Status.VIOLATION
    if main is not None:
        return main
    if not verdicts:
        return Status.NOT_AUDITED
    return Status.CONSISTENT if all(v is Status.CONSISTENT for v in verdicts) else Status.INCONCLUSIVE


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """A compliance report: claim, mechanism, accounting, audit evidence (optional), verdict, the NIST SP 800-226
    evaluation (:mod:`dplens.reports.nist`), the spec's ``[deployment]`` table (optional), provenance.

    Example:
        >>> import dplens
        >>> spec = dplens.parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 1.0}]})
        >>> report = dplens.build_report(
        ...     spec=spec, accounting=spec.accountant().summary(1e-5), title="Gaussian", not_audited_reason="example")
        >>> report
        Report('Gaussian': NOT_AUDITED; epsilon <= 4.37718 at delta=1e-05 [exact])
        >>> Report.from_dict(report.to_dict()) == report
        True
    """

    title: str
    claim: Claim
    mechanism: MechanismSection
    accounting: Accounting
    verdict: Verdict
    provenance: Provenance
    audit: AuditEvidence | None = None
    not_audited_reason: str | None = None
    figures: tuple[Figure, ...] = ()
    additional_audits: tuple[dict[str, Any], ...] = ()
    #: the cumulative spend of a budget ledger (``dplens report --ledger DB``): ``dplens.ledger`` computes it
    #: (:func:`dplens.ledger.report.ledger_section`), the report renders it; absent when no ledger was given.
    budget_ledger: dict[str, Any] | None = None
    nist: NistEvaluation
    deployment: dict[str, Any] | None = None
    #: what the ε covers (:func:`dplens.reports.scope.privacy_scope`): the privacy unit the DP-SGD tables are
    #: accounted for and the tuning searches included; absent when the spec has neither (and in older reports).
    privacy_scope: dict[str, Any] | None = None
    #: the implementation evidence of the DP-SGD step that ran (``dplens report --implementation-evidence``): a
    #: ``dplens check-dp-sgd`` result with the report's comparison (:mod:`dplens.reports.implementation`); absent when
    #: none was given.
    implementation_evidence: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise ValueError(version_message(self.schema_version))
        for extra in self.additional_audits:
            if Status(extra["verdict"]) is Status.NOT_AUDITED:
                raise ValueError("an additional audit must have an audit verdict, not NOT_AUDITED")
        expected = combined_status(
            None if self.audit is None else self.audit.verdict, self.additional_audits, self.implementation_evidence
        )
        if self.verdict.status is not expected:
            if self.audit is None and not self.additional_audits and self.implementation_evidence is None:
                raise ValueError(f"verdict.status is {self.verdict.status.value!r} but the report has no audit")
            raise ValueError(
                f"verdict.status {self.verdict.status.value!r} differs from the audit's (combined) {expected.value!r}"
            )
        if self.audit is None and not self.not_audited_reason:
            raise ValueError("not_audited_reason is required when the report has no audit")

    def with_figures(self, figures: tuple[Figure, ...]) -> Report:
        """A copy listing ``figures``."""
        return Report(
            title=self.title,
            claim=self.claim,
            mechanism=self.mechanism,
            accounting=self.accounting,
            verdict=self.verdict,
            provenance=self.provenance,
            audit=self.audit,
            not_audited_reason=self.not_audited_reason,
            figures=tuple(figures),
            additional_audits=self.additional_audits,
            budget_ledger=self.budget_ledger,
            nist=self.nist,
            deployment=self.deployment,
            privacy_scope=self.privacy_scope,
            implementation_evidence=self.implementation_evidence,
        )

    def to_dict(self) -> dict[str, Any]:
        ledger = {} if self.budget_ledger is None else {"budget_ledger": self.budget_ledger}
        if self.privacy_scope is not None:
            ledger["privacy_scope"] = self.privacy_scope
        if self.implementation_evidence is not None:
            ledger["implementation_evidence"] = self.implementation_evidence
        return ledger | {
            "format": REPORT_FORMAT,
            "schema_version": self.schema_version,
            "title": self.title,
            "claim": self.claim.to_dict(),
            "mechanism": self.mechanism.to_dict(),
            "accounting": self.accounting.to_dict(),
            "audit": None if self.audit is None else self.audit.to_dict(),
            "not_audited_reason": self.not_audited_reason,
            "verdict": self.verdict.to_dict(),
            "figures": [f.to_dict() for f in self.figures],
            "additional_audits": [dict(a) for a in self.additional_audits],
            "nist": self.nist.to_dict(),
            "deployment": None if self.deployment is None else dict(self.deployment),
            "provenance": self.provenance.to_dict(),
        }

    def __repr__(self) -> str:
        return (
            f"Report({self.title!r}: {self.verdict.status.value}; epsilon <= {self.accounting.epsilon:.6g} at "
            f"delta={self.accounting.delta:g} [{self.accounting.tightest.method}])"
        )

    def _repr_html_(self) -> str:
        from dplens._display import html_table

        rows = [
            ("verdict", self.verdict.status.value),
            ("claimed ε", self.claim.epsilon),
            ("δ", self.claim.delta),
            ("accountant's ε (upper bound)", self.accounting.epsilon),
            ("tightest route", self.accounting.tightest.method),
        ]
        if self.audit is not None:
            rows.append((f"audit ε lower bound (valid, {self.audit.confidence:.0%})", self.audit.epsilon_lower_bound))
        rows.append(("in words", self.verdict.sentence))
        return html_table(self.title, rows)

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        """Validate ``data`` against :data:`REPORT_SCHEMA` and build the report.

        Raises:
            ValueError: wrong format or ``schema_version``, a missing required field (named), a value of
                the wrong type, or a broken invariant (e.g. an estimate not labelled as one).
        """
        validate_report_dict(data)
        return cls(
            schema_version=data["schema_version"],
            title=data["title"],
            claim=Claim.from_dict(data["claim"]),
            mechanism=MechanismSection.from_dict(data["mechanism"]),
            accounting=Accounting.from_dict(data["accounting"]),
            audit=None if data["audit"] is None else AuditEvidence.from_dict(data["audit"]),
            not_audited_reason=data.get("not_audited_reason"),
            verdict=Verdict.from_dict(data["verdict"]),
            figures=tuple(Figure.from_dict(f) for f in data["figures"]),
            additional_audits=tuple(dict(a) for a in data.get("additional_audits", ())),
            nist=NistEvaluation.from_dict(data["nist"]),
            deployment=None if data.get("deployment") is None else dict(data["deployment"]),
            provenance=Provenance.from_dict(data["provenance"]),
            budget_ledger=data.get("budget_ledger"),
            privacy_scope=data.get("privacy_scope"),
            implementation_evidence=data.get("implementation_evidence"),
        )
