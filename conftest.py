"""Suite-wide pytest configuration (the repository root, so it applies to every test directory).

**Both cores.** With pytest-xdist loaded (it is in ``[test]``), ``python -m pytest`` runs on one worker per CPU this
process may use (``os.sched_getaffinity``), unless ``-n`` is given; ``-p no:xdist`` or ``-n 0`` runs everything in
this process, in the same order of phases. The worker count is set here rather than in ``addopts``, so that
``-p no:xdist`` still works. Each worker is pinned to its share of the CPUs, so the pools, subprocesses and BLAS
threads a test starts see what the worker has (``os.sched_getaffinity``, ``PYTEST_XDIST_WORKER_COUNT``), and
dplens's production defaults are what run. BLAS libraries get one thread per worker.

**A serial phase.** A test marked ``@pytest.mark.serial(reason)`` cannot share the machine: it starts a process pool
of its own, a PostgreSQL server or Chromium, sends signals, runs as a background job, or asserts on wall-clock time.
Such tests run after every other test has finished, one at a time, on one worker whose CPU affinity is widened to
the whole machine for the duration of the test (the scheduler ``SerialLastScheduling`` below, which learns their node
ids from a file each worker writes after its collection). Without xdist they run last too.

**A CPU budget per test.** A default test that takes more than ``DPLENS_TEST_CPU_LIMIT`` seconds of CPU time (20
unless set; this process and its reaped children, setup and call, a shared fixture counted in the test that first
needs it, so that the tests sharing an expensive fixture are marked), or more than ``DPLENS_TEST_WALL_LIMIT`` seconds
of wall-clock time (60, times the load average per CPU where the machine runs more processes than it has CPUs),
fails with its name and its times, unless it is marked
``@pytest.mark.accepted_long(reason)``. ``slow`` tests are exempt. Set either limit to 0 to turn the guard off
(profiling). ``DPLENS_TEST_TIMES=FILE`` appends every test's CPU and wall time to FILE (JSON lines, one per test,
from every worker): the input of the table of the slowest tests in ``benchmarks/RESULTS.md``.

**Hypothesis.** The ``dplens`` profile (loaded unless ``--hypothesis-profile`` names another) has no deadline and
does not fail a property for being slow on a loaded machine; under ``CI=true`` the ``ci`` profile also derandomizes
the examples and keeps no example database, so that CI's run depends neither on the machine's speed nor on chance.

``DPLENS_HYPOTHESIS_SCALE=N`` runs every hypothesis property with N times its own number of examples: the
``max_examples`` of its ``@settings`` (tests that set it explicitly included), or hypothesis' default (100) where it
sets none. Use it to look for oracles that are wrong on rare inputs before CI finds them at random::

    DPLENS_HYPOTHESIS_SCALE=50 python -m pytest -p no:cacheprovider --hypothesis-show-statistics

Unset (or 1), nothing changes.

A test that leaves JAX, jaxlib or TensorFlow loaded in the pytest process is an error: from then on every process pool
of the audit runner starts with forkserver (``runner._fork_hazard``), whose workers cannot import tasks defined in
test modules (``--import-mode=importlib``), so later tests would pass or fail by the order they ran in. Such tests
run their JAX code in a child process; that child's own pytest run sets ``DPLENS_TEST_FRAMEWORKS_IN_PROCESS=1``,
which turns both guards off (it starts no pools after them, and it exists to load them).

A test that needs an optional extra skips with one line naming it, in the form ``needs the [torch] extra: pip install
"dplens[torch]"`` (``pytest.importorskip(..., reason=...)`` or ``pytest.mark.skipif``). Under ``CI=true`` such a skip
is a failure: CI installs every extra, so a missing one there means a test that silently stopped running.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest

SCALE_VARIABLE = "DPLENS_HYPOTHESIS_SCALE"
MARKERS = (
    "serial(reason): cannot share the machine (a process pool of its own, a server, a browser, signals, background "
    "jobs, wall-clock time): runs alone, after the other tests (root conftest.py)",
    "accepted_long(reason): a default test allowed over the per-test CPU budget, with its reason (root conftest.py)",
)


def _register_hypothesis_profiles() -> None:
    """The ``dplens`` profile (no deadline, no failure for slowness) and ``ci`` (the same, derandomized, no database).

    Registered when this file is imported, before hypothesis' plugin reads ``--hypothesis-profile``; loaded in
    ``pytest_configure`` unless that option names a profile.
    """
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # hypothesis is in [test]; a venv without it runs no property anyway
        return
    settings.register_profile("dplens", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("ci", parent=settings.get_profile("dplens"), derandomize=True, database=None)


_register_hypothesis_profiles()


def _load_hypothesis_profile(config) -> None:
    if "hypothesis" not in sys.modules or config.getoption("hypothesis_profile", None) is not None:
        return
    from hypothesis import settings

    settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dplens")


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
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    _load_hypothesis_profile(config)
    _pin_worker(config)


def pytest_report_header(config):
    scale = hypothesis_scale()
    if scale != 1:
        return f"hypothesis: every property runs {scale}x its examples ({SCALE_VARIABLE}={scale})"
    return None


@pytest.hookimpl(trylast=True)  # after any plugin that reorders the collection (pytest-randomly, say)
def pytest_collection_modifyitems(config, items):
    _serial_tests_last(config, items)
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
    elif call.when == "call":
        _check_budget(item, report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    before = {name for name in FORK_HAZARD_MODULES if name in sys.modules}
    outcome = yield
    report = outcome.get_result()
    loaded = sorted(name for name in FORK_HAZARD_MODULES if name in sys.modules and name not in before)
    if (reason := _missing_extra_under_ci(report)) is not None:  # a module-level importorskip
        _fail_instead(report, reason)
    elif loaded and not report.failed and not frameworks_allowed_in_process():
        # the per-test guard below compares modules before and after each test, so it cannot see an import made
        # while the module was collected: every process pool of that worker would then use forkserver
        report.outcome = "failed"
        report.longrepr = (
            f"collecting {collector.nodeid} loaded {', '.join(loaded)} in the pytest process: later process pools "
            "would use forkserver and the suite would depend on test order; import it inside a child process"
        )


#: Modules whose runtime threads make the audit runner's process pools forkserver once they are loaded.
FORK_HAZARD_MODULES = ("jax", "jaxlib", "tensorflow")

#: Set by a test that runs a JAX or TensorFlow case file in a child pytest: there loading them is the point.
FRAMEWORKS_IN_PROCESS_VARIABLE = "DPLENS_TEST_FRAMEWORKS_IN_PROCESS"


def frameworks_allowed_in_process() -> bool:
    return os.environ.get(FRAMEWORKS_IN_PROCESS_VARIABLE, "").strip() == "1"


@pytest.fixture(autouse=True)
def _no_threaded_framework_left_loaded():
    before = {name for name in FORK_HAZARD_MODULES if name in sys.modules}
    yield
    left = sorted(name for name in FORK_HAZARD_MODULES if name in sys.modules and name not in before)
    if left and not frameworks_allowed_in_process():
        pytest.fail(
            f"this test left {', '.join(left)} loaded in the pytest process: later process pools would use "
            "forkserver and the suite would depend on test order; run that code in a child process",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _mpmath_precision_restored():
    """mpmath's working precision is process-wide: a test that sets it (``mp.dps = 40``) must not change the oracles
    of the tests that run after it in the same worker, which depends on the order (a shuffled run caught this)."""
    mpmath = sys.modules.get("mpmath")
    before = mpmath.mp.prec if mpmath is not None else None
    yield
    mpmath = sys.modules.get("mpmath")
    if mpmath is not None:
        mpmath.mp.prec = before if before is not None else 53


# ----------------------------------------------------------------------------------------------------------------------
# Both cores: the worker count, each worker's CPUs, and the serial phase
# ----------------------------------------------------------------------------------------------------------------------

#: Variables that size BLAS and OpenMP thread pools; a worker gets one thread each unless the caller set them.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), as dplens's own pools count them."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_worker_count() -> int:
    """xdist workers when ``-n`` is not given: ``PYTEST_XDIST_AUTO_NUM_WORKERS`` if set, else one per CPU."""
    raw = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip()
    if raw:
        try:
            return max(0, int(raw))
        except ValueError:
            raise pytest.UsageError(f"PYTEST_XDIST_AUTO_NUM_WORKERS must be an integer; got {raw!r}") from None
    return available_cpus()


@pytest.hookimpl(tryfirst=True)  # before xdist's own pytest_cmdline_main turns numprocesses into workers
def pytest_cmdline_main(config):
    option = config.option
    if not hasattr(option, "numprocesses") or hasattr(config, "workerinput"):
        return  # xdist not loaded (-p no:xdist), or this is a worker
    if option.numprocesses is None and not option.collectonly and not getattr(option, "usepdb", False):
        workers = default_worker_count()
        option.numprocesses = workers if workers > 1 else 0
    if option.numprocesses not in (None, 0, "0"):
        for name in THREAD_VARIABLES:  # inherited by the workers, which start after this hook
            os.environ.setdefault(name, "1")


_ALL_CPUS = pytest.StashKey[set]()


def _pin_worker(config) -> None:
    """Pin an xdist worker to its share of the CPUs (remembering them all for the serial phase)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    count = int(workerinput.get("workercount", 1))
    index = int(str(workerinput.get("workerid", "gw0")).removeprefix("gw") or 0)
    share = cpus[index::count] if count <= len(cpus) else [cpus[index % len(cpus)]]
    config.stash[_ALL_CPUS] = set(cpus)
    os.sched_setaffinity(0, share)


