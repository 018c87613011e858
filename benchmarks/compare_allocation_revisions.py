"""Random-allocation brackets of two source trees side by side (e.g. before and after a change to the laws).

    git worktree add /tmp/before <commit>
    python benchmarks/compare_allocation_revisions.py /tmp/before > before.jsonl   # one tree per run
    python benchmarks/compare_allocation_revisions.py . > after.jsonl
    python benchmarks/compare_allocation_revisions.py --compare before.jsonl after.jsonl

Each run prints one JSON line per configuration (σ ∈ {0.45 … 0.7}, 2 … 500 steps per epoch, 1 and 10 epochs,
δ ∈ {1e-5, 1e-9}: the heavy-tailed corner) with the certified bracket and the seconds it took; ``--compare`` checks
that every pair of brackets overlaps (both are certified: disjoint ones mean one of them is wrong) and prints the
widths and times.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

CONFIGS = [
    (sigma, steps, epochs, delta)
    for sigma in (0.45, 0.5, 0.55, 0.6, 0.7)
    for steps in (2, 10, 100, 500)
    for epochs in (1, 10)
    for delta in (1e-5, 1e-9)
]


def run(tree: str) -> None:
    sys.path.insert(0, f"{tree}/src")
    from dplens.accountant.compose import Accountant
    from dplens.accountant.samplers import RandomAllocation

    for sigma, steps, epochs, delta in CONFIGS:
        start = time.perf_counter()
        ledger = Accountant().compose(RandomAllocation(noise_multiplier=sigma, steps=steps), epochs)
        result = ledger.epsilon_result(delta)
        row = dict(cfg=[sigma, steps, epochs, delta], lower=result.epsilon_lower, upper=result.epsilon)
        print(json.dumps({**row, "sec": time.perf_counter() - start}), flush=True)


def compare(before_path: str, after_path: str) -> int:
    before = {tuple(row["cfg"]): row for row in map(json.loads, Path(before_path).read_text().splitlines())}
    after = {tuple(row["cfg"]): row for row in map(json.loads, Path(after_path).read_text().splitlines())}
    disjoint = 0
    print("| σ, steps, epochs, δ | before [lower, upper] | width | s | after [lower, upper] | width | s |")
    print("|---|---|---|---|---|---|---|")
    for key, new in after.items():
        old = before[key]
        overlap = new["lower"] <= old["upper"] * (1 + 1e-9) and old["lower"] <= new["upper"] * (1 + 1e-9)
        disjoint += not overlap
        cells = []
        for row in (old, new):
            width = (row["upper"] - row["lower"]) / row["upper"]
            cells.append(f"[{row['lower']:.5f}, {row['upper']:.5f}] | {width:.3%} | {row['sec']:.2f}")
        print(f"| {', '.join(map(str, key))} | {cells[0]} | {cells[1]} |{'' if overlap else ' DISJOINT'}")
    print(f"\n{len(after)} configurations, {disjoint} with disjoint brackets")
    return 1 if disjoint else 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        raise SystemExit(compare(sys.argv[2], sys.argv[3]))
    run(sys.argv[1])
