"""``dplens audit``: the CLI contract of DESIGN.md (JSON keys, verdicts), backends, checkpoints, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dplens.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONTRACT_KEYS = {"epsilon_lower_bound", "epsilon_claimed", "delta", "confidence", "trials", "verdict"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _comparable(payload: dict) -> dict:
    return {k: v for k, v in payload.items() if k not in ("elapsed_seconds", "backend")}


def test_json_contract_and_violation(capsys):
    code, out, _ = run(
        capsys, "audit", str(EXAMPLES / "gaussian_claim.toml"), "--trials", "100000", "--json", "--quiet"
    )
    assert code == 0
    payload = json.loads(out)
    assert set(payload) >= CONTRACT_KEYS
    assert payload["verdict"] == "VIOLATION"
    assert payload["epsilon_claimed"] == 1.0 and payload["delta"] == 1e-5
    assert payload["epsilon_lower_bound"] > 1.0
    assert payload["trials"] == 100_000 and payload["confidence"] == 0.95
    assert payload["is_estimate"] is False


def test_fail_on_violation_sets_the_exit_status(tmp_path, capsys):
    violated = [str(EXAMPLES / "gaussian_claim.toml"), "--trials", "20000", "--quiet"]
    code, out, _ = run(capsys, "audit", *violated, "--fail-on-violation")
    assert code == 1 and "verdict: VIOLATION" in out
    spec = tmp_path / "laplace.toml"
    spec.write_text('[[mechanism]]\ntype = "laplace"\nepsilon = 1.0\n')
    consistent = [str(spec), "--trials", "20000", "--delta", "0", "--quiet"]
    code, out, _ = run(capsys, "audit", *consistent, "--fail-on-violation")
    assert code == 0 and "verdict: CONSISTENT" in out


def test_text_output_labels_estimates_and_states_the_verdict(tmp_path, capsys):
    spec = tmp_path / "laplace.toml"
    spec.write_text('[[mechanism]]\ntype = "laplace"\nepsilon = 1.0\n')
    code, out, err = run(capsys, "audit", str(spec), "--trials", "20000", "--delta", "0", "--seed", "4")
    assert code == 0
    assert out.startswith("epsilon >= ")
    assert "valid 95% lower bound" in out and "measurability ceiling" in out
    assert "ESTIMATE (point)" in out and "not a bound" in out
    assert "verdict: CONSISTENT" in out
    assert "audit" in err  # the progress bar goes to stderr, never into stdout


def test_workers_do_not_change_the_result(capsys):
    argv = ["audit", str(EXAMPLES / "gaussian_claim.toml"), "--trials", "40000", "--json", "--quiet", "--seed", "9"]
    _, one, _ = run(capsys, *argv)
    _, two, _ = run(capsys, *argv, "--workers", "2")
    assert _comparable(json.loads(one)) == _comparable(json.loads(two))
    assert "process-pool" in json.loads(two)["backend"]


def test_checkpoint_resume_and_mismatch(tmp_path, capsys):
    checkpoint = tmp_path / "audit.ckpt"
    argv = ["audit", str(EXAMPLES / "gaussian_claim.toml"), "--trials", "30000", "--json", "--quiet"]
    code, first, _ = run(capsys, *argv, "--checkpoint", str(checkpoint))
    assert code == 0 and checkpoint.exists()
    code, resumed, _ = run(capsys, *argv, "--checkpoint", str(checkpoint))
    assert code == 0
    assert _comparable(json.loads(first)) == _comparable(json.loads(resumed))
    # A checkpoint of another audit (another seed) is refused rather than silently mixed in.
    code, out, err = run(capsys, *argv, "--checkpoint", str(checkpoint), "--seed", "1")
    assert code == 2 and out == ""
    assert err.startswith("dplens: error:") and "checkpoint" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("extra", "word"),
    [
        (["--trials", "0"], "trials"),
        (["--trials", "100", "--confidence", "1.5"], "confidence"),
        (["--trials", "100", "--delta", "2"], "delta"),
        (["--trials", "100", "--delta", "0.001"], "delta"),  # differs from the spec's claim
        (["--trials", "100", "--seed", "-1"], "seed"),
        (["--trials", "100", "--workers", "0"], "workers"),
        ([], "trials"),
    ],
)
def test_bad_arguments_one_line_exit_2(capsys, extra, word):
    code, out, err = run(capsys, "audit", str(EXAMPLES / "gaussian_claim.toml"), "--quiet", *extra)
    assert code == 2 and out == ""
    assert err.startswith("dplens: error:") and word in err and len(err.strip().splitlines()) == 1


def test_unauditable_spec_is_refused(tmp_path, capsys):
    spec = tmp_path / "mgm.toml"
    spec.write_text('[[mechanism]]\ntype = "modified_gaussmix"\nk = 5\ngamma = 100.0\neta = 0.5\n')
    code, out, err = run(capsys, "audit", str(spec), "--trials", "100", "--quiet")
    assert code == 2 and out == ""
    assert "cannot be audited" in err


def test_console_script_error_has_no_traceback(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = -1.0\n')
    done = subprocess.run(
        [sys.executable, "-m", "dplens.cli", "audit", str(spec), "--trials", "10"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_checkpoint_resumes_in_a_new_process_for_a_matrix_mechanism(tmp_path, capsys):
    # The fingerprint must not depend on memory addresses: a dp_ftrl audit checkpointed by one process resumes in
    # another (here: the first run in a subprocess, the resume in this one).
    checkpoint = tmp_path / "ftrl.ckpt"
    argv = ["audit", str(EXAMPLES / "dp_ftrl.toml"), "--trials", "4000", "--json", "--quiet"]
    first = subprocess.run(
        [sys.executable, "-m", "dplens.cli", *argv, "--checkpoint", str(checkpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    code, resumed, err = run(capsys, *argv, "--checkpoint", str(checkpoint))
    assert code == 0, err
    assert _comparable(json.loads(first.stdout)) == _comparable(json.loads(resumed))


def test_stable_description_has_no_memory_address():
    from dplens.auditing.games import _stable_description

    def square(outputs):
        return outputs * outputs

    def cube(outputs):
        return outputs * outputs * outputs

    assert "0x" not in _stable_description(square)
    assert _stable_description(square) != _stable_description(cube)
    assert "0x" not in _stable_description(object())
