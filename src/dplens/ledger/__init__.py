"""The privacy budget ledger: releases charged against budgets, stored in SQLite or PostgreSQL.

A budget protects a privacy unit (in words) under one neighbouring relation with a target (ε, δ), ρ or μ, for all
time or per calendar period. A release is charged atomically: accepted only if the budget still holds with it, by
the composition rule of the budget's mode (:class:`Mode`: ``planned`` uses the tightest route of the whole
composition, ``adaptive`` only a privacy filter proven valid when each release is chosen after seeing the earlier
ones; :mod:`dplens.ledger.rules`), refused otherwise with nothing written. The same is on the command line as
``dplens budget create|charge|status``.

Example:
    >>> import dplens, pathlib, tempfile
    >>> from dplens.ledger import Ledger, Mode, Period
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "budget.db"
    >>> with Ledger.open(path, create=True) as book:
    ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6, period=Period.MONTH)
    ...     accepted = book.charge(dplens.Gaussian(noise_multiplier=10.0), release="2026-11 table")
    ...     budget = book.status().budgets[0]
    >>> accepted.accepted, budget.periods[0].releases, budget.spent_epsilon < 1.0
    (True, 1, True)
"""

from __future__ import annotations

from dplens.ledger.core import Ledger, VerifyResult
from dplens.ledger.model import (
    Budget,
    BudgetCharge,
    BudgetStatus,
    ChargeResult,
    LedgerStatus,
    Mode,
    Period,
    PeriodStatus,
    ReleaseRow,
    Target,
    period_key,
)
from dplens.ledger.storage import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "Budget",
    "BudgetCharge",
    "BudgetStatus",
    "ChargeResult",
    "Ledger",
    "LedgerStatus",
    "Mode",
    "Period",
    "PeriodStatus",
    "ReleaseRow",
    "Target",
    "VerifyResult",
    "period_key",
]
