"""Suite-wide pytest configuration (the repository root, so it applies to every test directory).

``DPLENS_HYPOTHESIS_SCALE=N`` runs every hypothesis property with N times its own number of examples: the
``max_examples`` of its ``@settings`` (tests that set it explicitly included), or hypothesis' default (100) where it
sets none. Use it to look for oracles that are wrong on rare inputs before CI finds them at random::

    DPLENS_HYPOTHESIS_SCALE=50 python -m pytest -p no:cacheprovider --hypothesis-show-statistics

Unset (or 1), nothing changes.

A test that leaves JAX, jaxlib or TensorFlow loaded in the pytest process is an error: from then on every process pool
of the audit runner starts with forkserver (``runner._fork_hazard``), whose workers cannot import tasks defined in
test modules (``--import-mode=importlib``), so later tests would pass or fail by the order they ran in. Such tests
run their JAX code in a child process.

A test that needs an optional extra skips with one line naming it, in the form ``needs the [torch] extra: pip install
"dplens[torch]"`` (``pytest.importorskip(..., reason=...)`` or ``pytest.mark.skipif``). Under ``CI=true`` such a skip
is a failure: CI installs every extra, so a missing one there means a test that silently stopped running.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

SCALE_VARIABLE = "DPLENS_HYPOTHESIS_SCALE"


def hypothesis_scale() -> int:
    """The factor from the environment (1 when unset); a clear error for anything but a positive integer."""
    raw = os.environ.get(SCALE_VARIABLE, "").strip()
    if not raw:
        return 1
    try:
        scale = int(raw)
    except ValueError:
        scale = 0
    if scale < 1:
        raise pytest.UsageError(f"{SCALE_VARIABLE} must be a positive integer; got {raw!r}")
    return scale


def pytest_configure(config):
    hypothesis_scale()  # a bad value stops the run before collection, in one line


def pytest_report_header(config):
    scale = hypothesis_scale()
    if scale != 1:
        return f"hypothesis: every property runs {scale}x its examples ({SCALE_VARIABLE}={scale})"
    return None


def pytest_collection_modifyitems(config, items):
    scale = hypothesis_scale()
    if scale == 1:
        return
    from hypothesis import settings

    scaled: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        # @given marks the function it returns with `.hypothesis`; its settings (the explicit @settings, or the
        # default profile at decoration time) are read from this attribute when the test runs.
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is None or not hasattr(test, "hypothesis") or id(test) in scaled:
            continue  # not a property, or one already scaled through another parametrized item
        scaled.add(id(test))
        test._hypothesis_internal_use_settings = settings(own, max_examples=own.max_examples * scale)


#: The one-line reason of a skip for a missing extra; CI=true turns such a skip into a failure.
MISSING_EXTRA = re.compile(r"needs the \[[\w-]+\] extra")


def _missing_extra_under_ci(report) -> str | None:
    """The skip reason if ``report`` is a skip for a missing extra while CI=true, else None."""
    if os.environ.get("CI", "").lower() != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return None
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason if MISSING_EXTRA.search(reason) else None


def _fail_instead(report, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = f"CI=true but the test was skipped: {reason.removeprefix('Skipped: ')}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (reason := _missing_extra_under_ci(report)) is not None:
        _fail_instead(report, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if (reason := _missing_extra_under_ci(report)) is not None:  # a module-level importorskip
        _fail_instead(report, reason)


#: Modules whose runtime threads make the audit runner's process pools forkserver once they are loaded.
FORK_HAZARD_MODULES = ("jax", "jaxlib", "tensorflow")


@pytest.fixture(autouse=True)
def _no_threaded_framework_left_loaded():
    before = {name for name in FORK_HAZARD_MODULES if name in sys.modules}
    yield
    left = sorted(name for name in FORK_HAZARD_MODULES if name in sys.modules and name not in before)
    if left:
        pytest.fail(
            f"this test left {', '.join(left)} loaded in the pytest process: later process pools would use "
            "forkserver and the suite would depend on test order; run that code in a child process",
            pytrace=False,
        )
