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

import numpy as np
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


# --- batch-selection strategies (CyclicPoissonSampling, BallsInBinsSampling, BMinSepSampling) with MF noise


class CyclicPoissonSampling:  # stand-ins with jax_privacy 2.0's dataclass fields (the slow test checks the real ones)
    def __init__(self, sampling_prob, iterations, truncated_batch_size=None, cycle_length=1):
        self.sampling_prob, self.iterations = sampling_prob, iterations
        self.truncated_batch_size, self.cycle_length = truncated_batch_size, cycle_length


class BallsInBinsSampling:
    def __init__(self, iterations, cycle_length):
        self.iterations, self.cycle_length = iterations, cycle_length


class BMinSepSampling:
    def __init__(self, sampling_prob, iterations, min_sep, warm_start=True, truncated_batch_size=None):
        self.sampling_prob, self.iterations, self.min_sep = sampling_prob, iterations, min_sep
        self.warm_start, self.truncated_batch_size = warm_start, truncated_batch_size


C3 = [0.8, 0.5, 0.33]
C3_UNIT = list(np.asarray(C3) / np.linalg.norm(C3))


def test_batch_selection_strategies_read_as_their_samplers():
    from dplens.accountant import matrix_factorization as mf
    from dplens.accountant import mf_monte_carlo as mc
    from dplens.accountant.mf_accounting import mf_epsilon
    from dplens.integrations.jax_privacy_mf import batch_selection_mf_epsilon

    cyclic = batch_selection_mf_epsilon(
        CyclicPoissonSampling(0.1, 400, cycle_length=4), strategy=C3_UNIT, noise_multiplier=1.0, delta=1e-6
    )
    direct = bandmf_epsilon(
        iterations=400, sampling_prob=0.1, noise_multiplier=1.0, delta=1e-6, strategy=[*C3_UNIT, 0.0]
    )
    assert cyclic.epsilon == direct.epsilon and cyclic.rounds == 100 and cyclic.bands == 4
    bins = batch_selection_mf_epsilon(BallsInBinsSampling(64, 16), strategy=C3_UNIT, noise_multiplier=1.5, delta=1e-3)
    named = mf_epsilon(
        mechanism="bandmf",
        sampling="fixed-bins",
        strategy=C3_UNIT,
        dataset_size=1600,
        batch_size=100,
        epochs=4,
        noise_multiplier=1.5,
        delta=1e-3,
    )
    assert bins.epsilon == pytest.approx(named.epsilon, rel=1e-12) and bins.sampling == "fixed-bins"
    sep = batch_selection_mf_epsilon(
        BMinSepSampling(0.2, 60, 4), strategy=C3_UNIT, noise_multiplier=1.0, delta=1e-3, monte_carlo=20_000, seed=5
    )
    strategy = mf.toeplitz_strategy(C3_UNIT, 60)
    estimate = mc.b_min_sep_monte_carlo(
        strategy, min_separation=4, sampling_rate=0.2, noise_multiplier=1.0, delta=1e-3, samples=20_000, seed=5
    )
    assert sep.epsilon_monte_carlo == estimate.epsilon < sep.epsilon and sep.bound == "upper"
    assert "rate 0.2," in sep.monte_carlo["dominating_pair"]  # jax_privacy's own p, not one derived from N/B
    assert sep.sensitivity == pytest.approx(mf.minsep_sensitivity(strategy, min_separation=4).value, rel=1e-12)


def test_batch_selection_refusals_are_one_line():
    from dplens.integrations.jax_privacy_mf import batch_selection_mf_epsilon

    cases = [
        (CyclicPoissonSampling(0.1, 400, cycle_length=2), {}, "3 bands, more than the cycle_length=2 groups"),
        (BMinSepSampling(0.2, 60, 4, warm_start=False), {"monte_carlo": 10**5}, "warm_start=True"),
        (BMinSepSampling(0.2, 60, 4, truncated_batch_size=5), {"monte_carlo": 10**5}, "no truncated_batch_size"),
        (object(), {}, "must be a jax_privacy batch-selection strategy"),
    ]
    for selection, extra, words in cases:
        with pytest.raises(ValueError, match=words) as caught:
            batch_selection_mf_epsilon(selection, strategy=C3_UNIT, noise_multiplier=1.0, delta=1e-3, **extra)
        assert "\n" not in str(caught.value)


_BATCH_CHILD = r"""
import json
import numpy as np
from jax_privacy import batch_selection as bs
from dplens.integrations.jax_privacy_mf import batch_selection_mf_epsilon
c = list(np.array([0.8, 0.5, 0.33]) / np.linalg.norm([0.8, 0.5, 0.33]))
out = [
    batch_selection_mf_epsilon(bs.CyclicPoissonSampling(sampling_prob=0.1, iterations=400, cycle_length=4),
                               strategy=c, noise_multiplier=1.0, delta=1e-6).epsilon,
    batch_selection_mf_epsilon(bs.BallsInBinsSampling(iterations=64, cycle_length=16), strategy=c,
                               noise_multiplier=1.5, delta=1e-3).epsilon,
    batch_selection_mf_epsilon(bs.BMinSepSampling(sampling_prob=0.2, iterations=60, min_sep=4), strategy=c,
                               noise_multiplier=1.0, delta=1e-3, monte_carlo=20000, seed=5).epsilon_monte_carlo,
]
print(json.dumps(out))
"""


@pytest.mark.slow  # imports jax_privacy in a child process (several seconds)
def test_the_real_batch_selection_strategies_read_like_the_stand_ins():
    if importlib.util.find_spec("jax_privacy") is None:
        pytest.skip('needs the [jax] extra: pip install "dplens[jax]"')
    from dplens.integrations.jax_privacy_mf import batch_selection_mf_epsilon

    env = dict(os.environ, PYTHONPATH=str(SRC), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _BATCH_CHILD], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    stand_ins = [
        batch_selection_mf_epsilon(
            CyclicPoissonSampling(0.1, 400, cycle_length=4), strategy=C3_UNIT, noise_multiplier=1.0, delta=1e-6
        ).epsilon,
        batch_selection_mf_epsilon(
            BallsInBinsSampling(64, 16), strategy=C3_UNIT, noise_multiplier=1.5, delta=1e-3
        ).epsilon,
        batch_selection_mf_epsilon(
            BMinSepSampling(0.2, 60, 4), strategy=C3_UNIT, noise_multiplier=1.0, delta=1e-3, monte_carlo=20_000, seed=5
        ).epsilon_monte_carlo,
    ]
    assert real == pytest.approx(stand_ins, rel=1e-12)
