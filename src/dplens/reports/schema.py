"""The report's JSON schema (a JSON-Schema draft 2020-12 subset), its version, and a small validator.

``REPORT_SCHEMA`` is checked by our own validator (:func:`validate_report_dict`), so no dependency is added; the
same dict can be handed to any JSON-Schema validator. A report with a wrong ``schema_version`` or a missing
required field is rejected with a ``ValueError`` naming the field. Soundness conventions enforced here: every
accounting ε is an upper bound (``is_upper_bound`` true on every route); the audit's ``epsilon_lower_bound`` is a
statistically valid lower bound (``is_lower_bound`` true); every audit number that is not a bound is in
``estimates`` with ``is_estimate`` true.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "IMPLEMENTATION_CHECK_SCHEMA",
    "IMPLEMENTATION_SECTION_SCHEMA",
    "REPORT_FORMAT",
    "REPORT_SCHEMA",
    "SCHEMA_VERSION",
    "Definition",
    "Status",
    "validate_report_dict",
]

REPORT_FORMAT = "dplens-report"
#: Bump on any incompatible change of the JSON form; readers reject other versions.
SCHEMA_VERSION = 3  # 2: the accounting section carries the accountant's whole summary; 3: the NIST SP 800-226
# section and the spec's [deployment] table


class Definition(enum.Enum):
    """The privacy definition a claim is stated in."""

    APPROX_DP = "approx-DP"  # (ε, δ)-DP
    PURE_DP = "pure-DP"  # (ε, 0)-DP
    ZCDP = "zCDP"  # ρ-zCDP
    GDP = "GDP"  # μ-Gaussian DP


class Status(enum.Enum):
    """The verdict. The first three are the audit's (``dplens.auditing.games.Verdict``)."""

    CONSISTENT = "CONSISTENT"  # the valid lower bound does not exceed the claimed ε
    VIOLATION = "VIOLATION"  # the valid lower bound exceeds the claimed ε
    INCONCLUSIVE = "INCONCLUSIVE"  # the measurability ceiling is below the claim
    NOT_AUDITED = "NOT_AUDITED"  # no empirical test was run: accounting only


def version_message(version: Any) -> str:
    return (
        f"unsupported report schema_version {version!r}; this dplens reads schema_version {SCHEMA_VERSION} "
        "(regenerate the report with this version of dplens)"
    )


# --------------------------------------------------------------------------------------------
# Schema (JSON-Schema draft 2020-12 subset) and its validator
# --------------------------------------------------------------------------------------------

_NUM = {"type": "number"}
_INT = {"type": "integer"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_NULL = {"type": "null"}
_XNUM = {"anyOf": [_NUM, {"enum": ["Infinity", "-Infinity"]}]}  # a number or ±∞
_OPT_NUM = {"anyOf": [_NUM, _NULL]}
_OPT_XNUM = {"anyOf": [_NUM, {"enum": ["Infinity", "-Infinity"]}, _NULL]}
_OPT_STR = {"anyOf": [_STR, _NULL]}
_PROB = {"type": "number", "minimum": 0, "maximum": 1}


def _obj(properties: dict[str, Any], *, optional: tuple[str, ...] = (), extra: bool = False) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": [k for k in properties if k not in optional],
        "additionalProperties": extra,
    }


