"""Bad input on the command line, case by case (the property-based sweep is tests/test_cli_fuzz.py): the extreme
values, files and paths that used to end in a traceback or a hang now give one line on stderr and exit 2, fast;
extreme but valid values inside the supported ranges give answers."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dplens import spec as spec_module
from dplens.cli import main

GAUSSIAN = '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = {v}\n'
PSG = '[[mechanism]]\ntype = "poisson_subsampled_gaussian"\nnoise_multiplier = 1.0\nsampling_rate = 0.01\nsteps = {v}\n'
COMMANDS = {
    "account": ["account", "{spec}", "--delta", "1e-5"],
    "account-delta": ["account", "{spec}", "--epsilon", "1"],
    "audit": ["audit", "{spec}", "--trials", "1000", "--quiet"],
    "calibrate": ["calibrate", "{spec}", "--param", "noise_multiplier", "--target-epsilon", "1", "--delta", "1e-5"],
}


def run(capsys, argv: list[str]) -> tuple[int, str, str, float]:
    """Exit code, stdout, stderr and the CPU seconds it took (CPU time: a neighbour on the machine does not count)."""
    start = time.process_time()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err, time.process_time() - start


def one_line_error(code: int, out: str, err: str) -> bool:
    return code == 2 and out == "" and err.count("\n") == 1 and err.startswith("dplens: error: ")


# The issue's cases: OverflowError, ZeroDivisionError, "int too large to convert to C ssize_t", > 60 s calibrations.
ISSUE_CASES = {
    "sigma-1e308": GAUSSIAN.format(v="1e308"),
    "sigma-1e-320": GAUSSIAN.format(v="1e-320"),
    "steps-10**30": PSG.format(v=10**30),
    "steps-1e308": PSG.format(v="1e308"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(ISSUE_CASES))
def test_extreme_values_are_out_of_supported_range(tmp_path, capsys, case, command):
    spec = tmp_path / "spec.toml"
    spec.write_text(ISSUE_CASES[case])
    code, out, err, seconds = run(capsys, [a.replace("{spec}", str(spec)) for a in COMMANDS[command]])
    assert one_line_error(code, out, err), err
    assert "out of the supported range" in err and seconds < 10


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (GAUSSIAN.format(v="1e-7"), "noise_multiplier"),
        (GAUSSIAN.format(v="2e12"), "noise_multiplier"),
        (GAUSSIAN.format(v="1.0") + "count = 1000000000000000000\n", "count"),
        ('[[mechanism]]\ntype = "laplace"\nscale = 1e-9\n', "scale"),
        ('[[mechanism]]\ntype = "laplace"\nepsilon = 1e300\n', "epsilon"),
        ('[[mechanism]]\ntype = "randomized_response"\nepsilon = 1e20\n', "epsilon"),
        ('[[mechanism]]\ntype = "randomized_response"\nepsilon = 1.0\nnum_values = 1e300\n', "num_values"),
        ('[[mechanism]]\ntype = "dp_ftrl"\nnu = 0.05\nnoise_multiplier = 4.0\nsteps = 100000000000\n', "steps"),
    ],
)
def test_supported_ranges(tmp_path, capsys, text, words):
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    code, out, err, seconds = run(capsys, ["account", str(spec), "--delta", "1e-5"])
    assert one_line_error(code, out, err) and words in err and "supported range" in err and seconds < 10


def test_supported_ranges_are_documented_and_checked_per_name():
    ranges = spec_module.SUPPORTED_RANGES
    assert ranges["noise_multiplier"] == (1e-6, 1e12) and ranges["steps"][1] == spec_module.MAX_INTEGER
    # documented in the docs site (the input-limits table moved there from the README)
    root = Path(__file__).resolve().parents[1]
    documented = "\n".join(p.read_text(encoding="utf-8") for p in [root / "README.md", *(root / "docs").rglob("*.md")])
    assert (
        "out of the supported range" in documented.lower()
        and "| `noise_multiplier`, `scale` | 10⁻⁶ to 10¹² |" in documented
    )
    # nested numbers too: a list parameter holding NaN or a huge integer is refused before the builder runs
    for bad in (float("nan"), 10**30):
        data = {"mechanism": [{"type": "bcdp_mean", "delta": [0.2, bad], "epsilon": 2.0, "q": 0.1}]}
        with pytest.raises(ValueError, match="delta"):
            spec_module.parse_spec(data)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("sigma", ["1e-6", "0.01", "1e12"])
def test_extreme_but_supported_values_work(tmp_path, capsys, command, sigma):
    # σ = 0.01: the PLD would need ~1e8 grid points (it used to run for minutes); the best route now skips it
    spec = tmp_path / "spec.toml"
    spec.write_text(GAUSSIAN.format(v=sigma))
    argv = [a.replace("{spec}", str(spec)) for a in COMMANDS[command]]
    code, out, err, seconds = run(capsys, [*argv, "--json"])
    if command == "calibrate":
        # the calibrated σ does not depend on the spec's σ; the search must still end fast
        assert code == 0 and json.loads(out)["epsilon"] <= 1 and seconds < 30
        return
    assert code == 0, err
    payload = json.loads(out)
    assert seconds < 20
    if command == "account":
        assert payload["epsilon"] >= 0 and math.isfinite(payload["epsilon"])
        assert {r["method"] for r in payload.get("routes", [])} <= {"rdp", "exact", "pld"}


def test_pld_method_on_a_huge_grid_says_out_of_supported_range(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(GAUSSIAN.format(v="0.01"))
    code, out, err, seconds = run(capsys, ["account", str(spec), "--delta", "1e-5", "--method", "pld"])
    assert one_line_error(code, out, err) and "out of supported range for PLD accounting" in err and seconds < 5


def test_deeply_nested_json(tmp_path, capsys):
    spec = tmp_path / "deep.json"
    spec.write_text("[" * 100_000 + "]" * 100_000)
    code, out, err, _ = run(capsys, ["account", str(spec), "--delta", "1e-5"])
    assert one_line_error(code, out, err) and "nested too deeply" in err
    # nested within the parser's limit but deeper than the spec checks go: still one line
    inner = {"type": "gaussian", "noise_multiplier": 1.0, "extra": json.loads("[" * 500 + "]" * 500)}
    spec.write_text(json.dumps({"mechanism": [inner]}))
    code, out, err, _ = run(capsys, ["account", str(spec), "--delta", "1e-5"])
    assert one_line_error(code, out, err)


def test_unreadable_spec_paths(tmp_path, capsys, monkeypatch):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(bytes(range(256)) * 4)
    fifo = tmp_path / "pipe.toml"
    cases = {str(tmp_path): "is a directory", str(binary): "not UTF-8", str(tmp_path / "nope.toml"): "not found"}
    if hasattr(__import__("os"), "mkfifo"):
        __import__("os").mkfifo(fifo)
        cases[str(fifo)] = "not a regular file"  # reading it would block for ever
    for path, words in cases.items():
        code, out, err, seconds = run(capsys, ["account", path, "--delta", "1e-5"])
        assert one_line_error(code, out, err) and words in err and seconds < 5, (path, err)
    good = tmp_path / "good.toml"
    good.write_text(GAUSSIAN.format(v="1.0"))

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    code, out, err, _ = run(capsys, ["account", str(good), "--delta", "1e-5"])
    assert one_line_error(code, out, err) and "Permission denied" in err


def test_unwritable_outputs(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(GAUSSIAN.format(v="1.0"))
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    audit = ["audit", str(spec), "--trials", "100"]
    for argv, words in [
        ([*audit, "--checkpoint", str(tmp_path / "missing" / "c.ckpt")], "does not exist"),
        ([*audit, "--checkpoint", str(tmp_path)], "is a directory"),
        ([*audit, "--log-json", str(blocker / "log.jsonl")], "does not exist"),
        (["report", str(spec), "-o", str(blocker / "out"), "--no-audit", "--quiet"], "a-file"),
        (["demo", "-o", str(blocker / "demo"), "--quiet"], "a-file"),
    ]:
        code, out, err, _ = run(capsys, argv)
        assert one_line_error(code, out, err) and words in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "spec.toml"]


def test_console_script_on_the_issue_cases_has_no_traceback(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(PSG.format(v=10**30))
    for argv in (["account", str(spec), "--delta", "1e-5"], ["audit", str(spec), "--trials", "100"]):
        done = subprocess.run(
            [sys.executable, "-m", "dplens.cli", *argv], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "supported range" in done.stderr
