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
  (:class:`dplens.reports.model.Accounting`), with the fields both share (:class:`AccountingSection`,
  :class:`RouteSection`, dataclass bases of both); the report layer imports no accounting module, so they live here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any, Generic, TypeVar

__all__ = [
    "AccountingSection",
    "RouteSection",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteSection:
    """ε at δ by one accounting route, an upper bound: the fields (and their JSON) that the accountant's route
    (:class:`dplens.accountant.summary.RouteEpsilon`) and the report's (:class:`dplens.reports.model.AccountingRoute`)
    share. A frozen keyword-only dataclass base; each subclass adds its ``epsilon_lower`` (and the report's its
    ``is_upper_bound`` flag)."""

    method: str  # "rdp" | "pld" | "exact" | "pure"
    epsilon: float
    delta: float
    details: str
    is_tightest: bool = False
    optimal_order: float | None = None
    discretisation: str | None = None

    def _route_dict(self, *, is_upper_bound: bool) -> dict[str, Any]:
        return {
            "method": self.method,
            "epsilon": json_number(self.epsilon),
            "delta": self.delta,
            "details": self.details,
            "is_tightest": self.is_tightest,
            "is_upper_bound": is_upper_bound,
            "optimal_order": json_number(self.optimal_order),
            "discretisation": self.discretisation,
        }


RouteT = TypeVar("RouteT", bound=RouteSection)


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountingSection(Generic[RouteT]):
    """The fields the accountant's summary (:class:`dplens.accountant.summary.AccountingSummary`) and the report's
    accounting section (:class:`dplens.reports.model.Accounting`) share, with the tightest route; a frozen
    keyword-only dataclass base. Each subclass adds its own fields after ``claim_region`` (both end with
    ``calibration`` and ``attack_risk``, which :func:`accounting_section` reads)."""

    delta: float
    routes: tuple[RouteT, ...]
    unsupported: tuple[dict[str, str], ...] = ()
    pure_epsilon: float = math.inf
    mu: float | None = None
    epsilon_at: tuple[dict[str, float], ...] = ()
    epsilon_of_delta: tuple[dict[str, Any], ...] = ()
    rdp_curve: tuple[dict[str, float], ...] = ()
    trade_off: tuple[dict[str, float], ...] = ()
    trade_off_source: str = ""
    claim_region: tuple[dict[str, float], ...] = ()

    @property
    def tightest(self) -> RouteT:
        return next(r for r in self.routes if r.is_tightest)

    @property
    def epsilon(self) -> float:
        """The tightest upper bound on ε at :attr:`delta`."""
        return self.tightest.epsilon


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
