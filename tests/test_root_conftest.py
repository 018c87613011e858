"""The root conftest.py: DPLENS_HYPOTHESIS_SCALE multiplies every property's examples once, and under CI=true a test
skipped for a missing extra fails, and a test that leaves a threaded framework loaded is an error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def _run(tmp_path: Path, scale: str | None, *, tests: str = PROPERTIES, ci: str | None = None, flags=("-q",)):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_properties.py").write_text(tests, encoding="utf-8")
    for log in tmp_path.glob("*.log"):
        log.unlink()
    env = {k: v for k, v in os.environ.items() if k not in ("DPLENS_HYPOTHESIS_SCALE", "CI")}
    if scale is not None:
        env["DPLENS_HYPOTHESIS_SCALE"] = scale
    if ci is not None:
        env["CI"] = ci
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
