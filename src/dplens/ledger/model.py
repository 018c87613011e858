"""The ledger's value types: modes, periods, budgets, and the results of a charge and of a status query.

Small frozen types with ``to_dict()``; every ε they carry is an upper bound on the true ε (``remaining`` is then a
lower bound on what is left), and a number that is only an estimate says so.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Budget",
    "BudgetCharge",
    "BudgetStatus",
    "ChargeResult",
    "LedgerStatus",
    "Mode",
    "Period",
    "PeriodStatus",
    "ReleaseRow",
    "Target",
    "period_key",
]


class Mode(enum.Enum):
    """How the releases against a budget may be chosen, which decides the composition rule.

    PLANNED: every release's parameters are fixed in advance (they may not depend on earlier outputs): the tightest
    valid route of the whole composition decides (PLD / RDP / exact, as ``Accountant.epsilon_result``).
    ADAPTIVE: a release may be chosen after seeing earlier outputs: only a privacy filter decides
    (:mod:`dplens.accountant.filters`).

    Example:
        >>> Mode("adaptive")
        <Mode.ADAPTIVE: 'adaptive'>
    """

    PLANNED = "planned"
    ADAPTIVE = "adaptive"


class Period(enum.Enum):
    """How a budget renews: one budget for all time (NONE) or one per calendar period (UTC) of the release time.

    Example:
        >>> import datetime as dt
        >>> period_key(Period.MONTH, dt.datetime(2026, 11, 27, tzinfo=dt.timezone.utc))
        '2026-11'
    """

    NONE = "none"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    QUARTER = "quarter"
    YEAR = "year"


def period_key(period: Period, when: dt.datetime) -> str:
    """The period ``when`` (UTC) belongs to: ``all``, ``2026-11-27``, ``2026-W48`` (ISO week), ``2026-11``,
    ``2026-Q4`` or ``2026``.

    Example:
        >>> import datetime as dt
        >>> when = dt.datetime(2026, 11, 27, 23, 30, tzinfo=dt.timezone.utc)
        >>> [period_key(p, when) for p in Period]
        ['all', '2026-11-27', '2026-W48', '2026-11', '2026-Q4', '2026']
    """
    when = when.astimezone(dt.UTC)
    match period:
        case Period.NONE:
            return "all"
        case Period.DAY:
            return when.strftime("%Y-%m-%d")
        case Period.WEEK:
            year, week, _ = when.isocalendar()
            return f"{year}-W{week:02d}"
        case Period.MONTH:
            return when.strftime("%Y-%m")
        case Period.QUARTER:
            return f"{when.year}-Q{(when.month - 1) // 3 + 1}"
        case Period.YEAR:
            return f"{when.year}"
    raise ValueError(f"period must be a Period; got {period!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A budget's target: (ε, δ), or ρ (zCDP), or μ (GDP); ``delta`` is always the δ at which ε is reported.

    ``epsilon`` is the target's ε at ``delta`` (given, or converted from ρ or μ: an upper bound).

    Example:
        >>> Target(epsilon=4.7284, delta=1e-5, rho=0.5).kind
        'rho'
    """

    epsilon: float
    delta: float
    rho: float | None = None
    mu: float | None = None

    @property
    def kind(self) -> str:
        return "rho" if self.rho is not None else "mu" if self.mu is not None else "epsilon_delta"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "epsilon": self.epsilon, "delta": self.delta, "rho": self.rho, "mu": self.mu}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        return cls(epsilon=data["epsilon"], delta=data["delta"], rho=data.get("rho"), mu=data.get("mu"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """One budget: who it protects (``unit``, in words), under which neighbouring relation, its target, its mode and
    period, and the composition rule fixed when it was created (``rule``: a dict with ``kind`` and its parameters,
    e.g. the Rényi filter's orders and per-order budgets).

    Example:
        >>> import dplens.ledger as ledger
        >>> import pathlib, tempfile
        >>> with ledger.Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
        ...     budget = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        >>> budget.name, budget.mode.value, budget.rule["kind"]
        ('default', 'planned', 'planned_tightest')
    """

    name: str
    unit: str
    neighbouring: str
    mode: Mode
    target: Target
    period: Period
    rule: dict[str, Any]
    created_utc: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "neighbouring": self.neighbouring,
            "mode": self.mode.value,
            "target": self.target.to_dict(),
            "period": self.period.value,
            "rule": dict(self.rule),
            "created_utc": self.created_utc,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCharge:
    """What one charge does (or would do) to one budget's period.

    ``spent_epsilon``: the period's spent ε with this release (an upper bound; ``spent_method`` says by which route:
    a cheap bound when it already shows the budget holds, the tightest route otherwise); ``spent_epsilon_before``
    likewise without it; ``remaining_epsilon`` = target − spent (after an accepted charge; before, for a refused
    one), a lower bound on what is left.

    Example:
        >>> import dplens, dplens.ledger as ledger, pathlib, tempfile
        >>> with ledger.Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ...     charge = book.charge(dplens.Gaussian(noise_multiplier=8.0), release="q1").budgets[0]
        >>> charge.accepted, charge.spent_epsilon + charge.remaining_epsilon == 1.0
        (True, True)
    """

    budget: str
    period: str
    mode: Mode
    rule: str
    target_epsilon: float
    delta: float
    spent_epsilon: float
    spent_epsilon_before: float
    spent_method: str
    remaining_epsilon: float
    accepted: bool
    duplicate: bool = False
    filter: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "period": self.period,
            "mode": self.mode.value,
            "rule": self.rule,
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "spent_epsilon": _num(self.spent_epsilon),
            "spent_epsilon_before": _num(self.spent_epsilon_before),
            "spent_method": self.spent_method,
            "remaining_epsilon": _num(self.remaining_epsilon),
            "remaining_is_lower_bound": True,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "filter": self.filter,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChargeResult:
    """The outcome of a charge: accepted (stored once, in one transaction, against every budget) or refused
    (nothing stored). ``duplicate``: the same release (name and events) was already stored; nothing new was written.

    Example:
        >>> import dplens, dplens.ledger as ledger, pathlib, tempfile
        >>> with ledger.Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ...     first = book.charge(dplens.Gaussian(noise_multiplier=8.0), release="q1")
        ...     big = book.charge(dplens.Gaussian(noise_multiplier=1.0), release="q2")
        >>> first.accepted, big.accepted, big.reason.split(":")[0]
        (True, False, "refused release 'q2'")
    """

    release: str
    accepted: bool
    duplicate: bool
    budgets: tuple[BudgetCharge, ...]
    reason: str
    time_utc: str
    #: the tuning studies among the release's events (:func:`dplens.ledger.studies.tuning_studies`): a search of
    #: many runs charged as this one release, its selection included; empty when the release is not a study
    tuning: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        study = {"tuning": [dict(s) for s in self.tuning]} if self.tuning else {}
        return study | {
            "release": self.release,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "reason": self.reason,
            "time_utc": self.time_utc,
            "budgets": [b.to_dict() for b in self.budgets],
        }


class ReleaseRow(NamedTuple):
    """A stored release, as status lists it: its name, charge order, period, time, who charged it, and its own ε at
    the budget's δ (``epsilon_alone``: the release alone, an upper bound; releases do not add up by ε). A named tuple:
    status builds one per release (10⁵ of them in the benchmark), so it must be cheap.

    Example:
        >>> ReleaseRow("q1", 1, "all", "2026-11-27T12:00:00.000000Z", "ci", 0.5).to_dict()["name"]
        'q1'
    """

    name: str
    seq: int
    period: str
    time_utc: str
    charged_by: str
    epsilon_alone: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seq": self.seq,
            "period": self.period,
            "time_utc": self.time_utc,
            "charged_by": self.charged_by,
            "epsilon_alone": _num(self.epsilon_alone),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodStatus:
    """One period of one budget: spent ε (by the mode's rule, an upper bound), the certified lower end where the PLD
    route applies (``spent_epsilon_lower``), remaining (a lower bound), releases, the largest spenders.

    Example:
        >>> import dplens, dplens.ledger as ledger, pathlib, tempfile
        >>> with ledger.Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ...     _ = book.charge([(dplens.Laplace(noise_multiplier=20.0), 2)], release="counts")
        ...     period = book.status().budgets[0].periods[0]
        >>> period.period, period.releases, period.spent_epsilon_lower <= period.spent_epsilon <= 0.1
        ('all', 1, True)
    """

    period: str
    releases: int
    spent_epsilon: float
    spent_epsilon_lower: float | None
    spent_method: str
    remaining_epsilon: float
    largest: tuple[ReleaseRow, ...]
    filter: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "releases": self.releases,
            "spent_epsilon": _num(self.spent_epsilon),
            "spent_epsilon_lower": _num(self.spent_epsilon_lower),
            "spent_method": self.spent_method,
            "remaining_epsilon": _num(self.remaining_epsilon),
            "remaining_is_lower_bound": True,
            "largest": [r.to_dict() for r in self.largest],
            "filter": self.filter,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetStatus:
    """A budget and its periods; ``spent_epsilon`` / ``remaining_epsilon`` are those of ``current_period`` (the
    period of the status time; the whole history for a budget without periods).

    Example:
        >>> import dplens, dplens.ledger as ledger, pathlib, tempfile
        >>> with ledger.Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6, period=ledger.Period.YEAR)
        ...     status = book.status().budgets[0]
        >>> status.current_period.isdigit(), status.spent_epsilon, status.to_dict()["releases"]
        (True, 0.0, [])
    """

    budget: Budget
    current_period: str
    spent_epsilon: float
    remaining_epsilon: float
    periods: tuple[PeriodStatus, ...]
    releases: tuple[ReleaseRow, ...]
    chargers: dict[str, int] = field(default_factory=dict)
    #: the releases that are tuning studies (:mod:`dplens.ledger.studies`), by name: each charged as one release,
    #: its runs and their distribution, the selection included in its ε
    studies: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)

    def _release_dicts(self) -> list[dict[str, Any]]:
        out = [r.to_dict() for r in self.releases]
        if self.studies:
            for row in out:
                if row["name"] in self.studies:
                    row["tuning"] = [dict(s) for s in self.studies[row["name"]]]
        return out

    def to_dict(self) -> dict[str, Any]:
        return self.budget.to_dict() | {
            "target_epsilon": self.budget.target.epsilon,
            "delta": self.budget.target.delta,
            "current_period": self.current_period,
            "spent_epsilon": _num(self.spent_epsilon),
            "remaining_epsilon": _num(self.remaining_epsilon),
            "remaining_is_lower_bound": True,
            "releases_count": len(self.releases),
            "periods": [p.to_dict() for p in self.periods],
            "chargers": dict(self.chargers),
            "releases": self._release_dicts(),
            "tuning_studies": len(self.studies),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerStatus:
    """Every budget of a ledger at ``time_utc``.

    Example:
        >>> import dplens, dplens.ledger as ledger, pathlib, tempfile
        >>> with ledger.Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ...     _ = book.charge(dplens.Gaussian(noise_multiplier=8.0), release="q1")
        ...     status = book.status()
        >>> budget = status.budgets[0]
        >>> round(budget.spent_epsilon, 4), [r.name for r in budget.releases]
        (0.5039, ['q1'])
    """

    location: str
    schema_version: int
    time_utc: str
    budgets: tuple[BudgetStatus, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ledger": self.location,
            "schema_version": self.schema_version,
            "time_utc": self.time_utc,
            "budgets": [b.to_dict() for b in self.budgets],
        }


def _num(value: float | None) -> float | str | None:
    """JSON-safe: ∞ as the string "Infinity" (as dplens's reports write it)."""
    if value is None:
        return None
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
