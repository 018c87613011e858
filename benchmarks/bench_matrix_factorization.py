"""Matrix-factorisation mechanisms against jax_privacy 2.0 (64-bit) + dp_accounting, the peer in its own process.

    python benchmarks/bench_matrix_factorization.py            # prints the RESULTS.md section, writes the JSON

1. Sensitivities (tests/helpers/mf_cases.py): dplens's against jax_privacy's ``matrix_factorization`` functions run
   with ``JAX_ENABLE_X64=1`` in a child process; the values are recorded in
   ``benchmarks/results_matrix_factorization.json`` (the default test compares against them; a ``slow`` test reruns
   jax_privacy live).
2. Cyclic-Poisson BandMF: dplens's certified bracket against jax_privacy's ``amplified_bandmf_event`` under
   dp_accounting's ``PLDAccountant`` (default discretisation), ε within 0.1 %, and the time of the accounting call
   and of the whole process (``dplens dp-sgd --mechanism bandmf ... --json`` against a Python process importing
   jax_privacy and dp_accounting and accounting the event), best of three interleaved runs each.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results_matrix_factorization.json"
DELTA = 1e-6
#: (N, B, epochs, bands, σ): T = ⌈E N/B⌉ steps, q = B b/N; T a multiple of b (certified) in the first two only.
BANDMF = [
    (60_000, 256, 10, 8, 1.0),
    (50_000, 500, 20, 4, 0.8),
    (100_000, 1000, 50, 16, 1.5),
    (1_000_000, 4096, 5, 64, 2.0),
    (60_000, 256, 10, 7, 1.0),
]

_PEER = r"""
import json, math, sys, time
import dp_accounting
from jax_privacy.experimental import accounting
cases = json.loads(sys.argv[1])
out = []
for steps, bands, q, sigma, delta in cases:
    best = math.inf
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        event = accounting.amplified_bandmf_event(sigma, steps, num_bands=bands, sampling_prob=q)
        eps = dp_accounting.pld.PLDAccountant().compose(event).get_epsilon(delta)
        best = min(best, time.perf_counter() - start)
    out.append([eps, best])