def _arr(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


_ROUTE = _obj(
    {
        "method": {"enum": ["rdp", "pld", "exact", "pure"]},
        "epsilon": _XNUM,
        "delta": _PROB,
        "details": _STR,
        "is_tightest": _BOOL,
        "is_upper_bound": {"const": True},
        "optimal_order": _OPT_XNUM,
        "discretisation": _OPT_STR,
        "epsilon_lower": _OPT_XNUM,
    },
    optional=("epsilon_lower",),
)

_OPERATING_POINT = _obj(
    {
        "threshold": _OPT_XNUM,
        "false_positives": {"type": "integer", "minimum": 0},
        "false_negatives": {"type": "integer", "minimum": 0},
        "negatives": {"type": "integer", "minimum": 0},
        "positives": {"type": "integer", "minimum": 0},
        "fpr": _PROB,
        "fnr": _PROB,
        "fpr_upper": _PROB,
        "fnr_upper": _PROB,
    }
)

_ESTIMATE = _obj({"name": _STR, "epsilon": _OPT_XNUM, "is_estimate": {"const": True}, "assumption": _STR}, extra=True)

_AUDIT = _obj(
    {
        "epsilon_lower_bound": _XNUM,
        "is_lower_bound": {"const": True},
        "bound_direction": _STR,
        "epsilon_claimed": _XNUM,
        "ratio_to_claim": _OPT_XNUM,
        "delta": _PROB,
        "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "claim_source": _STR,
        "trials": {"type": "integer", "minimum": 1},
        "method": _STR,
        "threshold_strategy": {
            "type": "object",
            "properties": {"name": _STR},
            "required": ["name"],
            "additionalProperties": True,
        },
        "score": _STR,
        "mechanism": _STR,
        "pair": _STR,
        "operating_point": _OPERATING_POINT,
        "ceiling": _XNUM,
        "estimates": _arr(_ESTIMATE),
        "empirical_trade_off": _arr(_obj({"threshold": _OPT_XNUM, "fpr": _PROB, "fnr": _PROB}, extra=True)),
        "trajectory": _arr(
            _obj({"trials": {"type": "integer", "minimum": 1}, "epsilon_lower_bound": _XNUM}, extra=True)
        ),
        "verdict": {"enum": ["CONSISTENT", "VIOLATION", "INCONCLUSIVE"]},
        "verdict_reason": _STR,
        "seed": _INT,
        "chunks": {"type": "integer", "minimum": 0},
        "backend": _STR,
        "elapsed_seconds": {"type": "number", "minimum": 0},
        "extra": {"type": "object"},
    }
)

# The cumulative section of a budget ledger (``dplens report --ledger DB``); optional, so a report without it is
# exactly what this schema version wrote before the section existed. Every ε in it is an upper bound (remaining: a
# lower bound), as ``dplens budget status`` states them.
_LEDGER_PERIOD = _obj(
    {
        "period": _STR,
        "releases": {"type": "integer", "minimum": 0},
        "spent_epsilon": _XNUM,
        "spent_epsilon_lower": _OPT_XNUM,
        "spent_method": _STR,
        "remaining_epsilon": _XNUM,
        "history": _arr(
            _obj(
                {
                    "releases": {"type": "integer", "minimum": 1},
                    "time_utc": _STR,
                    "release": _STR,
                    "spent_epsilon": _XNUM,
                }
            )
        ),
    },
    extra=True,
)
_BUDGET_LEDGER = _obj(
    {
        "ledger": _STR,
        "schema_version": _INT,
        "time_utc": _STR,
        "is_upper_bound": {"const": True},
        "budgets": _arr(
            _obj(
                {
                    "name": _STR,
                    "unit": _STR,
                    "neighbouring": _STR,
                    "mode": {"enum": ["planned", "adaptive"]},
                    "rule": _STR,
                    "theorem": _STR,
                    "target_epsilon": _XNUM,
                    "delta": _PROB,
                    "period": _STR,
                    "current_period": _STR,
                    "spent_epsilon": _XNUM,
                    "remaining_epsilon": _XNUM,
                    "releases_count": {"type": "integer", "minimum": 0},
                    "periods": _arr(_LEDGER_PERIOD),
                },
                extra=True,
            )
        ),
    }
)

# The NIST SP 800-226 section (dplens.reports.nist): each layer of the pyramid and each hazard with one status.
_NIST = _obj(
    {
        "publication": _STR,
        "thresholds": {"type": "object", "additionalProperties": _NUM},
        "items": {
            **_arr(
                _obj(
                    {
                        "key": _STR,
                        "kind": {"enum": ["layer", "hazard"]},
                        "title": _STR,
                        "section": _STR,
                        "status": {"enum": ["shown", "declared", "not_assessed", "flagged"]},
                        "status_label": _STR,
                        "finding": _STR,
                        "where": _STR,
                    }
                )
            ),
            "minItems": 1,
        },
    }
)

_PROB_MAP = {"type": "object", "additionalProperties": _PROB}  # FPR (as text) → a probability
_ATTACK_RISK = _obj(
    {
        "fprs": _arr(_PROB),
        "tpr_upper": _PROB_MAP,
        "tpr_lower": {"anyOf": [_PROB_MAP, _NULL]},
        "advantage_upper": _PROB,
        "advantage_lower": {"anyOf": [_PROB, _NULL]},
        "bracket": {"type": "object"},
        "is_upper_bound": {"const": True},
        "method": _STR,
        "details": _STR,
        "neighboring": _STR,
        "bayes": {"type": "object"},
        "curve": _arr(_obj({"fpr": _PROB, "tpr_upper": _PROB, "tpr_lower": {"anyOf": [_PROB, _NULL]}})),
        "routes": _arr({"type": "object"}),
    },
    optional=("bayes", "curve", "routes"),
)

#: What the ε covers (issue 49): the DP-SGD tables' privacy unit and the tuning searches the ε includes.
_PRIVACY_SCOPE = _obj(
    {
        "unit": {"anyOf": [{"enum": ["user", "example"]}, _NULL]},
        "unit_words": _OPT_STR,
        "user_level": _arr({"type": "object"}),
        "mixed": _BOOL,
        "tuning": _arr(
            _obj(
                {
                    "mean_runs": _OPT_NUM,
                    "distribution": _STR,
                    "shape": _OPT_NUM,
                    "count": _INT,
                    "mechanism": _STR,
                    "included_in_epsilon": _BOOL,
                }
            )
        ),
        "includes_tuning": _BOOL,
        "tuning_outside_accounting": _OPT_STR,
        "sentence": _STR,
    }
)

# The implementation evidence of a DP-SGD training (``dplens report --implementation-evidence``, issue 46): the JSON
# of ``dplens check-dp-sgd --json`` and the report's comparison of its two lower bounds with the claim. Optional, as
# the budget ledger.
_IMPL_VERDICT = {"enum": ["PASS", "VIOLATION", "INCONCLUSIVE"]}
_IMPL_CHECK_VERDICT = {"enum": ["PASS", "VIOLATION", "INCONCLUSIVE", "DEVIATION"]}

# A check not counted in the overall verdict under an assumption the user stated (``stated_assumptions``, below):
# both keys optional, so evidence written before they existed still reads (compatible: no schema_version bump).
_IMPL_CHECK = _obj(
    {
        "name": _STR,
        "verdict": _IMPL_CHECK_VERDICT,
        "measured": _OPT_NUM,
        "declared": _OPT_NUM,
        "finding": _STR,
        "excluded_from_overall": _BOOL,
        "exclusion_reason": _OPT_STR,
    },
    optional=("excluded_from_overall", "exclusion_reason"),
    extra=True,
)
_IMPL_ASSUMPTION = _obj(
    {"option": _STR, "statement": _STR, "excludes": _arr(_STR), "checked_by_dplens": {"const": False}}, extra=True
)
_IMPL_AUDIT = _obj(
    {
        "epsilon_lower_bound": _NUM,
        "claimed_epsilon": _NUM,
        "verdict": {"enum": ["PASS", "VIOLATION"]},
        "kind": {"const": "assumption-free"},
        "significance": _NUM,
        "trials_per_side": {"type": "integer", "minimum": 1},
    },
    extra=True,
)
_IMPL_MODEL_BASED = _obj(
    {
        "epsilon_lower_bound": _NUM,
        "claimed_epsilon": _NUM,
        "verdict": {"enum": ["PASS", "VIOLATION"]},
        "kind": {"const": "model-based"},
        "assumptions": _STR,
        "significance": _NUM,
    },
    extra=True,
)
_IMPL_DECLARED = _obj(
    {
        "noise_multiplier": _NUM,
        "max_grad_norm": _NUM,
        "batch_size": {"type": "integer", "minimum": 1},
        "dataset_size": {"type": "integer", "minimum": 1},
        "steps": {"type": "integer", "minimum": 1},
        "delta": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "sampler": _STR,
        "normalise": _STR,
        "neighboring": _STR,
    },
    extra=True,
)
_IMPL_CHECK_KEYS = {
    "verdict": _IMPL_VERDICT,
    "checks": {**_arr(_IMPL_CHECK), "minItems": 1},
    "audit": _IMPL_AUDIT,
    "model_based": _IMPL_MODEL_BASED,
    "declared": _IMPL_DECLARED,
    "claimed_epsilon": _NUM,
    "subject": _STR,
    "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    "trials_per_side": {"type": "integer", "minimum": 1},
    "notes": _arr(_STR),
    "stated_assumptions": _arr(_IMPL_ASSUMPTION),
}
_IMPL_OPTIONAL = ("stated_assumptions",)
#: What a ``dplens check-dp-sgd --json`` object must hold for the report to render it.
IMPLEMENTATION_CHECK_SCHEMA: dict[str, Any] = _obj(_IMPL_CHECK_KEYS, optional=_IMPL_OPTIONAL, extra=True)
#: The report's ``implementation_evidence`` section: the check's keys and the report's comparison with its claim.
IMPLEMENTATION_SECTION_SCHEMA: dict[str, Any] = _obj(
    {
        **_IMPL_CHECK_KEYS,
        "source": _STR,
        "report_status": {"enum": ["CONSISTENT", "VIOLATION", "INCONCLUSIVE"]},
        "claim_comparison": _obj(
            {
                "claim_epsilon": _NUM,
                "claim_delta": _NUM,
                "audit_exceeds_claim": {"type": "boolean"},
                "model_based_exceeds_claim": {"type": "boolean"},
            }
        ),
    },
    optional=_IMPL_OPTIONAL,
    extra=True,
)


REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dplens compliance report",
    **_obj(
        {
            "format": {"const": REPORT_FORMAT},
            "schema_version": {"const": SCHEMA_VERSION},
            "title": _STR,
            "claim": _obj(
                {
                    "definition": {"enum": [d.value for d in Definition]},
                    "epsilon": _OPT_XNUM,
                    "delta": {"anyOf": [_PROB, _NULL]},
                    "rho": _OPT_NUM,
                    "mu": _OPT_NUM,
                    "neighbouring": _STR,
                    "neighbouring_description": _STR,
                    "privacy_unit": _STR,
                    "source": _STR,
                    "certified_by_accountant": {"anyOf": [_BOOL, _NULL]},
                }
            ),
            "mechanism": _obj(
                {
                    "name": _STR,
                    "components": _arr({"type": "object"}),
                    "neighbouring": _STR,
                    "sampling": _STR,
                    "ledger": {"type": "object"},
                    "implementation": _STR,
                }
            ),
            "accounting": _obj(
                {
                    "delta": _PROB,
                    "epsilon": _XNUM,
                    "tightest": {"enum": ["rdp", "pld", "exact", "pure"]},
                    "routes": {**_arr(_ROUTE), "minItems": 1},
                    "unsupported": _arr(_obj({"method": _STR, "reason": _STR})),
                    "pure_epsilon": _XNUM,
                    "mu": _OPT_NUM,
                    "epsilon_at": _arr(_obj({"delta": _PROB, "epsilon": _XNUM})),
                    "epsilon_of_delta": _arr(_obj({"method": _STR, "delta": _PROB, "epsilon": _XNUM})),
                    "rdp_curve": _arr(_obj({"alpha": _NUM, "rdp": _XNUM, "epsilon": _XNUM})),
                    "trade_off": _arr(_obj({"alpha": _PROB, "beta": _PROB})),
                    "trade_off_source": _STR,
                    "claim_region": _arr(_obj({"alpha": _PROB, "beta": _PROB})),
                    "calibration": {"anyOf": [{"type": "object"}, _NULL]},
                    "attack_risk": {"anyOf": [_ATTACK_RISK, _NULL]},
                },
                optional=("attack_risk",),  # reports written before the attack-risk card have none
            ),
            "audit": {"anyOf": [_AUDIT, _NULL]},
            "not_audited_reason": _OPT_STR,
            "verdict": _obj({"status": {"enum": [s.value for s in Status]}, "sentence": _STR, "reasons": _arr(_STR)}),
            "figures": _arr(_obj({"name": _STR, "file": _STR, "caption": _STR})),
            "additional_audits": _arr(
                _obj(
                    {
                        "kind": _STR,
                        "verdict": {"enum": ["CONSISTENT", "VIOLATION", "INCONCLUSIVE"]},
                        "result": {"type": "object"},
                    }
                )
            ),
            "nist": _NIST,
            "deployment": {"anyOf": [{"type": "object"}, _NULL]},
            "provenance": _obj(
                {
                    "tool": {
                        "type": "object",
                        "properties": {"name": _STR, "version": _STR},
                        "required": ["name", "version"],
                        "additionalProperties": True,
                    },
                    "python": _STR,
                    "platform": _STR,
                    "dependencies": {"type": "object", "additionalProperties": _STR},
                    "spec_source": _STR,
                    "spec_sha256": _STR,
                    "seeds": {"type": "object"},
                    "created_utc": _STR,
                    "command": _arr(_STR),
                }
            ),
            "budget_ledger": _BUDGET_LEDGER,
            "privacy_scope": _PRIVACY_SCOPE,
            "implementation_evidence": IMPLEMENTATION_SECTION_SCHEMA,
        },
        optional=("budget_ledger", "privacy_scope", "implementation_evidence"),
    ),
}

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
}


