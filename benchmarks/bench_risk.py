"""Attack risk against riskcal 1.5.1 (Kulynych et al., NeurIPS 2024), side by side on DP-SGD runs.

    python benchmarks/bench_risk.py [--repeat N] [--quick] [--write benchmarks/RESULTS.md]

For each run (Poisson-sampled Gaussian, add/remove adjacency):

- the risk query: the largest attack TPR at FPR 0.1 %, 1 %, 10 % and the advantage. riskcal builds dp-accounting's
  connect-the-dots PLD at its default grid (1e-4) once and reads β and the advantage off it
  (``riskcal.analysis.get_beta_from_pld`` / ``get_advantage_from_pld``); dplens runs ``attack_risk`` on the PLD route
  (its engine's certified bracket, default tolerance 1e-3). Timed in process (median of ``--repeat`` runs, every run
  from scratch) and as a whole process (a fresh interpreter: ``python -c`` running riskcal's calls against
  ``dplens risk SPEC --json``; median of ``--repeat``, interleaved);
- calibration of σ to a TPR target at FPR 1 % (riskcal's own TPR at the run's σ, so both answers sit near it):
  ``riskcal.calibration.dpsgd.find_noise_multiplier_for_err_rates`` (its defaults) against dplens's
  ``calibrate_risk`` (PLD, never over the target); one run each (riskcal's takes minutes). ``--quick`` skips riskcal's
  calibration.

Both numbers are meant as upper bounds on the TPR; a riskcal value below dplens's certified lower end is marked
(it then understates the risk: see RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
from results_md import write_section  # benchmarks/ is sys.path[0] when run as a script

from dplens.accountant.calibrate import RiskTarget, calibrate_risk
from dplens.accountant.compose import Accountant
from dplens.accountant.events import Gaussian, PoissonSampled
from dplens.accountant.risk import attack_risk

FPRS = (0.001, 0.01, 0.1)
RUNS = [  # (name, q, σ, steps)
    ("MNIST (q = 256/60000, 14 063 steps, σ = 1.1)", 256 / 60000, 1.1, 14063),
    ("CIFAR-10 (q = 1024/50000, 1 465 steps, σ = 1.5)", 1024 / 50000, 1.5, 1465),
    ("small data (q = 0.01, 1 000 steps, σ = 1.0)", 0.01, 1.0, 1000),
]

_RISKCAL_SNIPPET = """
import warnings; warnings.simplefilter("ignore")
from dp_accounting.pld import privacy_loss_distribution as pm
from riskcal.analysis import get_advantage_from_pld, get_beta_from_pld
pld = pm.from_gaussian_mechanism(standard_deviation={sigma}, sampling_prob={q}, use_connect_dots=True,
                                 value_discretization_interval=1e-4).self_compose({steps})
