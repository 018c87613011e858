"""The pytest plugin of :mod:`dplens.testing` (entry point ``pytest11: dplens``).

Installing dplens registers it in every pytest run; until a test uses a DP assertion it imports nothing but the
standard library and pytest, adds only its options and the ``dp`` marker, and prints nothing. A run that collects a
``dplens``-marked test or a test using the ``dp_assertions`` fixture prints one line after collection (the run
seed, α and how it is shared); a run in which any DP assertion ran prints a summary at the end.

Options (also ``DPLENS_SEED`` / ``DPLENS_MODE`` in the environment, for CI jobs):

- ``--dplens-alpha A`` — the run's significance, shared by all its DP assertions (default 0.01);
- ``--dplens-seed S|random`` — the run seed (default 0: deterministic; ``random`` draws one and prints it);
- ``--dplens-mode quick|thorough`` — 2 s or 30 s per assertion (local runs vs nightly CI);
- ``--dplens-budget SECONDS`` — seconds per assertion (overrides the mode);
- ``--dplens-trials N`` — fixed trials per side (no timing: reproduces an audit exactly).

Example (a test file):

.. code-block:: python

    import pytest
    from dplens.testing import assert_dp

    @pytest.mark.dplens  # counted at collection: it gets its share of α up front
    def test_my_count():
        assert_dp(my_count, ([1, 1, 1], [1, 1]), epsilon=1.0)

    def test_with_fixture(dp_assertions):  # the fixture form, counted at collection too
        dp_assertions.assert_dp(my_count, ([1, 1, 1], [1, 1]), epsilon=1.0)
"""

from __future__ import annotations

import os
import secrets
from typing import Any

import pytest

from dplens.testing import _run
from dplens.testing.significance import DEFAULT_ALPHA, SignificanceLedger

__all__ = ["FIXTURE", "MARKER", "dp_assertions"]

_STATE_KEY = "_dplens_testing_context"
#: The marker and the fixture (names unlikely to clash with a project's own).
MARKER = "dplens"
FIXTURE = "dp_assertions"
_EXPLICIT_OPTIONS = ("dplens_alpha", "dplens_seed", "dplens_mode", "dplens_budget", "dplens_trials")


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("dplens", "DP assertions (dplens.testing)")
    group.addoption(
        "--dplens-alpha",
        type=float,
        default=None,
        help=f"significance shared by all DP assertions of the run (default {DEFAULT_ALPHA})",
    )
    group.addoption(
        "--dplens-seed", default=None, help="run seed of the DP assertions: an integer (default 0) or 'random'"
    )
    group.addoption(
        "--dplens-mode",
        choices=[m.value for m in _run.Mode],
        default=None,
        help="time budget per DP assertion: quick (2 s, default) or thorough (30 s)",
    )
    group.addoption("--dplens-budget", type=float, default=None, help="seconds per DP assertion (overrides the mode)")
    group.addoption("--dplens-trials", type=int, default=None, help="fixed trials per side for every DP assertion")


def _fail(config: Any, message: str) -> None:
    raise pytest.UsageError(message)


def _run_seed(value: Any, config: Any) -> int:
    if value is None:
        value = os.environ.get("DPLENS_SEED", "0")
    if str(value).lower() == "random":
        return secrets.randbelow(2**32)
    try:
        seed = int(value)
    except (TypeError, ValueError):
        _fail(config, f"--dplens-seed must be an integer >= 0 or 'random'; got {value!r}")
    if seed < 0:
        _fail(config, f"--dplens-seed must be an integer >= 0 or 'random'; got {value!r}")
    return seed


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(count=1, budget=None): the test makes `count` DP assertions (dplens.testing.assert_dp); "
        "counted at collection, they share the run's --dplens-alpha",
    )
    alpha = config.getoption("dplens_alpha")
    if alpha is not None and not 0 < alpha < 0.5:
        _fail(config, f"--dplens-alpha must be in (0, 0.5); got {alpha!r}")
    mode_value = config.getoption("dplens_mode") or os.environ.get("DPLENS_MODE", "quick")
    try:
        mode = _run.Mode(mode_value)
    except ValueError:
        _fail(config, f"DPLENS_MODE must be one of {[m.value for m in _run.Mode]}; got {mode_value!r}")
    budget = config.getoption("dplens_budget")
    if budget is not None and not budget > 0:
        _fail(config, f"--dplens-budget must be > 0 seconds; got {budget!r}")
    trials = config.getoption("dplens_trials")
    if trials is not None and trials < 1:
        _fail(config, f"--dplens-trials must be >= 1; got {trials!r}")
    worker_input = getattr(config, "workerinput", None)  # pytest-xdist
    worker, workers = 0, 1
    if worker_input is not None:
        workers = int(worker_input.get("workercount", 1))
        worker = int(str(worker_input.get("workerid", "gw0")).lstrip("gw") or 0)
    seed = _run_seed(config.getoption("dplens_seed"), config)
    if worker_input is not None and "dplens_seed" in worker_input:
        seed = int(worker_input["dplens_seed"])  # every worker uses the controller's (possibly random) seed
    context = _run.RunContext(
        ledger=SignificanceLedger(alpha=alpha if alpha is not None else DEFAULT_ALPHA, worker=worker, workers=workers),
        run_seed=seed,
        mode=mode,
        budget=budget,
        trials=trials,
    )
    setattr(config, _STATE_KEY, context)
    _run.set_current(context)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist controller: hand the run seed to the workers
    context = getattr(node.config, _STATE_KEY, None)
    if context is not None:
        node.workerinput["dplens_seed"] = context.run_seed