def _check(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    """The first violation of ``schema`` by ``value`` at ``where`` (a dotted path), or None."""
    if "anyOf" in schema:
        problems = [_check(value, option, where) for option in schema["anyOf"]]
        if all(problems):
            # the most specific explanation: from the option whose type matches, else a generic one
            typed = [p for p, option in zip(problems, schema["anyOf"], strict=True) if _type_ok(value, option)]
            return typed[0] if typed else f"field {where!r} has an invalid value {_show(value)}"
        return None
    if "const" in schema and value != schema["const"]:
        return f"field {where!r} must be {schema['const']!r}; got {_show(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"field {where!r} must be one of {schema['enum']}; got {_show(value)}"
    if "type" in schema and not _type_ok(value, schema):
        return f"field {where!r} must be of type {schema['type']}; got {_show(value)}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        for key, ok in (
            ("minimum", lambda lim: value >= lim),
            ("maximum", lambda lim: value <= lim),
            ("exclusiveMinimum", lambda lim: value > lim),
            ("exclusiveMaximum", lambda lim: value < lim),
        ):
            if key in schema and not ok(schema[key]):
                return f"field {where!r} violates {key} {schema[key]}; got {_show(value)}"
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                return f"missing required field {_join(where, key)!r}"
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                problem = _check(item, properties[key], _join(where, key))
            elif additional is False:
                problem = f"unknown field {_join(where, key)!r}"
            elif isinstance(additional, dict):
                problem = _check(item, additional, _join(where, key))
            else:
                problem = None
            if problem:
                return problem
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"field {where!r} needs at least {schema['minItems']} item(s)"
        if "items" in schema:
            for index, item in enumerate(value):
                problem = _check(item, schema["items"], f"{where}[{index}]")
                if problem:
                    return problem
    return None


def _type_ok(value: Any, schema: Mapping[str, Any]) -> bool:
    if "type" not in schema:
        return "enum" not in schema or value in schema["enum"]
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return any(_TYPES[t](value) for t in types)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validate_report_dict(data: Any) -> None:
    """Check a report's JSON form against :data:`REPORT_SCHEMA`.

    Raises:
        ValueError: naming the first offending field, e.g. ``missing required field 'claim.epsilon'``.
            A wrong ``schema_version`` is reported first, with the version this dplens reads.
    """
    if not isinstance(data, dict):
        raise ValueError(f"report must be a JSON object; got {type(data).__name__}")
    if data.get("format") != REPORT_FORMAT:
        raise ValueError(f"not a dplens report: field 'format' must be {REPORT_FORMAT!r}; got {data.get('format')!r}")
    if "schema_version" not in data:
        raise ValueError("missing required field 'schema_version'")
    if data["schema_version"] != SCHEMA_VERSION or isinstance(data["schema_version"], bool):
        raise ValueError(version_message(data["schema_version"]))
    problem = _check(data, REPORT_SCHEMA, "")
    if problem:
        raise ValueError(f"invalid report: {problem}")
