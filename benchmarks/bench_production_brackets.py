"""Certified brackets at production scale (issue 47): width, time and peak memory against dp-accounting's PLD.

    python benchmarks/bench_production_brackets.py [--fine] [--skip-dpa] [--sampling NAME] [--write]
    python benchmarks/bench_production_brackets.py calibrate

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


def _process(code: str, timeout: float) -> dict | None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=True
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


def main() -> None:
    if sys.argv[1:2] == ["calibrate"]:
        calibrate()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sampling", help="only the rows of this sampler")
    parser.add_argument("--fine", action="store_true", help="also dp-accounting at interval 2e-5 (slow)")
    parser.add_argument("--skip-dpa", action="store_true", help="dplens only")
    parser.add_argument("--dpa-timeout", type=float, default=120.0, help="seconds per dp-accounting process")
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
        + "` (each dplens row a whole process: a fresh interpreter, its imports and the answer; peak RSS of it)",
        "",
        "| sampling, N, B, E, σ, δ (T) | in regime | dplens [lower, upper] | width | process | peak | "
        + " | ".join(f"dp-accounting {iv:g} pess / opt" for iv in intervals)
        + " | bounds hold | note |",
        "|---" * (8 + len(intervals)) + "|",
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
