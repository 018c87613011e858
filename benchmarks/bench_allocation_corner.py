"""Balls-and-bins brackets in the low-noise, few-step corner of issue 47's regime (σ ≥ 0.55, up to 10 epochs).

    python benchmarks/bench_allocation_corner.py [--part 0 --parts 2]   (one JSON line per point; run parts in parallel)

σ ∈ {0.55, 0.6, 0.7} × steps per epoch t ∈ {2, 5, 20, 50, 200} × epochs ∈ {1, 3, 10} × δ ∈ {1e-5, 1e-6, 1e-9}: one
``epsilon_result`` each (a fresh allocation every epoch). Printed: the bracket, its relative width, the seconds and
the bracket's note; the last line counts the points in the regime (ε ≤ 10) wider than 0.5 %.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

from dplens.accountant.compose import Accountant
from dplens.accountant.samplers import RandomAllocation

GRID = list(itertools.product((0.55, 0.6, 0.7), (2, 5, 20, 50, 200), (1, 3, 10), (1e-5, 1e-6, 1e-9)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--parts", type=int, default=1)
    args = parser.parse_args()
    wide = 0
    for k, (sigma, steps, epochs, delta) in enumerate(GRID):
        if k % args.parts != args.part:
            continue
        started = time.perf_counter()
        ledger = Accountant().compose(RandomAllocation(noise_multiplier=sigma, steps=steps), epochs)
        result = ledger.epsilon_result(delta)
        width = (result.epsilon - (result.epsilon_lower or 0.0)) / result.epsilon
        wide += width > 5e-3 and result.epsilon <= 10
        row = dict(sigma=sigma, steps=steps, epochs=epochs, delta=delta, lower=result.epsilon_lower)
        row.update(upper=result.epsilon, width=width, seconds=time.perf_counter() - started, note=result.bracket_note)
        print(json.dumps(row), flush=True)
    print(json.dumps({"in_regime_wider_than_0.5%": wide}))


if __name__ == "__main__":
    main()
