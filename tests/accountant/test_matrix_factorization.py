"""Matrix-factorisation strategies and sensitivities: closed forms, brute force, and jax_privacy 2.0 (64-bit)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dplens.accountant import matrix_factorization as mf
from dplens.research.dp_ftrl import accounting as ftrl

ROOT = Path(__file__).resolve().parents[2]


def _helper(name: str):
    spec = importlib.util.spec_from_file_location(f"_mf_{name}", ROOT / "tests" / "helpers" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = _helper("mf_cases")
_normalised, _signed_dense, _banded_dense = CASES.normalised, CASES.signed_dense, CASES.banded_dense


def _brute_force(c: np.ndarray, patterns) -> float:
    """max over patterns of ‖Σ_{i∈P} C_{:, i}‖: the exact sensitivity when CᵀC ≥ 0 (aligned gradients)."""
    return max(float(np.linalg.norm(c[:, list(p)].sum(axis=1))) for p in patterns)


def _minsep_patterns(steps: int, b: int, k: int):
    for size in range(1, k + 1):
        for p in itertools.combinations(range(steps), size):
            if all(q - r >= b for r, q in itertools.pairwise(p)):
                yield p


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


def test_nu_ftrl_strategy_is_the_seed_coefficients_scaled_by_gamma():
    s = mf.nu_ftrl_strategy(0.05, 1000)
    assert s.norm == pytest.approx(ftrl.nu_ftrl_gamma(0.05, 1000), rel=1e-12)  # note F2: 1.284076
    assert s.norm == pytest.approx(1.284076, abs=1e-6)
    np.testing.assert_allclose(s.coefficients * s.norm, ftrl.strategy_coefficients(0.05, 1000), rtol=1e-11)
    assert s.column_norms().max() == pytest.approx(1.0, rel=1e-12)


def test_bsr_coefficients_are_the_square_root_ones():
    s = mf.bsr_strategy(4, 50)
    np.testing.assert_allclose(s.coefficients * s.norm, [1, 1 / 2, 3 / 8, 5 / 16], rtol=1e-14)
    assert s.bands == 4 and s.nonincreasing_toeplitz()


def test_blt_coefficients_follow_the_buffers():
    s = mf.blt_strategy([0.9, 0.5], [0.3, 0.2], 5)
    np.testing.assert_allclose(s.coefficients * s.norm, [1, 0.5, 0.37, 0.293, 0.2437], rtol=1e-14)


def test_toeplitz_column_norms_match_the_dense_matrix():
    s = mf.toeplitz_strategy([0.8, 0.6], 7)
    np.testing.assert_allclose(s.column_norms(), np.linalg.norm(s.dense(), axis=0), rtol=1e-14)
    assert s.column_norms()[-1] == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.ones((3, 4)), "square T x T"),
        (np.eye(3)[None], "square T x T"),
        (np.array([[1.0, 0.1], [0.0, 1.0]]), "lower-triangular"),
        (np.array([[1.0, 0.0], [np.nan, 1.0]]), "finite"),
        (2 * np.eye(3), "largest column norm 1.*got largest column norm 2"),
    ],
)
def test_dense_strategy_rejects_bad_matrices_in_one_line(matrix, message):
    with pytest.raises(ValueError, match=message) as err:
        mf.dense_strategy(matrix)
    assert "\n" not in str(err.value)


def test_dense_strategy_must_match_the_steps():
    with pytest.raises(ValueError, match="T = 5 steps"):
        mf.dense_strategy(np.eye(4), steps=5)


def test_banded_strategy_bands_mismatch():
    with pytest.raises(ValueError, match="bands=2 does not match the strategy, which has 3 bands"):
        mf.banded_toeplitz_strategy([0.8, 0.5, np.sqrt(1 - 0.89)], 10, bands=2)
    with pytest.raises(ValueError, match="largest column norm 1"):
        mf.banded_toeplitz_strategy([1.0, 0.5], 10)


def test_dense_bands_are_counted():
    assert mf.dense_strategy(_banded_dense(12, 3)).bands == 3
    assert mf.dense_strategy(np.eye(5)).bands == 1


# --------------------------------------------------------------------------------------------
# Sensitivities: closed forms and brute force
# --------------------------------------------------------------------------------------------


def test_minsep_matches_the_seed_reference_f5():
    s = mf.nu_ftrl_strategy(0.0, 1000)
    sens = mf.minsep_sensitivity(s, min_separation=100, max_participations=10)
    assert sens.exact and sens.value * s.norm == pytest.approx(9.154043, abs=1e-6)  # note F5


@pytest.mark.parametrize("b", [1, 2, 3, 5])
def test_minsep_exact_routes_equal_brute_force(b):
    steps, k = 11, 3
    for strategy in (mf.bsr_strategy(4, steps), mf.dense_strategy(_banded_dense(steps, b))):
        sens = mf.minsep_sensitivity(strategy, min_separation=b, max_participations=k)
        c = strategy.dense()
        if (c.T @ c >= 0).all():
            assert sens.exact
            assert sens.value == pytest.approx(_brute_force(c, _minsep_patterns(steps, b, k)), rel=1e-12)


def test_minsep_upper_bound_is_never_below_brute_force_and_labelled():
    steps, b, k = 10, 2, 3
    c = np.abs(_signed_dense(steps))  # C >= 0 but not Toeplitz: brute force is exact
    sens = mf.minsep_sensitivity(mf.dense_strategy(_normalised(c)), min_separation=b, max_participations=k)
    assert not sens.exact
    assert sens.value >= _brute_force(_normalised(c), _minsep_patterns(steps, b, k)) * (1 - 1e-12)


def test_fixed_epoch_equals_brute_force_for_nonnegative_strategies():
    steps, t = 12, 4
    patterns = [tuple(range(i, steps, t)) for i in range(t)]
    for strategy in (mf.nu_ftrl_strategy(0.1, steps), mf.dense_strategy(_banded_dense(steps, 3))):
        sens = mf.fixed_epoch_sensitivity(strategy, period=t)
        assert sens.exact and sens.participations == 3
        assert sens.value == pytest.approx(_brute_force(strategy.dense(), patterns), rel=1e-12)
    ident = mf.fixed_epoch_sensitivity(mf.dense_strategy(np.eye(12)), period=5)
    assert ident.value == pytest.approx(math.sqrt(3))  # offsets 0, 1 take part 3 times


def test_fixed_epoch_with_negative_gram_entries_is_an_upper_bound():
    sens = mf.fixed_epoch_sensitivity(mf.dense_strategy(_signed_dense(12)), period=4)
    c = _signed_dense(12)
    assert not sens.exact
    assert sens.value >= _brute_force(c, [tuple(range(i, 12, 4)) for i in range(4)]) * (1 - 1e-12)


def test_epoch_block_bound_covers_every_one_per_epoch_pattern():
    steps, t = 9, 3
    patterns = list(itertools.product(*(range(e * t, (e + 1) * t) for e in range(3))))
    for strategy in (mf.nu_ftrl_strategy(0.0, steps), mf.dense_strategy(_normalised(np.abs(_signed_dense(steps))))):
        sens = mf.epoch_block_sensitivity(strategy, period=t)
        assert not sens.exact
        assert sens.value >= _brute_force(strategy.dense(), patterns) * (1 - 1e-12)
        # and never above the min-separation-1 bound with 3 participations where that one is exact
        if strategy.nonincreasing_toeplitz():
            loose = mf.minsep_sensitivity(strategy, min_separation=1, max_participations=3)
            assert sens.value <= loose.value * (1 + 1e-12)


def test_large_toeplitz_routes_need_no_dense_matrix():
    s = mf.nu_ftrl_strategy(0.0, 100_000)
    assert mf.minsep_sensitivity(s, min_separation=1000, max_participations=100).exact
    with pytest.raises(ValueError, match=r"non-negative and non-increasing Toeplitz.*steps=5000 > 4096"):
        mf.minsep_sensitivity(mf.toeplitz_strategy([0.6, -0.8], 5000), min_separation=1)


# --------------------------------------------------------------------------------------------
# jax_privacy 2.0, 64-bit, in a child process (JAX must never be loaded here)
# --------------------------------------------------------------------------------------------


def _jax_reference(cases: list[dict]) -> list:
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "jax_mf_reference.py")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sensitivities_equal_jax_privacy_64_bit_recorded():
    """Against jax_privacy's values recorded by benchmarks/bench_matrix_factorization.py (its own 64-bit run)."""
    recorded = json.loads((ROOT / "benchmarks" / "results_matrix_factorization.json").read_text())
    cases, ours = CASES.cases()
    assert [c["kind"] for c in cases] == recorded["sensitivity_kinds"]
    for kind, mine, ref in zip(recorded["sensitivity_kinds"], ours, recorded["jax_privacy_sensitivities"], strict=True):
        assert mine == pytest.approx(ref, rel=1e-9, abs=1e-12), (kind, mine, ref)


@pytest.mark.slow
def test_sensitivities_equal_jax_privacy_64_bit():
    # find_spec, not importorskip: JAX loaded here would make later process pools forkserver (runner._fork_hazard)
    if importlib.util.find_spec("jax_privacy") is None:
        pytest.skip('needs the [jax] extra: pip install "dplens[jax]"')
    cases, ours = CASES.cases()
    theirs = _jax_reference(cases)
    for case, mine, ref in zip(cases, ours, theirs, strict=True):
        assert mine == pytest.approx(ref, rel=1e-9, abs=1e-12), (case["kind"], mine, ref)
