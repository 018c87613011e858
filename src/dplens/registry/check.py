"""Checking the privacy parameters of registry records others wrote (``dplens registry check``).

For each record dplens re-derives what its structured fields (``privacy_parameters``, ``dp_variant``) and the
statements of its details text (:mod:`dplens.registry.statements`) let it re-derive, asking the accountant:

- ρ-zCDP → (ε, δ) by the tightest valid conversion dplens has (Canonne, Kamath, Steinke 2020, arXiv 2004.00010v4,
  Prop. 12, α optimised continuously: :meth:`dplens.accountant.curves.Zcdp.epsilon`) and by the classic one
  (Bun & Steinke 2016, arXiv 1605.02065, Prop. 1.3: ε = ρ + 2√(ρ log 1/δ)); a stated ε at least the tightest
  conversion's is **valid**, and the tighter ε is reported;
- a stated ε *below* the tightest conversion of the stated ρ does not follow from ρ: a mechanism-specific analysis
  must be cited. For reference the Gaussian mechanism's exact profile at the same ρ (μ = √(2ρ), Dong, Roth, Su 2022
  Cor. 2.13; a Gaussian is exactly ρ-zCDP, so no conversion valid for every ρ-zCDP mechanism can go below it) is
  reported, and a μ-GDP analysis named in the details is checked (μ → (ε, δ) by the same corollary);
- pure DP stated with a δ > 0, a variant without the parameter that defines it, values out of range:
  **inconsistent**.

Every ε dplens derives is an upper bound (rounded up); the Gaussian profile's ε is the exact value of that one
mechanism, a reference, not a guarantee for the record.

Example:
    >>> record = {"deployment": {"dp_variant": {"variant_name": "Zero-concentrated DP"}, "privacy_loss": {
    ...     "privacy_parameters": {"rho": 4.96, "epsilon": 26.34, "delta": 1e-10}}}}
    >>> result = check_record(record, name="dhc.yaml")
    >>> result.status.value, round(result.checks[0].values["epsilon_optimal"], 2)
    ('valid', 25.41)
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dplens._numbers import fmt_upper
from dplens.registry.statements import Statement, decimal_half_unit, parse_delta, read_statements

__all__ = [
    "DEFAULT_DERIVE_DELTA",
    "CheckStatus",
    "ParameterCheck",
    "RecordCheck",
    "RecordsCheck",
    "check_record",
    "check_records",
    "record_files",
]

#: δ at which a ρ with no stated δ is converted (the 2020 Census products state their ε at δ = 10⁻¹⁰).
DEFAULT_DERIVE_DELTA = 1e-10
_RECORD_SUFFIXES = (".yaml", ".yml")


class CheckStatus(enum.Enum):
    """The outcome of one check, and of a record (its worst check)."""

    INCONSISTENT = "inconsistent"  # the stated parameters contradict each other or their variant
    NEEDS_CITATION = "needs_citation"  # a stated ε does not follow from the stated ρ by any conversion dplens has
    VALID = "valid"  # a stated ε follows from the stated ρ (or μ) by a valid conversion
    DERIVED = "derived"  # nothing to compare: dplens derived (ε, δ) from the stated ρ
    NOT_CHECKABLE = "not_checkable"  # nothing the structured fields let dplens re-derive

    @property
    def rank(self) -> int:
        return list(CheckStatus).index(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParameterCheck:
    """One re-derivation: what was checked, where the values came from, the outcome and the numbers."""

    kind: str
    status: CheckStatus
    source: str
    message: str
    values: dict[str, Any] = field(default_factory=dict)
    label: str | None = None  # the details sentence's label (e.g. "Person Tables") when read from the text

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "status": self.status.value,
            "source": self.source,
            "message": self.message,
            "values": dict(self.values),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordCheck:
    """The checks of one record; its status is the worst of them (inconsistent first)."""

    path: str
    url_slug: str | None
    name: str | None
    tier: Any
    variant: str | None
    parameters: dict[str, Any]
    checks: tuple[ParameterCheck, ...]

    @property
    def status(self) -> CheckStatus:
        if not self.checks:
            return CheckStatus.NOT_CHECKABLE
        return min((c.status for c in self.checks), key=lambda s: s.rank)

    def line(self) -> str:
        """The record in one line: file, status, what was found."""
        worst = [c for c in self.checks if c.status is self.status]
        summary = "; ".join(f"{c.label}: {c.message}" if c.label else c.message for c in worst)
        summary = summary or "no privacy parameters stated"
        return f"{Path(self.path).name}: {self.status.value.upper().replace('_', ' ')} — {summary}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "url_slug": self.url_slug,
            "name": self.name,
            "tier": self.tier,
            "variant": self.variant,
            "parameters": dict(self.parameters),
            "status": self.status.value,
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordsCheck:
    """The result of checking several files: a check per readable record, one error line per unreadable file."""

    records: tuple[RecordCheck, ...]
    errors: tuple[tuple[str, str], ...]
    schema: str
    delta: float

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {s.value: 0 for s in CheckStatus}
        for record in self.records:
            counts[record.status.value] += 1
        return {
            "schema": self.schema,
            "delta_for_derived_epsilon": self.delta,
            "records": [r.to_dict() for r in self.records],
            "errors": [{"path": p, "error": e} for p, e in self.errors],
            "counts": counts,
        }


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _conversions(rho: float, delta: float) -> dict[str, float]:
    """ε of ρ-zCDP at δ by the tightest conversion, the classic one, and the Gaussian mechanism's exact profile."""
    from dplens.accountant.conversions import gdp_epsilon
    from dplens.accountant.curves import Zcdp

    zcdp = Zcdp(rho=rho)
    return {
        "epsilon_optimal": zcdp.epsilon(delta),
        "epsilon_classic": zcdp.epsilon_bun_steinke(delta),
        "epsilon_gaussian": gdp_epsilon(math.sqrt(2.0 * rho), delta),
    }


