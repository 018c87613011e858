"""Cold start, whole process, side by side with dp-accounting in one run (issue 14).

    python benchmarks/bench_cold_start.py [--repeat N] [--write benchmarks/RESULTS.md]

(a) `dplens account examples/dp_sgd_mnist.toml --delta 1e-5 --method rdp` against the equivalent dp-accounting
    script (RdpAccountant, the same MNIST DP-SGD ledger), each a fresh interpreter. Target: dplens ≥ 2.5× faster.
(b) `dplens --help` against `python -c "import dp_accounting"`. Target: ≥ 5× faster.
(c) For the record: `python -c "import dplens"` and the modules a command loads.

Each pair runs interleaved (theirs, ours, theirs, ours, …) so that a change in machine load hits both alike;
times are medians of --repeat runs of the whole process (interpreter start-up included).
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from results_md import write_section  # benchmarks/ is sys.path[0] when run as a script

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "dp_sgd_mnist.toml"

DPA_RDP_SCRIPT = """
import dp_accounting as dpa
event = dpa.SelfComposedDpEvent(
    dpa.PoissonSampledDpEvent(256 / 60000, dpa.GaussianDpEvent(1.1)), 14063)
accountant = dpa.rdp.RdpAccountant()
accountant.compose(event)
print(accountant.get_epsilon(1e-5))
"""


def _dplens_command() -> list[str]:
    script = shutil.which("dplens")
    return [script] if script else [sys.executable, "-m", "dplens.cli"]


def _run(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, out.stdout


def interleaved(theirs: list[str], ours: list[str], repeat: int) -> tuple[float, float, str, str]:
    t_theirs, t_ours, out_theirs, out_ours = [], [], "", ""
    _run(theirs), _run(ours)  # warm the file-system cache for both
    for _ in range(repeat):
        elapsed, out_theirs = _run(theirs)
        t_theirs.append(elapsed)
        elapsed, out_ours = _run(ours)
        t_ours.append(elapsed)
    return statistics.median(t_theirs), statistics.median(t_ours), out_theirs, out_ours


def loaded_modules(code: str) -> str:
    probe = f"{code}\nimport sys\nprint()\nprint(' '.join(m for m in ('numpy', 'scipy', 'mpmath', 'dp_accounting', "
    probe += "'matplotlib') if m in sys.modules) or 'none')"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--write", type=Path, help="replace (or append) this benchmark's section of this Markdown file")
    args = parser.parse_args()

    dplens = _dplens_command()
    account = [*dplens, "account", str(SPEC), "--delta", "1e-5", "--method", "rdp", "--json"]
    t_dpa, t_ours, out_dpa, out_ours = interleaved([sys.executable, "-c", DPA_RDP_SCRIPT], account, args.repeat)
    t_dpa_import, t_help, _, _ = interleaved(
        [sys.executable, "-c", "import dp_accounting"], [*dplens, "--help"], args.repeat
    )
    t_python, t_import, _, _ = interleaved(
        [sys.executable, "-c", "pass"], [sys.executable, "-c", "import dplens"], args.repeat
    )

    import json

    eps_ours = json.loads(out_ours)["epsilon"]
    eps_dpa = float(out_dpa.strip())
    rows = [
        (
            "(a) `dplens account … --method rdp` vs dp-accounting RDP script",
            t_dpa,
            t_ours,
            2.5,
            f"ε {eps_dpa:.5f} vs **{eps_ours:.5f}**",
        ),
        ("(b) `dplens --help` vs `import dp_accounting`", t_dpa_import, t_help, 5.0, ""),
    ]
    lines = [
        f"### Cold start, whole process ({time.strftime('%Y-%m-%d')}, {platform.machine()}, Python "
        f"{platform.python_version()}, dp-accounting {metadata.version('dp-accounting')})",
        "",
        f"Command: `python benchmarks/bench_cold_start.py --repeat {args.repeat}` (medians of fresh interpreters, "
        "interleaved)",
        "",
        "| measurement | dp-accounting | dplens | ratio (speed-up) | target | note |",
        "|---|---|---|---|---|---|",
    ]
    for name, theirs, ours, target, note in rows:
        ratio = theirs / ours
        verdict = "met" if ratio >= target else "NOT met"
        lines.append(f"| {name} | {theirs:.3f} s | {ours:.3f} s | {ratio:.2f}× | ≥ {target:g}× ({verdict}) | {note} |")
    help_probe = "from dplens.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    account_probe = (
        f"from dplens.cli import main\nmain(['account', {str(SPEC)!r}, '--delta', '1e-5', '--method', 'rdp'])"
    )
    lines += [
        "",
        f'Bare interpreter (`python -c pass`): {t_python:.3f} s; `python -c "import dplens"`: {t_import:.3f} s. '
        f"Heavy modules loaded by `import dplens`: {loaded_modules('import dplens')}; by `dplens --help`: "
        f"{loaded_modules(help_probe)}; by `account --method rdp`: {loaded_modules(account_probe)}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(args.write, "bench_cold_start", text)


if __name__ == "__main__":
    main()
