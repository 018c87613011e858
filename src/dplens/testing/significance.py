"""Suite-wide significance: one α shared by every DP assertion of a test run (standard library only).

A DP assertion (:func:`dplens.testing.assertions.assert_dp`) fails when its audit's lower bound on ε exceeds the
claim. For a correct mechanism that is a false alarm, and the audit's bound is valid at its confidence 1 − αᵢ: a
false alarm has probability at most αᵢ (the audit's own guarantee; Clopper–Pearson-type bounds with every score's
multiplicity counted). The ledger below hands out the αᵢ so that their sum never exceeds the run's α, whatever the
number and order of assertions; by the union bound (Boole's inequality), a run in which every mechanism is correct
then fails with probability at most

    P(any false alarm) ≤ Σᵢ P(false alarm at i) ≤ Σᵢ αᵢ ≤ α_known + α_spent ≤ α.

How the αᵢ are chosen (each is fixed before the audit it governs draws anything, so the bound holds even when which
assertions run depends on earlier outcomes):

- **Assertions known at collection** — tests marked ``@pytest.mark.dplens(count=n)`` (n assertions; 1 by default) or
  using the ``dp_assertions`` fixture — share α_known = (1 − f)·α equally: each gets α_known / K, K the total
  count collected.
- **Everything else** (calls from unmarked tests, or beyond a marker's count) spends from α_spent = f·α (all of α
  when nothing was collected) along the sequence α_spent · 6 / (π² j²) for the j-th such call of the run, whose
  sum over j ≥ 1 is α_spent (Σ 1/j² = π²/6). Under pytest-xdist, worker w of W takes the indices j ≡ w + 1 (mod W),
  so the workers' shares are disjoint and still sum to at most α_spent.

f = :data:`SPENDING_FRACTION` (10 %) when some assertions were collected. Outside pytest (a plain script), each
call spends from the same sequence with α = :data:`DEFAULT_ALPHA`.

Example:
    >>> ledger = SignificanceLedger(alpha=0.01)
    >>> ledger.set_collected(4)
    >>> round(ledger.known_share(), 12)  # 0.9 · 0.01 / 4
    0.00225
    >>> [round(ledger.spend(), 6) for _ in range(3)]  # 0.001 · 6/π² · (1, 1/4, 1/9)
    [0.000608, 0.000152, 6.8e-05]
"""

from __future__ import annotations

import hashlib
import math
import threading

__all__ = ["DEFAULT_ALPHA", "SPENDING_FRACTION", "SignificanceLedger", "derive_seed"]

#: The run's α when none is given (``--dplens-alpha``): a suite of correct mechanisms fails at most 1 % of the time.
DEFAULT_ALPHA = 0.01
#: The part of α kept for assertions not counted at collection, when some were counted.
SPENDING_FRACTION = 0.1


def _check_alpha(alpha: float) -> float:
    ok = isinstance(alpha, int | float) and not isinstance(alpha, bool) and 0 < alpha < 0.5
    if not ok:
        raise ValueError(f"alpha must be a number in (0, 0.5); got {alpha!r}")
    return float(alpha)


class SignificanceLedger:
    """Hands out the αᵢ of a run's DP assertions (see the module docstring for the argument).

    Args:
        alpha: the run's total significance.
        worker: this process's index among ``workers`` (pytest-xdist), 0 without it.
        workers: the number of processes sharing the run.
    """

    def __init__(self, *, alpha: float = DEFAULT_ALPHA, worker: int = 0, workers: int = 1) -> None:
        self.alpha = _check_alpha(alpha)
        if not (isinstance(workers, int) and workers >= 1 and isinstance(worker, int) and 0 <= worker < workers):
            raise ValueError(f"worker must be in [0, workers); got worker={worker!r}, workers={workers!r}")
        self._worker, self._workers = worker, workers
        self._collected = 0
        self._spent_calls = 0
        self._lock = threading.Lock()
        #: Every share handed out: (kind, αᵢ), in order.
        self.shares: list[tuple[str, float]] = []

    def set_collected(self, count: int) -> None:
        """Declare the number of assertions known at collection (before any is run)."""
        if self.shares:
            raise ValueError("the collected count must be set before any assertion runs")
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        self._collected = count

    @property
    def collected(self) -> int:
        return self._collected

    @property
    def spending_budget(self) -> float:
        """α_spent: the part of α for assertions not counted at collection."""
        return self.alpha * (SPENDING_FRACTION if self._collected else 1.0)

    def known_share(self) -> float:
        """αᵢ of one assertion counted at collection (recorded as handed out)."""
        if not self._collected:
            raise ValueError("no assertion was counted at collection")
        share = self.alpha * (1 - SPENDING_FRACTION) / self._collected
        with self._lock:
            self.shares.append(("collected", share))
        return share

    def spend(self) -> float:
        """αᵢ of the next assertion not counted at collection: α_spent · 6/(π² j²), j this process's next index."""
        with self._lock:
            self._spent_calls += 1
            j = self._worker + 1 + (self._spent_calls - 1) * self._workers
            share = self.spending_budget * 6.0 / (math.pi**2 * j * j)
            self.shares.append(("spent", share))
        return share

    def total_handed_out(self) -> float:
        return math.fsum(share for _, share in self.shares)


def derive_seed(run_seed: int, node_id: str, index: int) -> int:
    """The audit seed of the ``index``-th assertion of test ``node_id`` in a run seeded ``run_seed``.

    A SHA-256 of the three (stable across processes and Python versions, unlike ``hash``), reduced to 63 bits.

    Example:
        >>> node = "tests/test_mechanisms.py::test_laplace"
        >>> derive_seed(0, node, 0) == derive_seed(0, node, 0) != derive_seed(1, node, 0)
        True
    """
    digest = hashlib.sha256(f"dplens-testing:{run_seed}:{node_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
