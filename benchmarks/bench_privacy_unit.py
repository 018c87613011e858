"""The privacy unit (issue 49): user-level DP-SGD, tuning and adaptive clipping, against dp-accounting in one run.

    python benchmarks/bench_privacy_unit.py [--write]

1. Example-level sampling with at most K examples per user (Poisson): dplens's ``UserLevelRun`` (the mixture of
   Gaussians with Binomial(K, q) weights on dplens's PLD engine, certified bracket) against dp-accounting's
   ``MixtureOfGaussiansDpEvent`` on its PLD accountant (value_discretization_interval 1e-4, its default), and against
   dplens's ``GroupPrivacy`` of the subsampled step (RDP, Mironov Prop. 2). dplens's whole process (a fresh
   interpreter: import + accounting) is timed too. K = 100 / 1000 (truncated Binomial tail) for dplens alone.
2. Repeat-and-select (Papernot–Steinke) against dp-accounting's RdpAccountant on ``RepeatAndSelectDpEvent``.
3. Adaptive clipping against the closed form (DP-SGD at the total σ).
4. Fixed-size batches for a user (K ≥ 2): dplens's group-privacy upper bound and attained-pair lower end beside
   Ganesh 2024's hypergeometric mixture on dp-accounting's PLD (what jax_privacy's user-level accountant computes).
5. Heterogeneous users: a histogram of examples per user (worst case and distribution), with times.
6. Opacus 1.6's AdaClipDPOptimizer as from_opacus reads it, against the ε Opacus charges.

``--write`` replaces this benchmark's section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
N = 1_000_000
ELS = [  # (σ, q, T, δ, K)
    (1.5, 0.005, 5000, 1e-6, 2),
    (1.5, 0.005, 5000, 1e-6, 4),
    (1.5, 0.005, 5000, 1e-6, 8),
    (1.0, 0.01, 1000, 1e-5, 3),
    (3.0, 0.02, 2000, 1e-6, 10),
]
LARGE_K = [(30.0, 0.005, 5000, 1e-6, 100), (300.0, 0.005, 5000, 1e-6, 1000)]


def _run(sigma, q, steps, k):
    from dplens.accountant.user_level import UserLevelRun

    batch = round(q * N)
    return UserLevelRun(
        noise_multiplier=sigma, dataset_size=N, batch_size=batch, epochs=steps * batch / N, max_examples_per_user=k
    )


def _dpa(sigma, q, steps, delta, k):
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from scipy.stats import binom

    probs = binom.pmf(range(k + 1), k, q)
    event = dp_event.MixtureOfGaussiansDpEvent(sigma, [float(i) for i in range(k + 1)], [float(p) for p in probs])
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    return accountant.compose(event, steps).get_epsilon(delta)


def _whole_process(sigma, q, steps, delta, k) -> float:
    code = (
        "from dplens.accountant.user_level import user_level_epsilon as f;"
        f"f(dataset_size={N}, batch_size={round(q * N)}, epochs={steps * round(q * N) / N!r}, noise_multiplier={sigma},"
        f" delta={delta}, max_examples_per_user={k}, method='pld')"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return time.perf_counter() - start


def _els_rows() -> list[str]:
    from dplens.accountant.compose import Accountant
    from dplens.accountant.group import GroupPrivacy

    rows = [
        "| σ, q, T, δ, K | dp-accounting MoG PLD ε | time | dplens [ε_lower, ε] | time (in process / whole process) | "
        "ratio ε | speed-up (whole process) | GroupPrivacy (RDP) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sigma, q, steps, delta, k in ELS:
        run = _run(sigma, q, steps, k)
        start = time.perf_counter()
        ours = Accountant().compose(run).epsilon_result(delta, method="pld")
        ours_time = time.perf_counter() - start
        whole = _whole_process(sigma, q, steps, delta, k)
        start = time.perf_counter()
        theirs = _dpa(sigma, q, steps, delta, k)
        theirs_time = time.perf_counter() - start
        group = GroupPrivacy(event=run.record_run().standard_event(), group_size=k)
        group_eps = Accountant().compose(group).epsilon(delta, method="rdp")
        inside = ours.epsilon_lower <= theirs
        rows.append(
            f"| {sigma}, {q}, {steps}, {delta:g}, {k} | {theirs:.4f} | {theirs_time:.1f} s | "
            f"[{ours.epsilon_lower:.4f}, {ours.epsilon:.4f}]{'' if inside else ' (lower end above dp-accounting!)'} | "
            f"{ours_time:.2f} s / {whole:.2f} s | {ours.epsilon / theirs:.4f} | {theirs_time / whole:.1f}× | "
            f"{group_eps:.3f} |"
        )
    return rows


def _large_k_rows() -> list[str]:
    from dplens.accountant.user_level import user_level_epsilon

    rows = ["| σ, q, T, δ, K | dplens [ε_lower, ε] | truncation δ (included) | time |", "|---|---|---|---|"]
    for sigma, q, steps, delta, k in LARGE_K:
        batch = round(q * N)
        start = time.perf_counter()
        out = user_level_epsilon(
            dataset_size=N,
            batch_size=batch,
            epochs=steps * batch / N,
            noise_multiplier=sigma,
            delta=delta,
            max_examples_per_user=k,
            method="pld",
        )
        elapsed = time.perf_counter() - start
        lower = "none" if out.epsilon_lower is None else f"{out.epsilon_lower:.4f}"
        rows.append(
            f"| {sigma}, {q}, {steps}, {delta:g}, {k} | [{lower}, {out.epsilon:.4f}] | "
            f"{out.truncation_delta or 0:.2g} | {elapsed:.2f} s |"
        )
    return rows


def _tuning_rows() -> list[str]:
    from dp_accounting.rdp import rdp_privacy_accountant

    from dplens.accountant import events as ev
    from dplens.accountant.compose import Accountant
    from dplens.accountant.tuning import tuning_event

    base = ev.SelfComposed(
        event=ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.1)), count=1000
    )
    one = Accountant().compose(base).epsilon(1e-6, method="rdp")
    rows = [
        f"One run (q = 0.01, σ = 1.1, T = 1000, δ = 1e-6): ε = {one:.4f}.",
        "",
        "| trials | dp-accounting RDP ε | dplens RDP ε | ratio |",
        "|---|---|---|---|",
    ]
    for distribution, mean, shape in [
        ("geometric", 10, None),
        ("poisson", 10, None),
        ("logarithmic", 10, None),
        ("truncated-negative-binomial", 10, 0.5),
        ("geometric", 40, None),
        ("poisson", 40, None),
    ]:
        study = tuning_event(base, distribution=distribution, mean=mean, shape=shape)
        ours = Accountant().compose(study).epsilon(1e-6, method="rdp")
        theirs = rdp_privacy_accountant.RdpAccountant().compose(study.to_dp_accounting()).get_epsilon(1e-6)
        label = f"{distribution}{'' if shape is None else f' (η = {shape})'}, mean {mean}"
        rows.append(f"| {label} | {theirs:.4f} | {ours:.4f} | {ours / theirs:.4f} |")
    return rows


def _adaclip_row() -> str:
    from dplens.accountant import events as ev
    from dplens.accountant.adaptive_clipping import AdaptiveClipping
    from dplens.accountant.compose import Accountant

    ada = AdaptiveClipping.from_total(noise_multiplier=1.1, count_noise=12.8, sampling_rate=0.004, steps=10000)
    plain = ev.PoissonSampled(sampling_rate=0.004, event=ev.Gaussian(noise_multiplier=1.1))
    a = Accountant().compose(ada).epsilon(1e-5, method="pld")
    b = Accountant().compose(plain, count=10000).epsilon(1e-5, method="pld")
    return (
        f"Adaptive clipping (σ = 1.1, σ_b = 12.8 → σ_eff = {ada.gradient_noise:.6f}, q = 0.004, T = 10000, "
        f"δ = 1e-5): ε = {a:.6f}; DP-SGD at σ = 1.1: {b:.6f} (relative difference {abs(a - b) / b:.1e})."
    )


FIXED_SIZE = [  # (σ, q, T, δ, K, relation)
    (1.5, 0.005, 5000, 1e-6, 2, "zero_out"),
    (1.5, 0.005, 5000, 1e-6, 8, "zero_out"),
    (1.5, 0.005, 5000, 1e-6, 2, "replace_one"),
]


def _dpa_fixed_size(sigma, q, steps, delta, k, shift):
    """jax_privacy's FIXED_BATCH_SIZE user-level event (Ganesh 2024): Hypergeometric(N, K, B) weights, shifts
    ``shift``·j, on dp-accounting's PLD."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from scipy.stats import hypergeom

    law = hypergeom(N, k, round(q * N))
    probs = [float(law.pmf(j)) for j in range(k + 1)]
    event = dp_event.MixtureOfGaussiansDpEvent(sigma, [float(shift * j) for j in range(k + 1)], probs)
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    return accountant.compose(event, steps).get_epsilon(delta)


