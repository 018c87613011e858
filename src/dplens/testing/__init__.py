"""DP assertions for pytest: a test fails when dplens's audit shows a mechanism violates its claim.

- :func:`assert_dp` — ``assert_dp(target, pair, epsilon, delta=0, …)``: audits the target on the pair and fails with
  the evidence (lower bound, claim, best score and counts, the cause — a floating-point leak or the output
  distribution — and the commands that reproduce it).
- The pytest plugin (:mod:`dplens.testing.plugin`, registered through the ``pytest11`` entry point): one α for the
  whole run (``--dplens-alpha``, default 0.01) shared by every DP assertion (:mod:`dplens.testing.significance`:
  a run of correct mechanisms fails with probability ≤ α), seeds derived from ``--dplens-seed`` (default 0) and the
  test's node id, a time budget per assertion (``--dplens-mode quick|thorough``, ``--dplens-budget``) that picks the
  trials, the ``dplens`` marker (``@pytest.mark.dplens(count=1, budget=None)``) and the ``dp_assertions`` fixture.

The package loads nothing heavy until an assertion runs (the names below are imported on first use).

Example:
    >>> import numpy as np
    >>> from dplens.testing import assert_dp
    >>> def randomized_response(bit, rng):  # keeps the bit with probability e/(1 + e): ε = 1
    ...     keep = rng.random() < np.e / (1 + np.e)
    ...     return int(bit[0]) if keep else 1 - int(bit[0])
    >>> assert_dp(randomized_response, ([1], [0]), epsilon=1.0, trials=20_000).verdict.value
    'CONSISTENT'
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DpAssertionError",
    "DpInconclusiveWarning",
    "Inconclusive",
    "Mode",
    "PairSearch",
    "SignificanceLedger",
    "assert_dp",
    "choose_trials",
]

_EXPORTS = {
    "DpAssertionError": "dplens.testing.assertions",
    "DpInconclusiveWarning": "dplens.testing.assertions",
    "Inconclusive": "dplens.testing.assertions",
    "PairSearch": "dplens.testing.assertions",
    "assert_dp": "dplens.testing.assertions",
    "choose_trials": "dplens.testing.assertions",
    "Mode": "dplens.testing._run",
    "SignificanceLedger": "dplens.testing.significance",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dplens.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
