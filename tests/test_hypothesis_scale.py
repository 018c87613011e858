"""The suite-wide DPLENS_HYPOTHESIS_SCALE switch (root conftest.py) multiplies every property's examples once."""

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


def _run(tmp_path: Path, scale: str | None) -> subprocess.CompletedProcess:
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_properties.py").write_text(PROPERTIES, encoding="utf-8")
    for log in tmp_path.glob("*.log"):
        log.unlink()
    env = {k: v for k, v in os.environ.items() if k != "DPLENS_HYPOTHESIS_SCALE"}
    if scale is not None:
        env["DPLENS_HYPOTHESIS_SCALE"] = scale
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path)],
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
