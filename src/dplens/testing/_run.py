"""The state of one test run that DP assertions share (standard library only: the pytest plugin imports it).

The plugin creates a :class:`RunContext` at configuration and points it at the current test before each one runs;
:func:`dplens.testing.assertions.assert_dp` reads it. Outside pytest there is a default context (α = 0.01, run seed 0).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from dplens.testing.significance import DEFAULT_ALPHA, SignificanceLedger

__all__ = ["MODE_BUDGETS", "Mode", "RunContext", "current", "set_current"]


class Mode(enum.Enum):
    """How long a DP assertion may run: QUICK for local runs and every commit, THOROUGH for nightly CI."""

    QUICK = "quick"
    THOROUGH = "thorough"


#: Seconds per assertion in each mode (``--dplens-budget`` overrides; a ``dp(budget=…)`` marker overrides both).
MODE_BUDGETS = {Mode.QUICK: 2.0, Mode.THOROUGH: 30.0}


@dataclass
class RunContext:
    """The run's ledger, seed and budget, and the test now running."""

    ledger: SignificanceLedger
    run_seed: int = 0
    mode: Mode = Mode.QUICK
    budget: float | None = None  # seconds per assertion; None: the mode's
    trials: int | None = None  # fixed trials per side (--dplens-trials): no timing, exact reproduction
    node_id: str = ""
    index: int = 0  # assertions made so far by the current test
    known_remaining: int = 0  # assertions of the current test still covered by its collected share
    item_budget: float | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    def seconds(self) -> float:
        """The current test's budget per assertion."""
        if self.item_budget is not None:
            return self.item_budget
        return self.budget if self.budget is not None else MODE_BUDGETS[self.mode]

    def next_share(self) -> tuple[float, str]:
        """(αᵢ, how it was allocated) for the current test's next assertion."""
        if self.known_remaining > 0:
            self.known_remaining -= 1
            return self.ledger.known_share(), "counted at collection"
        return self.ledger.spend(), "spent (not counted at collection)"

    def start_test(self, node_id: str, *, known: int, budget: float | None) -> None:
        self.node_id, self.index, self.known_remaining, self.item_budget = node_id, 0, known, budget

    def end_test(self) -> None:
        self.node_id, self.index, self.known_remaining, self.item_budget = "", 0, 0, None


_DEFAULT = RunContext(ledger=SignificanceLedger(alpha=DEFAULT_ALPHA))
_current: RunContext | None = None


def current() -> RunContext:
    """The context of the pytest run in progress, else the process-wide default one."""
    return _current if _current is not None else _DEFAULT


def set_current(context: RunContext | None) -> None:
    global _current
    _current = context
