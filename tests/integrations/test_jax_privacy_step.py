"""The jax_privacy subject of check_dp_sgd (issue 46), run in a child pytest process.

JAX starts threads when it is imported; once it is loaded in the pytest process every later process pool of the audit
runner starts with forkserver (the root conftest's rule), and other tests' pools break. So the cases
(``jax_privacy_step_cases.py``: the update is the clipped sum, a correct step passes, planted bugs are named, the
sampler adapter) run in a child ``pytest``, and this test fails with the child's output if any case fails."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXTRA = 'needs the [jax] extra: pip install "dplens[jax]"'

if importlib.util.find_spec("jax_privacy") is None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but jax_privacy is missing: the jax_privacy subject's tests {EXTRA}", pytrace=False)
    pytest.skip(f"jax_privacy is not installed: this test {EXTRA}", allow_module_level=True)

CASES = Path(__file__).with_name("jax_privacy_step_cases.py")


def test_the_jax_privacy_subject_cases_pass_in_a_child_process():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(CASES), "-p", "no:xdist", "-p", "no:cacheprovider", "-rf"],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
        # the child loads JAX at collection by design: the root conftest's framework guards stand down there
        env={**os.environ, "DPLENS_TEST_FRAMEWORKS_IN_PROCESS": "1"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary and "failed" not in summary, proc.stdout[-1000:]
