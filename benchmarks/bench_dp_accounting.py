"""dplens's dp_accounting PLDAccountant against dp_accounting's own, same call sequence (issue 32).

    PYTHONPATH=$PWD/src nice -n 10 python benchmarks/bench_dp_accounting.py [--repeat N] [--write benchmarks/RESULTS.md]

Two workloads, each the same user code with only the accountant class swapped
(``dp_accounting.pld.PLDAccountant`` against ``dplens.integrations.dp_accounting.PLDAccountant``, both at their
defaults: dp_accounting's grid 1e-4, dplens's certified bracket of relative width 1e-3):

1. MNIST DP-SGD: ``compose(PoissonSampledDpEvent(256/60000, GaussianDpEvent(1.1)), 14063)``, ``get_epsilon(1e-5)``;
2. a 100-σ heterogeneous schedule: σ = linspace(0.8, 1.6, 100), q = 0.004, 100 steps each, one ``compose`` per σ,
   then ``get_epsilon(1e-5)`` (the schedule of benchmarks/bench_speed.py).

Three timings per workload, medians of ``--repeat``:

- **whole process** — a fresh interpreter runs the script (``import dp_accounting``, build, compose, query),
  alternating the two sides; bytecode caching on for both (a temporary PYTHONPYCACHEPREFIX);
- **after imports** — the same processes, timed from just after ``import dp_accounting`` (which both sides pay:
  the user's code imports it to build its events) to the end: dplens's own imports are inside this part;
- **warm** — in this process, after one warm-up call of each: a fresh accountant per repetition, same calls.

Ratios are dp_accounting time / dplens time.
"""

from __future__ import annotations

import argparse
import datetime
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

from _sections import write_section

ROOT = Path(__file__).resolve().parent.parent
DELTA = 1e-5
MNIST = (256 / 60000, 1.1, 14063)
SCHEDULE_Q, SCHEDULE_STEPS = 0.004, 100
MARKERS = ("<!-- bench_dp_accounting:start -->", "<!-- bench_dp_accounting:end -->")
IMPORTS = {
    "dp_accounting": "from dp_accounting.pld.pld_privacy_accountant import PLDAccountant",
    "dplens": "from dplens.integrations.dp_accounting import PLDAccountant",
}


def _schedule_sigmas() -> list[float]:
    return [0.8 + 0.8 * i / 99 for i in range(100)]


WORKLOADS = {
    "MNIST DP-SGD (q = 256/60000, σ = 1.1, 14 063 steps)": f"""
        accountant = PLDAccountant()
        accountant.compose(dp_accounting.PoissonSampledDpEvent({MNIST[0]!r}, dp_accounting.GaussianDpEvent({MNIST[1]})),
                           {MNIST[2]})
        epsilon = accountant.get_epsilon({DELTA})
    """,
    "100-σ schedule (σ 0.8…1.6, q = 0.004, 100 steps each)": f"""
        accountant = PLDAccountant()
        for sigma in {_schedule_sigmas()!r}:
            accountant.compose(dp_accounting.PoissonSampledDpEvent({SCHEDULE_Q}, dp_accounting.GaussianDpEvent(sigma)),
                               {SCHEDULE_STEPS})
        epsilon = accountant.get_epsilon({DELTA})
    """,
}


def _script(side: str, body: str) -> str:
    return (
        "import time\nstart = time.perf_counter()\nimport dp_accounting\nimported = time.perf_counter()\n"
        + IMPORTS[side]
        + "\n"
        + textwrap.dedent(body)
        + "\nprint(epsilon, time.perf_counter() - imported, imported - start)\n"
    )


def _run(path: Path, env: dict[str, str]) -> tuple[float, float, float]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{path.name} failed: {done.stderr[-2000:]}")
    epsilon, after, _ = (float(v) for v in done.stdout.split())
    return wall, after, epsilon


