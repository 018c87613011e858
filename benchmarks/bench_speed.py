"""Whole-process speed against dp-accounting, side by side in one run (issue 19).

    PYTHONPATH=$PWD/src python benchmarks/bench_speed.py [--repeat N] [--write benchmarks/RESULTS.md]

Each measurement runs a ``dplens`` command and an equivalent dp-accounting script in fresh interpreters (this
Python, ``sys.executable``), alternating the two so that a change in machine load hits both alike; the times are the
medians of ``--repeat`` runs after one warm-up run of each. Both sides run with bytecode caching on (as for installed
packages: the sandbox's PYTHONDONTWRITEBYTECODE=1 would make every dplens process recompile its sources), into a
temporary PYTHONPYCACHEPREFIX.

1. Schedule: 100 noise multipliers linspace(0.8, 1.6, 100), sampling rate 0.004, 100 steps each, δ = 1e-5:
   ``dplens account --method pld`` against dp-accounting's ``PLDAccountant`` at its default grid (1e-4).
2. MNIST DP-SGD (q = 256/60000, σ = 1.1, 14 063 steps, δ = 1e-5): ``dplens account --method pld --json`` (with its
   certified ``epsilon_lower``) against ``PLDAccountant(value_discretization_interval=1e-4)``.
3. Calibration of σ to ε = 3 (δ = 1e-5, PLD): ``dplens calibrate`` against ``calibrate_dp_mechanism`` with
   ``PLDAccountant`` (its default bracket).
4. Sweep of 1000 (σ, q, T) configurations by RDP: ``dplens sweep --json`` against a loop of dp-accounting
   ``RdpAccountant`` over the same grid.

Ratios are dp-accounting time / dplens time (higher = dplens faster).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DELTA = 1e-5
SCHEDULE_SIGMAS = np.linspace(0.8, 1.6, 100)
SCHEDULE_Q, SCHEDULE_STEPS = 0.004, 100
MNIST_Q, MNIST_SIGMA, MNIST_STEPS = 256 / 60000, 1.1, 14063
# The sweep: 10 noise multipliers × 5 sampling rates × 20 step counts = 1000 configurations (50 distinct (σ, q)).
SWEEP = {"noise_multiplier": (0.6, 2.0, 10), "sampling_rate": (0.001, 0.02, 5), "steps": (500, 10000, 20)}
MARK_BEGIN, MARK_END = "<!-- bench_speed:begin -->", "<!-- bench_speed:end -->"


def _environment(cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    env.setdefault("PYTHONPATH", str(ROOT / "src"))
    return env


def _run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return elapsed, done.stdout


def _side_by_side(theirs: list[str], ours: list[str], env: dict[str, str], repeat: int) -> dict:
    """Warm up each, then alternate; medians of ``repeat`` timings and the last outputs."""
    _run(theirs, env)
    _run(ours, env)
    t_theirs, t_ours, out_theirs, out_ours = [], [], "", ""
    for _ in range(repeat):
        elapsed, out_theirs = _run(theirs, env)
        t_theirs.append(elapsed)
        elapsed, out_ours = _run(ours, env)
        t_ours.append(elapsed)
    return {
        "theirs_s": statistics.median(t_theirs),
        "ours_s": statistics.median(t_ours),
        "theirs_all": t_theirs,
        "ours_all": t_ours,
        "theirs_out": out_theirs,
        "ours_out": out_ours,
    }


def _script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("import dp_accounting as dpa\n" + textwrap.dedent(body), encoding="utf-8")
    return path


def _spec(directory: Path, name: str, tables: list[dict]) -> Path:
    lines = []
    for table in tables:
        lines.append("[[mechanism]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
        lines.append("")
    path = directory / name
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _account(spec: Path) -> list[str]:
    return [sys.executable, "-m", "dplens.cli", "account", str(spec), "--delta", str(DELTA), "--method=pld", "--json"]


def _grid(low: float, high: float, count: int) -> list[float]:
    return [float(v) for v in np.linspace(low, high, count)]


def bench_schedule(directory: Path, env: dict[str, str], repeat: int) -> dict:
    spec = _spec(
        directory,
        "schedule.toml",
        [
            {
                "type": "poisson_subsampled_gaussian",
                "noise_multiplier": float(s),
                "sampling_rate": SCHEDULE_Q,
                "steps": SCHEDULE_STEPS,
            }
            for s in SCHEDULE_SIGMAS
        ],
    )
    script = _script(
        directory,
        "schedule_dpa.py",
        f"""
        acc = dpa.pld.PLDAccountant()
        for sigma in {[float(s) for s in SCHEDULE_SIGMAS]!r}:
            acc.compose(dpa.PoissonSampledDpEvent({SCHEDULE_Q}, dpa.GaussianDpEvent(sigma)), {SCHEDULE_STEPS})
        print(acc.get_epsilon({DELTA}))
        """,
    )
    run = _side_by_side([sys.executable, str(script)], _account(spec), env, repeat)
    payload = json.loads(run["ours_out"])
    return run | {"eps_theirs": float(run["theirs_out"]), "eps": payload["epsilon"], "lower": payload["epsilon_lower"]}


def bench_mnist(directory: Path, env: dict[str, str], repeat: int) -> dict:
    spec = _spec(
        directory,
        "mnist.toml",
        [
            {
                "type": "poisson_subsampled_gaussian",
                "noise_multiplier": MNIST_SIGMA,
                "sampling_rate": MNIST_Q,
                "steps": MNIST_STEPS,
            }
        ],
    )
    script = _script(
        directory,
        "mnist_dpa.py",
        f"""
        acc = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
        event = dpa.PoissonSampledDpEvent({MNIST_Q!r}, dpa.GaussianDpEvent({MNIST_SIGMA}))
        acc.compose(dpa.SelfComposedDpEvent(event, {MNIST_STEPS}))
        print(acc.get_epsilon({DELTA}))
        """,
    )
    run = _side_by_side([sys.executable, str(script)], _account(spec), env, repeat)
    payload = json.loads(run["ours_out"])
    return run | {"eps_theirs": float(run["theirs_out"]), "eps": payload["epsilon"], "lower": payload["epsilon_lower"]}


def bench_calibration(directory: Path, env: dict[str, str], repeat: int, target: float = 3.0) -> dict:
    spec = _spec(
        directory,
        "calibrate.toml",
        [
            {
                "type": "poisson_subsampled_gaussian",
                "noise_multiplier": 1.0,
                "sampling_rate": MNIST_Q,
                "steps": MNIST_STEPS,
            }
        ],
    )
    script = _script(
        directory,
        "calibrate_dpa.py",
        f"""
        def event(sigma):
            step = dpa.PoissonSampledDpEvent({MNIST_Q!r}, dpa.GaussianDpEvent(sigma))
            return dpa.SelfComposedDpEvent(step, {MNIST_STEPS})
        print(dpa.calibrate_dp_mechanism(dpa.pld.PLDAccountant, event, {target}, {DELTA}))
        """,
    )
    ours = [
        sys.executable, "-m", "dplens.cli", "calibrate", str(spec), "--param", "noise_multiplier",
        "--target-epsilon", str(target), "--delta", str(DELTA), "--json",
    ]  # fmt: skip
    run = _side_by_side([sys.executable, str(script)], ours, env, repeat)
    payload = json.loads(run["ours_out"])
    sigma = payload["value"]
    # The answer re-checked by dp-accounting itself, at its default grid and at a finer one (5e-5).
    checks = {}
    import dp_accounting as dpa

    for interval in (1e-4, 5e-5):
        acc = dpa.pld.PLDAccountant(value_discretization_interval=interval)
        step = dpa.PoissonSampledDpEvent(MNIST_Q, dpa.GaussianDpEvent(sigma))
        acc.compose(dpa.SelfComposedDpEvent(step, MNIST_STEPS))
        checks[interval] = acc.get_epsilon(DELTA)
    return run | {
        "sigma_theirs": float(run["theirs_out"]),
        "sigma": sigma,
        "eps": payload["epsilon"],
        "lower": payload.get("epsilon_lower"),
        "target": target,
        "checks": checks,
    }


def bench_sweep(directory: Path, env: dict[str, str], repeat: int) -> dict:
    spec = _spec(
        directory,
        "sweep.toml",
        [{"type": "poisson_subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 0.01, "steps": 1000}],
    )
    grid = {name: _grid(*values) for name, values in SWEEP.items()}
    script = _script(
        directory,
        "sweep_dpa.py",
        f"""
        import json
        out = []
        for sigma in {grid["noise_multiplier"]!r}:
            for q in {grid["sampling_rate"]!r}:
                for steps in {[round(v) for v in grid["steps"]]!r}:
                    acc = dpa.rdp.RdpAccountant()
                    step = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma))
                    acc.compose(dpa.SelfComposedDpEvent(step, steps))
                    out.append(acc.get_epsilon({DELTA}))
        print(json.dumps(out))
        """,
    )
    params = [f"--param={name}={low}:{high}:{count}" for name, (low, high, count) in SWEEP.items()]
    ours = [sys.executable, "-m", "dplens.cli", "sweep", str(spec), *params, "--delta", str(DELTA), "--json"]
    run = _side_by_side([sys.executable, str(script)], ours, env, repeat)
    theirs = np.array(json.loads(run["theirs_out"]))
    ours_eps = np.array([row["epsilon"] for row in json.loads(run["ours_out"])["rows"]])
    return run | {"configurations": ours_eps.size, "ratio_eps": ours_eps / theirs}


def _load() -> str:
    try:
        return " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["schedule", "mnist", "calibration", "sweep"], action="append")
    parser.add_argument("--write", metavar="PATH", help="replace (or append) the bench_speed section of this file")
    args = parser.parse_args()
    chosen = args.only or ["schedule", "mnist", "calibration", "sweep"]
    load_before = _load()
    started = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        env = _environment(str(directory / "pycache"))
        for name in chosen:
            results[name] = globals()[f"bench_{name}"](directory, env, args.repeat)
            print(f"[bench_speed] {name}: done", file=sys.stderr, flush=True)
    wall = time.perf_counter() - started
    text = _report(results, repeat=args.repeat, load_before=load_before, load_after=_load(), wall=wall)
    print(text)
    if args.write:
        _write(Path(args.write), text)


def _times(run: dict) -> str:
    return ", ".join(f"{t:.2f}" for t in run["theirs_all"]) + " | " + ", ".join(f"{t:.2f}" for t in run["ours_all"])


def _report(results: dict, *, repeat: int, load_before: str, load_after: str, wall: float) -> str:
    lines = [
        MARK_BEGIN,
        f"### Speed: whole process against dp-accounting ({time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, Python {platform.python_version()}, dp-accounting {metadata.version('dp-accounting')}, "
        f"numpy {np.__version__})",
        "",
        f"Command: `python benchmarks/bench_speed.py --repeat {repeat} --write benchmarks/RESULTS.md`"
        f" (wall time {wall:.0f} s; load average {load_before} before, {load_after} after; the ratios come from"
        " interleaved runs, so a change of load hits both sides alike)",
        "",
        "Fresh interpreters for every run (`python -m dplens.cli …` against a dp-accounting script, both with bytecode"
        f" caching), alternated; medians of {repeat} runs after a warm-up.",
        "",
        "| measurement | dp-accounting | dplens | ratio | target | result | values |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    if "schedule" in results:
        r = results["schedule"]
        ratio = r["theirs_s"] / r["ours_s"]
        rel = r["eps"] / r["eps_theirs"] - 1
        ok = ratio >= 10 and abs(rel) <= 1e-3 and r["eps"] >= 0.995 * r["eps_theirs"]
        lines.append(
            f"| 100-σ schedule, PLD (`PLDAccountant()` default grid) | {r['theirs_s']:.2f} s | {r['ours_s']:.2f} s | "
            f"**{ratio:.1f}×** | ≥ 10×, ε within 0.1 %, ≥ 0.995× | {'met' if ok else 'NOT met'} | "
            f"ε {r['eps_theirs']:.6f} vs {r['eps']:.6f} ({rel * 100:+.3f} %); "
            f"certified [{r['lower']:.6f}, {r['eps']:.6f}] |"
        )
        notes.append(f"schedule times (s), dp-accounting | dplens: {_times(r)}")
    if "mnist" in results:
        r = results["mnist"]
        ratio = r["theirs_s"] / r["ours_s"]
        rel = r["eps"] / r["eps_theirs"] - 1
        width = (r["eps"] - r["lower"]) / r["eps"]
        ok = ratio >= 3 and abs(rel) <= 1e-3 and width <= 1e-3
        lines.append(
            f"| MNIST DP-SGD, PLD (dp-accounting at 1e-4) | {r['theirs_s']:.2f} s | {r['ours_s']:.2f} s | "
            f"**{ratio:.1f}×** | ≥ 3×, ε within 0.1 %, (ε − ε_lower) ≤ 1e-3 ε | {'met' if ok else 'NOT met'} | "
            f"ε {r['eps_theirs']:.6f} vs {r['eps']:.6f} ({rel * 100:+.3f} %); epsilon_lower {r['lower']:.6f} "
            f"(width {width:.1e}) |"
        )
        notes.append(f"MNIST times (s), dp-accounting | dplens: {_times(r)}")
    if "calibration" in results:
        r = results["calibration"]
        ratio = r["theirs_s"] / r["ours_s"]
        ok = ratio >= 5 and r["eps"] <= r["target"]
        checks = ", ".join(f"{e:.6f} at {i:g}" for i, e in r["checks"].items())
        lines.append(
            f"| calibrate σ to ε = {r['target']:g} (PLD) | {r['theirs_s']:.2f} s | {r['ours_s']:.2f} s | "
            f"**{ratio:.1f}×** | ≥ 5×, never above the target | {'met' if ok else 'NOT met'} | "
            f"σ {r['sigma_theirs']:.6f} vs {r['sigma']:.6f} ({(r['sigma'] / r['sigma_theirs'] - 1) * 100:+.3f} %); "
            f"dplens ε {r['eps']:.6f}, certified lower {r['lower']:.6f}; dp-accounting's ε at dplens's σ: {checks} |"
        )
        notes.append(f"calibration times (s), dp-accounting | dplens: {_times(r)}")
    if "sweep" in results:
        r = results["sweep"]
        ratio = r["theirs_s"] / r["ours_s"]
        ok = ratio >= 50
        grid = " × ".join(f"{name} {low:g}:{high:g}:{count}" for name, (low, high, count) in SWEEP.items())
        lines.append(
            f"| sweep of {r['configurations']} configurations, RDP ({grid}) | {r['theirs_s']:.2f} s | "
            f"{r['ours_s']:.2f} s | **{ratio:.1f}×** | ≥ 50× | {'met' if ok else 'NOT met'} | dplens ε / dp-accounting "
            f"ε: min {r['ratio_eps'].min():.6f}, max {r['ratio_eps'].max():.6f} (continuous α vs its 156 orders) |"
        )
        notes.append(f"sweep times (s), dp-accounting | dplens: {_times(r)}")
    lines += ["", *[f"- {note}" for note in notes], MARK_END]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if MARK_BEGIN in old and MARK_END in old:
        head, _, rest = old.partition(MARK_BEGIN)
        _, _, tail = rest.partition(MARK_END)
        new = head + text + tail
    else:
        new = old.rstrip("\n") + "\n\n\n" + text + "\n"
    path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    main()