def _fixed_size_rows() -> list[str]:
    from dplens.accountant.user_level import user_level_epsilon

    rows = [
        "| σ, q, T, δ, K, relation | dplens ε (group privacy, upper) | dplens ε_lower (attained pair) | time | "
        "Ganesh 2024 mixture on dp-accounting (jax_privacy's) | time |",
        "|---|---|---|---|---|---|",
    ]
    for sigma, q, steps, delta, k, relation in FIXED_SIZE:
        batch = round(q * N)
        start = time.perf_counter()
        out = user_level_epsilon(
            dataset_size=N,
            batch_size=batch,
            epochs=steps * batch / N,
            noise_multiplier=sigma,
            delta=delta,
            max_examples_per_user=k,
            sampling="fixed-size",
            neighboring=relation,
        )
        ours_time = time.perf_counter() - start
        start = time.perf_counter()
        theirs = _dpa_fixed_size(sigma, q, steps, delta, k, 2 if relation == "replace_one" else 1)
        theirs_time = time.perf_counter() - start
        rows.append(
            f"| {sigma}, {q}, {steps}, {delta:g}, {k}, {relation} | {out.epsilon:.4g} | {out.epsilon_lower:.4f} | "
            f"{ours_time:.2f} s | {theirs:.4f} | {theirs_time:.1f} s |"
        )
    return rows


