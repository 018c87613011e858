"""Side-by-side accounting benchmark against dp-accounting, in one run (issue: Foundation).

    python benchmarks/bench_accounting.py [--repeat N] [--write benchmarks/RESULTS.md]

Setting: MNIST DP-SGD, q = 256/60000, σ = 1.1, T = 14063, δ = 1e-5.
(a) RDP ε: dplens (continuous α) vs dp-accounting's RdpAccountant (156-order grid).
(b) PLD ε: dplens Accountant (PLD route) vs dp-accounting's PLDAccountant, both at interval 1e-4.
(c) Calibration of σ for ε = 3 with exact (PLD) accounting: dplens vs dp-accounting's calibrate_dp_mechanism
    with PLDAccountant; σ compared and ε at our σ re-checked with dp-accounting's PLD at its default grid.
Timings are medians of --repeat runs; ratios are dp-accounting time / dplens time (higher = dplens faster).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings
from importlib import metadata

import dp_accounting as dpa
from results_md import write_section  # benchmarks/ is sys.path[0] when run as a script

from dplens.accountant import events as ev
from dplens.accountant import rdp as rdp_module
from dplens.accountant.calibrate import calibrate_dp_sgd_noise
from dplens.accountant.compose import Accountant, Method

Q, SIGMA, STEPS, DELTA = 256 / 60000, 1.1, 14063, 1e-5


def timed(function, repeat):
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def interleaved(theirs, ours, repeat):
    """Alternate the two so that a change in machine load hits both alike; medians of each."""
    t_theirs, t_ours, v_theirs, v_ours = [], [], None, None
    for _ in range(repeat):
        start = time.perf_counter()
        v_theirs = theirs()
        t_theirs.append(time.perf_counter() - start)
        start = time.perf_counter()
        v_ours = ours()
        t_ours.append(time.perf_counter() - start)
    return statistics.median(t_theirs), v_theirs, statistics.median(t_ours), v_ours


def dpa_event(sigma):
    return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(sigma)), STEPS)


def ours_accountant(sigma):
    return Accountant().compose(ev.PoissonSampled(sampling_rate=Q, event=ev.Gaussian(noise_multiplier=sigma)), STEPS)


def bench_rdp(repeat):
    def theirs():
        acc = dpa.rdp.RdpAccountant()
        acc.compose(dpa_event(SIGMA))
        return acc.get_epsilon(DELTA)

    def ours():
        rdp_module._INTEGER_LOG_A_CACHE.clear()  # cold cache every run: no credit for repeating the same σ
        return ours_accountant(SIGMA).epsilon(DELTA, method=Method.RDP)

    ours()  # warm-up (imports)
    theirs()
    t_theirs, e_theirs, t_ours, e_ours = interleaved(theirs, ours, repeat)
    return {"theirs_s": t_theirs, "ours_s": t_ours, "eps_theirs": e_theirs, "eps_ours": e_ours}


def bench_pld(repeat):
    def theirs():
        acc = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(dpa_event(SIGMA))
        return acc.get_epsilon(DELTA)

    def ours():
        return ours_accountant(SIGMA).epsilon(DELTA, method=Method.PLD)

    t_theirs, e_theirs, t_ours, e_ours = interleaved(theirs, ours, repeat)
    return {"theirs_s": t_theirs, "ours_s": t_ours, "eps_theirs": e_theirs, "eps_ours": e_ours}


def bench_calibration(target=3.0):
    def theirs():
        # dp-accounting's default bracket (LowerEndpointAndGuess(0, 1)); a bracket reaching down to σ = 0.1 makes
        # it build enormous PLDs and takes minutes.
        return dpa.calibrate_dp_mechanism(dpa.pld.PLDAccountant, dpa_event, target, DELTA)

    def ours():
        return calibrate_dp_sgd_noise(sampling_rate=Q, steps=STEPS, target_epsilon=target, target_delta=DELTA)

    t_theirs, s_theirs = timed(theirs, 1)
    t_ours, result = timed(ours, 3)
    check = dpa.pld.PLDAccountant()
    check.compose(dpa_event(result.value))
    return {
        "theirs_s": t_theirs,
        "ours_s": t_ours,
        "sigma_theirs": s_theirs,
        "sigma_ours": result.value,
        "eps_ours": result.epsilon,
        "eps_ours_checked_by_dp_accounting": check.get_epsilon(DELTA),
        "target": target,
        "details": result.details,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--write", metavar="PATH", help="replace (or append) this benchmark's section of this file")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rdp = bench_rdp(args.repeat)
    pld = bench_pld(max(args.repeat // 2, 1))
    cal = bench_calibration()
    lines = [
        f"### Accounting vs dp-accounting ({time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, dp-accounting {metadata.version('dp-accounting')})",
        "",
        "Command: `python benchmarks/bench_accounting.py --write benchmarks/RESULTS.md`",
        "",
        "| measurement | dp-accounting | dplens | ratio (speed-up) | ε / σ |",
        "|---|---|---|---|---|",
        f"| (a) RDP ε, MNIST DP-SGD | {rdp['theirs_s'] * 1e3:.1f} ms | {rdp['ours_s'] * 1e3:.1f} ms | "
        f"{rdp['theirs_s'] / rdp['ours_s']:.1f}× | {rdp['eps_theirs']:.5f} vs **{rdp['eps_ours']:.5f}** |",
        f"| (b) PLD ε (interval 1e-4) | {pld['theirs_s']:.2f} s | {pld['ours_s']:.2f} s | "
        f"{pld['theirs_s'] / pld['ours_s']:.2f}× | {pld['eps_theirs']:.5f} vs {pld['eps_ours']:.5f} |",
        f"| (c) calibrate σ for ε = {cal['target']:g} (PLD) | {cal['theirs_s']:.2f} s | {cal['ours_s']:.2f} s | "
        f"{cal['theirs_s'] / cal['ours_s']:.1f}× | σ {cal['sigma_theirs']:.5f} vs {cal['sigma_ours']:.5f} "
        f"({(cal['sigma_ours'] / cal['sigma_theirs'] - 1) * 100:+.3f} %) |",
        "",
        f"Calibrated σ = {cal['sigma_ours']:.6f}: dplens ε = {cal['eps_ours']:.6f}; dp-accounting's PLDAccountant "
        f"(interval 1e-4) at that σ: ε = {cal['eps_ours_checked_by_dp_accounting']:.6f} ≤ {cal['target']:g}. "
        f"Route: {cal['details']}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(args.write, "bench_accounting", text)


if __name__ == "__main__":
    main()
