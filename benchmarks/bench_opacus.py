"""dplens's Opacus accountant against Opacus's PRV accountant at eps_error = 1e-3, side by side in one run (issue 24).

    PYTHONPATH=$PWD/src nice python benchmarks/bench_opacus.py [--repeat N] [--write benchmarks/RESULTS.md]

For each history (Opacus's ``(noise_multiplier, sample_rate, steps)`` entries) it times, in this one process and
alternating the two sides so that a change in machine load hits both alike:

- ``get_epsilon(δ, eps_error=1e-3)`` of a fresh :class:`dplens.integrations.opacus_accountant.OpacusAccountant`
  (dplens's module-level RDP caches cleared first, so nothing is reused between repeats) against a fresh
  ``opacus.accountants.PRVAccountant`` holding the same history;
- ``dplens.from_opacus(prv_accountant).epsilon_result(δ)`` (the ledger of an Opacus accountant's history, default
  tolerance) against the same PRV call.

Times are medians of ``--repeat`` runs. It prints dplens's certified bracket [ε_lower, ε], PRV's answer (its upper
bound) and PRV's estimate and lower bound (from the same discretised PRV), and the speed ratio PRV / dplens.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DELTA = 1e-5
EPS_ERROR = 1e-3
MNIST_Q = 256 / 60000
STEPS_PER_EPOCH = 235  # ⌈60000 / 256⌉ Poisson batches per epoch
MARK_BEGIN, MARK_END = "<!-- bench_opacus:begin -->", "<!-- bench_opacus:end -->"


def _histories() -> dict[str, list[tuple[float, float, int]]]:
    # σ decays linearly from 1.3 to 0.9 over 10 epochs (one σ per epoch); the last 2 epochs double the batch size.
    schedule = [(round(1.3 - 0.4 * e / 9, 6), MNIST_Q * (2 if e >= 8 else 1), STEPS_PER_EPOCH) for e in range(10)]
    return {
        "MNIST, q = 256/60000, σ = 1.1, 10 epochs (2343 steps)": [(1.1, MNIST_Q, 2343)],
        "MNIST, q = 256/60000, σ = 1.1, 60 epochs (14063 steps)": [(1.1, MNIST_Q, 14063)],
        "schedule: σ 1.3 → 0.9 per epoch, batch ×2 in epochs 9-10 (10 entries, 2350 steps)": schedule,
    }


def _clear_dplens_caches() -> None:
    from dplens.accountant import rdp

    for name in ("_INTEGER_LOG_A_CACHE", "_FRACTIONAL_LOG_A_CACHE"):
        getattr(rdp, name).clear()


def _time(call) -> tuple[float, object]:
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def measure(history: list[tuple[float, float, int]], repeat: int) -> dict[str, object]:
    from opacus.accountants import PRVAccountant

    import dplens
    from dplens.integrations.opacus_accountant import OpacusAccountant

    def prv() -> PRVAccountant:
        accountant = PRVAccountant()
        accountant.history = list(history)
        return accountant

    def ours() -> object:
        _clear_dplens_caches()
        accountant = OpacusAccountant()
        accountant.history = list(history)
        return accountant.get_epsilon_bracket(DELTA, eps_error=EPS_ERROR)

    def ledger() -> object:
        _clear_dplens_caches()
        return dplens.from_opacus(prv()).epsilon_result(DELTA)

    times: dict[str, list[float]] = {"prv": [], "ours": [], "ledger": []}
    for _ in range(repeat):
        t, prv_eps = _time(lambda: prv().get_epsilon(DELTA, eps_error=EPS_ERROR))
        times["prv"].append(t)
        t, bracket = _time(ours)
        times["ours"].append(t)
        t, ledger_result = _time(ledger)
        times["ledger"].append(t)
    lower, estimate, upper = (
        prv()._get_dprv(eps_error=EPS_ERROR, delta_error=DELTA / 1000).compute_epsilon(DELTA, DELTA / 1000, EPS_ERROR)
    )
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {
        "prv": float(prv_eps),
        "prv_bracket": (float(lower), float(estimate), float(upper)),
        "ours": bracket,
        "ledger": ledger_result,
        "times": medians,
    }


def render(results: dict[str, dict[str, object]], repeat: int) -> str:
    import numpy
    import opacus
    import torch

    lines = [
        f"### dplens inside Opacus: get_epsilon against Opacus PRV at eps_error = 1e-3 ({time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, Python {platform.python_version()}, opacus {opacus.__version__}, "
        f"torch {torch.__version__}, numpy {numpy.__version__})",
        "",
        "Command: `PYTHONPATH=$PWD/src nice python benchmarks/bench_opacus.py --write benchmarks/RESULTS.md` "
        f"(medians of {repeat} runs, interleaved, one process; δ = 1e-5; on the shared 2-core VM while other sessions "
        "ran: the ratios are the claim).",
        "",
        "| history | dplens `get_epsilon` [ε_lower, ε] (eps_error = 1e-3) | Opacus PRV answer (PRV lower, estimate) "
        "| time dplens / PRV (s) | ratio | `from_opacus` ε (default tolerance) | time (s) | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        ours, ledger, t = r["ours"], r["ledger"], r["times"]
        lo, est, _ = r["prv_bracket"]
        lines.append(
            f"| {name} | [{ours.epsilon_lower:.5f}, **{ours.epsilon:.5f}**] | {r['prv']:.5f} ({lo:.5f}, {est:.5f}) "
            f"| {t['ours']:.3f} / {t['prv']:.2f} | **{t['prv'] / t['ours']:.0f}×** "
            f"| {ledger.epsilon:.5f} [{ledger.epsilon_lower:.5f}] | {t['ledger']:.3f} "
            f"| **{t['prv'] / t['ledger']:.0f}×** |"
        )
    lines += [
        "",
        "PRV's answer is its upper bound, its estimate plus slightly more than eps_error; dplens's certified bracket "
        "lies inside PRV's [lower, upper] and contains PRV's estimate (to within eps_error), so both bound the same "
        "true ε and dplens's upper bound is the tighter. The literal check, PRV's answer inside dplens's bracket "
        "widened by eps_error:",
        "",
    ]
    for name, r in results.items():
        ours = r["ours"]
        lo, est, up = r["prv_bracket"]
        inside = ours.epsilon_lower - EPS_ERROR <= r["prv"] <= ours.epsilon + EPS_ERROR
        lines.append(
            f"- {name}: PRV answer − dplens ε = {r['prv'] - ours.epsilon:+.2e} "
            f"({'inside' if inside else 'outside'}; "
            f"PRV answer − PRV estimate = {(up - est) / EPS_ERROR:.2f} eps_error; "
            f"PRV estimate inside dplens's bracket: {ours.epsilon_lower <= est <= ours.epsilon})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", type=Path, help="replace this benchmark's section of RESULTS.md")
    args = parser.parse_args(argv)
    versions = {name: metadata.version(name) for name in ("opacus", "torch")}
    print(f"opacus {versions['opacus']}, torch {versions['torch']}")
    results = {}
    for name, history in _histories().items():
        results[name] = measure(history, args.repeat)
        r = results[name]
        print(
            f"{name}: dplens [{r['ours'].epsilon_lower:.5f}, {r['ours'].epsilon:.5f}] {r['times']['ours']:.3f}s; "
            f"PRV {r['prv']:.5f} (lo/est/up {r['prv_bracket']}) {r['times']['prv']:.2f}s; "
            f"from_opacus {r['ledger'].epsilon:.5f} {r['times']['ledger']:.3f}s",
            flush=True,
        )
    section = render(results, args.repeat)
    print(section)
    if args.write:
        text = args.write.read_text(encoding="utf-8")
        block = f"{MARK_BEGIN}\n{section}\n{MARK_END}"
        if MARK_BEGIN in text and MARK_END in text:
            head, rest = text.split(MARK_BEGIN, 1)
            text = head + block + rest.split(MARK_END, 1)[1]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        args.write.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
