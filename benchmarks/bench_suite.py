"""The default test suite: wall time, CPU time per test, and the slowest tests (issue 45).

Runs ``python -m pytest`` (the README's test command, with any extra arguments after ``--``) with
``DPLENS_TEST_TIMES`` set, so that every test's CPU and wall time is recorded (root conftest.py), and prints the
suite's wall time, the machine's load before and after, and a Markdown table of the slowest tests by CPU time.
With ``--times FILE`` it summarises an earlier run's times instead of running the suite; with ``--before FILE`` the
table shows each test's time in that earlier run beside the new one.

    python benchmarks/bench_suite.py                       # run the suite, print the table of the 30 slowest
    python benchmarks/bench_suite.py --times t.jsonl --before before.jsonl --top 30
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def read_times(path: Path) -> dict[str, dict[str, float]]:
    """Test id → {"cpu", "wall"} (and "start", "worker" where recorded); a test run twice keeps its last time."""
    times: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            times[row["test"]] = {k: row[k] for k in ("cpu", "wall", "start", "worker") if k in row}
    return times


def timeline(times: dict) -> list[str]:
    """Per worker: from its first test's start to its last test's end, the time its tests took and the time it had
    none (collection, fixtures outside the tests, waiting in the serial phase); the run's last test ends at 0 s. Empty
    for a times file written before the start times were recorded."""
    rows = [t for t in times.values() if "start" in t]
    if not rows:
        return []
    end = max(t["start"] + t["wall"] for t in rows)
    begin = min(t["start"] for t in rows)
    lines = [f"timeline: {end - begin:.0f} s from the first test's start to the last test's end"]
    for worker in sorted({t["worker"] for t in rows}):
        mine = [t for t in rows if t["worker"] == worker]
        first, last = min(t["start"] for t in mine), max(t["start"] + t["wall"] for t in mine)
        busy = sum(t["wall"] for t in mine)
        lines.append(
            f"  {worker}: {len(mine)} tests from {first - begin:.0f} s to {last - begin:.0f} s, in tests {busy:.0f} s, "
            f"between tests {last - first - busy:.0f} s, idle after its last test {end - last:.0f} s"
        )
    return lines


def run_suite(extra: list[str]) -> tuple[Path, float, str, str, int]:
    times = Path(tempfile.mkstemp(prefix="dplens-suite-", suffix=".jsonl")[1])
    times.write_text("", encoding="utf-8")
    before = load_average()
    start = time.monotonic()
    code = subprocess.call(
        [sys.executable, "-m", "pytest", *extra], cwd=ROOT, env={**os.environ, "DPLENS_TEST_TIMES": str(times)}
    )
    return times, time.monotonic() - start, before, load_average(), code


def table(times: dict, before: dict | None, top: int) -> str:
    rows = sorted(times.items(), key=lambda kv: -kv[1]["cpu"])[:top]
    head = "| # | test | CPU s | wall s |" + (" before: CPU s | before: wall s |" if before else "")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for rank, (name, t) in enumerate(rows, 1):
        line = f"| {rank} | `{name}` | {t['cpu']:.1f} | {t['wall']:.1f} |"
        if before:
            old = before.get(name)
            line += f" {old['cpu']:.1f} | {old['wall']:.1f} |" if old else " (new) | |"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=Path, help="summarise this times file (JSON lines) instead of running")
    parser.add_argument("--before", type=Path, help="an earlier run's times file, shown beside")
    parser.add_argument("--top", type=int, default=30, help="rows of the table (default 30)")
    parser.add_argument("pytest_args", nargs="*", help="arguments for pytest (after --)")
    args = parser.parse_args(argv)
    code = 0
    if args.times is None:
        path, wall, load_before, load_after, code = run_suite(args.pytest_args)
        print(
            f"suite wall time {wall:.0f} s (pytest exit {code}); load average before {load_before}, after {load_after}"
        )
    else:
        path = args.times
    times = read_times(path)
    cpu = sum(t["cpu"] for t in times.values())
    over = [name for name, t in times.items() if t["cpu"] > 20 or t["wall"] > 60]
    print(f"{len(times)} tests, {cpu:.0f} s of CPU in all; over 20 s CPU or 60 s wall: {len(over)}")
    for line in timeline(times):
        print(line)
    print(table(times, read_times(args.before) if args.before else None, args.top))
    return code


if __name__ == "__main__":
    sys.exit(main())
