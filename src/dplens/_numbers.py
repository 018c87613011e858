"""Numbers as dplens writes them, on the ground floor (no numpy): JSON's ±∞, finite-or-None, and bounds in words.

Every floor writes numbers the same way, so the helpers live once, here:

- :func:`json_number` / :func:`from_json_number`: JSON has no infinity and no NaN, so ±∞ are the strings
  ``"Infinity"`` / ``"-Infinity"`` and NaN is ``null`` (the report schema's convention, also the accounting
  summary's); reading back turns the strings into ±∞.
- :func:`finite_or_none`: a finite float, or None for ∞, NaN and None (an undefined optimum, an estimate with
  no value).
- :func:`fmt_upper`, :func:`fmt_lower`, :func:`fmt_estimate`: a bound shown rounded on its safe side (an upper
  bound up, a lower bound down), so the printed number is still a bound; an estimate rounded to nearest.
- :func:`fmt_short`: a number in a one-line message (6 significant digits, ``inf`` for ±∞).
- :func:`accounting_section`: the JSON form of an accounting section, written once for the accountant's summary
  (:class:`dplens.accountant.summary.AccountingSummary`) and the report that reads it back
  (:class:`dplens.reports.model.Accounting`); the report layer imports no accounting module, so it lives here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any, Protocol

__all__ = [
    "AccountingSection",
    "accounting_section",
    "finite_or_none",
    "fmt_estimate",
    "fmt_lower",
    "fmt_short",
    "fmt_upper",
    "from_json_number",
    "json_number",
]


def json_number(value: float | None) -> float | str | None:
    """A float for JSON: ±∞ as ``"Infinity"`` / ``"-Infinity"``, NaN and None as None.

    Example:
        >>> json_number(float("inf")), json_number(2), json_number(float("nan"))
        ('Infinity', 2.0, None)
    """
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def from_json_number(value: Any) -> float | None:
    """Inverse of :func:`json_number`: ``"Infinity"`` / ``"-Infinity"`` to ±∞, None kept, anything else ``float``."""
    if value is None:
        return None
    if value == "Infinity":
        return math.inf
    if value == "-Infinity":
        return -math.inf
    return float(value)


def finite_or_none(value: float | None) -> float | None:
    """``float(value)`` when it is finite, else None (for None, ±∞ and NaN)."""
    return None if value is None or not math.isfinite(value) else float(value)


def fmt_short(value: float) -> str:
    """A number in a message: 6 significant digits, ``inf`` for ±∞ (``nan`` for NaN)."""
    return "inf" if math.isinf(value) else f"{value:.6g}"


def _rounded(value: float | None, digits: int, rounding: str) -> str:
    if value is None:
        return "n/a"
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    exact = Decimal(repr(value))
    quantum = Decimal(1).scaleb(exact.adjusted() - (digits - 1))
    rounded = exact.quantize(quantum, rounding=rounding)
    if -5 <= rounded.adjusted() < 7:
        return f"{rounded:f}"
    return f"{rounded:.{digits - 1}E}"


def fmt_upper(value: float | None, digits: int = 4) -> str:
    """An upper bound shown with ``digits`` significant digits, rounded up (never below the bound)."""
    return _rounded(value, digits, ROUND_CEILING)


def fmt_lower(value: float | None, digits: int = 4) -> str:
    """A lower bound shown with ``digits`` significant digits, rounded down (never above the bound)."""
    return _rounded(value, digits, ROUND_FLOOR)


def fmt_estimate(value: float | None, digits: int = 4) -> str:
    """An estimate (not a bound), rounded to nearest."""
    return _rounded(value, digits, ROUND_HALF_EVEN)


class _Route(Protocol):
    method: str

    def to_dict(self) -> dict[str, Any]: ...


class AccountingSection(Protocol):
    """What :func:`accounting_section` reads: the fields the accountant's summary and the report's section share."""

    delta: float
    routes: Sequence[_Route]
    unsupported: Sequence[Mapping[str, str]]
    pure_epsilon: float
    mu: float | None
    epsilon_at: Sequence[Mapping[str, Any]]
    epsilon_of_delta: Sequence[Mapping[str, Any]]
    rdp_curve: Sequence[Mapping[str, Any]]
    trade_off: Sequence[Mapping[str, float]]
    trade_off_source: str
    claim_region: Sequence[Mapping[str, float]]
    calibration: dict[str, Any] | None
    attack_risk: dict[str, Any] | None

    @property
    def tightest(self) -> _Route: ...

    @property
    def epsilon(self) -> float: ...


def accounting_section(accounting: AccountingSection, **extra: Any) -> dict[str, Any]:
    """The accounting section as JSON (±∞ as strings, NaN as null); ``extra`` keys (the summary's claim, neighbouring
    relation and ledger) go after ``claim_region``, before ``calibration``."""
    return {
        "delta": accounting.delta,
        "epsilon": json_number(accounting.epsilon),
        "tightest": accounting.tightest.method,
        "routes": [r.to_dict() for r in accounting.routes],
        "unsupported": [dict(u) for u in accounting.unsupported],
        "pure_epsilon": json_number(accounting.pure_epsilon),
        "mu": accounting.mu,
        "epsilon_at": [{"delta": r["delta"], "epsilon": json_number(r["epsilon"])} for r in accounting.epsilon_at],
        "epsilon_of_delta": [
            {"method": r["method"], "delta": r["delta"], "epsilon": json_number(r["epsilon"])}
            for r in accounting.epsilon_of_delta
        ],
        "rdp_curve": [
            {"alpha": p["alpha"], "rdp": json_number(p["rdp"]), "epsilon": json_number(p["epsilon"])}
            for p in accounting.rdp_curve
        ],
        "trade_off": [dict(p) for p in accounting.trade_off],
        "trade_off_source": accounting.trade_off_source,
        "claim_region": [dict(p) for p in accounting.claim_region],
        **extra,
        "calibration": accounting.calibration,
        "attack_risk": accounting.attack_risk,
    }
