"""dplens's dp_accounting accountant inside jax_privacy 2.x: calibration and accounting of a DP-SGD training
(examples/jax_privacy_dpsgd.py). Needs the [jax] extra; skipped with one line without it, failed under CI=true."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

EXTRA = 'needs the [jax] extra: pip install "dplens[jax]"'

if importlib.util.find_spec("jax_privacy") is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but jax_privacy is missing: the jax_privacy integration test {EXTRA}", pytrace=False)
    pytest.skip(f"jax_privacy is not installed: this test {EXTRA}", allow_module_level=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# JAX starts threads when imported, and later tests fork (multiprocessing, subprocesses): a forked child of a
# multithreaded process can deadlock. So JAX runs in a child process of its own, never in the test process.
_PROBE = """
import dataclasses, json, sys
sys.path.insert(0, sys.argv[1])
import jax_privacy_dpsgd
result = jax_privacy_dpsgd.train(num_examples=1_000, expected_batch_size=50, steps=40, target_epsilon=1.5, seed=1)
from dplens.integrations.dp_accounting import PLDAccountant, RdpAccountant, jax_privacy_config
from jax_privacy import accounting
pld, rdp = jax_privacy_config(), jax_privacy_config(kind="rdp")
classes = [
    isinstance(pld, accounting.PldAccountantConfig), isinstance(pld.create_accountant(), PLDAccountant),
    isinstance(rdp, accounting.RdpAccountantConfig), isinstance(rdp.create_accountant(), RdpAccountant),
]
try:
    jax_privacy_config(kind="prv")
    refusal = None
except ValueError as err:
    refusal = str(err)
print(json.dumps({"result": dataclasses.asdict(result), "classes": classes, "refusal": refusal}))
"""


@pytest.fixture(scope="module")
def run():
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(EXAMPLES)], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_jax_privacy_training_calibrated_and_accounted_by_dplens(run):
    result = types.SimpleNamespace(**run["result"])
    # jax_privacy's calibration with dplens's accountant never overshoots the target (dplens's ε is an upper bound).
    assert result.epsilon <= 1.5
    # The certified bracket holds jax_privacy's own answer (dp_accounting's pessimistic PLD: an upper bound on the same
    # true ε, so ≥ its lower end), and dplens's upper bound is within its stated tolerance of it.
    assert result.epsilon_lower <= result.epsilon_jax_privacy_pld <= result.epsilon * (1 + 1e-3)
    assert result.epsilon <= result.epsilon_jax_privacy_pld * (1 + 1e-3)
    assert result.accuracy > 0.7  # the model learned despite the noise


def test_config_classes_are_jax_privacys(run):
    assert run["classes"] == [True, True, True, True]
    assert run["refusal"] == "kind must be 'pld' or 'rdp'; got 'prv'"
