"""Target-audit benchmark: trials per second for user code, and third-party mechanisms through the adapters.

    python benchmarks/bench_targets.py [--trials N] [--repeat R] [--no-thirdparty]

Prints a Markdown section for benchmarks/RESULTS.md (paste it with the command). Throughput is counted trials per
side per second of a whole audit (pilot, reproducibility check, probe, scoring and float checks included), for:

- a Python-level scalar target ``f(data, rng)`` (the textbook float Laplace of examples/targets),
- the same target declared batched ``f(data, rng, size)``,
- both with a 2-worker process pool (workers import the target by its path).

Repetitions are interleaved and the median is reported; on the shared 2-core VM the ratios are the claim.
Then one audit per third-party mechanism (diffprivlib, OpenDP; skipped without the [thirdparty] extra): the bound,
the verdict and the time.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "targets"


def _throughput(target: str, pair: str, trials: int, workers: int) -> tuple[float, float]:
    from dplens.auditing.target_game import audit_target

    start = time.perf_counter()
    result = audit_target(target, pair, claim_epsilon=1.0, trials=trials, seed=0, workers=workers)
    elapsed = time.perf_counter() - start
    return trials / elapsed, result.epsilon_lower_bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-thirdparty", action="store_true")
    args = parser.parse_args()
    os.chdir(EXAMPLES)
    sys.path.insert(0, str(EXAMPLES))

    cases = [
        ("scalar f(data, rng)", "mechanisms:textbook_laplace", 1),
        ("batched f(data, rng, size)", "mechanisms:noisy_sum_batched", 1),
        ("scalar, 2 workers", "mechanisms:textbook_laplace", 2),
        ("batched, 2 workers", "mechanisms:noisy_sum_batched", 2),
    ]
    rates: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    bounds: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, target, workers in cases:
            rate, bound = _throughput(target, "pair.json", args.trials, workers)
            rates[name].append(rate)
            bounds[name] = bound
    base = statistics.median(rates[cases[0][0]])
    print(
        f"### Target audits: throughput and third-party mechanisms ({time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__})\n"
    )
    print(f"Command: `python benchmarks/bench_targets.py --trials {args.trials} --repeat {args.repeat}`\n")
    print("| target | trials/s per side (median) | vs scalar | ε lower bound (claim 1) |")
    print("|---|---|---|---|")
    for name, _, _ in cases:
        rate = statistics.median(rates[name])
        print(f"| {name} | {rate:,.0f} | {rate / base:.2f}× | {bounds[name]:.3f} |")
    if args.no_thirdparty:
        return
    try:
        import diffprivlib  # noqa: F401
        import opendp  # noqa: F401
    except ImportError:
        print("\n(third-party mechanisms skipped: install dplens[thirdparty])")
        return
    from dplens.auditing.target_game import audit_target

    print("\n| mechanism (adapter) | claim (ε, δ) | trials | ε lower bound | verdict | reproducible | time |")
    print("|---|---|---|---|---|---|---|")
    gaussian_claim = 0.5 + 2 * (0.5 * np.log(1e5)) ** 0.5  # 0.5-zCDP at δ = 1e-5 (Bun & Steinke 2016)
    third = [
        ("thirdparty:diffprivlib_laplace", "pair.json", 1.0, 0.0, 100_000),
        ("thirdparty:diffprivlib_gaussian", "pair.json", 1.0, 1e-5, 100_000),
        ("thirdparty:diffprivlib_geometric", "pair.json", 1.0, 0.0, 100_000),
        ("thirdparty:diffprivlib_binary", "pair_rr.json", 1.0, 0.0, 100_000),
        ("thirdparty:diffprivlib_exponential", "pair.json", 1.0, 0.0, 20_000),
        ("thirdparty:opendp_laplace", "pair_float.json", 1.0, 0.0, 20_000),
        ("thirdparty:opendp_discrete_laplace", "pair_int.json", 1.0, 0.0, 20_000),
        ("thirdparty:opendp_gaussian", "pair_float.json", gaussian_claim, 1e-5, 20_000),
        ("thirdparty:opendp_discrete_gaussian", "pair_int.json", gaussian_claim, 1e-5, 20_000),
        ("thirdparty:opendp_randomized_response", "pair_bool.json", 1.0, 0.0, 20_000),
    ]
    for target, pair, epsilon, delta, trials in third:
        start = time.perf_counter()
        result = audit_target(target, pair, claim_epsilon=epsilon, claim_delta=delta, trials=trials, seed=0)
        elapsed = time.perf_counter() - start
        print(
            f"| {target.split(':')[1]} | ({epsilon:.3g}, {delta:g}) | {trials:,} | {result.epsilon_lower_bound:.3f} "
            f"| {result.verdict.value} | {str(result.reproducible).lower()} | {elapsed:.1f} s |"
        )


if __name__ == "__main__":
    main()
