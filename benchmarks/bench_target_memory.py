"""Peak memory of a target audit against the output's dimension and the trials: flat in the trials, within the budget.

    python benchmarks/bench_target_memory.py [--grid DIM:TRIALS ...] [--budget SIZE] [--workers W] [--json FILE]
        [--write [PATH]]

Each audit runs in a fresh Python process (:func:`dplens.auditing.target_game.audit_target` on a float32 Gaussian
vector release of DIM coordinates whose first coordinate moves by 0.5 σ between the inputs, like a gradient with
one record's contribution; claim ε = 2 at δ = 10⁻⁵, about the Gaussian mechanism's ε there). The process first
runs a tiny audit (10 coordinates, 100 trials) so that numpy, scipy and scikit-learn are loaded, reads its peak
resident set size (``getrusage`` ``ru_maxrss``), runs the measured audit and reads it again: the difference is
what the audit itself held at its peak, which issue 30 bounds by the memory budget (default: a quarter of the
available memory; ``--budget`` sets one) whatever DIM and TRIALS. The raw outputs column is what holding every
output would take (both sides, pilot and counted trials).

The default grid is issue 30's: 10, 10³, 10⁵ and 10⁶ coordinates at 10⁴ to 10⁶ trials per side where they fit the
time, and the issue's own case (200 000 coordinates, 2 000 trials per side). ``--write PATH`` puts the section in
PATH (benchmarks/RESULTS.md) between its markers, replacing the previous run's (one section per ``--budget``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from results_md import write_section  # benchmarks/ is sys.path[0] when run as a script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
DEFAULT_GRID = [
    "10:10000",
    "10:100000",
    "10:1000000",
    "1000:10000",
    "1000:100000",
    "1000:1000000",
    "100000:10000",
    "100000:100000",
    "200000:2000",
    "1000000:10000",
]

CHILD = r"""
import json, resource, sys, time
import numpy as np
from dplens.auditing.target_game import audit_target
from dplens.auditing.targets import batched

dimension, trials, budget, workers = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] or None, int(sys.argv[4])


def release(d):
    @batched
    def target(data, rng, size):
        out = rng.standard_normal((size, d), dtype=np.float32)
        out[:, 0] += np.float32(0.5 * data)
        return out
    return target


audit_target(release(10), (1, 0), claim_epsilon=1.0, trials=100, seed=1)  # load the libraries
scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
start = time.perf_counter()
if workers > 1:
    sys.path.insert(0, sys.argv[5])
    import bench_target_memory_target as module
    setattr(module, "target", release(dimension))
    target = "bench_target_memory_target:target"
else:
    target = release(dimension)
result = audit_target(
    target, (1, 0), claim_epsilon=2.0, claim_delta=1e-5, trials=trials, seed=0, workers=workers,
    memory_budget=budget,
)
seconds = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
print(json.dumps({
    "dimension": dimension,
    "trials": trials,
    "workers": workers,
    "baseline_bytes": before,
    "peak_bytes": after,
    "audit_bytes": after - before,
    "worker_peak_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale,
    "seconds": seconds,
    "pilot_trials": result.pilot_trials,
    "epsilon_lower_bound": result.epsilon_lower_bound,
    "verdict": result.verdict.value,
    "best_score": result.best_score,
    "memory": result.memory,
}))
"""


def measure(dimension: int, trials: int, budget: str | None, workers: int) -> dict:
    """One audit in a fresh process (its JSON line), or the error it ended with."""
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    if workers > 1:  # worker processes import the target by path: a module whose target the child sets
        (scratch / "bench_target_memory_target.py").write_text("target = None\n")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(dimension), str(trials), budget or "", str(workers), str(scratch)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        return {"dimension": dimension, "trials": trials, "error": last, "seconds": time.perf_counter() - started}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _mib(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def _raw_gb(row: dict) -> str:
    draws = row["trials"] + row.get("pilot_trials", 0) + 16  # counted, pilot and the reproducibility check
    return f"{2 * draws * row['dimension'] * 4 / 1e9:,.3g}"


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| coordinates | trials / side | raw outputs (GB) | budget (MiB) | audit's peak (MiB) | within budget | "
        "peak RSS (MiB) | batch | reduced | s | ε lower bound | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['dimension']:,} | {row['trials']:,} | error: {row['error'][:200]} |")
            continue
        memory = row["memory"]
        within = "yes" if row["audit_bytes"] <= memory["budget_bytes"] else "**no**"
        lines.append(
            f"| {row['dimension']:,} | {row['trials']:,} | {_raw_gb(row)} | {_mib(memory['budget_bytes'])} | "
            f"{_mib(row['audit_bytes'])} | {within} | {_mib(row['peak_bytes'])} | {memory['batch_rows']} | "
            f"{'yes' if memory['reduced'] else 'no'} | {row['seconds']:.0f} | {row['epsilon_lower_bound']:.3f} | "
            f"{row['verdict']} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", nargs="+", default=DEFAULT_GRID, metavar="DIM:TRIALS")
    parser.add_argument("--budget", default=None, help="memory budget of every audit (default: dplens's)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", metavar="FILE", help="save the raw results")
    parser.add_argument("--write", nargs="?", const=str(RESULTS), metavar="PATH", help="append the section")
    args = parser.parse_args(argv)
    try:
        grid = [tuple(int(float(part)) for part in item.split(":")) for item in args.grid]
    except ValueError:
        print(f"--grid takes DIM:TRIALS pairs; got {args.grid}", file=sys.stderr)
        return 2
    rows = []
    for dimension, trials in grid:
        row = measure(dimension, trials, args.budget, args.workers)
        rows.append(row)
        shown = f"error {row['error']}" if "error" in row else f"audit peak {_mib(row['audit_bytes'])} MiB"
        print(f"{dimension:>9,} × {trials:>9,}: {shown}, {row['seconds']:.0f} s", file=sys.stderr, flush=True)
    command = shlex.join(["python", "benchmarks/bench_target_memory.py", *(argv if argv is not None else sys.argv[1:])])
    budget = f", budget {args.budget}" if args.budget else ", default budget"
    lines = [
        f"### Target audit memory against the output's dimension and the trials (issue 30{budget}) "
        f"({time.strftime('%Y-%m-%d')}, {platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores)",
        "",
        f"Command: `{command}`",
        "",
        "A float32 Gaussian vector release whose first coordinate moves by 0.5 σ (claim ε = 2, δ = 1e-5), one "
        "process per audit; the audit's peak is the growth of the process's peak resident set size over a warm "
        "process with the libraries loaded (`ru_maxrss`); raw outputs: what holding every output of both sides "
        "would take.",
        "",
        *table(rows),
        "",
    ]
    section = "\n".join(lines)
    print(section)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "rows": rows}, indent=1))
    if args.write:
        name = "bench_target_memory" + (f"_{args.budget}" if args.budget else "")
        write_section(Path(args.write), name, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