def whole_process(body: str, repeat: int, directory: Path, env: dict[str, str]) -> dict:
    paths = {}
    for side in IMPORTS:
        paths[side] = directory / f"{side}_{abs(hash(body))}.py"
        paths[side].write_text(_script(side, body))
        _run(paths[side], env)  # warm-up (bytecode cache)
    walls: dict[str, list[float]] = {side: [] for side in IMPORTS}
    afters: dict[str, list[float]] = {side: [] for side in IMPORTS}
    epsilons = {}
    for _ in range(repeat):
        for side in IMPORTS:
            wall, after, epsilon = _run(paths[side], env)
            walls[side].append(wall)
            afters[side].append(after)
            epsilons[side] = epsilon
    return {"wall": walls, "after_imports": afters, "epsilon": epsilons}


def warm(body: str, repeat: int) -> dict:
    import dp_accounting  # noqa: F401  (the scripts' namespace)

    times: dict[str, list[float]] = {}
    epsilons = {}
    for side, line in IMPORTS.items():
        namespace: dict = {}
        exec("import dp_accounting\n" + line, namespace)
        code = compile(textwrap.dedent(body), f"<{side}>", "exec")
        exec(code, namespace)  # warm-up
        times[side] = []
        for _ in range(repeat):
            start = time.perf_counter()
            exec(code, namespace)
            times[side].append(time.perf_counter() - start)
        epsilons[side] = namespace["epsilon"]
    return {"times": times, "epsilon": epsilons}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def markdown(results: dict, *, command: str, elapsed: float) -> str:
    versions = f"dp-accounting {metadata.version('dp-accounting')}, numpy {metadata.version('numpy')}"
    lines = [
        f"### dplens as dp_accounting's PLDAccountant: same call sequence ({datetime.date.today().isoformat()}, "
        f"{platform.machine()}, Python {platform.python_version()}, {versions})",
        "",
        f"Command: `{command}` (wall time {elapsed:.0f} s; medians; load average before/after "
        f"{results['load_before']} / {results['load_after']}). Both sides: the same script, only the "
        "`PLDAccountant` class swapped; dp_accounting at its default grid (1e-4), dplens at its default bracket "
        "(relative width 1e-3).",
        "",
        "| workload | timing | dp_accounting | dplens | ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for name, data in results["workloads"].items():
        for label, key, values in (
            ("whole process", "wall", data["process"]["wall"]),
            ("after `import dp_accounting`", "after", data["process"]["after_imports"]),
            ("warm (in process)", "warm", data["warm"]["times"]),
        ):
            theirs, ours = _median(values["dp_accounting"]), _median(values["dplens"])
            target = "≥ 10×" if key in ("wall", "warm") else "—"
            met = "" if target == "—" else (" (met)" if theirs / ours >= 10 else " (**not met**)")
            lines.append(
                f"| {name} | {label} | {theirs:.3f} s | {ours:.3f} s | **{theirs / ours:.1f}×** | {target}{met} |"
            )
        eps = data["process"]["epsilon"]
        lines.append(
            f"| {name} | ε at δ = 1e-5 | {eps['dp_accounting']:.6f} | {eps['dplens']:.6f} | "
            f"{(eps['dplens'] / eps['dp_accounting'] - 1) * 100:+.3f} % | both upper bounds |"
        )
    lines += [
        "",
        f"`python -c 'import dp_accounting'` alone: {results['import_seconds']:.3f} s (median), paid by both sides of "
        "every whole-process run: it bounds the whole-process ratio of a workload that is fast on both sides "
        "(see the notes).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results: dict = {"workloads": {}, "load_before": " / ".join(f"{v:.2f}" for v in os.getloadavg())}
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env.setdefault("PYTHONPATH", str(ROOT / "src"))
        imports = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import dp_accounting"], env=env, check=True)
            imports.append(time.perf_counter() - t0)
        results["import_seconds"] = _median(imports)
        for name, body in WORKLOADS.items():
            results["workloads"][name] = {
                "process": whole_process(body, args.repeat, Path(tmp), env),
                "warm": warm(body, args.repeat),
            }
            print(name, json.dumps(results["workloads"][name]["process"]["epsilon"]), file=sys.stderr)
    results["load_after"] = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    elapsed = time.perf_counter() - start
    shown = " ".join(["python benchmarks/bench_dp_accounting.py", *(argv if argv is not None else sys.argv[1:])])
    section = markdown(results, command=f"PYTHONPATH=$PWD/src nice -n 10 {shown}", elapsed=elapsed)
    print(section)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.write:
        write_section(args.write, MARKERS, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