#: Fixtures whose tests cannot share the machine: they are marked ``serial`` at collection, with this reason.
SERIAL_FIXTURES = {
    "postgres_server": "a PostgreSQL server of its own (tests/ledger/conftest.py)",
    "chromium": "headless Chromium (tests/reports/conftest.py)",
}


def is_serial(item) -> bool:
    return item.get_closest_marker("serial") is not None


def _mark_serial_fixtures(items) -> None:
    for item in items:
        for name in SERIAL_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.serial(SERIAL_FIXTURES[name]))


def _shared_builds_first(items) -> list:
    """Under xdist, the first accepted-long test of each module, which pays for what that module's other long tests
    share (the strict docs build, shared by the workers through a directory of the run): handed out first, so that
    it does not start near the end of the parallel phase and keep one worker busy while the other waits (the longest
    first, as a scheduler of unequal jobs would). The module's other tests keep their place: by the time they run,
    the build is done, and no worker waits on another's lock."""
    first: dict[str, Any] = {}
    for item in items:
        if item.get_closest_marker("accepted_long") is not None and not is_serial(item):
            first.setdefault(item.nodeid.split("::")[0], item)
    chosen = {id(item) for item in first.values()}
    return list(first.values()) + [item for item in items if id(item) not in chosen]


def _serial_tests_last(config, items) -> None:
    """Serial tests after all others (a stable partition); under xdist their ids tell the scheduler which they are."""
    _mark_serial_fixtures(items)
    parallel = [item for item in items if not is_serial(item)]
    if hasattr(config, "workerinput"):  # only workers share a build across modules (in one process it would be torn
        parallel = _shared_builds_first(parallel)  # down with the module's fixtures and built twice)
    items[:] = parallel + [item for item in items if is_serial(item)]
    directory = getattr(config, "workerinput", {}).get(SERIAL_PHASE_INPUT)
    if directory:  # tell the controller, which sees only node ids, which tests are serial (written before the
        # worker reports its collection, so the file is there when the scheduler reads it)
        serial = [item.nodeid for item in items if is_serial(item)]
        path = os.path.join(directory, f"{config.workerinput['workerid']}.json")
        with open(path + ".part", "w", encoding="utf-8") as out:
            json.dump(serial, out)
        os.replace(path + ".part", path)


