"""The root conftest.py: DPLENS_HYPOTHESIS_SCALE multiplies every property's examples once, and under CI=true a test
skipped for a missing extra fails, and a test that leaves a threaded framework loaded is an error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROPERTIES = """
import pytest
from hypothesis import given, settings, strategies as st


def _count(name):
    with open(name, "a") as log:
        log.write("x")


@settings(max_examples=7, database=None)
@given(st.integers())
def test_explicit(n):
    _count("explicit.log")


@given(st.integers())
@settings(database=None)
def test_default(n):
    _count("default.log")


@pytest.mark.parametrize("side", ["left", "right"])
@settings(max_examples=5, database=None)
@given(st.integers())
def test_parametrized(side, n):
    _count(side + ".log")
"""


def _run(
    tmp_path: Path,
    scale: str | None,
    *,
    tests: str = PROPERTIES,
    ci: str | None = None,
    flags=("-q",),
    xdist=False,
    extra_env: dict[str, str] | None = None,
):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_properties.py").write_text(tests, encoding="utf-8")
    for log in tmp_path.glob("*.log"):
        log.unlink()
    # The inner run is hermetic: none of the outer run's xdist worker variables, suite settings or thread counts.
    inherited = ("DPLENS_HYPOTHESIS_SCALE", "CI", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in inherited and not k.startswith(("PYTEST_XDIST_", "DPLENS_TEST_", "PYTEST_ADDOPTS"))
    }
    if scale is not None:
        env["DPLENS_HYPOTHESIS_SCALE"] = scale
    if ci is not None:
        env["CI"] = ci
    env.update(extra_env or {})
    if not xdist:  # one process unless the test is about the workers (the conftest would start them)
        flags = (*flags, "-p", "no:xdist")
    argv = [sys.executable, "-m", "pytest", *flags, "-p", "no:cacheprovider", "-c", os.devnull]
    return subprocess.run(
        [*argv, "--rootdir", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _counts(tmp_path: Path) -> dict[str, int]:
    return {name: len((tmp_path / f"{name}.log").read_text()) for name in ("explicit", "default", "left", "right")}


def test_scale_multiplies_explicit_and_default_examples_once(tmp_path):
    unscaled = _run(tmp_path, None)
    assert unscaled.returncode == 0, unscaled.stdout + unscaled.stderr
    assert _counts(tmp_path) == {"explicit": 7, "default": 100, "left": 5, "right": 5}
    scaled = _run(tmp_path, "3")
    assert scaled.returncode == 0, scaled.stdout + scaled.stderr
    # Each parametrized case runs 3 × 5, not 3 × 3 × 5: the two items share one function.
    assert _counts(tmp_path) == {"explicit": 21, "default": 300, "left": 15, "right": 15}


def test_a_bad_scale_is_refused_in_one_line(tmp_path):
    result = _run(tmp_path, "fifty")
    assert result.returncode != 0
    assert "DPLENS_HYPOTHESIS_SCALE must be a positive integer; got 'fifty'" in result.stderr
    assert "Traceback" not in result.stderr


NEEDS_EXTRAS = """
import pytest

REASON = 'needs the [torch] extra: pip install "dplens[torch]"'


@pytest.mark.skipif(True, reason=REASON)
def test_marked():
    pass


def test_imported():
    pytest.importorskip("no_such_module_for_dplens", reason=REASON)


def test_skipped_for_another_reason():
    pytest.skip("not on this platform")


def test_runs():
    assert True
"""

MODULE_LEVEL = """
import pytest

pytest.importorskip("no_such_module_for_dplens", reason='needs the [torch] extra: pip install "dplens[torch]"')


def test_never_collected():
    pass
"""


def test_a_missing_extra_skips_in_one_line_and_fails_under_ci(tmp_path):
    local = _run(tmp_path, None, tests=NEEDS_EXTRAS, flags=("-rs",))
    assert local.returncode == 0, local.stdout
    assert "1 passed, 3 skipped" in local.stdout
    assert local.stdout.count('needs the [torch] extra: pip install "dplens[torch]"') == 2
    ci = _run(tmp_path, None, tests=NEEDS_EXTRAS, ci="true")
    assert ci.returncode == 1
    # the skipif marker acts at setup (an error), importorskip in the call (a failure); another skip stays a skip
    assert "1 failed, 1 passed, 1 skipped, 1 error" in ci.stdout
    assert "CI=true but the test was skipped: needs the [torch] extra" in ci.stdout


def test_a_module_skipped_for_a_missing_extra_fails_under_ci(tmp_path):
    assert "1 skipped" in _run(tmp_path, None, tests=MODULE_LEVEL).stdout
    ci = _run(tmp_path, None, tests=MODULE_LEVEL, ci="true")
    assert ci.returncode != 0 and "CI=true but the test was skipped: needs the [torch] extra" in ci.stdout


LOADS_A_FRAMEWORK = """
import sys
import types


