"""A report rendered as a DP Deployments Registry record (``registry-entry.yaml``).

The record joins the report's facts — the variant from the claim, ε and δ (upper bounds, rounded up), ρ when the
composition is zCDP (computed by the accountant and passed in: this layer computes no privacy quantity), the
neighbouring relation in words, the composition and its route, the mechanisms, the audit — with the author's
``[deployment]`` table (:mod:`dplens.registry.deployment`). The record reaches the highest tier whose fields are
all there; a missing tier-1 field is a ``ValueError`` naming it (and no record is written).

Example:
    >>> import dplens
    >>> from dplens.registry.deployment import parse_deployment
    >>> spec = dplens.parse_spec({"mechanism": [{"type": "laplace", "epsilon": 0.5}]})
    >>> report = dplens.build_report(spec=spec, accounting=spec.accountant().summary(0.0), title="Counts",
    ...                              not_audited_reason="example")
    >>> deployment = parse_deployment({"name": "Counts", "data_curators": ["Example Agency"],
    ...     "description": "Noisy counts.", "intended_use": "Planning.", "data_product_type": "Summary statistics",
    ...     "data_product_region": "Atlantis", "publication_date": "2025-03-01"})
    >>> entry = build_registry_entry(report, deployment, rho=None, tool="dplens 0.1.0")
    >>> int(entry.tier), entry.record["deployment"]["privacy_loss"]["privacy_parameters"]
    (1, {'epsilon': 0.5001})
    >>> entry.missing_for_next_tier
    ('model_name', 'release_type', 'data_source_type', 'access_type')
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dplens._files import read_input_bytes
from dplens._version import __version__
from dplens.registry.deployment import (
    Deployment,
    missing_for_tier,
    registry_slug,
    require_authors,
    require_tier_one,
)
from dplens.registry.export import composed_rho, resolve_deployment
from dplens.registry.fields import REGISTRY_COMMIT, ReleaseType, Tier, VariantName
from dplens.registry.schema import validate_record
from dplens.reports.format import fmt_lower, fmt_upper, percent
from dplens.reports.model import Definition, Report, Status
from dplens.reports.output import atomic_write_text, significant
from dplens.reports.risk_card import short_risk

__all__ = [
    "MAX_REPORT_BYTES",
    "RegistryEntry",
    "build_registry_entry",
    "export_entry",
    "read_report",
    "registry_file_name",
    "write_entry",
]

#: Largest report file read by :func:`read_report`.
MAX_REPORT_BYTES = 256 * 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryEntry:
    """A registry record (a dict in the registry's key order), the tier it reaches and what the next tier needs."""

    record: dict[str, Any]
    tier: Tier
    missing_for_next_tier: tuple[str, ...]
    header: str = ""

    def to_yaml(self) -> str:
        """The record as YAML: the ``url_slug`` line first (the registry's tests read the slug from the file's first
        line: ``tests/test_yaml.py::test_updated_slugs``), then a comment saying where the record came from."""
        from dplens.registry.yamlio import dump_record

        text = dump_record(self.record)
        first, newline, rest = text.partition("\n")
        if not first.startswith("url_slug:"):  # pragma: no cover - the record's first key is url_slug
            raise ValueError("a registry record must start with its url_slug")
        comment = "".join(f"# {line}\n" for line in self.header.splitlines())
        return first + newline + comment + rest

    def to_dict(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "tier": int(self.tier),
            "missing_for_next_tier": list(self.missing_for_next_tier),
        }


def _number(value: float) -> float:
    """An upper bound as a record's number: rounded up to 4 significant digits (never below the bound)."""
    return float(fmt_upper(value))


def _parameters(report: Report, rho: float | None) -> tuple[dict[str, Any], str, bool]:
    """privacy_parameters, the text that says where each number comes from, and whether the claim is certified."""
    claim, accounting = report.claim, report.accounting
    certified = claim.certified_by_accountant is not False and claim.epsilon is not None
    if certified:
        epsilon, delta = float(claim.epsilon), float(claim.delta or 0.0)
        source = f"the claim ({claim.source}), certified by the accountant"
    else:
        delta = float(claim.delta or 0.0)
        bound = accounting.epsilon_for(delta)
        epsilon = accounting.epsilon if bound is None else bound
        delta = delta if bound is not None else accounting.delta
        source = (
            f"the accountant's upper bound: the claimed epsilon = {fmt_upper(claim.epsilon)} is NOT certified by "
            "the accountant and is not stated here"
        )
    params: dict[str, Any] = {"epsilon": _number(epsilon) if math.isfinite(epsilon) else None}
    if params["epsilon"] is None:
        raise ValueError("the report's epsilon is infinite: there is no privacy guarantee to register")
    if delta > 0:
        params["delta"] = delta
    tight = accounting.tightest
    text = [
        f"epsilon = {fmt_upper(epsilon)}" + (f" at delta = {delta:g}" if delta > 0 else " (pure DP)") + f": {source}.",
        f"The accountant's tightest upper bound at delta = {accounting.delta:g} is epsilon <= "
        f"{fmt_upper(accounting.epsilon)} ({tight.method}: {tight.details})"
        + (
            f"; certified bracket: the exact epsilon at that delta is at least {fmt_lower(tight.epsilon_lower)}"
            if tight.epsilon_lower is not None
            else ""
        )
        + ".",
    ]
    if rho is not None:
        params["rho"] = _number(rho)
        text.append(f"The composition is rho-zCDP with rho = {fmt_upper(rho)} (an upper bound, rounded up).")
    if accounting.attack_risk:
        words = short_risk(accounting.attack_risk).replace("≤", "<=").replace("−", "-")
        text.append(f"In terms of attacks on {report.claim.privacy_unit}: {words}.")
    text.append("Every number is an upper bound on the mechanism's true privacy loss, rounded up (computed by dplens).")
    return params, " ".join(text), certified


def _variant(report: Report, deployment: Deployment, rho: float | None) -> VariantName:
    if deployment.variant_name is not None:
        if deployment.variant_name is VariantName.ZCDP and rho is None:
            raise ValueError(
                "[deployment] variant_name 'Zero-concentrated DP' needs rho, which dplens derives only for "
                "compositions of Gaussian and zCDP mechanisms; registry-entry.yaml was not written"
            )
        if deployment.variant_name is VariantName.PURE and (report.claim.delta or 0) > 0:
            raise ValueError(
                "[deployment] variant_name 'Pure DP' but the report's claim has delta > 0; "
                "registry-entry.yaml was not written"
            )
        return deployment.variant_name
    return VariantName.PURE if report.claim.definition is Definition.PURE_DP else VariantName.APPROXIMATE


def _components(report: Report) -> list[str]:
    out = []
    for component in report.mechanism.components:
        # sorted: the same text from a report in memory and from its canonical JSON (whose keys are sorted)
        params = ", ".join(f"{k} = {significant(v)}" for k, v in sorted(component.items()) if k != "type")
        out.append(f"- {component.get('type', '?')}: {params}")
    return out


def _ledger(report: Report) -> str | None:
    """The budget ledger's spend across releases in words, when the report has that section (``--ledger``)."""
    from dplens.reports.nist import ledger_summary

    section = getattr(report, "budget_ledger", None)
    if not section or not section.get("budgets"):
        return None
    return f"Privacy loss across releases is tracked by a dplens {ledger_summary(section)}."


def _composition(report: Report, deployment: Deployment) -> str:
    accounting = report.accounting
    routes = "; ".join(f"{r.method}: epsilon <= {fmt_upper(r.epsilon)}" for r in accounting.routes)
    lines = [
        f"dplens composes the {len(report.mechanism.components)} mechanism component(s) below in order (sequential "
        f"composition under {report.mechanism.neighbouring} adjacency) and reports the tightest of every valid "
        f"accounting route at delta = {accounting.delta:g}: {routes}.",
        f"Tightest: {accounting.tightest.details}.",
        *_components(report),
    ]
    if (across := _ledger(report)) is not None:
        lines.append(across)
    if deployment.composition_details:
        lines.append(deployment.composition_details)
    return "\n".join(lines)


def _mechanisms(report: Report, deployment: Deployment) -> str:
    lines = [
        f"Mechanisms (from the dplens spec, sha256 {report.provenance.spec_sha256}):",
        *_components(report),
        f"Sampling assumption: {report.mechanism.sampling}.",
    ]
    declared = [
        ("Implementation", deployment.implementation),
        ("Floating point (declared by the author)", deployment.floating_point),
        ("Side channels (declared by the author)", deployment.side_channels),
        ("Security and access control (declared by the author)", deployment.security),
    ]
    lines += [f"{label}: {text}" for label, text in declared if text]
    return "\n".join(lines)


def _justification(report: Report, deployment: Deployment) -> str:
    audit = report.audit
    if audit is not None:
        lines = [
            f"Empirical audit (dplens, {audit.trials} trials per side, seed {audit.seed}): verdict "
            f"{audit.verdict.value}; with {percent(audit.confidence)} confidence epsilon >= "
            f"{fmt_lower(audit.epsilon_lower_bound)} at delta = {audit.delta:g} (a valid lower bound), against the "
            f"claimed epsilon = {fmt_upper(audit.epsilon_claimed)}. {audit.verdict_reason}"
        ]
    else:
        lines = [f"Not audited: {report.not_audited_reason}."]
    for extra in report.additional_audits:
        bound = extra["result"].get("epsilon_lower_bound")
        shown = fmt_lower(bound) if isinstance(bound, int | float) else "n/a"
        lines.append(f"Additional audit ({extra['kind']}): verdict {extra['verdict']}, epsilon >= {shown}.")
    floats = report.nist.item("floating_point")
    lines.append(f"Floating-point check: {floats.status.label}: {floats.finding}")
    lines.append(f"Overall verdict of the dplens report: {report.verdict.status.value}. {report.verdict.sentence}")
    if deployment.justification_details:
        lines.append(deployment.justification_details)
    return "\n".join(lines)


#: The registry's short label of the unit each accounted DP-SGD unit gets when [deployment] gives none.
_UNIT_LABELS = {"user": "User-level", "example": "Example-level"}


def _scope(report: Report) -> dict[str, Any]:
    return getattr(report, "privacy_scope", None) or {}


def _unit_label(report: Report, deployment: Deployment) -> str:
    """``privacy_unit``: the author's label, else the accounted DP-SGD unit's (issue 49), else the claim's words."""
    if deployment.privacy_unit:
        return deployment.privacy_unit
    return _UNIT_LABELS.get(_scope(report).get("unit"), report.claim.privacy_unit)


def _unit_details(report: Report, deployment: Deployment) -> str:
    claim, scope = report.claim, _scope(report)
    accounted = []
    if scope.get("unit") == "user":
        accounted.append(f"The epsilon is accounted for {scope['unit_words']} by dplens (a user-level guarantee).")
    elif scope.get("unit") == "example":
        accounted.append(
            "The DP-SGD epsilon is accounted for one training example by dplens: it is not a guarantee for a person "
            "who contributes several examples."
        )
    if deployment.privacy_unit_details:
        return "\n".join([deployment.privacy_unit_details, *accounted])
    relation = f"Adjacent data sets are {claim.neighbouring_description} (dplens's relation '{claim.neighbouring}')."
    return " ".join([relation, *accounted])


def _tuning(report: Report, deployment: Deployment) -> str | None:
    """``preprocessing_and_hyperparameter_tuning``: the author's text, with the search the ε includes (issue 49)."""
    from dplens.reports.scope import tuning_words

    scope = _scope(report)
    accounted = None
    if scope.get("includes_tuning"):
        searches = "; ".join(tuning_words(row) for row in scope["tuning"])
        accounted = f"Hyperparameter tuning accounted by dplens and included in the epsilon: {searches}."
    texts = [t for t in (deployment.preprocessing_and_hyperparameter_tuning, accounted) if t]
    return "\n".join(texts) or None


def _put(section: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != () and value != "":
        section[key] = list(value) if isinstance(value, tuple) else value


def _given(deployment: Deployment, keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``[deployment]`` keys that were given, in the registry's order (enums as their values)."""
    section: dict[str, Any] = {}
    for key in keys:
        value = getattr(deployment, key)
        _put(section, key, value.value if hasattr(value, "value") else value)
    return section


def registry_file_name(slug: str) -> str:
    """The file name the registry's ``check_name`` accepts for a record with ``slug``: lowercase letters, digits and
    underscores (``scripts/check.py`` of the registry).

    Example:
        >>> registry_file_name("readmission-risk-model-dp-sgd--example-regional-health-network-2025")
        'readmission_risk_model_dp_sgd_example_regional_health_network_2025.yaml'
    """
    import re

    stem = re.sub(r"_+", "_", re.sub(r"[^a-z0-9]+", "_", slug.lower())).strip("_") or "deployment"
    return f"{stem}.yaml"


#: The record's ``basic`` and ``deployment_model`` fields, in the registry's order, taken from [deployment] as given.
_BASIC_FIELDS = (
    "name",
    "data_curators",
    "intended_use",
    "data_product_type",
    "data_product_region",
    "description",
    "publication_date",
    "data_product_sector",
)
_DEPLOYMENT_MODEL_FIELDS = (
    "model_name",
    "model_name_details",
    "actors",
    "release_type",
    "release_type_details",
    "data_source_type",
    "data_source_type_details",
    "access_type",
    "access_type_details",
)


def _administrative(deployment: Deployment, note: str | None) -> dict[str, Any]:
    """The record's administrative section; empty when it would hold only the audit's note (no registry authors)."""
    administrative: dict[str, Any] = {}
    _put(administrative, "sources", deployment.sources)
    notes = "\n".join(t for t in (deployment.notes, note) if t)
    _put(administrative, "notes", notes)
    _put(administrative, "registry_authors", deployment.registry_authors)
    return administrative if "registry_authors" in administrative else {}


def _tier_reached(deployment: Deployment) -> tuple[Tier, tuple[str, ...]]:
    """The highest tier whose fields the deployment fills, and what the next tier still needs."""
    tier = Tier.BASIC
    for level in (Tier.INTERMEDIATE, Tier.ADVANCED):
        if missing_for_tier(deployment, level):
            break
        tier = level
    missing_next = tuple(missing_for_tier(deployment, Tier(tier + 1))) if tier < Tier.ADVANCED else ()
    return tier, missing_next


def _header(report: Report, tool: str, slug: str, tier: Tier, missing_next: tuple[str, ...], certified: bool) -> str:
    """The YAML comment above the record: where it came from, where to submit it, its tier."""
    return (
        f"Written by {tool} from the report '{report.title}' (spec sha256 {report.provenance.spec_sha256}).\n"
        f"Submit it as deployments/{registry_file_name(slug)} (the registry's file names are lowercase "
        "letters, digits and underscores).\n"
        f"Follows the DP Deployments Registry schema at commit {REGISTRY_COMMIT} (opendp/deployments-registry-data).\n"
        f"Tier {int(tier)}"
        + (f"; tier {int(tier) + 1} needs [deployment] {', '.join(missing_next)}." if missing_next else ".")
        + (
            ""
            if certified
            else "\nThe claim's epsilon is not certified by the accountant: the record states the bound."
        )
    )


def build_registry_entry(report: Report, deployment: Deployment, *, rho: float | None, tool: str) -> RegistryEntry:
    """The registry record of ``report`` with the author's ``deployment`` table.

    Args:
        report: a finished report.
        deployment: the validated ``[deployment]`` table.
        rho: ρ of the composition when it is ρ-zCDP (an upper bound computed by the accountant), else None.
        tool: the tool and version named in the file's header comment.

    Raises:
        ValueError: a tier-1 field is missing (named), the declared variant does not fit the report, or the
            report has no finite ε.
    """
    if report.verdict.status is Status.VIOLATION:
        note = "The dplens audit refutes the claim (VIOLATION): see implementation.justification."
    else:
        note = None
    require_tier_one(deployment)
    require_authors(deployment)
    params, params_text, certified = _parameters(report, rho)
    variant = _variant(report, deployment, rho)
    basic = _given(deployment, _BASIC_FIELDS)
    dp_variant: dict[str, Any] = {"variant_name": variant.value}
    _put(dp_variant, "data_domain", deployment.data_domain)
    _put(dp_variant, "unprotected_quantities", deployment.unprotected_quantities)
    details = params_text + (
        f"\n{deployment.privacy_parameters_details}" if deployment.privacy_parameters_details else ""
    )
    privacy_loss = {
        "privacy_unit": _unit_label(report, deployment),
        "privacy_unit_details": _unit_details(report, deployment),
        "privacy_parameters": params,
        "privacy_parameters_details": details,
    }
    across = _ledger(report)
    if across is not None:  # a ledger across releases: many releases, managed by the ledger's budgets
        updates: dict[str, Any] = {
            "release_type_details": "\n".join(t for t in (deployment.release_type_details, across) if t)
        }
        if deployment.release_type is None:
            updates["release_type"] = ReleaseType.MANY
        deployment = dataclasses.replace(deployment, **updates)
    model = _given(deployment, _DEPLOYMENT_MODEL_FIELDS)
    accounting = {"composition": _composition(report, deployment)}
    _put(accounting, "post_processing", deployment.post_processing)
    accounting = {k: accounting[k] for k in ("post_processing", "composition") if k in accounting}
    implementation: dict[str, Any] = {}
    _put(implementation, "preprocessing_and_hyperparameter_tuning", _tuning(report, deployment))
    implementation["mechanisms"] = _mechanisms(report, deployment)
    implementation["justification"] = _justification(report, deployment)
    section: dict[str, Any] = {"basic": basic, "dp_variant": dp_variant, "privacy_loss": privacy_loss}
    if model:
        section["deployment_model"] = model
    section["accounting"] = accounting
    section["implementation"] = implementation
    administrative = _administrative(deployment, note)
    if administrative:
        section["administrative"] = administrative
    tier, missing_next = _tier_reached(deployment)
    record = {
        "url_slug": deployment.url_slug
        or registry_slug(deployment.name or "", deployment.data_curators, deployment.publication_date or ""),
        "status": deployment.status.value,
        "tier": int(tier),
        "deployment": section,
    }
    header = _header(report, tool, record["url_slug"], tier, missing_next, certified)
    return RegistryEntry(record=record, tier=tier, missing_for_next_tier=missing_next, header=header)


def export_entry(report: Any, *, deployment: Deployment | None = None, override: Mapping[str, Any] | None = None):
    """The registry record of ``report`` (:class:`~dplens.reports.registry_entry.RegistryEntry`), validated.

    Args:
        report: a :class:`~dplens.reports.model.Report`.
        deployment: the ``[deployment]`` table to use (default: the report's, with ``override`` on top).
        override: ``[deployment]`` keys that replace the report's.

    Raises:
        ValueError: a required field is missing (named), a value is invalid, or the record does not validate.
    """

    if deployment is None:
        deployment = resolve_deployment(report, override)
    entry = build_registry_entry(
        report, deployment, rho=composed_rho(report.mechanism.ledger), tool=f"dplens {__version__}"
    )
    problems = validate_record(entry.record)
    if problems:  # a bug of the export, not of the input: say so plainly
        raise ValueError(f"the exported registry record does not match the registry schema: {problems[0]}")
    return entry


def write_entry(entry: Any, path: str | Path) -> Path:
    """Write the record's YAML atomically (temporary file + rename)."""
    return atomic_write_text(Path(path), entry.to_yaml())


def read_report(path: str | Path) -> Any:
    """A report from its ``report.json`` (validated; every failure a one-line ``ValueError`` naming the file)."""
    raw = read_input_bytes(path, what="report file", max_bytes=MAX_REPORT_BYTES)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"report file {str(path)!r} is not valid JSON: {err}") from None
    except RecursionError:
        raise ValueError(f"report file {str(path)!r} is nested too deeply to be a report") from None
    try:
        return Report.from_dict(data)
    except (KeyError, TypeError) as err:
        raise ValueError(f"report file {str(path)!r} is not a valid report: {err!r}") from None
