"""BandMF at δ = 1e-6: dplens's valid upper bounds against Monte Carlo at the sample counts the verification rule needs.

    python benchmarks/bench_mf_small_delta.py [--samples N]   # prints the RESULTS.md rows (default N = 5·10⁷)

Issue 48 asks for the fixed-bins and b-min-sep comparisons at δ = 1e-6 as well as 1e-3: validity (the bound never
below the Monte Carlo lower confidence limit, both directions) and tightness (the bound over the estimate). For each
configuration: the valid upper bound ε_U that ``mf_epsilon`` reports (fixed bins: the Rényi bound; b-min-sep: the
unamplified μ-GDP bound), then from N privacy-loss samples per direction

- δ̂(ε_U) and its one-sided 99.9 % lower confidence limit (Chernoff–KL, f ∈ [0, 1]: the smallest d with
  N·KL(δ̂ ‖ d) ≤ log 1000), in each direction: the bound is refuted only if that limit exceeds δ;
- the pointwise lower confidence limit of ε(δ): the smallest ε whose δ's lower confidence limit is ≤ δ;
- the verified estimate under the verification rule (base δ′ from Fact 4.2 of arXiv 2412.16802) and ε_U over it.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dplens.accountant import matrix_factorization as mf
from dplens.accountant import mf_monte_carlo as mc
from dplens.accountant.mf_accounting import mf_epsilon

#: one log(1/α) for every limit: α = 1e-3
LOG_LEVEL = math.log(1000.0)


def _kl(a: float, b: float) -> float:
    def term(x: float, y: float) -> float:
        return 0.0 if x == 0 else x * math.log(x / y)

    return term(a, b) + term(1 - a, 1 - b)


def lower_limit(mean: float, samples: int) -> float:
    """The smallest d ≤ mean with samples·KL(mean ‖ d) ≤ log(1/α) (Chernoff's bound for a mean of [0, 1] values)."""
    if mean <= 0:
        return 0.0
    low, high = 0.0, mean
    for _ in range(200):
        mid = (low + high) / 2
        if samples * _kl(mean, mid) > LOG_LEVEL:
            low = mid
        else:
            high = mid
    return high


def _delta_hat(losses: np.ndarray, epsilon: float) -> float:
    return mc._empirical_delta(losses, epsilon)


def _epsilon_lower_limit(losses: np.ndarray, delta: float) -> float:
    """The smallest ε (to 1e-4) with lower_limit(δ̂(ε)) ≤ δ (δ̂ non-increasing in ε)."""
    low, high = 0.0, max(1.0, float(losses.max()))
    n = losses.size
    if lower_limit(_delta_hat(losses, low), n) <= delta:
        return 0.0
    while high - low > 1e-4:
        mid = (low + high) / 2
        if lower_limit(_delta_hat(losses, mid), n) <= delta:
            high = mid
        else:
            low = mid
    return high


def _row(name: str, bound: float, remove: np.ndarray, add: np.ndarray, delta: float, seconds: float) -> str:
    n = remove.size
    cells = []
    for losses in (remove, add):
        hat = _delta_hat(losses, bound)
        cells.append(f"{hat:.3g} / {lower_limit(hat, n):.3g}")
    limits = [_epsilon_lower_limit(losses, delta) for losses in (remove, add)]
    try:
        base = mc.base_delta(n, delta)
    except ValueError:  # too few samples for the verification rule: the limits above still hold
        verified_cells = "— (too few samples to verify) | —"
    else:
        verified = mc._released(remove, add, samples=n, base=base, delta=delta, seed=0)
        verified_cells = (
            f"{verified.epsilon:.4f} ({verified.epsilon_remove:.4f}, {verified.epsilon_add:.4f}), base δ′ {base:.3g} | "
            f"{bound / verified.epsilon:.2f}"
        )
    holds = all(lower_limit(_delta_hat(losses, bound), n) <= delta for losses in (remove, add))
    return (
        f"| {name} | {delta:g} | {n} | {bound:.4f} | {cells[0]} | {cells[1]} | {limits[0]:.4f}, {limits[1]:.4f} | "
        f"{verified_cells} | {'yes' if holds else 'NO'} | {seconds:.0f} s |"
    )


def fixed_bins(samples: int, delta: float) -> str:
    bands, steps, period, sigma = 4, 64, 16, 1.5
    strategy = mf.bsr_strategy(bands, steps)
    bound = mf_epsilon(
        mechanism="bsr",
        bands=bands,
        sampling="fixed-bins",
        dataset_size=160,
        batch_size=10,
        epochs=steps * 10 / 160,
        noise_multiplier=sigma,
        delta=delta,
    )
    start = time.perf_counter()
    remove, add = mc.fixed_bins_losses(
        strategy, period=period, noise_multiplier=sigma, samples=samples, rng=np.random.default_rng(0)
    )
    seconds = time.perf_counter() - start
    return _row(
        f"fixed bins, bsr {bands} bands, T {steps}, t {period}, σ {sigma:g}", bound.epsilon, remove, add, delta, seconds
    )


def b_min_sep(samples: int, delta: float) -> str:
    bands, steps, separation, rate, sigma = 4, 500, 4, 0.05, 1.0
    c = np.linspace(1.0, 0.3, bands)
    c /= np.linalg.norm(c)
    strategy = mf.banded_toeplitz_strategy(c, steps)
    sens = mf.minsep_sensitivity(strategy, min_separation=separation).value
    from dplens.accountant import conversions

    bound = conversions.gdp_epsilon(sens * (1 + mf.SENSITIVITY_MARGIN) / sigma, delta)
    start = time.perf_counter()
    remove, add = mc.b_min_sep_losses(
        strategy,
        min_separation=separation,
        sampling_rate=rate,
        noise_multiplier=sigma,
        samples=samples,
        rng=np.random.default_rng(0),
    )
    seconds = time.perf_counter() - start
    name = f"b-min-sep, {bands} bands, T {steps}, b {separation}, p {rate:g}, σ {sigma:g} (unamplified bound)"
    return _row(name, bound, remove, add, delta, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5 * 10**7, help="privacy-loss samples per direction")
    args = parser.parse_args()
    print(
        "| configuration | δ | samples per direction | valid upper bound ε_U | remove: δ̂(ε_U) / its 99.9 % lower "
        "limit | add: the same | ε's 99.9 % lower limit (remove, add) | verified estimate (remove, add) | ε_U / "
        "estimate | bound holds | sampling time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run in (fixed_bins, b_min_sep):
        print(run(args.samples, 1e-6), flush=True)


if __name__ == "__main__":
    main()
