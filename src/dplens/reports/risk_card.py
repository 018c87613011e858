"""The attack-risk card in words: one source for the HTML card, the privacy statement, the NIST section and the
registry record.

The numbers come from the accountant (``accounting.attack_risk``, :func:`dplens.accountant.risk.attack_risk`); this
module only words them. Every TPR and advantage is an upper bound and is shown rounded up (:func:`fmt_upper`); the
lower end of a certified bracket is shown rounded down.

Example:
    >>> risk = {"fprs": [0.01], "tpr_upper": {"0.01": 0.0402134}, "tpr_lower": {"0.01": 0.0401854},
    ...         "advantage_upper": 0.2245010, "advantage_lower": 0.2243745, "method": "pld", "details": "pld (…)"}
    >>> short_risk(risk)[:91]
    'no membership attack reaches a true-positive rate above 4.022 % at a false-positive rate of'
    >>> short_risk(risk)[91:]
    ' 1 %; advantage (TPR − FPR) ≤ 0.2246 (upper bounds, route pld)'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dplens.reports.format import fmt_lower, fmt_upper

__all__ = ["percent_lower", "percent_upper", "risk_points", "risk_sentence", "short_risk"]


def percent_upper(probability: float | None) -> str:
    """An upper bound on a probability as a percentage, rounded up: 0.0402134 → '4.022 %'."""
    return "n/a" if probability is None else f"{fmt_upper(100.0 * probability)} %"


def percent_lower(probability: float | None) -> str:
    """A lower bound on a probability as a percentage, rounded down."""
    return "n/a" if probability is None else f"{fmt_lower(100.0 * probability)} %"


def _fpr_text(fpr: float) -> str:
    return f"{100.0 * fpr:g} %"


def risk_points(risk: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per FPR of the card: ``fpr``, ``fpr_text``, ``tpr_upper``, ``tpr_lower`` (None without a bracket),
    ``ratio`` (TPR / FPR: how many times likelier a member is flagged than a non-member, at most)."""
    lows = risk.get("tpr_lower") or {}
    rows = []
    for fpr in risk["fprs"]:
        key = repr(float(fpr))
        upper = risk["tpr_upper"][key]
        rows.append(
            {
                "fpr": fpr,
                "fpr_text": _fpr_text(fpr),
                "tpr_upper": upper,
                "tpr_lower": lows.get(key),
                "ratio": upper / fpr,
            }
        )
    return rows


def short_risk(risk: Mapping[str, Any]) -> str:
    """The card in one clause (NIST section, registry record)."""
    points = risk_points(risk)
    tprs = ", ".join(f"{percent_upper(p['tpr_upper'])} at {p['fpr_text']}" for p in points)
    tprs = tprs.replace(" at ", " at a false-positive rate of ", 1)
    return (
        f"no membership attack reaches a true-positive rate above {tprs}; advantage (TPR − FPR) ≤ "
        f"{fmt_upper(risk['advantage_upper'])} (upper bounds, route {risk['method']})"
    )


def risk_sentence(risk: Mapping[str, Any], unit: str) -> str:
    """The card in plain words for the privacy statement and the page: what an attack can reach, at most."""
    points = risk_points(risk)
    first, rest = points[0], points[1:]
    parts = [
        f"an attack that tries to tell whether {unit} is in the data, and wrongly flags {first['fpr_text']} of the "
        f"units that are not, flags at most {percent_upper(first['tpr_upper'])} of those that are"
    ]
    parts += [f"at {p['fpr_text']} false positives, at most {percent_upper(p['tpr_upper'])}" for p in rest]
    bracket = ""
    if risk.get("tpr_lower"):
        bracket = "; the accountant's certified bracket puts the exact bound within " + ", ".join(
            f"[{percent_lower(p['tpr_lower'])}, {percent_upper(p['tpr_upper'])}]" for p in points
        )
    return (
        "Attack risk (what the guarantee means for membership inference): "
        + "; ".join(parts)
        + f". Its advantage, TPR − FPR, is at most {fmt_upper(risk['advantage_upper'])} (random guessing has 0). "
        f"These are upper bounds for every attacker, whatever else it knows, read off the pessimistic side of the "
        f"accountant's trade-off curve (route {risk['method']}){bracket}."
    )