def _gdp_epsilon(mu: float, delta: float) -> float:
    from dplens.accountant.conversions import gdp_epsilon

    return gdp_epsilon(mu, delta)


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------


def _range_checks(params: Mapping[str, Any], source: str) -> list[ParameterCheck]:
    messages = []
    for key in ("epsilon", "rho"):
        if key in params:
            value = _number(params[key])
            if value is None or not math.isfinite(value) or value < 0:
                messages.append(f"{key} = {params[key]!r} is not a finite number >= 0")
    if "delta" in params:
        delta = parse_delta(params["delta"])
        if delta is not None and not (math.isfinite(delta) and 0 <= delta < 1):
            messages.append(f"delta = {params['delta']!r} is not in [0, 1)")
    return [
        ParameterCheck(kind="range", status=CheckStatus.INCONSISTENT, source=source, message=message)
        for message in messages
    ]


def _not_checkable(kind: str, source: str, message: str) -> ParameterCheck:
    """A check the structured fields give dplens nothing to re-derive for (why in ``message``)."""
    return ParameterCheck(kind=kind, status=CheckStatus.NOT_CHECKABLE, source=source, message=message)


def _variant_checks(variant: str | None, params: Mapping[str, Any], details_rho: bool) -> list[ParameterCheck]:
    source = "dp_variant.variant_name + privacy_parameters"
    delta = parse_delta(params.get("delta")) if "delta" in params else None
    has = {k: k in params for k in ("epsilon", "delta", "rho")}
    problems = []
    if variant is not None and not params:
        return [_not_checkable("variant", source, f"{variant} stated without privacy parameters")]
    if variant == "Pure DP":
        if delta is not None and delta > 0:
            problems.append(
                f"pure DP stated with delta = {params['delta']!r}: pure DP has delta = 0; with delta > 0 the "
                "guarantee is approximate DP"
            )
        if not has["epsilon"]:
            problems.append("pure DP without epsilon")
    elif variant == "Approximate DP":
        if not has["epsilon"] or not has["delta"]:
            missing = " and ".join(k for k in ("epsilon", "delta") if not has[k])
            problems.append(f"approximate DP without {missing}")
    elif variant == "Zero-concentrated DP" and not has["rho"] and not details_rho:
        problems.append("zero-concentrated DP without rho (the parameter that defines it)")
    return [
        ParameterCheck(kind="variant", status=CheckStatus.INCONSISTENT, source=source, message=problem)
        for problem in problems
    ]


def _explained_by_mu(epsilon: float, delta: float, statements: Sequence[Statement]) -> tuple[float, float] | None:
    """A μ named in the details whose μ-GDP guarantee implies the stated (ε, δ): (μ, its ε at δ)."""
    for statement in statements:
        if statement.mu is not None and statement.mu > 0:
            value = _gdp_epsilon(statement.mu, delta)
            if value <= epsilon:
                return statement.mu, value
    return None