#: The key of xdist's worker input naming the directory where each worker writes the node ids of its serial tests
#: (the controller runs a serial phase only under --dist load).
SERIAL_PHASE_INPUT = "dplens_serial_phase"
_SERIAL_DIRECTORY = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    config = node.config
    if config.getvalue("dist") != "load":
        return
    if _SERIAL_DIRECTORY not in config.stash:
        import tempfile

        config.stash[_SERIAL_DIRECTORY] = tempfile.mkdtemp(prefix="dplens-serial-")
    node.workerinput[SERIAL_PHASE_INPUT] = config.stash[_SERIAL_DIRECTORY]


def pytest_unconfigure(config):
    directory = config.stash.get(_SERIAL_DIRECTORY, None)
    if directory is not None:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


def _serial_ids(config) -> set[str]:
    """The node ids the workers marked serial (any worker's file: every worker collects the same tests)."""
    directory = config.stash.get(_SERIAL_DIRECTORY, None)
    for name in sorted(os.listdir(directory)) if directory else ():
        if name.endswith(".json"):
            with open(os.path.join(directory, name), encoding="utf-8") as ids:
                return set(json.load(ids))
    return set()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load":
        return None  # another --dist mode chosen by the caller: xdist's own scheduler, no serial phase
    from xdist.scheduler import LoadScheduling

    class SerialLastScheduling(LoadScheduling):
        """xdist's load scheduling, then the serial tests one node at a time once every other test has finished.

        The parallel tests are shared out as by ``LoadScheduling``; a node that runs out of them is shut down,
        except the first, which keeps its last test (an xdist worker runs a test only once it knows the next, or
        that there is none) until every other node has finished, then receives the serial tests and shuts down.
        """

        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.serial: list[int] = []
            self.serial_ids: set[str] = set()
            self.serial_node = None

        @property
        def tests_finished(self) -> bool:
            return not self.serial and super().tests_finished

        @property
        def has_pending(self) -> bool:
            return bool(self.serial) or super().has_pending

        def schedule(self) -> None:
            if self.collection is None and self._check_nodes_have_same_collection():
                collection = next(iter(self.node2collection.values()))
                self.serial_ids = _serial_ids(self.config)
                self.serial = [i for i, nodeid in enumerate(collection) if nodeid in self.serial_ids]
                if len(self.serial) == len(collection):  # nothing to run in parallel: one node runs them all
                    self.serial_node = next(iter(self.node2pending))
                self.collection = collection
                self.pending[:] = [i for i in range(len(collection)) if i not in set(self.serial)]
                if self.maxschedchunk is None:
                    self.maxschedchunk = len(collection)
            for node in self.nodes:
                self.check_schedule(node)

        def check_schedule(self, node, duration: float = 0) -> None:
            if node.shutting_down:
                return
            if self.pending:
                # LoadScheduling sends a node a chunk at a time and shuts it down once nothing is pending.
                super().check_schedule(node, duration=duration)
                return
            if not self.serial:
                node.shutdown()
                return
            if self.serial_node is None:
                self.serial_node = node
            if node is not self.serial_node:
                node.shutdown()
            elif len(self.node2pending) == 1:  # every other node has finished: the serial phase
                todo, self.serial = self.serial, []
                self.node2pending[node].extend(todo)
                node.send_runtest_some(todo)
                node.shutdown()

        def remove_node(self, node):
            crashed = super().remove_node(node)
            serial = set(self.serial)
            if self.collection is not None:  # a crashed node's serial tests go back to the serial queue
                back = [i for i in self.pending if self.collection[i] in self.serial_ids]
                self.pending[:] = [i for i in self.pending if i not in set(back)]
                self.serial = sorted(serial | set(back))
            if node is self.serial_node:
                self.serial_node = None
            for other in self.nodes:
                self.check_schedule(other)
            return crashed

    return SerialLastScheduling(config, log)


