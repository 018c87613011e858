"""What a report's ε covers: the privacy unit the DP-SGD tables are accounted for, and the tuning runs (issue 49).

A published DP-SGD ε is usually that of one training *example* in one training *run*. A reviewer signing off a
model's privacy statement needs two more facts, both read from the spec's tables (this layer computes no privacy
quantity; the accountant already composed every table):

- **the unit**: ``dp_sgd`` tables with ``privacy_unit = "user"`` are accounted for one user (at most K examples each,
  Ganesh 2024; or users sampled with per-user clipping, Charles et al. 2025), the others for one example. A spec that
  mixes the two is accounted for one example only (a user's ε of the example-level table is not bounded);
- **the tuning**: a ``repeat_and_select`` table is a hyperparameter search of a random number of runs releasing
  the best (Papernot & Steinke, ICLR 2022, Thms 2 and 6), and the ε *includes* it; a search declared only in the
  ``[deployment]`` table (``preprocessing_and_hyperparameter_tuning``) is outside the ε.

Example:
    >>> scope = privacy_scope([{"type": "repeat_and_select", "mean": 10, "shape": "geometric", "mechanism": {
    ...     "type": "dp_sgd", "privacy_unit": "user", "max_examples_per_user": 4, "dataset_size": 1000}}])
    >>> scope["unit"], scope["includes_tuning"], scope["tuning"][0]["distribution"]
    ('user', True, 'geometric')
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["privacy_scope", "tuning_words", "unit_words"]

_WRAPPERS = ("repeat_and_select", "group_privacy")


def _walk(tables: Sequence[Mapping[str, Any]], under: tuple[Mapping[str, Any], ...], out: list) -> None:
    for table in tables:
        out.append((table, under))
        inner = table.get("mechanism")
        if table.get("type") in _WRAPPERS and isinstance(inner, Mapping):
            _walk([inner], (*under, table), out)


def _distribution(table: Mapping[str, Any]) -> tuple[str, float | None]:
    """The number of runs' distribution in words and the TNB shape η (None for Poisson)."""
    shape = table.get("shape", table.get("distribution"))
    if isinstance(shape, str):
        shape = {"poisson": math.inf, "geometric": 1.0, "logarithmic": 0.0}.get(shape, shape)
    if not isinstance(shape, int | float) or isinstance(shape, bool):
        return str(shape), None
    if math.isinf(shape):
        return "poisson", None
    if shape == 1:
        return "geometric", 1.0
    if shape == 0:
        return "logarithmic", 0.0
    return f"truncated negative binomial (shape eta = {shape:g})", float(shape)


def _user_row(table: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "max_examples_per_user": table.get("max_examples_per_user"),
        "user_sampling": bool(table.get("user_sampling", False)),
        "users": table.get("users"),
        "sampling": table.get("sampling", "poisson"),
    }


def unit_words(row: Mapping[str, Any]) -> str:
    """A user-level table's unit in words (the claim's ``privacy_unit`` when the author states none)."""
    if row["user_sampling"]:
        return f"one user (all of their examples; users sampled, {row['users']} users, their examples clipped together)"
    return (
        f"one user (all of their examples, at most {row['max_examples_per_user']} per user; examples sampled "
        "individually)"
    )


def tuning_words(row: Mapping[str, Any]) -> str:
    """One search in words."""
    repeated = f", {row['count']} such searches" if row["count"] != 1 else ""
    return (
        f"a hyperparameter search of {row['mean_runs']:g} runs on average ({row['distribution']} number of runs, "
        f"Papernot & Steinke 2022) of {row['mechanism']}, only the best run released{repeated}"
    )


def _tuning_rows(walked: list) -> list[dict[str, Any]]:
    rows = []
    for table, _ in walked:
        if table.get("type") != "repeat_and_select":
            continue
        distribution, shape = _distribution(table)
        inner = table.get("mechanism") if isinstance(table.get("mechanism"), Mapping) else {}
        unit = " (user level)" if inner.get("privacy_unit") == "user" else ""
        mean = table.get("mean")
        rows.append(
            {
                "mean_runs": float(mean) if isinstance(mean, int | float) else None,
                "distribution": distribution,
                "shape": shape,
                "count": int(table.get("count", 1)),
                "mechanism": f"{inner.get('type', '?')}{unit}",
                "included_in_epsilon": True,
            }
        )
    return rows


def _sentence(unit: str | None, users: list, mixed: bool, others: list[str], tuning: list, outside: str | None) -> str:
    parts = []
    if unit == "user":
        parts.append(
            f"The ε is accounted for {unit_words(users[0])}: a user-level guarantee, never the per-example number."
        )
        if others:
            parts.append(
                f"The other components ({', '.join(sorted(set(others)))}) are accounted at the sensitivity the spec "
                "gives: the user-level ε holds only if those sensitivities bound a whole user's contribution."
            )
    elif unit == "example":
        parts.append(
            "The DP-SGD ε is accounted for one training example"
            + (
                " (the spec mixes user-level and example-level DP-SGD tables, so the composed ε is not a user-level "
                "guarantee)"
                if mixed
                else ""
            )
            + ": a user who contributes several examples has a larger ε (state privacy_unit = 'user' with "
            "max_examples_per_user, or user_sampling with users)."
        )
    if tuning:
        searches = "; ".join(tuning_words(row) for row in tuning)
        parts.append(f"The ε INCLUDES the tuning: {searches}.")
    elif outside:
        parts.append(
            f"Tuning declared outside the accounting ({' '.join(outside.split())}): the ε does NOT include it."
        )
    else:
        parts.append(
            "No hyperparameter search is accounted: if the released model was selected among several runs, the ε "
            "does not cover that search (wrap the run in a repeat_and_select table)."
        )
    return " ".join(parts)


def privacy_scope(
    tables: Sequence[Mapping[str, Any]], *, deployment: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The report's ``privacy_scope`` section: the unit the DP-SGD tables are accounted for and the searches the ε
    includes; None when the spec has neither a ``dp_sgd`` nor a ``repeat_and_select`` table.

    Keys: ``unit`` (``"user"``, ``"example"`` or None: no DP-SGD table), ``unit_words``, ``user_level`` (each
    user-level table's K, user sampling, users, sampler), ``mixed`` (user- and example-level tables together),
    ``tuning`` (each search: ``mean_runs``, ``distribution``, ``shape``, ``count``, ``mechanism``,
    ``included_in_epsilon``), ``includes_tuning``, ``tuning_outside_accounting`` (the author's declaration when no
    search is accounted) and ``sentence``.
    """
    walked: list = []
    _walk(tables, (), walked)
    sgd = [table for table, _ in walked if table.get("type") == "dp_sgd"]
    tuning = _tuning_rows(walked)
    if not sgd and not tuning:
        return None
    users = [_user_row(t) for t in sgd if t.get("privacy_unit") == "user"]
    mixed = bool(users) and len(users) < len(sgd)
    unit = None if not sgd else ("user" if users and not mixed else "example")
    declared = (deployment or {}).get("preprocessing_and_hyperparameter_tuning")
    outside = declared if isinstance(declared, str) and declared.strip() and not tuning else None
    others = [str(t.get("type")) for t, under in walked if not under and t.get("type") not in ("dp_sgd", *_WRAPPERS)]
    return {
        "unit": unit,
        "unit_words": unit_words(users[0]) if unit == "user" else ("one training example" if unit else None),
        "user_level": users,
        "mixed": mixed,
        "tuning": tuning,
        "includes_tuning": bool(tuning),
        "tuning_outside_accounting": outside,
        "sentence": _sentence(unit, users, mixed, others, tuning, outside),
    }