def _zcdp_check(
    *,
    rho: float,
    rho_text: str | None,
    epsilon: float | None,
    epsilon_text: str | None,
    delta: float | None,
    default_delta: float,
    source: str,
    statements: Sequence[Statement],
    label: str | None = None,
) -> ParameterCheck:
    """ρ (and a stated ε at δ) against the conversions."""
    at = delta if delta is not None and 0 < delta < 1 else default_delta
    values: dict[str, Any] = {"rho": rho, "delta": at, **_conversions(rho, at)}
    optimal, classic, gaussian = values["epsilon_optimal"], values["epsilon_classic"], values["epsilon_gaussian"]
    both = (
        f"tightest conversion (Canonne-Kamath-Steinke): epsilon <= {fmt_upper(optimal)}; "
        f"classic (Bun-Steinke): {fmt_upper(classic)}"
    )

    def result(status: CheckStatus, message: str) -> ParameterCheck:
        return ParameterCheck(
            kind="zcdp_conversion", status=status, source=source, message=message, values=values, label=label
        )

    if epsilon is None:
        note = "" if delta is not None else "; no delta stated"
        return result(CheckStatus.DERIVED, f"rho = {rho:g} at delta = {at:g}: {both}{note}")
    values["epsilon_stated"] = epsilon
    stated = f"rho = {rho:g}, stated epsilon = {epsilon:g} at delta = {at:g}"
    if epsilon >= optimal:
        return result(CheckStatus.VALID, f"{stated}: valid; {both}")
    explained = _explained_by_mu(epsilon, at, statements)
    if explained is not None:
        mu, mu_epsilon = explained
        values |= {"mu": mu, "epsilon_gdp": mu_epsilon}
        return result(
            CheckStatus.VALID,
            f"{stated}: below what rho allows ({fmt_upper(optimal)} by the tightest conversion, "
            f"{fmt_upper(gaussian)} for a Gaussian mechanism), but it follows from the mu-GDP analysis the details "
            f"cite: mu = {mu:g} gives epsilon <= {fmt_upper(mu_epsilon)} (Dong-Roth-Su Cor. 2.13)",
        )
    parts = [
        f"{stated}: below the tightest conversion ({fmt_upper(optimal)}), so it does not follow from rho and a "
        "mechanism-specific analysis must be cited",
        f"a Gaussian mechanism at this rho has exactly {fmt_upper(gaussian)}",
    ]
    rho_low = rho - decimal_half_unit(rho_text or repr(rho))
    epsilon_high = epsilon + decimal_half_unit(epsilon_text or repr(epsilon))
    if 0 <= rho_low < rho:
        low = _conversions(rho_low, at)["epsilon_optimal"]
        if low <= epsilon_high:
            values["epsilon_optimal_rounding"] = low
            parts.append(f"within rounding: rho = {rho_low:g} (which rounds to {rho:g}) gives {fmt_upper(low)}")
    return result(CheckStatus.NEEDS_CITATION, "; ".join(parts))


def _gdp_check(*, mu: float, epsilon: float, delta: float, source: str, label: str | None) -> ParameterCheck:
    value = _gdp_epsilon(mu, delta)
    values = {"mu": mu, "delta": delta, "epsilon_stated": epsilon, "epsilon_gdp": value}
    if epsilon >= value:
        status, verdict = CheckStatus.VALID, "valid"
    else:
        status, verdict = CheckStatus.NEEDS_CITATION, "below what mu-GDP allows: an analysis must be cited"
    return ParameterCheck(
        kind="gdp_conversion",
        status=status,
        source=source,
        message=(
            f"stated epsilon = {epsilon:g} at delta = {delta:g} against mu = {mu:g} (epsilon <= {fmt_upper(value)} by "
            f"Dong-Roth-Su Cor. 2.13): {verdict}"
        ),
        values=values,
        label=label,
    )


def check_record(record: Any, *, name: str, delta: float = DEFAULT_DERIVE_DELTA) -> RecordCheck:
    """The checks of one record (already read; not validated against a schema here).

    Args:
        record: the decoded YAML document.
        name: its file name (for messages).
        delta: the δ at which a ρ without a stated δ is converted.
    """
    deployment = record.get("deployment") if isinstance(record, Mapping) else None
    deployment = deployment if isinstance(deployment, Mapping) else {}
    basic = deployment.get("basic") if isinstance(deployment.get("basic"), Mapping) else {}
    variant_table = deployment.get("dp_variant") if isinstance(deployment.get("dp_variant"), Mapping) else {}
    loss = deployment.get("privacy_loss") if isinstance(deployment.get("privacy_loss"), Mapping) else {}
    params = loss.get("privacy_parameters") if isinstance(loss.get("privacy_parameters"), Mapping) else {}
    variant = variant_table.get("variant_name") if isinstance(variant_table.get("variant_name"), str) else None
    statements = read_statements(loss.get("privacy_parameters_details"))
    checks = _range_checks(params, "privacy_parameters")
    checks += _variant_checks(variant, params, any(s.rho is not None for s in statements))
    if not any(c.kind == "range" for c in checks):
        checks += _parameter_checks(params, variant, statements, delta)
    return RecordCheck(
        path=name,
        url_slug=record.get("url_slug") if isinstance(record, Mapping) else None,
        name=basic.get("name") if isinstance(basic.get("name"), str) else None,
        tier=record.get("tier") if isinstance(record, Mapping) else None,
        variant=variant,
        parameters=dict(params),
        checks=tuple(checks),
    )


