"""Batch samplers: random allocation against pld-accounting 2.0, and the tables of Feldman & Shenfeld and Chua et al.

    python benchmarks/bench_samplers.py [--parts allocation,one-epoch,fixed,tables] [--write]

- ``allocation``: dplens's random allocation (one step per epoch, a fresh allocation each epoch) against
  pld-accounting 2.0's ``gaussian_allocation_epsilon_range`` (Feldman & Shenfeld's accountant, a certified bracket of
  its own) on the same (σ, steps per epoch, epochs), δ = 1e-5: each one run as a whole process (a fresh interpreter:
  imports, the computation, the answer), so the times compare what a user waits for. Checks: dplens's upper bound
  ≥ pld-accounting's lower value and ≤ 1.02 × its upper value, dplens's lower end ≤ pld-accounting's upper value,
  and the time ratio (target ≥ 10×).
- ``one-epoch``: the one-epoch configurations of ``allocation`` again, each side's whole process three times
  alternately, the medians compared (issue 47's ≥ 10× there).
- ``fixed``: fixed bins (jax_privacy's BallsInBinsSampling) against pld-accounting run as one allocation with σ/√E.
- ``tables``: ε at δ = 1e-5 by sampler as the noise grows — Poisson, balls-and-bins (Feldman & Shenfeld, Figure 1's
  comparison), shuffled batches' interval [Chua et al.'s lower bound, no amplification] (Chua et al., ICML 2024
  Figure 1 and NeurIPS 2024 Figure 2's comparison), fixed bins, cyclic.

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
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
DELTA = 1e-5
ALLOCATION = [(1.0, 100, 1), (1.0, 1000, 5), (0.8, 235, 10), (0.5, 100, 1), (2.0, 50, 20)]
FIXED = [(1.0, 100, 10), (2.0, 235, 5)]

_DPLENS = """
import json, sys, time
start = time.perf_counter()
from dplens.accountant.compose import Accountant
from dplens.accountant.samplers import {kind}
sigma, steps, epochs = {sigma!r}, {steps!r}, {epochs!r}
if "{kind}" == "FixedBins":
    ledger = Accountant().compose(FixedBins(noise_multiplier=sigma, steps=steps, cycles=epochs))
else:
    ledger = Accountant().compose(RandomAllocation(noise_multiplier=sigma, steps=steps), epochs)
result = ledger.epsilon_result({delta!r})
print(json.dumps({{"upper": result.epsilon, "lower": result.epsilon_lower, "seconds": time.perf_counter() - start}}))
"""

_PLD_ACCOUNTING = """
import json, time
start = time.perf_counter()
from PLD_accounting.random_allocation_api import gaussian_allocation_epsilon_range
upper, lower = gaussian_allocation_epsilon_range(delta={delta!r}, sigma={sigma!r}, num_steps={steps!r},
                                                 num_epochs={epochs!r})
