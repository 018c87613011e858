"""Mixtures of Gaussians (dp-accounting's ``MixtureOfGaussiansDpEvent``) on the PLD route, side by side in one process.

    python benchmarks/bench_mixture.py

dplens's own PLD engine (certified bracket [ε_lower, ε], default tolerance 1e-3) against dp-accounting's
``PLDAccountant(value_discretization_interval=1e-4)`` on the same ledger: ε, wall times, and whether dp-accounting's
(pessimistic) answer lies inside dplens's bracket. Prints a Markdown table for ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import platform
import time
from importlib import metadata

from dp_accounting import dp_event as dpe
from dp_accounting.pld import pld_privacy_accountant

from dplens.accountant.compose import Accountant
from dplens.accountant.events import MixtureOfGaussians

DELTA = 1e-5
CASES = [  # (σ, shifts, probabilities, count)
    (2.0, (0.0, 1.0), (0.9, 0.1), 1000),
    (1.5, (0.0, 1.0, 2.0), (0.5, 0.3, 0.2), 50),
    (1.0, (0.5, 1.0), (0.5, 0.5), 20),
    (3.0, (1.0, 2.0, 3.0), (0.6, 0.3, 0.1), 200),
]


def main() -> None:
    print(
        f"### Mixtures of Gaussians, PLD route ({time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"Python {platform.python_version()}, dp-accounting {metadata.version('dp-accounting')})\n"
    )
    print("Command: `python benchmarks/bench_mixture.py` (one process; δ = 1e-5)\n")
    print("| σ, shifts, probabilities × count | dp-accounting ε (1e-4) | time | dplens [ε_lower, ε] | time | ratio |")
    print("|---|---|---|---|---|---|")
    for sigma, shifts, probs, count in CASES:
        event = MixtureOfGaussians(standard_deviation=sigma, sensitivities=shifts, sampling_probs=probs)
        start = time.perf_counter()
        ours = Accountant().compose(event, count=count).epsilon_result(DELTA, method="pld")
        ours_time = time.perf_counter() - start
        start = time.perf_counter()
        reference = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        reference.compose(dpe.MixtureOfGaussiansDpEvent(sigma, list(shifts), list(probs)), count)
        theirs = reference.get_epsilon(DELTA)
        theirs_time = time.perf_counter() - start
        inside = ours.epsilon_lower <= theirs <= ours.epsilon
        print(
            f"| σ={sigma}, c={shifts}, p={probs} ×{count} | {theirs:.6f} | {theirs_time:.2f} s | "
            f"[{ours.epsilon_lower:.6f}, {ours.epsilon:.6f}]{'' if inside else ' (outside!)'} | {ours_time:.3f} s | "
            f"{theirs_time / ours_time:.0f}× |"
        )


if __name__ == "__main__":
    main()
