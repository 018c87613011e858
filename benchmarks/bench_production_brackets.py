"""Certified brackets at production scale (issue 47): width, time and peak memory against dp-accounting's PLD.

    python benchmarks/bench_production_brackets.py [--fine] [--skip-dpa] [--sampling NAME] [--opake PYTHON] [--write]
    python benchmarks/bench_production_brackets.py calibrate
    python benchmarks/bench_production_brackets.py grid [--cap SECONDS] [--delta D ...] [--jsonl FILE] [--write]

``calibrate``: σ calibrated to ε = 1 at N = 2e7, B = 2000, 10 epochs, δ = 1e-6 (10⁴ steps per epoch) under Poisson
and balls-and-bins, each ``dplens dp-sgd --target-epsilon`` a whole process (time, peak RSS, load average before and
after): balls-and-bins' σ must not exceed Poisson's (Feldman & Shenfeld, arXiv 2602.17284) and ε must be ≤ 1.

Each dplens row is one ``dp_sgd_epsilon`` call in a fresh interpreter (imports included: what a user waits for), its
wall time and the process's peak resident memory. Poisson rows are compared with dp-accounting's PLD (test-time
reference only) at value_discretization_interval 1e-4 — and 2e-5 with ``--fine`` — pessimistic (connect-the-dots)
and optimistic (privacy buckets), each in its own process with a time limit: dplens's upper end must not fall below
their optimistic value and its lower end must not exceed their pessimistic one. "in regime" marks issue 47's regime
(q ≥ 5e-6, σ ≥ 0.45, T ≤ 2e6; balls-and-bins up to 10⁴ steps per epoch, 10 epochs, σ ≥ 0.55), where the bracket
must be ≤ 0.5 % wide; outside it a wider bracket must carry its ``bracket_note``.

``--opake PYTHON``: also opake 0.16.1's ε for each row (``poisson(gaussian(σ), q) * T``; balls-and-bins as its
``k_out_of_t(…, k = epochs, t = T, allocation="block")``: each record once in each epoch's block), a whole process of
that interpreter (opake imports on Python 3.13 only here); its value, an upper bound, must not be below dplens's
certified lower end.

``grid``: issue 47's grid for Poisson sampling, in-process: q ∈ {1e-6 … 0.1} by decades, σ ∈ {0.4, 0.45, 0.5, 0.6,
0.8, 1, 2, 5}, T ∈ {1e3 … 1e7} by decades (B = 100, N = B/q, T steps), restricted to 0.01 ≤ upper ≤ 50. Each point is
one ``dp_sgd_epsilon`` call under a time cap (``--cap``; a point beyond it is recorded as such); a point whose RDP
upper bound is below 0.01 is out of range without the PLD (ε ≤ RDP's). On every point in range the bracket must be
≤ 0.5 % wide or carry a ``bracket_note`` stating its width and reason (in issue 47's regime: ≤ 0.5 %, no exception),
in the result's text (the CLI's lines) and JSON (``to_dict``), and neither may hold Infinity or NaN.

``--write`` replaces this script's section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# (sampling, N, B, epochs, σ, δ, in regime)
ROWS = [
    ("poisson", 10**5, 1000, 10, 1.0, 1e-6, True),
    ("poisson", 10**6, 1000, 10, 0.8, 1e-6, True),
    ("poisson", 10**6, 100, 3, 0.57337, 1e-6, True),
    ("poisson", 10**7, 100, 3, 0.6, 1e-6, True),
    ("poisson", 2 * 10**7, 100, 10, 0.45, 1e-9, True),
    ("poisson", 2 * 10**7, 100, 10, 0.45, 1e-5, True),
    ("poisson", 10**8, 100, 1, 0.5, 1e-6, False),
    ("balls-and-bins", 10**9, 1000, 1, 1.0, 1e-6, False),
    ("balls-and-bins", 10**9, 10, 1, 0.6, 1e-6, False),
    ("balls-and-bins", 2 * 10**7, 2000, 10, 0.7, 1e-6, True),
    ("balls-and-bins", 2 * 10**7, 2000, 10, 0.6, 1e-6, True),
    ("balls-and-bins", 2 * 10**7, 2000, 10, 0.55, 1e-6, True),
    ("balls-and-bins", 2 * 10**7, 2000, 10, 0.55, 1e-5, True),
    ("balls-and-bins", 2 * 10**7, 2000, 10, 0.7, 1e-9, True),
    ("balls-and-bins", 2 * 10**7, 2000, 10, 0.55, 1e-9, True),
]

_DPLENS = """
import json, resource, time
start = time.perf_counter()
from dplens.accountant.dp_sgd import dp_sgd_epsilon
r = dp_sgd_epsilon(dataset_size={n}, batch_size={b}, epochs={epochs}, noise_multiplier={sigma}, delta={delta},
                   sampling={sampling!r})
