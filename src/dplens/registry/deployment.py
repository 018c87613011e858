"""The spec's ``[deployment]`` table: what only the deployment's author knows (standard library only).

A registry record (:mod:`dplens.registry.export`) joins what dplens knows — the DP variant, the parameters, the
neighbouring relation, the composition, the mechanisms, the audit — with what only the author can say: who
publishes the data product, for what, where and when, the deployment model, the release type, the data domain,
the unprotected quantities. Those go in a ``[deployment]`` table of the spec (or a TOML file given with
``--deployment``). Every key is optional when the spec is parsed; the keys a tier of the registry requires are
checked when a record is exported (:func:`missing_for_tier`). A few keys are dplens's own (``dataset_size``,
``records_per_person``, ``floating_point``, ``side_channels``, ``security``, ``data_collection``): they feed the
NIST SP 800-226 section of the report, and the implementation text of the record.

Keys (registry field in brackets):

- tier 1: ``name``, ``data_curators`` (a list), ``description``, ``intended_use``, ``data_product_type``,
  ``data_product_region``, ``publication_date`` (YYYY-MM-DD or a TOML date), ``data_product_sector``;
- tier 2: ``privacy_unit`` (a short label, e.g. "User-level"), ``variant_name`` (default: from the claim),
  ``model_name``, ``release_type``, ``data_source_type``, ``access_type`` (each with a ``…_details`` text);
- tier 3: ``data_domain``, ``unprotected_quantities``, ``actors``, ``privacy_unit_details`` (default: dplens's
  neighbouring relation in words), ``privacy_parameters_details``, ``post_processing``, ``composition_details``,
  ``preprocessing_and_hyperparameter_tuning``, ``implementation`` (library, version, code: added to dplens's
  mechanisms text), ``justification_details``;
- administrative: ``sources``, ``notes``, ``registry_authors`` (a list), ``status`` (default "Draft"),
  ``url_slug`` (default: the registry's slug of name, curators and year).

Example:
    >>> table = {"name": "Counts", "data_curators": ["Example Agency"], "data_product_type": "Summary statistics",
    ...          "publication_date": "2025-03-01", "release_type": "One release"}
    >>> deployment = parse_deployment(table)
    >>> deployment.release_type, deployment.publication_date
    (<ReleaseType.ONE: 'One release'>, '2025-03-01')
    >>> parse_deployment({"release_type": "once"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: [deployment] release_type must be one of ['One release', 'Many releases']; got 'once'
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dplens.registry.fields import (
    BASIC_REQUIRED,
    ENUM_FIELDS,
    AccessType,
    DataProductType,
    DataSourceType,
    ModelName,
    RecordStatus,
    ReleaseType,
    Sector,
    Tier,
    VariantName,
    choices,
)

__all__ = [
    "DEPLOYMENT_KEYS",
    "MAX_DEPLOYMENT_BYTES",
    "TIER_FIELDS",
    "Deployment",
    "load_deployment_file",
    "merge_deployment_tables",
    "missing_for_tier",
    "parse_deployment",
    "registry_slug",
    "require_authors",
    "require_tier_one",
]

#: Largest ``--deployment`` file read.
MAX_DEPLOYMENT_BYTES = 2**20

#: Largest integer a ``[deployment]`` count may hold (the spec's own limit).
_MAX_INTEGER = 10**15
#: Longest text a ``[deployment]`` key may hold (a record is a page, not a data file).
_MAX_TEXT = 20_000

_TEXT_KEYS = (
    "name",
    "description",
    "intended_use",
    "data_product_region",
    "data_domain",
    "unprotected_quantities",
    "privacy_unit",
    "privacy_unit_details",
    "privacy_parameters_details",
    "model_name_details",
    "actors",
    "release_type_details",
    "data_source_type_details",
    "access_type_details",
    "post_processing",
    "composition_details",
    "preprocessing_and_hyperparameter_tuning",
    "implementation",
    "justification_details",
    "sources",
    "notes",
    "url_slug",
    "floating_point",
    "side_channels",
    "security",
    "data_collection",
)
_LIST_KEYS = ("data_curators", "registry_authors")
_INTEGER_KEYS = ("dataset_size", "records_per_person")
#: Every key a ``[deployment]`` table may hold.
DEPLOYMENT_KEYS = frozenset((*_TEXT_KEYS, *_LIST_KEYS, *ENUM_FIELDS, *_INTEGER_KEYS, "publication_date"))

#: The ``[deployment]`` keys each tier needs from the author (dplens supplies the variant, the parameters, the
#: unit's neighbouring relation, the composition, the mechanisms and their justification).
TIER_FIELDS: dict[Tier, tuple[str, ...]] = {
    Tier.BASIC: BASIC_REQUIRED,
    Tier.INTERMEDIATE: ("model_name", "release_type", "data_source_type", "access_type"),
    Tier.ADVANCED: (
        "data_domain",
        "unprotected_quantities",
        "actors",
        "post_processing",
        "preprocessing_and_hyperparameter_tuning",
    ),
}

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """A validated ``[deployment]`` table (see the module's docstring for the keys); None where not given."""

    name: str | None = None
    data_curators: tuple[str, ...] = ()
    description: str | None = None
    intended_use: str | None = None
    data_product_type: DataProductType | None = None
    data_product_region: str | None = None
    publication_date: str | None = None
    data_product_sector: Sector | None = None
    variant_name: VariantName | None = None
    data_domain: str | None = None
    unprotected_quantities: str | None = None
    privacy_unit: str | None = None
    privacy_unit_details: str | None = None
    privacy_parameters_details: str | None = None
    model_name: ModelName | None = None
    model_name_details: str | None = None
    actors: str | None = None
    release_type: ReleaseType | None = None
    release_type_details: str | None = None
    data_source_type: DataSourceType | None = None
    data_source_type_details: str | None = None
    access_type: AccessType | None = None
    access_type_details: str | None = None
    post_processing: str | None = None
    composition_details: str | None = None
    preprocessing_and_hyperparameter_tuning: str | None = None
    implementation: str | None = None
    justification_details: str | None = None
    sources: str | None = None
    notes: str | None = None
    registry_authors: tuple[str, ...] = ()
    status: RecordStatus = RecordStatus.DRAFT
    url_slug: str | None = None
    dataset_size: int | None = None
    records_per_person: int | None = None
    floating_point: str | None = None
    side_channels: str | None = None
    security: str | None = None
    data_collection: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The keys that were given (enums as their values, lists as lists): the table's JSON form, which
        :func:`parse_deployment` reads back."""
        out: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if value is None or value == () or (item.name == "status" and value is RecordStatus.DRAFT):
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            out[item.name] = value
        return out

    def given(self, key: str) -> bool:
        """Whether ``key`` was given (a list: non-empty)."""
        value = getattr(self, key)
        return value is not None and value != ()


def _text(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} {key} must be a non-empty string; got {_show(value)}")
    if len(value) > _MAX_TEXT:
        raise ValueError(f"{where} {key} is longer than {_MAX_TEXT} characters")
    return value.strip()


def _texts(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where} {key} must be a non-empty list of names; got {_show(value)}")
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item) > _MAX_TEXT:
            raise ValueError(f"{where} {key} must hold non-empty strings; got {_show(item)}")
    return tuple(item.strip() for item in value)


def _choice(raw: Mapping[str, Any], key: str, kind: type[enum.Enum], where: str) -> enum.Enum:
    value = raw[key]
    try:
        return kind(value)
    except (ValueError, TypeError):
        raise ValueError(f"{where} {key} must be one of {choices(kind)}; got {_show(value)}") from None


def _date(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw[key]
    if isinstance(value, dt.datetime):
        raise ValueError(f"{where} {key} must be a date YYYY-MM-DD, not a date and time; got {_show(value)}")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str) and _DATE.match(value.strip()):
        try:
            return dt.date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            pass
    raise ValueError(f"{where} {key} must be a date YYYY-MM-DD (day and month 01 if unknown); got {_show(value)}")


def _integer(raw: Mapping[str, Any], key: str, where: str) -> int:
    value = raw[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_INTEGER:
        raise ValueError(f"{where} {key} must be an integer in [1, {_MAX_INTEGER:.0e}]; got {_show(value)}")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_deployment(raw: Any, *, where: str = "[deployment]", defaults: Mapping[str, str] | None = None) -> Deployment:
    """Validate a ``[deployment]`` table; an unknown key, a wrong type or a value outside a registry enumeration is
    a ``ValueError`` naming the key (and the allowed values).

    Args:
        raw: the decoded table.
        where: how messages name the table.
        defaults: text keys taken from elsewhere in the spec when the table does not give them (the spec's top-level
            ``name`` and ``description``).
    """
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a table; got {_show(raw)}")
    unknown = sorted(str(k) for k in raw if k not in DEPLOYMENT_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {where}; allowed: {sorted(DEPLOYMENT_KEYS)}")
    table = dict(defaults or {}) | dict(raw)
    values: dict[str, Any] = {}
    for key in table:
        if key in _LIST_KEYS:
            values[key] = _texts(table, key, where)
        elif key in ENUM_FIELDS:
            values[key] = _choice(table, key, ENUM_FIELDS[key], where)
        elif key in _INTEGER_KEYS:
            values[key] = _integer(table, key, where)
        elif key == "publication_date":
            values[key] = _date(table, key, where)
        elif key in _TEXT_KEYS:
            values[key] = _text(table, key, where)
    return Deployment(**values)


def merge_deployment_tables(*tables: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keys of several ``[deployment]`` tables, later tables winning (e.g. the spec's, then ``--deployment``)."""
    merged: dict[str, Any] = {}
    for table in tables:
        if table:
            merged.update(table)
    return merged


def missing_for_tier(deployment: Deployment | None, tier: Tier) -> list[str]:
    """The ``[deployment]`` keys ``tier`` still needs (lower tiers included), in the registry's order."""
    missing = []
    for level in Tier:
        if level > tier:
            break
        for key in TIER_FIELDS[level]:
            if deployment is None or not deployment.given(key):
                missing.append(key)
    return missing


def require_tier_one(deployment: Deployment | None) -> None:
    """Raise a ``ValueError`` naming the first tier-1 key ``deployment`` lacks (a record cannot be written without
    them)."""
    missing = missing_for_tier(deployment, Tier.BASIC)
    if missing:
        more = f" (and {len(missing) - 1} more: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise ValueError(
            f"the registry record needs [deployment] {missing[0]}{more}; registry-entry.yaml was not written"
        )