def test_loads_tensorflow():
    sys.modules["tensorflow"] = types.ModuleType("tensorflow")  # as an import would, and never undone


def test_after_it():
    assert "tensorflow" in sys.modules
"""


def test_a_test_that_leaves_a_threaded_framework_loaded_is_an_error(tmp_path):
    run = _run(tmp_path, None, tests=LOADS_A_FRAMEWORK)
    assert run.returncode == 1
    assert "2 passed, 1 error" in run.stdout  # only the test that loaded it; the next one already found it loaded
    assert "this test left tensorflow loaded in the pytest process" in run.stdout


LOADS_A_FRAMEWORK_AT_IMPORT = """
import sys
import types

sys.modules["tensorflow"] = types.ModuleType("tensorflow")  # a module-level import, made while it is collected


def test_runs():
    pass
"""


def test_a_module_that_loads_a_threaded_framework_when_collected_is_an_error(tmp_path):
    # the gap the per-test guard left: JAX imported at collection made 7 later pool tests of that worker fail
    run = _run(tmp_path, None, tests=LOADS_A_FRAMEWORK_AT_IMPORT)
    assert run.returncode != 0
    assert "collecting test_properties.py loaded tensorflow in the pytest process" in run.stdout


def test_a_child_run_that_exists_to_load_a_framework_may_say_so(tmp_path):
    # the jax_privacy cases run in a child pytest that imports JAX at collection: the guard must let that one through
    run = _run(tmp_path, None, tests=LOADS_A_FRAMEWORK_AT_IMPORT, extra_env={"DPLENS_TEST_FRAMEWORKS_IN_PROCESS": "1"})
    assert run.returncode == 0, run.stdout[-2000:]
    assert "1 passed" in run.stdout


# ----------------------------------------------------------------------------------------------------------------------
# Both cores, the serial phase and the CPU budget
# ----------------------------------------------------------------------------------------------------------------------

PHASES = """
import json, os, time
import pytest


def _log(name):
    start = time.monotonic()
    time.sleep(0.4)
    record = dict(name=name, start=start, end=time.monotonic(), cpus=sorted(os.sched_getaffinity(0)),
                  worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
                  workers=os.environ.get("PYTEST_XDIST_WORKER_COUNT"), blas=os.environ.get("OPENBLAS_NUM_THREADS"))
    with open("phases.log", "a") as log:
        log.write(json.dumps(record) + "\\n")


@pytest.mark.serial("a test of the serial phase")
@pytest.mark.parametrize("n", range(2))
def test_serial(n):
    _log(f"serial{n}")


@pytest.mark.parametrize("n", range(6))
def test_parallel(n):
    _log(f"parallel{n}")
"""


def _phases(tmp_path: Path, *flags: str):
    (tmp_path / "phases.log").unlink(missing_ok=True)
    run = _run(tmp_path, None, tests=PHASES, flags=("-q", *flags), xdist="-n" in flags)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "8 passed" in run.stdout, run.stdout
    records = [json.loads(line) for line in (tmp_path / "phases.log").read_text().splitlines()]
    assert sorted(r["name"] for r in records) == sorted(
        [f"serial{n}" for n in range(2)] + [f"parallel{n}" for n in range(6)]
    )
    serial = sorted((r for r in records if r["name"].startswith("serial")), key=lambda r: r["start"])
    parallel = [r for r in records if r["name"].startswith("parallel")]
    return serial, parallel


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_serial_tests_run_after_the_others_and_alone_on_the_whole_machine(tmp_path):
    pytest.importorskip("xdist", reason="needs the [test] extra: pip install '.[test]' (pytest-xdist)")
    serial, parallel = _phases(tmp_path, "-n", "2")
    assert {r["worker"] for r in parallel} == {"gw0", "gw1"}  # both workers ran the parallel phase
    assert min(r["start"] for r in serial) >= max(r["end"] for r in parallel)  # the serial phase came after it ...
    assert serial[1]["start"] >= serial[0]["end"]  # ... one test at a time
    machine = sorted(os.sched_getaffinity(0))
    assert all(r["cpus"] == machine for r in serial)  # with every CPU this run may use
    if len(machine) >= 2:  # while each worker of the parallel phase kept to its share
        assert all(len(r["cpus"]) == len(machine) // 2 for r in parallel)
        assert {tuple(r["cpus"]) for r in parallel if r["worker"] == "gw0"}.isdisjoint(
            {tuple(r["cpus"]) for r in parallel if r["worker"] == "gw1"}
        )
    assert {r["blas"] for r in parallel} == {"1"}


def test_without_xdist_the_serial_tests_still_run_last(tmp_path):
    serial, parallel = _phases(tmp_path)
    assert {r["worker"] for r in serial + parallel} == {"main"}
    assert min(r["start"] for r in serial) >= max(r["end"] for r in parallel)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_the_default_worker_count_is_the_cpus_this_run_may_use(tmp_path):
    pytest.importorskip("xdist", reason="needs the [test] extra: pip install '.[test]' (pytest-xdist)")
    cpus = len(os.sched_getaffinity(0))
    for env_count, expected in ((None, cpus), ("3", 3), ("1", None)):
        (tmp_path / "phases.log").unlink(missing_ok=True)
        extra = {} if env_count is None else {"PYTEST_XDIST_AUTO_NUM_WORKERS": env_count}
        run = _run(tmp_path, None, tests=PHASES, xdist=True, extra_env=extra)
        assert run.returncode == 0, run.stdout + run.stderr
        records = [json.loads(line) for line in (tmp_path / "phases.log").read_text().splitlines()]
        shown = {r["workers"] for r in records}
        assert shown == ({str(expected)} if expected and expected > 1 else {None}), (env_count, shown)


BUDGET = """
import time
import pytest