print(json.dumps({{"upper": r.epsilon, "lower": r.epsilon_lower, "note": r.bracket_note, "steps": r.steps,
                  "seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

_DPA = """
import json, time, warnings
warnings.simplefilter("ignore")
start = time.perf_counter()
from dp_accounting.pld import privacy_loss_distribution as pl
step = pl.from_gaussian_mechanism(standard_deviation={sigma}, sampling_prob={q}, value_discretization_interval={iv},
                                  pessimistic_estimate={pess}, use_connect_dots={pess})
eps = step.self_compose({steps}).get_epsilon_for_delta({delta})
print(json.dumps({{"epsilon": eps, "seconds": time.perf_counter() - start}}))
"""


_OPAKE = """
import json, resource, time
start = time.perf_counter()
import opake.dpsgd.accounting as dpsgd_acc
if {sampling!r} == "poisson":
    training = dpsgd_acc.poisson(dpsgd_acc.gaussian({sigma}), sample_rate={q}) * {steps}
else:  # each record once in each epoch's block of steps, at a uniformly random step: balls-and-bins
    training = dpsgd_acc.k_out_of_t(dpsgd_acc.gaussian({sigma}), k={epochs}, t={steps}, allocation="block")
eps = training.epsilon_at({delta})
print(json.dumps({{"epsilon": eps, "seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def _process(code: str, timeout: float, python: str | None = None) -> dict | None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    try:
        out = subprocess.run(
            [python or sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=True
        )
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as err:
        return {"error": type(err).__name__}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _dpa(q: float, sigma: float, steps: int, delta: float, interval: float, pess: bool, timeout: float) -> tuple:
    code = _DPA.format(sigma=sigma, q=q, iv=interval, pess=pess, steps=steps, delta=delta)
    got = _process(code, timeout)
    if got is None or "error" in got:
        return f"— ({got.get('error') if got else 'none'})", None
    return f"{got['epsilon']:.5f} ({got['seconds']:.0f} s)", got["epsilon"]


_CALIBRATE = """
import json, resource, time
start = time.perf_counter()
from dplens.accountant.dp_sgd import dp_sgd_noise_multiplier
r = dp_sgd_noise_multiplier(dataset_size=20_000_000, batch_size=2000, epochs=10, target_epsilon=1.0, delta=1e-6,
                            sampling={sampling!r})
print(json.dumps({{"sigma": r.noise_multiplier, "upper": r.epsilon, "lower": r.epsilon_lower,
                  "seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def calibrate() -> None:
    """The ``calibrate`` case (see the module): one table row per sampler."""
    print("| sampling | σ | ε [lower, upper] | process | peak | load before / after |")
    print("|---|---|---|---|---|---|")
    sigmas = {}
    for sampling in ("poisson", "balls-and-bins"):
        before = os.getloadavg()[0]
        got = _process(_CALIBRATE.format(sampling=sampling), 1800)
        after = os.getloadavg()[0]
        if "error" in got:
            print(f"| {sampling} | {got['error']} |", flush=True)
            continue
        sigmas[sampling] = got["sigma"]
        print(
            f"| {sampling} | {got['sigma']:.6f} | [{got['lower']:.6f}, {got['upper']:.6f}] | {got['seconds']:.1f} s | "
            f"{got['peak_mb']:.0f} MB | {before:.1f} / {after:.1f} |",
            flush=True,
        )
    if len(sigmas) == 2:
        ok = sigmas["balls-and-bins"] <= sigmas["poisson"]
        print(f"balls-and-bins σ ≤ Poisson σ: {'yes' if ok else 'NO'}")


GRID_Q = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1)
GRID_SIGMA = (0.4, 0.45, 0.5, 0.6, 0.8, 1.0, 2.0, 5.0)
GRID_T = (10**3, 10**4, 10**5, 10**6, 10**7)
GRID_BATCH = 100
WIDTH = 5e-3  # issue 47: brackets wider than this (relative) must say how wide and why


class _CappedError(Exception):
    """A grid point ran past its time cap."""


def _in_regime(q: float, sigma: float, steps: int) -> bool:
    return q >= 5e-6 and sigma >= 0.45 and steps <= 2 * 10**6  # and ε ≤ 10, known once the point has run


def _non_finite(value) -> bool:
    """Whether a result's dictionary holds a non-finite float anywhere (it would print Infinity/NaN)."""
    import math

    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_non_finite(v) for v in value)
    return False


def _grid_point(q: float, sigma: float, steps: int, delta: float, cap: float) -> dict:
    """One grid point: its outcome, bracket, note and time (see the module's ``grid``)."""
    import math
    import re
    import signal

    from dplens import cli
    from dplens.accountant import events as ev
    from dplens.accountant.compose import Accountant
    from dplens.accountant.dp_sgd import dp_sgd_epsilon
    from dplens.accountant.routes import Method

    n = round(GRID_BATCH / q)
    point = {"q": q, "sigma": sigma, "steps": steps, "delta": delta, "regime": _in_regime(q, sigma, steps)}
    step = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))
    rdp = Accountant().compose(step, steps).epsilon(delta, method=Method.RDP)
    point["rdp"] = rdp
    if rdp < 0.01:  # the reported ε is at most RDP's
        return {**point, "outcome": "below 0.01 (RDP)", "seconds": 0.0}

    def alarm(signum, frame):
        raise _CappedError

    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, cap)
    try:
        r = dp_sgd_epsilon(
            dataset_size=n, batch_size=GRID_BATCH, epochs=steps * GRID_BATCH / n, noise_multiplier=sigma, delta=delta
        )
    except _CappedError:
        return {**point, "outcome": f"capped ({cap:g} s)", "seconds": time.perf_counter() - start}
    except Exception as err:
        return {**point, "outcome": f"error: {type(err).__name__}: {err}", "seconds": time.perf_counter() - start}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.perf_counter() - start
    lower, upper = r.epsilon_lower, r.epsilon
    point.update(steps_run=r.steps, lower=lower, upper=upper, note=r.bracket_note, method=r.method, seconds=seconds)
    text = cli._dp_sgd_lines(r) + f"\n  epsilon <= {cli._fmt(upper)}"
    try:
        json.dumps(r.to_dict(), allow_nan=False)
        printable = not _non_finite(r.to_dict()) and not re.search(r"\b(inf|nan|infinity)\b", text, re.I)
    except ValueError:
        printable = False
    finite = lower is not None and upper > 0 and math.isfinite(upper)
    width = (upper - lower) / upper if finite else None
    point["width"] = width
    point["regime"] = point["regime"] and upper <= 10  # issue 47's regime is at ε ≤ 10
    stated = r.bracket_note is not None and "% wide" in r.bracket_note and r.bracket_note in text
    stated = stated and r.to_dict().get("bracket_note") == r.bracket_note
    if r.steps != steps or not printable:
        outcome = "FAIL (steps or non-finite output)"
    elif not 0.01 <= upper <= 50:
        outcome = "below 0.01" if upper < 0.01 else "above 50"
    elif lower is None or lower > upper:
        outcome = "FAIL (no bracket)"
    elif width <= WIDTH:
        outcome = "<= 0.5 %"
    elif stated and not point["regime"]:
        outcome = "> 0.5 %, noted"
    else:
        outcome = "FAIL (> 0.5 % in regime)" if point["regime"] else "FAIL (> 0.5 %, no note)"
    return {**point, "outcome": outcome}


def _grid_summary(points: list[dict], command: str, load: tuple, cap: float) -> str:
    """The Markdown summary of a grid run: counts per outcome, the widest brackets in range, the times."""
    import collections
    import statistics

    counts = collections.Counter(p["outcome"] for p in points)
    ran = [p for p in points if "upper" in p]
    in_range = [p for p in ran if 0.01 <= p["upper"] <= 50 and p["width"] is not None]
    lines = [
        f"#### Poisson grid (issue 47) ({time.strftime('%Y-%m-%d')}, load average at start {load[0]:.1f} / "
        f"{load[1]:.1f} / {load[2]:.1f}, cap {cap:g} s a point)",
        "",
        f"Command: `{command}`",
        "",
        "| outcome | points | of them in the regime |",
        "|---|---|---|",
    ]
    for outcome, count in sorted(counts.items()):
        regime = sum(1 for p in points if p["outcome"] == outcome and p["regime"])
        lines.append(f"| {outcome} | {count} | {regime} |")
    lines += [
        "",
        "Widest brackets in range (0.01 ≤ upper ≤ 50):",
        "",
        "| q, σ, T, δ | in regime | [lower, upper] | width | time | note |",
        "|---|---|---|---|---|---|",
    ]
    for p in sorted(in_range, key=lambda p: -p["width"])[:8]:
        note = "—" if p["note"] is None else p["note"].split(": ", 1)[-1]
        lines.append(
            f"| {p['q']:g}, {p['sigma']:g}, {p['steps']:.0e}, {p['delta']:g} | {'yes' if p['regime'] else 'no'} | "
            f"[{p['lower']:.6g}, {p['upper']:.6g}] | {100 * p['width']:.3g} % | {p['seconds']:.1f} s | {note} |"
        )
    if ran:
        times = [p["seconds"] for p in ran]
        slowest = max(ran, key=lambda p: p["seconds"])
        lines += [
            "",
            f"Times (points run through the PLD, {len(ran)}): median {statistics.median(times):.2f} s, total "
            f"{sum(times):.0f} s, slowest {slowest['seconds']:.1f} s (q = {slowest['q']:g}, σ = {slowest['sigma']:g}, "
            f"T = {slowest['steps']:.0e}).",
        ]
    return "\n".join(lines)


def grid(argv: list[str]) -> None:
    """The ``grid`` case (see the module)."""
    parser = argparse.ArgumentParser(description="issue 47's Poisson grid")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds per point")
    parser.add_argument("--delta", type=float, action="append", help="δ (repeatable; default 1e-6)")
    parser.add_argument("--q", type=float, action="append", help="only these sampling rates")
    parser.add_argument("--jsonl", help="append each point as a JSON line to this file")
    parser.add_argument("--write", action="store_true", help="replace the grid's part of RESULTS.md")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    points = []
    for delta in args.delta or [1e-6]:
        for q in args.q or GRID_Q:
            for sigma in GRID_SIGMA:
                for steps in GRID_T:
                    point = _grid_point(q, sigma, steps, delta, args.cap)
                    points.append(point)
                    print(json.dumps(point), flush=True)
                    if args.jsonl:
                        with open(args.jsonl, "a", encoding="utf-8") as out:
                            out.write(json.dumps(point) + "\n")
    command = "python benchmarks/bench_production_brackets.py grid " + " ".join(argv)
    text = _grid_summary(points, command.strip(), load, args.cap)
    print(text)
    if args.write:
        sys.path.insert(0, str(HERE))
        from results_md import write_section

        write_section(HERE / "RESULTS.md", "bench_production_brackets_grid", text)


def main() -> None:
    if sys.argv[1:2] == ["calibrate"]:
        calibrate()
        return
    if sys.argv[1:2] == ["grid"]:
        grid(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sampling", help="only the rows of this sampler")
    parser.add_argument("--fine", action="store_true", help="also dp-accounting at interval 2e-5 (slow)")
    parser.add_argument("--skip-dpa", action="store_true", help="dplens only")
    parser.add_argument("--dpa-timeout", type=float, default=120.0, help="seconds per dp-accounting process")
    parser.add_argument(
        "--opake", metavar="PYTHON", help="also opake 0.16.1, run by this interpreter (it imports on Python 3.13)"
    )
    parser.add_argument("--write", action="store_true", help="replace this script's section of RESULTS.md")
    args = parser.parse_args()
    intervals = (1e-4, 2e-5) if args.fine else (1e-4,)
    load = os.getloadavg()
    lines = [
        f"### Certified brackets at production scale (issue 47) ({time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores shared; load average at start "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f})",
        "",
        "Command: `python benchmarks/bench_production_brackets.py"
        + (" --fine" if args.fine else "")
        + (" --skip-dpa" if args.skip_dpa else "")
        + (f" --opake {args.opake}" if args.opake else "")
        + "` (each dplens row a whole process: a fresh interpreter, its imports and the answer; peak RSS of it)",
        "",
        "| sampling, N, B, E, σ, δ (T) | in regime | dplens [lower, upper] | width | process | peak | "
        + " | ".join(f"dp-accounting {iv:g} pess / opt" for iv in intervals)
        + (" | opake 0.16.1 (process, peak) | its time / ours" if args.opake else "")
        + " | bounds hold | note |",
        "|---" * (8 + len(intervals) + (2 if args.opake else 0)) + "|",
    ]
    for sampling, n, b, epochs, sigma, delta, regime in ROWS:
        if args.sampling is not None and sampling != args.sampling:
            continue
        got = _process(_DPLENS.format(n=n, b=b, epochs=epochs, sigma=sigma, delta=delta, sampling=sampling), 900)
        if "error" in got:
            lines.append(f"| {sampling}, {n:.0e}, {b}, {epochs}, {sigma}, {delta:g} | {regime} | {got['error']} |")
            continue
        width = (got["upper"] - got["lower"]) / got["upper"] if got["upper"] > 0 else 0.0
        cells, holds = [], width <= 5e-3 or (not regime and got["note"] is not None)
        for interval in intervals:
            if sampling != "poisson" or args.skip_dpa:
                cells.append("—")
                continue
            shown_p, pess = _dpa(b / n, sigma, got["steps"], delta, interval, True, args.dpa_timeout)
            shown_o, opt = _dpa(b / n, sigma, got["steps"], delta, interval, False, args.dpa_timeout)
            cells.append(f"{shown_p} / {shown_o}")
            holds &= (pess is None or got["lower"] <= pess) and (opt is None or got["upper"] >= opt)
        if args.opake:
            theirs = _process(
                _OPAKE.format(sampling=sampling, sigma=sigma, q=b / n, steps=got["steps"], epochs=epochs, delta=delta),
                args.dpa_timeout,
                args.opake,
            )
            if "error" in theirs:
                cells += [f"— ({theirs['error']})", "—"]
            else:
                cells += [
                    f"{theirs['epsilon']:.6g} ({theirs['seconds']:.1f} s, {theirs['peak_mb']:.0f} MB)",
                    f"{theirs['seconds'] / got['seconds']:.1f}×",
                ]
                holds &= got["lower"] <= theirs["epsilon"]  # opake's ε is an upper bound: never below our lower end
        note = "—" if got["note"] is None else got["note"].split(": ", 1)[-1]
        lines.append(
            f"| {sampling}, {n:.0e}, {b}, {epochs}, {sigma}, {delta:g} (T = {got['steps']}) | "
            f"{'yes' if regime else 'no'} | [{got['lower']:.6g}, {got['upper']:.6g}] | {100 * width:.3g} % | "
            f"{got['seconds']:.1f} s | {got['peak_mb']:.0f} MB | {' | '.join(cells)} | {'yes' if holds else 'NO'} | "
            f"{note} |"
        )
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.write:
        sys.path.insert(0, str(HERE))
        from results_md import write_section

        write_section(HERE / "RESULTS.md", "bench_production_brackets", text)


if __name__ == "__main__":
    main()