def require_authors(deployment: Deployment) -> None:
    """Raise a ``ValueError`` when the record would have an ``administrative`` section (sources, notes) without the
    ``registry_authors`` the registry requires there."""
    if (deployment.sources or deployment.notes) and not deployment.registry_authors:
        raise ValueError(
            "the registry record needs [deployment] registry_authors (who wrote this record) when it has sources "
            "or notes; registry-entry.yaml was not written"
        )


def load_deployment_file(path: str) -> dict[str, Any]:
    """The ``[deployment]`` table of a TOML (``.toml``) or JSON file (``--deployment FILE``): the file's
    ``deployment`` table, or its top level when it has none; validated, returned as given (to merge)."""
    from dplens._files import read_document

    data, _ = read_document(path, what="deployment file", max_bytes=MAX_DEPLOYMENT_BYTES)
    if isinstance(data, dict) and isinstance(data.get("deployment"), dict):
        data = data["deployment"]
    parse_deployment(data, where=f"[deployment] of {path!r}")
    return dict(data)


def registry_slug(name: str, curators: tuple[str, ...], publication_date: str) -> str:
    """The registry's ``url_slug``: name, curators (joined) and year, lower case, each run of non-word characters a
    hyphen (the registry's ``scripts/update_slug.py`` rule, which its tests enforce).

    Example:
        >>> registry_slug("Disclosure Avoidance System", ("U.S. Census Bureau",), "2023-05-25")
        'disclosure-avoidance-system-u-s-census-bureau-2023'
    """
    parts = (name, "-".join(curators), publication_date.split("-")[0])
    return "_".join(re.sub(r"\W+", "_", part.lower()) for part in parts).replace("_", "-")
