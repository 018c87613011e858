"""Reading jax_privacy 2.0's BandMFExecutionPlanConfig: the same ε as its own event under dp_accounting's PLD.

jax_privacy runs only in a child process (the root conftest fails a test that leaves JAX loaded here).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dplens.accountant.mf_accounting import bandmf_epsilon
from dplens.integrations.jax_privacy_mf import bandmf_config_epsilon

SRC = Path(__file__).resolve().parents[2] / "src"

_CHILD = r"""
import json, math
import numpy as np
import dp_accounting
from jax_privacy.experimental import execution_plan
from dplens.integrations.jax_privacy_mf import bandmf_config_epsilon
out = []
for iterations, strategy, q, sigma, normalize in json.loads(__import__("sys").argv[1]):
    config = execution_plan.BandMFExecutionPlanConfig(
        iterations=iterations, strategy=np.array(strategy), epsilon=None, delta=None, noise_multiplier=sigma,
        sampling_prob=q, column_normalize=normalize,
    )
    ours = bandmf_config_epsilon(config, delta=1e-6)
    theirs = dp_accounting.pld.PLDAccountant().compose(config._get_dp_event(sigma)).get_epsilon(1e-6)
    out.append([ours.epsilon, ours.epsilon_lower, ours.bound, theirs])
print(json.dumps(out))
"""


@pytest.mark.slow  # imports jax_privacy in a child process (several seconds)
def test_bandmf_config_reads_like_jax_privacys_own_event():
    if importlib.util.find_spec("jax_privacy") is None:
        pytest.skip('needs the [jax] extra: pip install "dplens[jax]"')
    cases = [[1000, [1.0, 0.5, 0.2, 0.1], 0.4, 3.0, False], [1002, [1.0, 0.5, 0.2, 0.1], 0.1, 1.0, True]]
    env = dict(os.environ, PYTHONPATH=str(SRC), JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cases)], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for ours, lower, bound, theirs in json.loads(proc.stdout.strip().splitlines()[-1]):
        assert abs(ours - theirs) <= 1e-3 * theirs and lower <= ours
        assert bound == "certified"  # 1000 = 250 x 4; 1002 with column_normalize: every column has norm 1


class _Config:
    """A stand-in with BandMFExecutionPlanConfig's fields (the real one needs JAX, see the slow test)."""

    def __init__(self, **fields):
        defaults = dict(
            iterations=1002,
            strategy=[1.0, 0.5, 0.2, 0.1],
            sampling_prob=0.1,
            noise_multiplier=1.0,
            delta=None,
            truncated_batch_size=None,
            num_examples=None,
            column_normalize=False,
            accountant=None,
        )
        self.__dict__.update({**defaults, **fields})


def test_partial_last_round_is_certified_with_the_coefficients_and_by_column_normalisation():
    plain = bandmf_config_epsilon(_Config(), delta=1e-6)
    normalised = bandmf_config_epsilon(_Config(column_normalize=True), delta=1e-6)
    assert plain.bound == "certified" and normalised.bound == "certified"  # 1002 = 250 x 4 + 2
    assert plain.epsilon <= normalised.epsilon  # the partial columns have norm < 1 without normalisation
    dpsgd = bandmf_epsilon(iterations=1004, sampling_prob=0.1, noise_multiplier=1.0, delta=1e-6, num_bands=4)
    assert normalised.epsilon == pytest.approx(dpsgd.epsilon, rel=1e-9)  # 251 full rounds either way


def test_config_refusals_are_one_line():
    with pytest.raises(ValueError, match="noise_multiplier is None"):
        bandmf_config_epsilon(_Config(noise_multiplier=None), delta=1e-6)
    with pytest.raises(ValueError, match="delta is needed"):
        bandmf_config_epsilon(_Config())
    with pytest.raises(ValueError, match="must be a jax_privacy BandMFExecutionPlanConfig"):
        bandmf_config_epsilon(object(), delta=1e-6)
