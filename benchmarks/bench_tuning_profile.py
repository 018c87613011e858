"""Tuning studies (repeat-and-select, issue 49): Papernot–Steinke's RDP bound against dplens's profile bound.

    python benchmarks/bench_tuning_profile.py   # prints the RESULTS.md rows

For three DP-SGD runs (Poisson sampling) and five distributions of the number of runs: one run's ε (dplens's
tightest route), the study's ε by RDP (PS22 Theorems 2 and 6, the route dp-accounting's ``RepeatAndSelectDpEvent``
takes; dplens's agrees with it, benchmarks/bench_privacy_unit.py), by the privacy-profile bound of
``dplens.accountant.selection_profile`` (derived from the run's profile; not Koskela–Redberg–Wang's theorem), the
reported ε (the smaller, and at least one run's) and the time of the whole ``tuning_epsilon`` call.
"""

from __future__ import annotations

import time

from dplens.accountant.dp_sgd import DpSgdRun
from dplens.accountant.tuning import tuning_epsilon

#: (σ, N, B, epochs, δ)
RUNS = [(1.1, 100_000, 1000, 10, 1e-6), (0.8, 60_000, 256, 10, 1e-5), (0.6, 50_000, 500, 20, 1e-6)]
STUDIES = [("geometric", 10), ("poisson", 10), ("logarithmic", 10), ("geometric", 40), ("poisson", 40)]


def main() -> None:
    print("| run (σ, N, B, epochs, δ) | runs | one run ε | RDP ε | profile ε | reported | profile / RDP | time |")
    print("|---|---|---|---|---|---|---|---|")
    for sigma, n, b, epochs, delta in RUNS:
        run = DpSgdRun(noise_multiplier=sigma, dataset_size=n, batch_size=b, epochs=epochs)
        for distribution, mean in STUDIES:
            start = time.perf_counter()
            out = tuning_epsilon(run, distribution=distribution, mean=mean, delta=delta)
            seconds = time.perf_counter() - start
            print(
                f"| {sigma:g}, {n}, {b}, {epochs:g}, {delta:g} | {distribution}, mean {mean} | "
                f"{out.one_run_epsilon:.4f} | {out.epsilon_rdp:.4f} | {out.epsilon_profile:.4f} | "
                f"{out.epsilon:.4f} | {out.epsilon_profile / out.epsilon_rdp:.3f} | {seconds:.1f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
