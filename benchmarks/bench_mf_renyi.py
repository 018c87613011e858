"""Fixed-bins BandMF: dplens's Rényi upper bound (both directions) against its verified Monte Carlo estimate.

    python benchmarks/bench_mf_renyi.py [--samples-64 N] [--samples-1000 N]   # prints the RESULTS.md rows

For each configuration (a non-negative banded Toeplitz strategy — BSR, or issue 48's 4-band Toeplitz — T steps in
cycles of t, σ, δ): the frontier width of the remove programme and the largest order α_max it affords within
``mf_renyi.STATE_BUDGET``, ε of each direction (and the order that gives it), the time of the bound, the unamplified
μ-GDP bound, what ``mf_epsilon`` reports (the smallest valid bound) and, beside it, the verified Monte Carlo estimate
(``mf_monte_carlo``; the samples per direction and the seed are printed) — an estimate, never the bound.
"""

from __future__ import annotations

import argparse
import time

from dplens.accountant import conversions
from dplens.accountant import matrix_factorization as mf
from dplens.accountant import mf_monte_carlo as mc
from dplens.accountant import mf_renyi as mr
from dplens.accountant.mf_accounting import mf_epsilon

#: 4 Toeplitz coefficients, non-negative and non-increasing (largest column norm 1 after scaling)
TOEPLITZ4 = [1.0, 0.6, 0.35, 0.2]
#: (name, bands, T, t, σ, δ)
CASES = [
    ("bsr", 4, 64, 16, 1.5, 1e-3),
    ("toeplitz4", 4, 64, 16, 1.5, 1e-3),
    ("bsr", 4, 64, 16, 1.5, 1e-6),
    ("bsr", 8, 64, 16, 1.5, 1e-3),
    ("bsr", 4, 1000, 100, 1.0, 1e-3),
    ("bsr", 8, 1000, 100, 1.0, 1e-3),
    ("bsr", 16, 1000, 100, 1.0, 1e-3),
]


def _strategy(name: str, bands: int, steps: int) -> mf.Strategy:
    if name == "bsr":
        return mf.bsr_strategy(bands, steps)
    return mf.toeplitz_strategy(TOEPLITZ4, steps, name="bandmf", normalize=True)


def _row(case, samples: int | None) -> str:
    name, bands, steps, t, sigma, delta = case
    strategy = _strategy(name, bands, steps)
    gram = mr.fixed_bins_gram(strategy, period=t)
    width = mr.frontier_width(gram)
    order = mr.max_order_within(width, t)
    start = time.perf_counter()
    renyi = mr.fixed_bins_renyi(strategy, period=t, noise_multiplier=sigma, delta=delta)
    seconds = time.perf_counter() - start
    sens = mf.fixed_epoch_sensitivity(strategy, period=t).value
    unamplified = conversions.gdp_epsilon(sens * (1 + mf.SENSITIVITY_MARGIN) / sigma, delta)
    if renyi is None:
        bound = f"none (α_max = {order}: below order 2 within the budget)"
        ratio = "—"
    else:
        bound = (
            f"{renyi.epsilon:.3f} (remove {renyi.epsilon_remove:.3f} at α {renyi.order_remove}, add "
            f"{renyi.epsilon_add:.3f} at α {renyi.order_add})"
        )
    mc_text = "—"
    if samples:
        est = mc.fixed_bins_monte_carlo(
            strategy, period=t, noise_multiplier=sigma, delta=delta, samples=samples, seed=0
        )
        mc_text = f"{est.epsilon:.3f} ({est.epsilon_remove:.3f}, {est.epsilon_add:.3f}), {samples} samples, seed 0"
        if renyi is not None:
            ratio = f"{renyi.epsilon / est.epsilon:.2f}"
    elif renyi is not None:
        ratio = "—"
    run = dict(sampling="fixed-bins", dataset_size=10 * t, batch_size=10, epochs=steps / t, delta=delta)
    if name == "bsr":
        result = mf_epsilon(mechanism="bsr", bands=bands, noise_multiplier=sigma, **run)
    else:
        result = mf_epsilon(mechanism="bandmf", strategy=list(strategy.coefficients), noise_multiplier=sigma, **run)
    reported = f"{result.epsilon:.3f}"
    return (
        f"| {name}, {bands}, {steps}, {t}, {sigma:g}, {delta:g} | {width} / {order} | {bound} | {seconds:.2f} s | "
        f"{unamplified:.3f} | {reported} | {mc_text} | {ratio} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples-64", type=int, default=10**6, help="Monte Carlo samples per direction at T = 64")
    parser.add_argument("--samples-1000", type=int, default=2 * 10**5, help="... at T = 1000 (0: none)")
    args = parser.parse_args()
    print(
        "| strategy, bands, T, t, σ, δ | frontier / α_max | Rényi ε (remove, add) | time | unamplified ε | "
        "reported ε | Monte Carlo ε (remove, add) | Rényi / MC |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for case in CASES:
        samples = args.samples_64 if case[2] <= 64 else args.samples_1000
        if case[5] < 1e-4 and samples:
            samples = None  # the verification rule needs ~1.2e8 samples at δ = 1e-6: not run here
        print(_row(case, samples or None), flush=True)


if __name__ == "__main__":
    main()