print([1 - b for b in get_beta_from_pld(pld, alpha=[0.001, 0.01, 0.1])], get_advantage_from_pld(pld))
"""


def _accountant(q: float, sigma: float, steps: int) -> Accountant:
    return Accountant().compose(PoissonSampled(sampling_rate=q, event=Gaussian(noise_multiplier=sigma)), steps)


def _riskcal_query(q: float, sigma: float, steps: int) -> tuple[list[float], float]:
    from dp_accounting.pld import privacy_loss_distribution as pm
    from riskcal.analysis import get_advantage_from_pld, get_beta_from_pld

    pld = pm.from_gaussian_mechanism(
        standard_deviation=sigma, sampling_prob=q, use_connect_dots=True, value_discretization_interval=1e-4
    ).self_compose(steps)
    beta = get_beta_from_pld(pld, alpha=np.array(FPRS))
    return [float(1 - b) for b in beta], float(get_advantage_from_pld(pld))


def _timed(function, repeat: int):
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = function()
        times.append(time.perf_counter() - start)
    return value, statistics.median(times)


def _whole_process(q: float, sigma: float, steps: int, repeat: int, spec: Path) -> tuple[float, float]:
    theirs, ours = [], []
    snippet = _RISKCAL_SNIPPET.format(q=q, sigma=sigma, steps=steps)
    for _ in range(repeat):  # interleaved, so that load on the machine hits both alike
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", snippet], check=True, capture_output=True)
        theirs.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dplens.cli", "risk", str(spec), "--method", "pld", "--json"],
                       check=True, capture_output=True)  # fmt: skip
        ours.append(time.perf_counter() - start)
    return statistics.median(theirs), statistics.median(ours)


def _spec_file(directory: Path, q: float, sigma: float, steps: int) -> Path:
    path = directory / f"run_{len(list(directory.iterdir()))}.json"
    table = {"type": "poisson_subsampled_gaussian", "noise_multiplier": sigma, "sampling_rate": q, "steps": steps}
    path.write_text(json.dumps({"mechanism": [table]}))
    return path


def _query_rows(repeat: int, directory: Path) -> tuple[list[str], list[tuple[float, float, float]]]:
    rows, speed = [], []
    for name, q, sigma, steps in RUNS:
        (theirs_tpr, theirs_adv), theirs_time = _timed(lambda q=q, s=sigma, t=steps: _riskcal_query(q, s, t), repeat)
        ours, ours_time = _timed(lambda q=q, s=sigma, t=steps: attack_risk(_accountant(q, s, t), fprs=FPRS,
                                                                          method="pld"), repeat)  # fmt: skip
        whole_theirs, whole_ours = _whole_process(q, sigma, steps, repeat, _spec_file(directory, q, sigma, steps))
        cells = []
        for i, fpr in enumerate(FPRS):
            lo, hi, rc = ours.tpr_lower[i], ours.tpr_upper[i], theirs_tpr[i]
            mark = " (below dplens's lower end)" if rc < lo else ""
            cells.append(f"{fpr:g}: {rc:.4f}{mark} / [{lo:.4f}, {hi:.4f}]")
        adv_mark = " (below)" if theirs_adv < ours.advantage_lower else ""
        diff = max(max(abs(a - b) for a, b in zip(theirs_tpr, ours.tpr_upper, strict=True)),
                   abs(theirs_adv - ours.advantage_upper))  # fmt: skip
        rows.append(
            f"| {name} | {'; '.join(cells)} | {theirs_adv:.4f}{adv_mark} / [{ours.advantage_lower:.4f}, "
            f"{ours.advantage_upper:.4f}] | {diff:.4f} | {theirs_time:.2f} s / {ours_time:.3f} s "
            f"(**{theirs_time / ours_time:.1f}×**) | {whole_theirs:.2f} s / {whole_ours:.2f} s "
            f"(**{whole_theirs / whole_ours:.1f}×**) |"
        )
        speed.append((theirs_time / ours_time, whole_theirs / whole_ours, diff))
    return rows, speed


def _calibration_rows(quick: bool) -> tuple[list[str], list[tuple[float, float]]]:
    rows, out = [], []
    for name, q, sigma, steps in RUNS:
        target = round(_riskcal_query(q, sigma, steps)[0][1], 4)
        start = time.perf_counter()
        ours = calibrate_risk(
            lambda s, q=q, t=steps: _accountant(q, s, t),
            target=RiskTarget(max_tpr=target, at_fpr=0.01),
            lower=0.05,
            upper=500.0,
            param="noise_multiplier",
        )
        ours_time = time.perf_counter() - start
        if quick:
            rows.append(f"| {name} | TPR ≤ {target} at 1 % | (skipped) | {ours.value:.5f} ({ours_time:.1f} s) | | |")
            continue
        from riskcal.calibration.dpsgd import find_noise_multiplier_for_err_rates

        start = time.perf_counter()
        theirs = find_noise_multiplier_for_err_rates(alpha=0.01, beta=1 - target, sample_rate=q, num_steps=steps)
        theirs_time = time.perf_counter() - start
        relative = (ours.value - theirs) / theirs
        speedup = theirs_time / ours_time
        rows.append(
            f"| {name} | TPR ≤ {target} at 1 % | {theirs:.5f} ({theirs_time:.0f} s) | {ours.value:.5f} "
            f"({ours_time:.1f} s; TPR ≤ {ours.achieved:.6f}) | {100 * relative:+.2f} % | **{speedup:.0f}×** |"
        )
        out.append((theirs_time / ours_time, abs(relative)))
    return rows, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (median)")
    parser.add_argument("--quick", action="store_true", help="skip riskcal's calibration (minutes per run)")
    parser.add_argument("--write", type=Path, help="replace (or append) this benchmark's section of this file")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    command = "python benchmarks/bench_risk.py" + (" --quick" if args.quick else "") + f" --repeat {args.repeat}"
    with tempfile.TemporaryDirectory() as tmp:
        query_rows, speed = _query_rows(args.repeat, Path(tmp))
    calibration_rows, calibration = _calibration_rows(args.quick)
    lines = [
        f"### Attack risk against riskcal (issue 38) ({time.strftime('%Y-%m-%d')}, {platform.machine()}, Python "
        f"{platform.python_version()}, riskcal {metadata.version('riskcal')}, dp-accounting "
        f"{metadata.version('dp-accounting')})",
        "",
        f"Command: `{command}` (one process; whole-process timings in fresh interpreters, interleaved)",
        "",
        "TPR at FPR: riskcal / dplens's certified bracket [lower, upper]; the guarantee is the upper end.",
        "",
        "| run | TPR at FPR: riskcal / dplens | advantage: riskcal / dplens | largest difference | risk query in "
        "process: riskcal / dplens | whole process |",
        "|---|---|---|---|---|---|",
        *query_rows,
        "",
        "Calibration of σ to a TPR target at FPR 1 % (the target is riskcal's TPR at the run's σ):",
        "",
        "| run | target | riskcal σ (time) | dplens σ (time; its TPR bound) | dplens vs riskcal | speed-up |",
        "|---|---|---|---|---|---|",
        *calibration_rows,
        "",
        f"Targets: within 0.01 of riskcal — largest difference {max(d for _, _, d in speed):.4f}; risk query ≥ 3× — "
        f"in process {min(s for s, _, _ in speed):.1f}×–{max(s for s, _, _ in speed):.1f}×, whole process "
        f"{min(w for _, w, _ in speed):.1f}×–{max(w for _, w, _ in speed):.1f}×"
        + (
            f"; calibration ≥ 10× — {min(r for r, _ in calibration):.0f}×–{max(r for r, _ in calibration):.0f}×, "
            f"σ within 1 % — largest {100 * max(d for _, d in calibration):.2f} %."
            if calibration
            else "."
        ),
    ]
    text = "\n".join(lines)
    print(text)
    if args.write is not None:
        write_section(args.write, "bench_risk", text)


if __name__ == "__main__":
    main()