print(json.dumps({{"upper": upper, "lower": lower, "seconds": time.perf_counter() - start}}))
"""


def _process(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; its JSON answer and the whole process's wall time."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    answer["process"] = time.perf_counter() - start
    return answer


def _row(label: str, ours: dict, theirs: dict) -> tuple[str, bool]:
    ok = (
        ours["upper"] >= theirs["lower"]
        and ours["upper"] <= 1.02 * theirs["upper"]
        and ours["lower"] <= theirs["upper"]
    )
    ratio = theirs["process"] / ours["process"]
    return (
        f"| {label} | [{theirs['lower']:.4f}, {theirs['upper']:.4f}] | {theirs['process']:.1f} s | "
        f"[{ours['lower']:.4f}, {ours['upper']:.4f}] | {ours['process']:.2f} s | {ratio:.1f}× | "
        f"{'yes' if ok else 'NO'} |",
        ok and ratio >= 10,
    )


def allocation() -> list[str]:
    lines = [
        "| σ, steps per epoch, epochs | pld-accounting [lower, upper] | process | dplens [ε_lower, ε] | process | "
        "ratio | bounds hold |",
        "|---|---|---|---|---|---|---|",
    ]
    for sigma, steps, epochs in ALLOCATION:
        args = dict(sigma=sigma, steps=steps, epochs=epochs, delta=DELTA)
        ours = _process(_DPLENS.format(kind="RandomAllocation", **args))
        theirs = _process(_PLD_ACCOUNTING.format(**args))
        lines.append(_row(f"{sigma}, {steps}, {epochs}", ours, theirs)[0])
    return lines


def fixed() -> list[str]:
    lines = [
        "| σ, bins, cycles | pld-accounting at σ/√E, one epoch | process | dplens FixedBins [ε_lower, ε] | process | "
        "ratio | bounds hold |",
        "|---|---|---|---|---|---|---|",
    ]
    for sigma, steps, cycles in FIXED:
        ours = _process(_DPLENS.format(kind="FixedBins", sigma=sigma, steps=steps, epochs=cycles, delta=DELTA))
        theirs = _process(_PLD_ACCOUNTING.format(sigma=sigma / cycles**0.5, steps=steps, epochs=1, delta=DELTA))
        lines.append(_row(f"{sigma}, {steps}, {cycles}", ours, theirs)[0])
    return lines


def tables() -> list[str]:
    from dplens.accountant.dp_sgd import dp_sgd_epsilon

    lines = []
    for n, b, epochs in ((50000, 500, 1), (50000, 500, 10)):
        lines += [
            "",
            f"ε at δ = 1e-5, N = {n}, B = {b} ({n // b} steps per epoch), {epochs} epoch{'s' if epochs > 1 else ''}:",
            "",
            "| σ | Poisson | balls-and-bins | shuffle [lower bound, upper] (zero-out) | fixed bins | cyclic |",
            "|---|---|---|---|---|---|",
        ]
        for sigma in (0.6, 0.8, 1.0, 1.5, 2.0, 3.0):
            runs = {
                name: dp_sgd_epsilon(
                    dataset_size=n, batch_size=b, epochs=epochs, noise_multiplier=sigma, delta=DELTA, sampling=name
                )
                for name in ("poisson", "balls-and-bins", "shuffle", "fixed-bins", "cyclic")
            }
            shuffle = runs["shuffle"]
            lines.append(
                f"| {sigma} | {runs['poisson'].epsilon:.3f} | {runs['balls-and-bins'].epsilon:.3f} | "
                f"[{shuffle.epsilon_lower:.3f}, {shuffle.epsilon:.3f}] | {runs['fixed-bins'].epsilon:.3f} | "
                f"{runs['cyclic'].epsilon:.3f} |"
            )
    return lines


def one_epoch(repeats: int = 3) -> list[str]:
    """The one-epoch allocation configurations, each side's whole process run ``repeats`` times alternately (the
    median reported: these processes take 0.3–4 s, where one busy moment moves a single run by 10 %)."""
    lines = [
        f"One epoch, median of {repeats} alternating whole processes each (load average at start "
        f"{os.getloadavg()[0]:.2f}):",
        "",
        "| σ, steps per epoch, epochs | pld-accounting [lower, upper] | process | dplens [ε_lower, ε] | process | "
        "ratio | bounds hold |",
        "|---|---|---|---|---|---|---|",
    ]
    for sigma, steps, epochs in [config for config in ALLOCATION if config[2] == 1]:
        args = dict(sigma=sigma, steps=steps, epochs=epochs, delta=DELTA)
        ours, theirs = [], []
        for _ in range(repeats):
            ours.append(_process(_DPLENS.format(kind="RandomAllocation", **args)))
            theirs.append(_process(_PLD_ACCOUNTING.format(**args)))
        middle = repeats // 2
        ours.sort(key=lambda run: run["process"])
        theirs.sort(key=lambda run: run["process"])
        lines.append(_row(f"{sigma}, {steps}, {epochs}", ours[middle], theirs[middle])[0])
    return lines


PARTS = {"allocation": allocation, "one-epoch": one_epoch, "fixed": fixed, "tables": tables}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    parser.add_argument("--write", action="store_true", help="replace this script's section of RESULTS.md")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    head = [
        f"### Batch samplers ({time.strftime('%Y-%m-%d')}, {platform.machine()}, Python {platform.python_version()}, "
        f"pld-accounting {metadata.version('pld-accounting')})",
        "",
        f"Command: `python benchmarks/bench_samplers.py --parts {','.join(parts)}` (δ = 1e-5; each accountant a whole "
        "process: a fresh interpreter, its imports and the answer)",
        "",
    ]
    body = []
    for part in parts:
        body += [*PARTS[part](), ""]
    text = "\n".join(head + body)
    print(text)
    if args.write:
        sys.path.insert(0, str(HERE))
        from results_md import write_section

        write_section(HERE / "RESULTS.md", "bench_samplers", text)


if __name__ == "__main__":
    main()
