"""Float checks at the audit's speed (issue 40): a float-checked target audit against the value-only one, side by side.

    python benchmarks/bench_floats.py [--trials N ...] [--workers W ...] [--repeat R] [--counts D:D' ...]
        [--json FILE] [--compare FILE] [--label TEXT] [--write [PATH]]

Three batched targets add numpy noise to a count, as a new user would write them: ``count + rng.normal(0, σ)``
(the Gaussian mechanism at (1, 10⁻⁵), σ = √(2 ln(1.25/δ))), ``count + rng.laplace(0, 1)`` and a two-sided
geometric (integers: no float check applies); three more cover the other float models: ``count +
rng.exponential(1)``, the textbook inverse-CDF Laplace on ``rng.random()`` and Python's ``random.expovariate(1)``
(the last two state their sampler and query values in the pair, as the probe cannot see them). Each is audited
with :func:`dplens.audit` at the claim (1, 10⁻⁵), on each pair of counts of ``--counts`` (default 10:9 — D holds
one more record than D′ — and 1:0, where the Gaussian check has the most layers to try), at every ``--trials``
per side (default 10⁶ and 10⁷) and ``--workers`` (default 1 and 2), with the float checks on (the default) and
off (``float_checks=False``: the value-only audit), interleaved, after one warm-up audit of each kind (which also
reads the ziggurat's widths off numpy and runs the log self-test once per process). The table gives the median
seconds of ``--repeat`` runs (default 3 at 10⁶ per side and 1 above), their ratio — what the float check costs —,
and both audits' bounds and verdicts. ``--compare FILE`` adds the ratio of an earlier ``--json`` run (e.g. the
code before issue 40); ``--write`` puts the section in benchmarks/RESULTS.md (or PATH) between its markers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from results_md import write_section  # benchmarks/ is sys.path[0] when run as a script

from dplens.auditing.targets import batched

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
CLAIM = (1.0, 1e-5)
SIGMA = math.sqrt(2.0 * math.log(1.25 / CLAIM[1])) / CLAIM[0]  # the classic Gaussian mechanism, sensitivity 1


@batched
def gaussian_count(data, rng, size):
    """The Gaussian mechanism on a count: numpy's ziggurat normal."""
    return float(sum(data)) + rng.normal(0.0, SIGMA, size=size)


@batched
def laplace_count(data, rng, size):
    """The Laplace mechanism on a count: numpy's inverse-CDF Laplace."""
    return float(sum(data)) + rng.laplace(0.0, 1.0 / CLAIM[0], size=size)


@batched
def geometric_count(data, rng, size):
    """The two-sided geometric mechanism on a count (integers)."""
    p = 1.0 - math.exp(-CLAIM[0])
    return int(sum(data)) + rng.geometric(p, size=size) - rng.geometric(p, size=size)


@batched
def exponential_count(data, rng, size):
    """One-sided exponential noise on a count: numpy's ziggurat exponential."""
    return float(sum(data)) + rng.exponential(1.0 / CLAIM[0], size=size)


@batched
def inverse_cdf_laplace_count(data, rng, size):
    """The textbook inverse-CDF Laplace on a 53-bit uniform."""
    u = rng.random(size) - 0.5
    return float(sum(data)) + -(1.0 / CLAIM[0]) * np.copysign(1.0, u) * np.log(1.0 - 2.0 * np.abs(u))


@batched
def expovariate_count(data, rng, size):
    """Python's random.expovariate on a count (one draw per output in Python)."""
    source = random.Random(int(rng.integers(2**63)))
    count = float(sum(data))
    return np.array([count + source.expovariate(CLAIM[0]) for _ in range(size)])


# By import path (worker processes import them; benchmarks/ is on sys.path), and what the pair must state.
TARGETS = {
    "numpy Gaussian (rng.normal)": ("bench_floats:gaussian_count", None),
    "numpy Laplace (rng.laplace)": ("bench_floats:laplace_count", None),
    "two-sided geometric (integers)": ("bench_floats:geometric_count", None),
    "numpy exponential (rng.exponential)": ("bench_floats:exponential_count", None),
    "inverse-CDF Laplace (rng.random)": ("bench_floats:inverse_cdf_laplace_count", "inverse-cdf-laplace"),
    "Python random.expovariate": ("bench_floats:expovariate_count", "python-expovariate"),
}


def audit(target: tuple, counts: tuple[int, int], trials: int, workers: int, float_checks: bool) -> dict:
    """One audit: its seconds, bound and verdict."""
    import dplens

    path, sampler = target
    pair: object = ([1] * counts[0], [1] * counts[1])
    if sampler is not None:
        pair = {"data": pair[0], "neighbour": pair[1], "query": [float(c) for c in counts]}
        pair["noise"] = {"sampler": sampler, "scale": 1.0 / CLAIM[0] if sampler != "python-expovariate" else CLAIM[0]}
    start = time.perf_counter()
    result = dplens.audit(path, pair, trials=trials, claim=CLAIM, workers=workers, float_checks=float_checks)
    return {
        "seconds": time.perf_counter() - start,
        "bound": result.epsilon_lower_bound,
        "verdict": result.verdict.value,
    }


