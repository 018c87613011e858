"""Matrix-factorisation reference cases shared by the sensitivity tests and benchmarks/bench_matrix_factorization.py.

``cases()`` returns the JSON cases for ``jax_mf_reference.py`` (run in a child process with 64-bit JAX) and, in the
same order, dplens's own values. The matrices are deterministic formulas, the same in every process.
"""

from __future__ import annotations

import numpy as np

from dplens.accountant import matrix_factorization as mf


def normalised(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=0).max()


def signed_dense(steps: int) -> np.ndarray:
    """A lower-triangular matrix with negative entries."""
    i, j = np.indices((steps, steps))
    return normalised(np.tril(np.cos(1.3 * i + 0.7 * j) + 0.5 * (i == j)))


def banded_dense(steps: int, bands: int) -> np.ndarray:
    """A banded, column-normalised (every column norm 1), non-Toeplitz strategy."""
    i, j = np.indices((steps, steps))
    m = np.where((i >= j) & (i - j < bands), 1.0 + 0.3 * np.sin(0.9 * i + 0.4 * j), 0.0)
    return m / np.linalg.norm(m, axis=0)


def cases() -> tuple[list[dict], list[float]]:
    signed = signed_dense(40)
    banded = banded_dense(40, 4)
    bsr = mf.bsr_strategy(8, 64)
    nu = mf.nu_ftrl_strategy(0.05, 200)
    blt = ([0.95, 0.6, 0.1], [0.25, 0.15, 0.05])
    ours = [
        mf.minsep_sensitivity(bsr, min_separation=3, max_participations=5).value,
        mf.minsep_sensitivity(nu, min_separation=20, max_participations=10).value,
        mf.minsep_sensitivity(mf.dense_strategy(banded), min_separation=4, max_participations=None).value,
        mf.minsep_sensitivity(mf.dense_strategy(banded), min_separation=6, max_participations=3).value,
        mf.minsep_sensitivity(mf.dense_strategy(signed), min_separation=3, max_participations=5).value,
        mf.fixed_epoch_sensitivity(mf.dense_strategy(signed), period=10).value,
        mf.fixed_epoch_sensitivity(mf.dense_strategy(banded), period=8).value,
        mf.fixed_epoch_sensitivity(bsr, period=4).value,
        mf.blt_strategy(*blt, 300).norm,
    ]
    json_cases = [
        {"kind": "toeplitz_minsep", "coef": bsr.coefficients.tolist(), "min_sep": 3, "k": 5, "n": 64},
        {"kind": "toeplitz_minsep", "coef": nu.coefficients.tolist(), "min_sep": 20, "k": 10, "n": 200},
        {"kind": "banded", "C": banded.tolist(), "min_sep": 4, "k": None},
        {"kind": "banded", "C": banded.tolist(), "min_sep": 6, "k": 3},
        {"kind": "minsep_upper", "C": signed.tolist(), "min_sep": 3, "k": 5},
        {"kind": "fixed_epoch", "C": signed.tolist(), "epochs": 4},
        {"kind": "fixed_epoch", "C": banded.tolist(), "epochs": 5},
        {"kind": "fixed_epoch", "C": bsr.dense().tolist(), "epochs": 16},
        {"kind": "blt_norm", "buf_decay": blt[0], "output_scale": blt[1], "n": 300},
    ]
    return json_cases, ours