print(json.dumps(out))
"""


_PEER_MC = r"""
import json, sys, time
import numpy as np
from jax_privacy import batch_selection
from jax_privacy.experimental.monte_carlo import sample_generation
steps, period, sigma, coefs, n = json.loads(sys.argv[1])
strategy = batch_selection.BallsInBinsSampling(iterations=steps, cycle_length=period)
start = time.perf_counter()
remove, _ = sample_generation.get_privacy_loss_sample(strategy, sigma, np.asarray(coefs), 0, True, n)
add, _ = sample_generation.get_privacy_loss_sample(strategy, sigma, np.asarray(coefs), 1, False, n)
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "remove": remove.tolist(), "add": add.tolist()}))
"""
#: Fixed bins (issue 48's configuration first): (T, cycle t, bands of BSR, σ, samples per direction for the timing,
#: samples per direction of the verified estimate at δ = 1e-3).
MONTE_CARLO = [(64, 16, 4, 1.5, 20_000, 10**6), (1000, 100, 16, 1.0, 5_000, 200_000)]


def monte_carlo() -> list[dict]:
    """dplens's vectorised privacy-loss sampler against jax_privacy's at the same sample count, and the raw ε at
    δ = 1e-3 from each one's samples (the same estimator), plus dplens's verified ε (δ = 1e-3)."""
    import numpy as np

    from dplens.accountant import matrix_factorization as mf
    from dplens.accountant import mf_monte_carlo as mc

    rows = []
    for steps, period, bands, sigma, n, verify in MONTE_CARLO:
        strategy = mf.bsr_strategy(bands, steps)
        proc = subprocess.run(
            [sys.executable, "-c", _PEER_MC, json.dumps([steps, period, sigma, strategy.coefficients.tolist(), n])],
            capture_output=True,
            text=True,
            check=True,
            env=_env(),
        )
        peer = json.loads(proc.stdout.strip().splitlines()[-1])
        mc.fixed_bins_losses(strategy, period=period, noise_multiplier=sigma, samples=10, rng=np.random.default_rng(9))
        start = time.perf_counter()
        rem, add = mc.fixed_bins_losses(
            strategy, period=period, noise_multiplier=sigma, samples=n, rng=np.random.default_rng(0)
        )
        ours_s = time.perf_counter() - start
        raw = {
            who: max(mc._smallest_epsilon(np.asarray(r), 1e-3, 10.0), mc._smallest_epsilon(np.asarray(a), 1e-3, 10.0))
            for who, (r, a) in (("ours", (rem, add)), ("peer", (peer["remove"], peer["add"])))
        }
        start = time.perf_counter()
        verified = mc.fixed_bins_monte_carlo(
            strategy, period=period, noise_multiplier=sigma, delta=1e-3, samples=verify, seed=0
        )
        verified_s = time.perf_counter() - start
        rows.append(
            {
                "case": [steps, period, bands, sigma],
                "samples": n,
                "peer_s": peer["seconds"],
                "ours_s": ours_s,
                "raw_epsilon_ours": raw["ours"],
                "raw_epsilon_peer": raw["peer"],
                "verified": verified.to_dict(),
                "verified_s": verified_s,
            }
        )
    return rows


def _helper(name: str):
    spec = importlib.util.spec_from_file_location(f"_mf_{name}", ROOT / "tests" / "helpers" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env() -> dict:
    return dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT / "src"))


def sensitivities() -> dict:
    cases, ours = _helper("mf_cases").cases()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "jax_mf_reference.py")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"kinds": [c["kind"] for c in cases], "ours": ours, "theirs": theirs}


def _bandmf_row(n, b, epochs, bands, sigma):
    from dplens.accountant.dp_sgd import dp_sgd_steps

    steps = dp_sgd_steps(dataset_size=n, batch_size=b, epochs=epochs)
    return steps, bands, b * bands / n, sigma


def _peer(cases: list, repeats: int) -> list:
    proc = subprocess.run(
        [sys.executable, "-c", _PEER, json.dumps(cases), str(repeats)],
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cli(n, b, epochs, bands, sigma) -> list[str]:
    cli = [sys.executable, "-m", "dplens.cli", "dp-sgd", "--mechanism", "bandmf", "--bands", str(bands)]
    cli += ["--sampling", "cyclic-poisson", "--dataset-size", str(n), "--batch-size", str(b), "--epochs"]
    return [*cli, str(epochs), "--noise-multiplier", str(sigma), "--delta", str(DELTA), "--json"]


def processes(case) -> tuple[float, float]:
    """Whole process, one case: the peer (import jax_privacy + dp_accounting, account) against ``dplens dp-sgd``,
    best of three interleaved runs each."""
    peer_best = ours_best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        _peer([[*_bandmf_row(*case), DELTA]], 1)
        peer_best = min(peer_best, time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(_cli(*case), capture_output=True, text=True, check=True, env=_env())
        ours_best = min(ours_best, time.perf_counter() - start)
    return peer_best, ours_best


def bandmf() -> list[dict]:
    from dplens.accountant.mf_accounting import mf_epsilon

    peer = _peer([[*_bandmf_row(*case), DELTA] for case in BANDMF], 3)
    rows = []
    for (n, b, epochs, bands, sigma), (peer_eps, peer_call) in zip(BANDMF, peer, strict=True):
        args = dict(mechanism="bandmf", sampling="cyclic-poisson", dataset_size=n, batch_size=b, epochs=epochs)
        call = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            ours = mf_epsilon(noise_multiplier=sigma, delta=DELTA, bands=bands, **args)
            call = min(call, time.perf_counter() - start)
        rows.append(
            {
                "case": [n, b, epochs, bands, sigma],
                "steps": ours.steps,
                "rounds": ours.rounds,
                "bound": ours.bound,
                "epsilon": ours.epsilon,
                "epsilon_lower": ours.epsilon_lower,
                "jax_privacy_epsilon": peer_eps,
                "relative_difference": (ours.epsilon - peer_eps) / peer_eps,
                "call_s": call,
                "peer_call_s": peer_call,
            }
        )
    return rows


def main() -> None:
    sens = sensitivities()
    rows = bandmf()
    peer_process, our_process = processes(BANDMF[0])
    mc_rows = monte_carlo()
    record = {
        "monte_carlo": mc_rows,
        "process_case": list(BANDMF[0]),
        "peer_process_s": peer_process,
        "dplens_process_s": our_process,
        "sensitivity_kinds": sens["kinds"],
        "jax_privacy_sensitivities": sens["theirs"],
        "dplens_sensitivities": sens["ours"],
        "bandmf": rows,
        "delta": DELTA,
        "date": time.strftime("%Y-%m-%d"),
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"### Matrix-factorisation mechanisms ({time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"Python {platform.python_version()})\n"
    )
    print(
        "Command: `nice -n 10 python benchmarks/bench_matrix_factorization.py` (writes "
        "benchmarks/results_matrix_factorization.json)\n"
    )
    worst = max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(sens["ours"], sens["theirs"], strict=True))
    print(
        f"Sensitivities, {len(sens['kinds'])} cases ({', '.join(sorted(set(sens['kinds'])))}): largest relative "
        f"difference to jax_privacy 2.0 (64-bit) {worst:.1e}\n"
    )
    print(
        "| N, B, E, bands, σ | T (rounds) | jax_privacy + dp_accounting PLD ε | dplens ε (bound) [ε_lower] | diff |"
        " accounting call: peer / dplens |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        n, b, e, bands, sigma = r["case"]
        print(
            f"| {n}, {b}, {e}, {bands}, {sigma} | {r['steps']} ({r['rounds']}) | {r['jax_privacy_epsilon']:.6f} | "
            f"{r['epsilon']:.6f} ({r['bound']}) [{r['epsilon_lower']:.6f}] | {100 * r['relative_difference']:+.3f} % | "
            f"{r['peer_call_s']:.3f} s / {r['call_s']:.4f} s ({r['peer_call_s'] / r['call_s']:.0f}×) |"
        )
    n, b, e, bands, sigma = BANDMF[0]
    print(
        f"\nWhole process (N={n}, B={b}, E={e}, {bands} bands, σ={sigma}; best of three interleaved): a Python process "
        f"importing jax_privacy + dp_accounting and accounting `amplified_bandmf_event` {peer_process:.2f} s, "
        f"`dplens dp-sgd --mechanism bandmf ... --json` {our_process:.2f} s ({peer_process / our_process:.1f}×)"
    )
    _print_monte_carlo(mc_rows)


def _print_monte_carlo(rows: list[dict]) -> None:
    print(
        "\nFixed bins, Monte Carlo (BSR strategies; both directions): privacy-loss samplers at the same sample "
        "count, the raw estimate ε̂ at δ = 1e-3 from each one's samples, and dplens's verified ε at 10⁶ samples per "
        "direction for T = 64, 2·10⁵ for T = 1000 (base δ from the verification rule)\n"
    )
    print(
        "| T, cycle, bands, σ | samples | jax_privacy / dplens sampler | raw ε̂: jax_privacy / dplens "
        "| dplens verified ε (remove, add) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        v = r["verified"]
        print(
            f"| {', '.join(str(x) for x in r['case'])} | {r['samples']} | {r['peer_s']:.2f} s / {r['ours_s']:.3f} s "
            f"({r['peer_s'] / r['ours_s']:.0f}×) | {r['raw_epsilon_peer']:.3f} / {r['raw_epsilon_ours']:.3f} | "
            f"{v['epsilon']:.3f} ({v['epsilon_remove']:.3f}, {v['epsilon_add']:.3f}), base δ {v['base_delta']:.3g}, "
            f"{r['verified_s']:.1f} s |"
        )


if __name__ == "__main__":
    main()