def _parameter_checks(
    params: Mapping[str, Any], variant: str | None, statements: Sequence[Statement], default_delta: float
) -> list[ParameterCheck]:
    checks: list[ParameterCheck] = []
    rho = _number(params.get("rho"))
    epsilon = _number(params.get("epsilon"))
    delta = parse_delta(params["delta"]) if "delta" in params else None
    if "delta" in params and delta is None:
        message = f"delta is given as an expression ({params['delta']!r}), not a number: not checked"
        checks.append(_not_checkable("delta", "privacy_parameters", message))
    if rho is not None:
        checks.append(
            _zcdp_check(
                rho=rho,
                rho_text=repr(rho),
                epsilon=epsilon,
                epsilon_text=None if epsilon is None else repr(epsilon),
                delta=delta,
                default_delta=default_delta,
                source="privacy_parameters",
                statements=statements,
            )
        )
    for statement in statements:
        source = f"privacy_parameters_details ({statement.label!r}, read from the text)"
        if statement.rho is not None and (statement.rho != rho or statement.epsilon is not None):
            if statement.rho == rho and statement.epsilon == epsilon:
                continue  # the structured fields' own numbers, checked above
            checks.append(
                _zcdp_check(
                    rho=statement.rho,
                    rho_text=statement.rho_text,
                    epsilon=statement.epsilon,
                    epsilon_text=statement.epsilon_text,
                    delta=statement.delta if statement.delta is not None else delta,
                    default_delta=default_delta,
                    source=source,
                    statements=statements,
                    label=statement.label,
                )
            )
        elif statement.mu is not None and rho is None:
            stated_epsilon = statement.epsilon if statement.epsilon is not None else epsilon
            stated_delta = statement.delta if statement.delta is not None else delta
            if stated_epsilon is not None and stated_delta is not None and 0 < stated_delta < 1 and statement.mu > 0:
                checks.append(
                    _gdp_check(
                        mu=statement.mu,
                        epsilon=stated_epsilon,
                        delta=stated_delta,
                        source=source,
                        label=statement.label,
                    )
                )
    if not checks and params:
        what = ", ".join(f"{k} = {v!r}" for k, v in params.items())
        message = f"{variant or 'no variant'} with {what}: nothing dplens can re-derive from these fields"
        checks.append(_not_checkable("parameters", "privacy_parameters", message))
    return checks


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def record_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[tuple[str, str]]]:
    """The record files named by ``paths`` (a directory: its ``*.yaml`` / ``*.yml`` files) and one error per path
    that is not one (missing, a directory without records, another file in a directory)."""
    files: list[Path] = []
    errors: list[tuple[str, str]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = []
            for entry in sorted(path.iterdir()):
                if entry.name.startswith(".") or entry.is_dir():
                    continue
                if entry.suffix.lower() in _RECORD_SUFFIXES:
                    found.append(entry)
                else:
                    errors.append((str(entry), f"{str(entry)!r} is not a .yaml/.yml record"))
            if not found and not errors:
                errors.append((str(path), f"directory {str(path)!r} holds no .yaml/.yml record"))
            files += found
        elif not path.exists():
            errors.append((str(path), f"registry record not found: {str(path)!r}"))
        else:
            files.append(path)
    return files, errors


def check_records(
    paths: Iterable[str | Path], *, schema: Mapping[str, Any] | None = None, delta: float = DEFAULT_DERIVE_DELTA
) -> RecordsCheck:
    """Read, validate (against ``schema``, default dplens's :data:`~dplens.registry.schema.RECORD_SCHEMA`) and check
    every record named by ``paths``; a file that cannot be read or is not a valid record is an error (one line)."""
    from dplens.registry.fields import REGISTRY_COMMIT
    from dplens.registry.schema import validate_record
    from dplens.registry.yamlio import read_yaml_document

    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}")
    files, errors = record_files(paths)
    records = []
    for path in files:
        try:
            document = read_yaml_document(path)
        except ValueError as err:
            errors.append((str(path), str(err).splitlines()[0]))
            continue
        if not isinstance(document, Mapping):
            errors.append((str(path), f"{str(path)!r} is not a registry record: its top level is not a mapping"))
            continue
        problems = validate_record(document, schema=schema)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            errors.append((str(path), f"{str(path)!r} does not match the registry schema: {problems[0]}{more}"))
            continue
        records.append(check_record(document, name=str(path), delta=delta))
    label = "custom schema" if schema is not None else f"dplens's schema (registry commit {REGISTRY_COMMIT[:7]})"
    return RecordsCheck(records=tuple(records), errors=tuple(errors), schema=label, delta=float(delta))
