"""``dplens audit --target``: the acceptance command lines, JSON keys and one-line errors (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dplens.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "targets"


@pytest.fixture(autouse=True)
def in_examples(monkeypatch):
    monkeypatch.chdir(EXAMPLES)
    yield
    sys.modules.pop("mechanisms", None)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_textbook_laplace_violation_json(capsys):
    code, out, _ = _run(
        capsys, "--target", "mechanisms:textbook_laplace", "--pair", "pair.json", "--claim-epsilon", "1",
        "--trials", "10000", "--json", "--quiet",
    )  # fmt: skip
    payload = json.loads(out)
    assert code == 0 and payload["verdict"] == "VIOLATION" and payload["reproducible"] is True
    for key in ("epsilon_lower_bound", "epsilon_claimed", "delta", "confidence", "trials", "float_evidence", "scores"):
        assert key in payload


def test_text_output_explains_reproducibility(capsys):
    code, out, _ = _run(
        capsys, "--target", "mechanisms:global_rng_laplace", "--pair", "pair.json", "--claim-epsilon", "1",
        "--trials", "2000", "--quiet",
    )  # fmt: skip
    assert code == 0 and "not reproducible" in out and "verdict:" in out


def test_user_score_from_the_command_line(capsys):
    code, out, _ = _run(
        capsys, "--target", "mechanisms:geometric", "--pair", "pair.json", "--claim-epsilon", "1",
        "--trials", "3000", "--score", "mechanisms:distance_score", "--json", "--quiet",
    )  # fmt: skip
    assert code == 0 and any(s["kind"] == "user-score" for s in json.loads(out)["scores"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--target", "nomodule_xyz:f", "--pair", "pair.json"], "target module 'nomodule_xyz' not found"),
        (["--target", "mechanisms:missing", "--pair", "pair.json"], "has no attribute 'missing'"),
        (["--target", "mechanisms:geometric", "--pair", "{no_neighbour}"], "has no 'neighbour'"),
        (["--target", "mechanisms:geometric", "--pair", "{malformed}"], "is not valid JSON"),
        (["--target", "mechanisms:geometric", "--pair", "missing.json"], "pair file not found"),
        (["--target", "mechanisms:geometric"], "--target needs --pair"),
        (["--target", "mechanisms:geometric", "--pair", "pair.json", "--score", "mechanisms:nope"], "'nope'"),
    ],
)
def test_errors_exit_2_with_one_line(capsys, tmp_path, argv, message):
    (tmp_path / "no_neighbour.json").write_text('{"data": [1, 2]}')
    (tmp_path / "malformed.json").write_text('{"data": [1, 2],')
    argv = [a.format(no_neighbour=tmp_path / "no_neighbour.json", malformed=tmp_path / "malformed.json") for a in argv]
    code, out, err = _run(capsys, *argv, "--claim-epsilon", "1", "--trials", "100", "--quiet")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dplens: error: ") and message in err


def test_console_script_error_has_no_traceback():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "dplens.cli", "audit", "--target", "mechanisms:missing", "--pair", "pair.json",
         "--claim-epsilon", "1", "--trials", "10"],
        capture_output=True, text=True, cwd=EXAMPLES, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
