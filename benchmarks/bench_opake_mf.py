"""opake-dpftrl 0.16.1's accounting processes read by dplens (issue 48): the same training, each library's ε.

    /path/to/python3.13 benchmarks/bench_opake_mf.py   # a Python 3.13 with opake[dpftrl]==0.16.1 and dplens

opake imports on Python 3.13 only here (its wheels), so this runs in such an environment (``pip install
"opake[dpftrl]==0.16.1"`` and ``pip install -e .``). For each process: opake's own ``epsilon_at(δ)`` and its time,
``dplens.integrations.opake_mf.opake_epsilon`` on the *same object* (dplens's bound, its label, and for the Monte
Carlo samplers dplens's verified estimate), and two checks of the reading — opake's single-participation sensitivity
against the norm of the coefficients dplens read (the σ conventions agree where they are equal), and for
balls-in-bins opake's own Gram matrix of the mixture means against dplens's (``mf_renyi.fixed_bins_gram``).
"""

from __future__ import annotations

import time

import numpy as np
import opake.dpftrl.accounting as ftrl_acc
from opake.dpftrl.noise import band_mf_strategy, bisr_strategy, blt_strategy, bsr_strategy, identity_strategy

from dplens.accountant import matrix_factorization as mf
from dplens.accountant import mf_renyi as mr
from dplens.integrations.opake_mf import opake_epsilon

CASES = [
    (
        "BandMF 8 bands, cyclic Poisson q 0.05, T 1000, σ 1",
        1e-6,
        lambda: ftrl_acc.poisson(ftrl_acc.mf_gaussian(1.0, band_mf_strategy(bands=8)), sample_rate=0.05, n_steps=1000),
    ),
    (
        "identity, Poisson q 0.01, T 1000, σ 1",
        1e-6,
        lambda: ftrl_acc.poisson(ftrl_acc.mf_gaussian(1.0, identity_strategy()), sample_rate=0.01, n_steps=1000),
    ),
    (
        "BSR bandwidth 4, balls-in-bins 16 bins, T 64, σ 1.5",
        1e-3,
        lambda: ftrl_acc.balls_in_bins(
            ftrl_acc.mf_gaussian(1.5, bsr_strategy(bandwidth=4, alpha=1.0, beta=0.0)), num_bins=16, n_steps=64
        ),
    ),
    (
        "BLT 4 buffers, balls-in-bins 16 bins, T 64, σ 1.5",
        1e-3,
        lambda: ftrl_acc.balls_in_bins(ftrl_acc.mf_gaussian(1.5, blt_strategy(max_buffers=4)), num_bins=16, n_steps=64),
    ),
    (
        "BISR bandwidth 4 (not normalised), balls-in-bins 16 bins, T 64, σ 1.5",
        1e-3,
        lambda: ftrl_acc.balls_in_bins(
            ftrl_acc.mf_gaussian(1.5, bisr_strategy(bandwidth=4, normalized=False)), num_bins=16, n_steps=64
        ),
    ),
    (
        "BandMF 4 bands, b-min-sep p0 0.1, T 40, σ 1",
        1e-3,
        lambda: ftrl_acc.b_min_sep(ftrl_acc.mf_gaussian(1.0, band_mf_strategy(bands=4)), n_steps=40, p0=0.1),
    ),
]


def _reading(process) -> str:
    """opake's sensitivity against the read norm; for balls-in-bins, the largest Gram difference."""
    strategy, steps = process.inner.strategy, process.n_steps
    sens = strategy.sensitivity(n_steps=steps, min_sep=steps, max_participations=1)
    if type(strategy).__name__ == "IdentityStrategy":
        return f"{sens:.6g} vs 1"
    raw = np.asarray(
        strategy.coefficients(
            n_steps=steps, min_sep=process.min_sep, max_participations=process.max_participations
        ).tolist()
    )
    text = f"{sens:.10g} vs ‖c‖ {np.linalg.norm(raw[:steps]):.10g}"
    if type(process).__name__ == "BallsInBins":
        schema = dict(n_steps=steps, min_sep=process.min_sep, max_participations=process.max_participations)
        theirs = np.asarray(strategy.gram_matrix(**schema), dtype=float)
        ours = mr.fixed_bins_gram(mf.toeplitz_strategy(raw, steps, normalize=True), period=process.num_bins)
        if theirs.size == ours.size:  # opake's Gram is of the raw C: divided by ‖c‖²
            gap = np.max(np.abs(theirs.reshape(ours.shape) / np.linalg.norm(raw[:steps]) ** 2 - ours))
            text += f"; Gram max |opake/‖c‖² − dplens| {gap:.2e}"
        else:
            text += f"; opake's Gram has {theirs.size} entries, dplens's {ours.size}"
    return text


def main() -> None:
    print("| process | δ | opake ε (time) | dplens ε, bound (time) | dplens Monte Carlo estimate | reading check |")
    print("|---|---|---|---|---|---|")
    for name, delta, build in CASES:
        process = build()
        start = time.perf_counter()
        theirs = process.epsilon_at(delta)
        their_time = time.perf_counter() - start
        kind = type(process).__name__
        start = time.perf_counter()
        ours = opake_epsilon(
            process, delta=delta, monte_carlo=10**6 if kind in ("BMinSep", "BallsInBins") else None, seed=0
        )
        our_time = time.perf_counter() - start
        estimate = "—" if ours.epsilon_monte_carlo is None else f"{ours.epsilon_monte_carlo:.4f} (10⁶ per direction)"
        print(
            f"| {name} | {delta:g} | {theirs:.4f} ({their_time:.1f} s) | {ours.epsilon:.4f}, {ours.bound} "
            f"({our_time:.1f} s) | {estimate} | {_reading(process)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