HISTOGRAMS = [  # (label, histogram, σ, B, E, δ)
    ("2 counts", {1: 150_000, 5: 10_000}, 1.5, 1000, 25, 1e-6),
    ("K up to 1000", {1: 900_000, 10: 5000, 100: 400, 1000: 50}, 2.0, 5000, 2, 1e-6),
    ("300 distinct counts (1..300)", {k: 1000 for k in range(1, 301)}, 4.0, 20000, 1, 1e-6),
]


def _histogram_rows() -> list[str]:
    from dplens.accountant.user_level import user_epsilons

    rows = [
        "| histogram | N | worst case ε [ε_lower] | median / 99 % user ε | counts accounted | time |",
        "|---|---|---|---|---|---|",
    ]
    for label, histogram, sigma, batch, epochs, delta in HISTOGRAMS:
        start = time.perf_counter()
        out = user_epsilons(histogram, batch_size=batch, epochs=epochs, noise_multiplier=sigma, delta=delta)
        elapsed = time.perf_counter() - start
        worst = out.worst_case
        lower = "none" if worst.epsilon_lower is None else f"{worst.epsilon_lower:.4f}"
        rows.append(
            f"| {label} (σ = {sigma}, B = {batch}, E = {epochs}, δ = {delta:g}) | {out.dataset_size} | "
            f"{worst.epsilon:.4g} [{lower}] | {out.quantile(0.5):.4f} / {out.quantile(0.99):.4f} | "
            f"{len(set(out.accounted_at))} of {len(out.rows)} | {elapsed:.2f} s |"
        )
    return rows


def _opacus_adaclip_rows() -> list[str]:
    """Opacus 1.6 AdaClipDPOptimizer as implemented (raw count at σ_u, gradient at σ_eff) vs what it charges (σ)."""
    from dplens.accountant import events as ev
    from dplens.accountant.compose import Accountant
    from dplens.integrations.opacus_accountant import AdaClipSettings, _ledger

    rows = [
        "| σ, unclipped_num_std σ_u, q, T, δ | ε charged (DP-SGD at σ) | "
        "ε of the run (from_opacus with the optimizer) |",
        "|---|---|---|",
    ]
    q, steps, delta = 256 / 60000, 14063, 1e-5
    for sigma, sigma_u in ((1.1, 1.0), (1.1, 12.8)):
        settings = AdaClipSettings(
            unclipped_num_std=sigma_u,
            target_unclipped_quantile=0.5,
            clipbound_learning_rate=0.2,
            max_clipbound=10.0,
            min_clipbound=0.1,
        )
        true = _ledger([(sigma, q, steps)], adaclip=settings).epsilon(delta)
        step = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))
        charged = Accountant().compose(step, count=steps).epsilon(delta)
        rows.append(f"| {sigma}, {sigma_u}, {q:.6f}, {steps}, {delta:g} | {charged:.4f} | {true:.4f} |")
    return rows


def main() -> None:
    load = os.getloadavg()
    lines = [
        f"### The privacy unit: users, tuning, adaptive clipping (issue 49) ({time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, Python {platform.python_version()}, dp-accounting {metadata.version('dp-accounting')}, "
        f"load average {load[0]:.1f} on {os.cpu_count()} cores, shared)",
        "",
        "Command: `nice -n 10 python benchmarks/bench_privacy_unit.py --write` (one process; dp-accounting in the same "
        "run; N = 1e6 examples)",
        "",
        "Example-level sampling, at most K examples per user (Poisson):",
        "",
        *_els_rows(),
        "",
        "Large K (dplens alone; dp-accounting's mixture of K + 1 components is out of reach):",
        "",
        *_large_k_rows(),
        "",
        "Fixed-size batches (B of N drawn afresh each step), at most K examples per user:",
        "",
        *_fixed_size_rows(),
        "",
        "Heterogeneous users (a histogram of examples per user, Poisson):",
        "",
        *_histogram_rows(),
        "",
        "Tuning (Papernot–Steinke repeat-and-select, RDP route):",
        "",
        *_tuning_rows(),
        "",
        _adaclip_row(),
        "",
        "Opacus 1.6 AdaClipDPOptimizer read by from_opacus (MNIST-sized: q = 256/60000, T = 14063, δ = 1e-5):",
        "",
        *_opacus_adaclip_rows(),
    ]
    text = "\n".join(lines)
    print(text)
    if "--write" in sys.argv:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results_md import write_section

        write_section(ROOT / "benchmarks" / "RESULTS.md", "bench_privacy_unit", text)


if __name__ == "__main__":
    main()
