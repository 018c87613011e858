"""dplens's JSON schema of a registry record, written from the registry's documented fields, and validation.

:data:`RECORD_SCHEMA` is a Draft-7 schema with ``additionalProperties: false`` on every object, the registry's
required fields and enumerations, and ``format: date`` on the publication date, as the registry's schema
(``schemas/deployments-schema.yaml``) documents them at :data:`~dplens.registry.fields.REGISTRY_COMMIT`. It is the
project's own text (the registry's file is not copied): where the registry leaves a field untyped
(``privacy_parameters_details``, ``data_source_type_details``) it is a string here, so a record this schema accepts
is accepted by the registry's. Validation uses ``jsonschema``'s ``Draft7Validator`` with its format checker, as
the registry's ``scripts/check.py`` does; a copy of the registry's own schema can be used instead
(:func:`load_schema_file`, ``dplens registry check --schema``).

Example:
    >>> record = {"url_slug": "x", "status": "Draft", "tier": 1, "deployment": {"basic": {
    ...     "name": "Counts", "data_curators": ["Agency"], "description": "d", "intended_use": "u",
    ...     "data_product_type": "Summary statistics", "data_product_region": "USA", "publication_date": "2025-13-01"}}}
    >>> validate_record(record)
    ["deployment.basic.publication_date: '2025-13-01' is not a 'date'"]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dplens.registry.fields import BASIC_REQUIRED, ENUM_FIELDS, REGISTRY_COMMIT, Tier, choices

__all__ = ["MAX_SCHEMA_BYTES", "RECORD_SCHEMA", "load_schema_file", "validate_record"]

#: Largest schema file read by :func:`load_schema_file`.
MAX_SCHEMA_BYTES = 2**20

_TEXT: dict[str, Any] = {"type": "string"}
_NAMES: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "minItems": 1}


def _enum(key: str) -> dict[str, Any]:
    """The schema of the field ``key``: a string from its enumeration (:data:`~dplens.registry.fields.ENUM_FIELDS`)."""
    return {"type": "string", "enum": choices(ENUM_FIELDS[key])}


def _object(properties: dict[str, Any], *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_BASIC = _object(
    {
        "name": _TEXT,
        "data_curators": _NAMES,
        "intended_use": _TEXT,
        "data_product_type": _enum("data_product_type"),
        "data_product_region": _TEXT,
        "description": _TEXT,
        "publication_date": {"type": "string", "format": "date"},
        "data_product_sector": _enum("data_product_sector"),
    },
    required=BASIC_REQUIRED,
)

#: The project's Draft-7 schema of a registry record (see the module's docstring).
RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$comment": f"dplens's schema of a DP Deployments Registry record, following registry commit {REGISTRY_COMMIT}",
    **_object(
        {
            "url_slug": _TEXT,
            "status": _enum("status"),
            "tier": {"type": "integer", "enum": [int(t) for t in Tier]},
            "deployment": _object(
                {
                    "basic": _BASIC,
                    "dp_variant": _object(
                        {
                            "variant_name": _enum("variant_name"),
                            "data_domain": _TEXT,
                            "unprotected_quantities": _TEXT,
                        }
                    ),
                    "privacy_loss": _object(
                        {
                            "privacy_unit": _TEXT,
                            "privacy_unit_details": _TEXT,
                            "privacy_parameters": _object(
                                {
                                    "epsilon": {"type": "number"},
                                    "delta": {"type": ["number", "string"]},
                                    "rho": {"type": "number"},
                                }
                            ),
                            "privacy_parameters_details": _TEXT,
                        }
                    ),
                    "deployment_model": _object(
                        {
                            "model_name": _enum("model_name"),
                            "model_name_details": _TEXT,
                            "actors": _TEXT,
                            "release_type": _enum("release_type"),
                            "release_type_details": _TEXT,
                            "data_source_type": _enum("data_source_type"),
                            "data_source_type_details": _TEXT,
                            "access_type": _enum("access_type"),
                            "access_type_details": _TEXT,
                        }
                    ),
                    "accounting": _object({"post_processing": _TEXT, "composition": _TEXT}),
                    "implementation": _object(
                        {
                            "preprocessing_and_hyperparameter_tuning": _TEXT,
                            "mechanisms": _TEXT,
                            "justification": _TEXT,
                        }
                    ),
                    "administrative": _object(
                        {"sources": _TEXT, "notes": _TEXT, "registry_authors": _NAMES},
                        required=("registry_authors",),
                    ),
                },
                required=("basic",),
            ),
        },
        required=("url_slug", "status", "tier", "deployment"),
    ),
}


def validate_record(record: Any, *, schema: Mapping[str, Any] | None = None) -> list[str]:
    """Every violation of ``schema`` (default :data:`RECORD_SCHEMA`) by ``record``, as ``"dotted.path: message"``
    lines in path order (empty: valid). Draft 7 with its format checker, as the registry checks its records."""
    from jsonschema import Draft7Validator

    validator = Draft7Validator(dict(schema or RECORD_SCHEMA), format_checker=Draft7Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in error.absolute_path) or '(record)'}: {error.message}" for error in errors]


def load_schema_file(path: str | Path) -> dict[str, Any]:
    """A JSON schema from a YAML or JSON file (e.g. the registry's ``schemas/deployments-schema.yaml``), checked as
    a Draft-7 schema; every failure is a one-line ``ValueError`` naming the file."""
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import SchemaError

    from dplens.registry.yamlio import read_yaml_document

    path = Path(path)
    if path.suffix.lower() == ".json":
        from dplens._files import read_input_bytes

        raw = read_input_bytes(path, what="schema file", max_bytes=MAX_SCHEMA_BYTES)
        try:
            schema = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"schema file {str(path)!r} is not valid JSON: {err}") from None
    else:
        schema = read_yaml_document(path, what="schema file", max_bytes=MAX_SCHEMA_BYTES)
    if not isinstance(schema, dict):
        raise ValueError(f"schema file {str(path)!r} must hold a JSON schema object; got {type(schema).__name__}")
    try:
        Draft7Validator.check_schema(schema)
    except SchemaError as err:
        raise ValueError(f"schema file {str(path)!r} is not a valid Draft-7 schema: {err.message}") from None
    return schema