def measure(trials: list[int], workers: list[int], repeat: int | None, pairs: list[tuple[int, int]]) -> list[dict]:
    for target in TARGETS.values():  # warm-up: imports, the ziggurat's widths, the log self-test
        for checks in (False, True):
            audit(target, pairs[0], 10_000, 1, checks)
    rows = []
    for counts in pairs:
        for n in trials:
            for w in workers:
                for name, target in TARGETS.items():
                    rows.append(measure_one(name, target, counts, n, w, repeat))
    return rows


def measure_one(name: str, target: tuple, counts: tuple[int, int], n: int, w: int, repeat: int | None) -> dict:
    """The value-only and the float-checked audit of one target, interleaved ``repeat`` times: medians."""
    runs = repeat if repeat is not None else (3 if n <= 1_000_000 else 1)
    done: dict[bool, list[dict]] = {False: [], True: []}
    for _ in range(runs):
        for checks in (False, True):
            done[checks].append(audit(target, counts, n, w, checks))
    off, on = (statistics.median(r["seconds"] for r in done[c]) for c in (False, True))
    row = {"target": name, "counts": list(counts), "trials": n, "workers": w, "runs": runs}
    row |= {"value_only_s": off, "float_checked_s": on, "ratio": on / off}
    for checks, tag in ((False, "off"), (True, "on")):
        row |= {f"bound_{tag}": done[checks][-1]["bound"], f"verdict_{tag}": done[checks][-1]["verdict"]}
    print(
        f"{name}, counts {counts[0]}:{counts[1]}, {n:,} trials, {w} worker(s): {off:.2f} s value-only, "
        f"{on:.2f} s float-checked ({on / off:.2f}×)",
        file=sys.stderr,
        flush=True,
    )
    return row


def table(rows: list[dict], earlier: dict | None) -> list[str]:
    def key(r: dict) -> tuple:
        return r["target"], tuple(r.get("counts", (10, 9))), r["trials"], r["workers"]

    before = {key(r): r for r in (earlier or {}).get("rows", [])}
    head = "| target | counts | trials / side | workers | value-only (s) | float-checked (s) | ratio |"
    rule = "|---|---|---|---|---|---|---|"
    if earlier:
        head += f" ratio before ({earlier.get('label', 'earlier run')}) |"
        rule += "---|"
    head += " bound, value-only | bound, float-checked | verdict, float-checked |"
    rule += "---|---|---|"
    lines = [head, rule]
    for r in rows:
        line = (
            f"| {r['target']} | {r['counts'][0]} vs {r['counts'][1]} | {r['trials']:,} | {r['workers']} | "
            f"{r['value_only_s']:.2f} | "
            f"{r['float_checked_s']:.2f} | **{r['ratio']:.2f}×** |"
        )
        if earlier:
            old = before.get(key(r))
            line += f" {old['ratio']:.1f}× ({old['float_checked_s']:.1f} s) |" if old else " — |"
        line += f" {r['bound_off']:.4g} | {r['bound_on']:.4g} | {r['verdict_on']} |"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per audit (default 3 at ≤ 10⁶ per side, 1 above)"
    )
    parser.add_argument("--counts", nargs="+", default=["10:9", "1:0"], metavar="D:D'", help="pairs of counts")
    parser.add_argument("--json", metavar="FILE", help="save the raw numbers")
    parser.add_argument("--compare", metavar="FILE", help="an earlier --json file: its ratios as a 'before' column")
    parser.add_argument("--label", default="", help="what this run measures (kept in --json)")
    parser.add_argument("--write", nargs="?", const=str(RESULTS), metavar="PATH", help="write the RESULTS.md section")
    args = parser.parse_args(argv)
    try:
        pairs = [(int(d), int(n)) for d, n in (item.split(":") for item in args.counts)]
    except ValueError:
        print(f"--counts takes D:D' pairs of integers; got {args.counts}", file=sys.stderr)
        return 2
    if any(n < 1_000 for n in args.trials) or any(w < 1 for w in args.workers) or (args.repeat or 1) < 1:
        print("--trials must be ≥ 1000, --workers and --repeat ≥ 1", file=sys.stderr)
        return 2
    earlier = json.loads(Path(args.compare).read_text()) if args.compare else None
    started = time.perf_counter()
    rows = measure(args.trials, args.workers, args.repeat, pairs)
    command = shlex.join(["python", "benchmarks/bench_floats.py", *(argv if argv is not None else sys.argv[1:])])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"### Float checks at the audit's speed (issue 40) ({time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cores)",
        "",
        f"Command: `{command}`",
        "",
        "`dplens.audit` of a batched target adding numpy noise to a count (D holds the first count of records, D′ "
        f"the second), claim (1, 1e-5), σ = {SIGMA:.4f}; median seconds of the runs (3 at ≤ 10⁶ per side, 1 "
        "above), after a warm-up audit; ratio = float-checked / value-only (`float_checks=False`), same machine, "
        f"same run. The whole benchmark took {time.perf_counter() - started:.0f} s (load average {load:.1f} at "
        "its end).",
        "",
        *table(rows, earlier),
        "",
    ]
    section = "\n".join(lines)
    print(section)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "label": args.label, "rows": rows}, indent=1))
    if args.write:
        write_section(Path(args.write), "bench_floats", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