# ----------------------------------------------------------------------------------------------------------------------
# A CPU budget per test
# ----------------------------------------------------------------------------------------------------------------------


def _limit(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise pytest.UsageError(f"{name} must be a number of seconds; got {raw!r}") from None
    return value if value > 0 else float("inf")


CPU_LIMIT = _limit("DPLENS_TEST_CPU_LIMIT", 20.0)
WALL_LIMIT = _limit("DPLENS_TEST_WALL_LIMIT", 60.0)


def cpu_seconds() -> float:
    """User + system CPU time of this process and of its children that have been waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass(frozen=True)
class _Clock:
    cpu: float
    wall: float

    def elapsed(self) -> tuple[float, float]:
        return cpu_seconds() - self.cpu, time.perf_counter() - self.wall


_CLOCK = pytest.StashKey[_Clock]()
_PINNED = pytest.StashKey[set]()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    all_cpus = item.config.stash.get(_ALL_CPUS, None)
    if all_cpus is not None and is_serial(item):  # the serial phase runs alone: the whole machine is the test's
        item.stash[_PINNED] = os.sched_getaffinity(0)
        os.sched_setaffinity(0, all_cpus)
    item.stash[_CLOCK] = _Clock(cpu=cpu_seconds(), wall=time.perf_counter())
    yield


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item):
    yield
    pinned = item.stash.get(_PINNED, None)
    if pinned is not None:
        os.sched_setaffinity(0, pinned)


def _exempt(item) -> bool:
    return item.get_closest_marker("slow") is not None or item.get_closest_marker("accepted_long") is not None


def _check_budget(item, report) -> None:
    clock = item.stash.get(_CLOCK, None)
    if clock is None:
        return
    cpu, wall = clock.elapsed()
    report.user_properties += [("cpu_seconds", round(cpu, 3)), ("wall_seconds", round(wall, 3))]
    if (path := os.environ.get("DPLENS_TEST_TIMES")) and report.when == "call":
        # when it started (epoch seconds) and on which worker: the timeline of a run, to see idle workers
        start = time.time() - wall
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        line = json.dumps({"test": item.nodeid, "cpu": cpu, "wall": wall, "start": start, "worker": worker})
        with open(path, "a", encoding="utf-8") as times:
            times.write(line + "\n")
    wall_limit = WALL_LIMIT * _oversubscription()
    if report.passed and report.when == "call" and not _exempt(item) and (cpu > CPU_LIMIT or wall > wall_limit):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {cpu:.1f} s of CPU time and {wall:.1f} s of wall-clock time, over the default "
            f"suite's budget of {CPU_LIMIT:g} s CPU / {wall_limit:.0f} s wall per test (the wall-clock ceiling is "
            f"{WALL_LIMIT:g} s on a machine with a core per runnable process): make it faster, move it to `slow` "
            "(keeping a smaller default test of its property), or mark it @pytest.mark.accepted_long(reason) "
            "(root conftest.py)"
        )


def _oversubscription() -> float:
    """How many runnable processes share each CPU (the 1-minute load average per CPU, at least 1): a test that
    gets a quarter of a core takes four times as long, which says nothing about the test."""
    try:
        return max(1.0, os.getloadavg()[0] / available_cpus())
    except OSError:
        return 1.0
