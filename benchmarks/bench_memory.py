"""Peak memory of the distinguishing game against the number of trials: it must not grow with it.

    python benchmarks/bench_memory.py [--trials 1e6,1e7,1e8] [--mechanism laplace|gaussian] [--workers W]
                                      [--write PATH]

Each audit runs in a fresh Python process (``games.audit`` on the mechanism, default strategy and score), which
reports its own peak resident set size (``getrusage`` ``ru_maxrss``) and, with ``--workers`` > 1, the largest peak
of its worker processes. The claim (issue 18): the peak at 10⁸ trials per side is within 1.3× of the peak at 10⁶.
Memory is a property of the code, not of the machine's load, but the wall times printed alongside are not: the
machine is a shared 2-core VM.

``--write PATH`` replaces (or appends) the table in PATH (benchmarks/RESULTS.md), under a heading with the command:
one section for one worker, one per number of workers otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from results_md import write_section  # benchmarks/ is sys.path[0] when run as a script

CHILD = r"""
import json, resource, sys, time
from dplens.auditing import games
from dplens.mechanisms.additive import GaussianMechanism, LaplaceMechanism

mechanism_name, trials, workers = sys.argv[1], int(float(sys.argv[2])), int(sys.argv[3])
mechanism = LaplaceMechanism(scale=1.0) if mechanism_name == "laplace" else GaussianMechanism(noise_multiplier=1.0)
delta = 0.0 if mechanism_name == "laplace" else 1e-5
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
result = games.audit(mechanism, trials=trials, delta=delta, claimed_epsilon=1.0, seed=0, workers=workers)
elapsed = time.perf_counter() - start
scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
print(json.dumps({
    "trials": trials,
    "workers": workers,
    "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20,
    "baseline_mib": before * scale / 2**20,
    "worker_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale / 2**20,
    "seconds": elapsed,
    "epsilon_lower_bound": result.epsilon_lower_bound,
    "pilot_trials": result.pilot_trials,
    "chunks": result.chunks,
}))
"""


def measure(mechanism: str, trials: float, workers: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mechanism, repr(trials), str(workers)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict], reference: dict) -> str:
    lines = [
        "| trials / side | workers | chunks | pilot / side | peak RSS (MiB) | ratio to 1e6 | worker peak (MiB) | "
        "time (s) | ε lower bound |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = row["peak_mib"] / reference["peak_mib"]
        worker = f"{row['worker_peak_mib']:.0f}" if row["workers"] > 1 else "–"
        lines.append(
            f"| {row['trials']:.0e} | {row['workers']} | {row['chunks']} | {row['pilot_trials']:.0e} | "
            f"{row['peak_mib']:.0f} | {ratio:.3f} | {worker} | {row['seconds']:.1f} | "
            f"{row['epsilon_lower_bound']:.4f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", default="1e6,1e7,1e8", help="comma-separated trials per side")
    parser.add_argument("--mechanism", choices=["laplace", "gaussian"], default="laplace")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--write", type=Path, help="replace (or append) its section of this file (RESULTS.md)")
    args = parser.parse_args()
    sizes = [float(t) for t in args.trials.split(",")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for trials in sizes:
        row = measure(args.mechanism, trials, args.workers)
        rows.append(row)
        print(json.dumps(row), flush=True)
    reference = next((r for r in rows if r["trials"] == 10**6), rows[0])
    text = table(rows, reference)
    largest = rows[-1]["peak_mib"] / reference["peak_mib"]
    verdict = "met" if largest <= 1.3 else "NOT met"
    summary = (
        f"Peak RSS at {rows[-1]['trials']:.0e} / {reference['trials']:.0e} trials per side: {largest:.3f}× "
        f"(target ≤ 1.3×: **{verdict}**)."
    )
    print(text)
    print(summary)
    if args.write is not None:
        command = "python benchmarks/bench_memory.py " + " ".join(sys.argv[1:])
        stamp = datetime.date.today().isoformat()
        key = "bench_memory" if args.workers == 1 else f"bench_memory_{args.workers}_workers"
        heading = "### Audit memory against the number of trials"
        if args.workers > 1:
            heading = f"#### {args.workers} workers"
        write_section(
            args.write,
            key,
            f"{heading} ({stamp}, {platform.machine()}, Python {platform.python_version()}; {args.mechanism}, "
            f"load average {load:.2f} at the start)\n\nCommand: `{command}`\n\n{text}\n\n{summary}\n",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