def pytest_unconfigure(config: Any) -> None:
    if getattr(config, _STATE_KEY, None) is not None:
        _run.set_current(None)


def _uses_fixture(item: Any) -> bool:
    """Whether the test requests *this plugin's* fixture (a project may define its own of the same name)."""
    if FIXTURE not in getattr(item, "fixturenames", ()):
        return False
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).get(FIXTURE, ())
    return bool(definitions) and getattr(definitions[-1], "func", None) is _fixture_function


def _declared(item: Any) -> int:
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        count = marker.kwargs.get("count", marker.args[0] if marker.args else 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise pytest.UsageError(f"{item.nodeid}: {MARKER}(count=…) must be an integer >= 0; got {count!r}")
        return count
    return 1 if _uses_fixture(item) else 0


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    context = getattr(config, _STATE_KEY, None)
    if context is not None:
        context.ledger.set_collected(sum(_declared(item) for item in items))


def _explicit(config: Any) -> bool:
    return any(config.getoption(name) is not None for name in _EXPLICIT_OPTIONS)


def _describe(context: Any) -> str:
    known = context.ledger.collected
    share = (
        f"{known} collected DP assertions share {context.ledger.alpha - context.ledger.spending_budget:.3g}, "
        f"others spend from {context.ledger.spending_budget:.3g}"
        if known
        else f"assertions spend from {context.ledger.alpha:.3g}"
    )
    budget = f"{context.trials} trials" if context.trials else f"{context.seconds():g} s each"
    return (
        f"dplens: run seed {context.run_seed} (--dplens-seed {context.run_seed} reproduces), alpha "
        f"{context.ledger.alpha:g} for the whole run ({share}), mode {context.mode.value} ({budget})"
    )


def pytest_report_collectionfinish(config: Any, start_path: Any, items: list[Any]) -> Any:
    context = getattr(config, _STATE_KEY, None)
    if context is None or not (context.ledger.collected or _explicit(config)):
        return None
    return _describe(context)


def pytest_runtest_setup(item: Any) -> None:
    context = getattr(item.config, _STATE_KEY, None)
    if context is None:
        return
    marker = item.get_closest_marker(MARKER)
    budget = marker.kwargs.get("budget") if marker is not None else None
    if budget is not None and not (isinstance(budget, int | float) and budget > 0):
        raise pytest.UsageError(f"{item.nodeid}: {MARKER}(budget=…) must be a number of seconds > 0; got {budget!r}")
    context.start_test(item.nodeid, known=_declared(item), budget=budget)


def pytest_runtest_teardown(item: Any) -> None:
    context = getattr(item.config, _STATE_KEY, None)
    if context is not None:
        context.end_test()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: Any, config: Any) -> None:
    context = getattr(config, _STATE_KEY, None)
    if context is None or not context.records:
        return
    records = context.records
    failed = sum(r["verdict"] == "VIOLATION" for r in records)
    over = [r for r in records if r["budget"] is not None and r["seconds"] > 1.5 * r["budget"] + 1.0]
    terminalreporter.write_sep("-", "dplens DP assertions")
    terminalreporter.write_line(_describe(context))
    terminalreporter.write_line(
        f"{len(records)} DP assertions, {failed} violations; alpha handed out {context.ledger.total_handed_out():.4g}"
        f" of {context.ledger.alpha:g}; {sum(r['seconds'] for r in records):.1f} s in audits"
        + (f"; {len(over)} over their time budget" if over else "")
    )


class _DpAssertions:
    """The ``dp_assertions`` fixture: ``dp_assertions.assert_dp(…)`` is :func:`dplens.testing.assertions.assert_dp`."""

    @staticmethod
    def assert_dp(*args: Any, **kwargs: Any) -> Any:
        from dplens.testing.assertions import assert_dp

        return assert_dp(*args, **kwargs)


def _fixture_function() -> _DpAssertions:
    """DP assertions in a test: ``dp_assertions.assert_dp(target, pair, epsilon, delta=0, …)``; the test counts as
    one assertion at collection (``@pytest.mark.dplens(count=n)`` for more)."""
    return _DpAssertions()


dp_assertions = pytest.fixture(name=FIXTURE)(_fixture_function)