def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_over_budget():
    _burn(0.6)


@pytest.mark.accepted_long("a test of the marker")
def test_accepted():
    _burn(0.6)


@pytest.mark.slow
def test_slow():
    _burn(0.6)


def test_within_budget():
    _burn(0.05)
"""


def test_a_default_test_over_the_cpu_budget_fails_with_its_name(tmp_path):
    run = _run(tmp_path, None, tests=BUDGET, flags=("-q", "-rf"), extra_env={"DPLENS_TEST_CPU_LIMIT": "0.4"})
    out = run.stdout
    assert run.returncode == 1 and "1 failed, 3 passed" in out, out
    assert "test_properties.py::test_over_budget took 0." in out, out
    assert "over the default suite's budget of 0.4 s CPU" in out, out


def test_every_tests_times_are_written_when_asked(tmp_path):
    times = tmp_path / "times.jsonl"
    run = _run(tmp_path, None, tests=BUDGET, extra_env={"DPLENS_TEST_TIMES": str(times)})
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {row["test"]: row for row in map(json.loads, times.read_text().splitlines())}
    assert set(rows) == {
        f"test_properties.py::test_{name}" for name in ("over_budget", "accepted", "slow", "within_budget")
    }
    assert 0.55 < rows["test_properties.py::test_over_budget"]["cpu"] < 5
    assert rows["test_properties.py::test_within_budget"]["cpu"] < 0.5
    # the timeline: when each test started, on which worker
    assert {row["worker"] for row in rows.values()} == {"main"}
    starts = [rows[f"test_properties.py::test_{name}"]["start"] for name in ("over_budget", "within_budget")]
    assert starts[0] < starts[1] and abs(time.time() - starts[0]) < 600


PROFILE = """
from hypothesis import settings


def test_profile():
    print("PROFILE", settings.get_current_profile_name(), settings.default.deadline, settings.default.derandomize)
"""


def test_hypothesis_runs_without_a_deadline_and_derandomized_under_ci(tmp_path):
    for ci, expected in ((None, "PROFILE dplens None False"), ("true", "PROFILE ci None True")):
        run = _run(tmp_path, None, tests=PROFILE, ci=ci, flags=("-q", "-s"))
        assert run.returncode == 0 and expected in run.stdout, (ci, run.stdout + run.stderr)


PRECISION = """
import mpmath


def test_sets_the_precision():
    mpmath.mp.dps = 5


def test_after_it():
    assert mpmath.mp.dps == 15, mpmath.mp.dps
"""


def test_a_test_that_sets_mpmaths_precision_leaves_the_next_test_the_default(tmp_path):
    run = _run(tmp_path, None, tests=PRECISION)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr


def test_the_first_long_test_of_each_module_is_handed_out_first(monkeypatch):
    """It pays for the build its module's other long tests share; they keep their place (no worker waits on a lock)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_root_conftest_copy", ROOT / "conftest.py")
    root = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, root)  # its dataclasses look their module up there
    spec.loader.exec_module(root)

    class Item:
        def __init__(self, nodeid: str, *marks: str):
            self.nodeid, self.marks = nodeid, marks

        def get_closest_marker(self, name: str):
            return name if name in self.marks else None

    items = [
        Item("a.py::t1"),
        Item("docs.py::t1"),
        Item("docs.py::build", "accepted_long"),
        Item("docs.py::page", "accepted_long"),
        Item("docs.py::browser", "accepted_long", "serial"),
        Item("b.py::t1"),
        Item("b.py::big", "accepted_long"),
    ]
    order = [item.nodeid for item in root._shared_builds_first(items)]
    assert order == [
        "docs.py::build",
        "b.py::big",
        "a.py::t1",
        "docs.py::t1",
        "docs.py::page",
        "docs.py::browser",
        "b.py::t1",
    ]
