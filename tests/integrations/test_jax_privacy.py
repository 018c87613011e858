"""dplens's dp_accounting accountant inside jax_privacy 2.x: calibration and accounting of a DP-SGD training
(examples/jax_privacy_dpsgd.py). Needs the [jax] extra; skipped with one line without it, failed under CI=true."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

EXTRA = 'needs the [jax] extra: pip install "dplens[jax]"'

if importlib.util.find_spec("jax_privacy") is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but jax_privacy is missing: the jax_privacy integration test {EXTRA}", pytrace=False)
    pytest.skip(f"jax_privacy is not installed: this test {EXTRA}", allow_module_level=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import jax_privacy_dpsgd
    finally:
        sys.path.remove(str(EXAMPLES))
    return jax_privacy_dpsgd


def test_jax_privacy_training_calibrated_and_accounted_by_dplens(example):
    result = example.train(num_examples=1_000, expected_batch_size=50, steps=40, target_epsilon=1.5, seed=1)
    # jax_privacy's calibration with dplens's accountant never overshoots the target (dplens's ε is an upper bound).
    assert result.epsilon <= 1.5
    # The certified bracket holds jax_privacy's own answer (dp_accounting's pessimistic PLD: an upper bound on the same
    # true ε, so ≥ its lower end), and dplens's upper bound is within its stated tolerance of it.
    assert result.epsilon_lower <= result.epsilon_jax_privacy_pld <= result.epsilon * (1 + 1e-3)
    assert result.epsilon <= result.epsilon_jax_privacy_pld * (1 + 1e-3)
    assert result.accuracy > 0.7  # the model learned despite the noise


def test_config_classes_are_jax_privacys():
    from jax_privacy import accounting

    from dplens.integrations.dp_accounting import PLDAccountant, RdpAccountant, jax_privacy_config

    pld = jax_privacy_config()
    assert isinstance(pld, accounting.PldAccountantConfig) and isinstance(pld.create_accountant(), PLDAccountant)
    rdp = jax_privacy_config(kind="rdp")
    assert isinstance(rdp, accounting.RdpAccountantConfig) and isinstance(rdp.create_accountant(), RdpAccountant)
    with pytest.raises(ValueError, match="kind must be 'pld' or 'rdp'; got 'prv'"):
        jax_privacy_config(kind="prv")
