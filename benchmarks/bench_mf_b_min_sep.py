"""b-min-sep BandMF: dplens's verified Monte Carlo estimate against jax_privacy 2.0's sampler (issue 48).

    python benchmarks/bench_mf_b_min_sep.py [--samples N] [--opake PYTHON]   # prints the RESULTS.md rows

For each configuration (a non-negative banded Toeplitz strategy of ``bands`` coefficients, T steps, separation b, the
rate p of jax_privacy's ``BMinSepSampling`` with its warm start, σ): the seconds each library takes to draw ``N``
privacy-loss samples per direction (both processes warm: imports and the first call excluded, best of two; dplens on
its default worker threads, one per CPU, and on one; "cores busy" is the call's CPU time over its wall time), dplens's
verified ε at δ = 1e-3 beside the unamplified bound, and, on the *same* noise draws (the P-samples of dplens), the
largest difference between jax_privacy's privacy loss and dplens's, whose recursion is checked against the exact
sum over participation patterns in tests/accountant/test_mf_monte_carlo.py: for b ≥ 3 bands jax_privacy's loss
reverses the truncated column norms of the last b − 1 steps (``squared_norms[-c.size+1:] = cumsum(c²)[:-1]``, where
the column of step T − r keeps its first r coefficients).

``--opake PYTHON`` (a Python 3.13 with ``opake==0.16.1``): opake-dpftrl's own b-min-sep accountant (Monte Carlo PLD,
``b_min_sep(mf_gaussian(σ, band_mf_strategy(bands=b)), n_steps=T, p0=B/N)``, its BandMF coefficients optimised by
opake for T) beside dplens's verified estimate on the *same* coefficients (read off opake's strategy), 10⁶ samples
per direction.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

import numpy as np

from dplens.accountant import conversions
from dplens.accountant import matrix_factorization as mf
from dplens.accountant import mf_monte_carlo as mc

#: (bands, T, b, p, σ)
CASES = [(4, 500, 4, 0.05, 1.0), (8, 500, 8, 0.05, 1.0), (8, 2000, 16, 0.02, 1.5)]


def _coefficients(bands: int) -> np.ndarray:
    c = np.linspace(1.0, 0.3, bands)
    return c / np.linalg.norm(c)


def _best(function, repeats: int = 2) -> tuple[float, float]:
    """(best wall seconds, the CPU seconds of that call: how many cores it kept busy)."""
    times = []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        function()
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    return min(times)


def _row(case, samples: int) -> str:
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation

    bands, steps, separation, rate, sigma = case
    c = _coefficients(bands)
    strategy = mf.banded_toeplitz_strategy(c, steps)

    def ours_on(workers: int | None) -> None:
        mc.b_min_sep_losses(
            strategy,
            min_separation=separation,
            sampling_rate=rate,
            noise_multiplier=sigma,
            samples=samples,
            rng=np.random.default_rng(0),
            workers=workers,
        )

    ours, one = _best(lambda: ours_on(None)), _best(lambda: ours_on(1))
    plan = batch_selection.BMinSepSampling(sampling_prob=rate, iterations=steps, min_sep=separation, warm_start=True)

    def theirs_both() -> None:
        for positive in (True, False):
            sample_generation.get_privacy_loss_sample(
                plan, sigma, c, seed=1, positive_sample=positive, num_samples=samples
            )

    theirs = _best(theirs_both)
    estimate = mc.b_min_sep_monte_carlo(
        strategy,
        min_separation=separation,
        sampling_rate=rate,
        noise_multiplier=sigma,
        delta=1e-3,
        samples=samples,
        seed=0,
    )
    sens = mf.minsep_sensitivity(strategy, min_separation=separation).value
    unamplified = conversions.gdp_epsilon(sens * (1 + mf.SENSITIVITY_MARGIN) / sigma, 1e-3)
    # The same noise through both losses (P-samples: y = σz + Cx).
    rng = np.random.default_rng(3)
    y = rng.standard_normal((steps, 2000)) * sigma
    rows, cols = mc._participation_rows(steps, separation, rate, 2000, rng)
    for band, value in enumerate(c.tolist()):
        inside = cols + band < steps
        y[cols[inside] + band, rows[inside]] += value
    our_loss = mc._b_min_sep_loss(mc._window_dots(y, c), c, separation, rate, sigma)
    their_loss = sample_generation.compute_privacy_loss(plan, y, sigma, c)
    gap = float(np.max(np.abs(np.asarray(their_loss) - our_loss)))
    return (
        f"| {bands}, {steps}, {separation}, {rate:g}, {sigma:g} | {samples} | {theirs[0]:.2f} s "
        f"({theirs[1] / theirs[0]:.2f}) | {ours[0]:.2f} s ({ours[1] / ours[0]:.2f}) | {theirs[0] / ours[0]:.1f}× | "
        f"{one[0]:.2f} s | {theirs[0] / one[0]:.1f}× | {estimate.epsilon:.4f} ({estimate.epsilon_remove:.4f}, "
        f"{estimate.epsilon_add:.4f}) | {unamplified:.3f} | {gap:.2e} |"
    )


#: (bands = b, T, p0 = B/N, σ, δ) for the opake comparison
OPAKE_CASES = [(4, 40, 0.1, 1.0, 1e-3), (8, 200, 0.05, 1.0, 1e-3)]

_OPAKE = """
import json, sys, time
import numpy as np
from opake.dpftrl.accounting.amplification import b_min_sep
from opake.dpftrl.accounting.mechanisms import mf_gaussian
from opake.dpftrl.noise import band_mf_strategy
bands, steps, p0, sigma, delta = json.loads(sys.argv[1])
process = b_min_sep(mf_gaussian(sigma, band_mf_strategy(bands=bands)), n_steps=steps, p0=p0)
start = time.perf_counter()
epsilon = process.epsilon_at(delta)
seconds = time.perf_counter() - start
coefficients = np.asarray(process.inner.strategy.coefficients(n_steps=steps)).ravel().tolist()
print(json.dumps({"epsilon": epsilon, "seconds": seconds, "coefficients": coefficients}))
"""


def _opake_rows(python: str) -> list[str]:
    rows = [
        "| bands = b, T, p0 = B/N, σ, δ | opake-dpftrl 0.16.1 ε (its MC PLD) | its time | dplens verified ε (remove, "
        "add), 10⁶ samples per direction, seed 0 | dplens time |",
        "|---|---|---|---|---|",
    ]
    for bands, steps, p0, sigma, delta in OPAKE_CASES:
        done = subprocess.run(
            [python, "-c", _OPAKE, json.dumps([bands, steps, p0, sigma, delta])],
            capture_output=True,
            text=True,
            check=True,
        )
        theirs = json.loads(done.stdout.strip().splitlines()[-1])
        strategy = mf.banded_toeplitz_strategy(theirs["coefficients"], steps)
        start = time.perf_counter()
        ours = mc.b_min_sep_monte_carlo(
            strategy,
            min_separation=bands,
            sampling_rate=mc.b_min_sep_rate(dataset_size=round(1000 / p0), batch_size=1000, min_separation=bands),
            noise_multiplier=sigma,
            delta=delta,
            samples=10**6,
            seed=0,
        )
        seconds = time.perf_counter() - start
        rows.append(
            f"| {bands}, {steps}, {p0:g}, {sigma:g}, {delta:g} | {theirs['epsilon']:.4f} | {theirs['seconds']:.1f} s | "
            f"{ours.epsilon:.4f} ({ours.epsilon_remove:.4f}, {ours.epsilon_add:.4f}) | {seconds:.1f} s |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000, help="privacy-loss samples per direction")
    parser.add_argument("--opake", metavar="PYTHON", help="a Python with opake 0.16.1: compare its b-min-sep ε")
    args = parser.parse_args()
    if args.opake:
        print("\n".join(_opake_rows(args.opake)))
        return
    print(
        "| bands, T, b, p, σ | samples per direction | jax_privacy 2.0 (cores busy) | dplens (cores busy) | ratio | "
        "dplens, one worker | ratio | dplens verified ε at δ = 1e-3 (remove, add) | unamplified ε | "
        "max abs loss gap, same draws |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case in CASES:
        print(_row(case, args.samples), flush=True)


if __name__ == "__main__":
    main()
