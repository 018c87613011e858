"""``dplens demo``: calibrate → account every route → audit → report, on the built-in DP-SGD example."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from dplens.accountant.calibrate import calibrate_dp_sgd_noise
from dplens.cli import main
from dplens.demo import DEMO_CONFIG, demo_spec, run_demo
from dplens.reports.render import read_json


def test_demo_writes_the_full_report(tmp_path, capsys):
    config = DEMO_CONFIG | {"audit_trials": 2_000}  # the real demo uses more trials; the pipeline is the same
    assert run_demo(tmp_path / "demo", config=config) == 0
    out = capsys.readouterr().out
    html = (tmp_path / "demo" / "report.html").resolve()
    assert out.strip().splitlines()[-1] == f"dplens demo: wrote {html}"
    for step in ("[1/4] calibrating", "[2/4] accounting", "[3/4] auditing", "[4/4] writing"):
        assert step in out

    report = read_json(tmp_path / "demo" / "report.json")
    calibration = report.accounting.calibration
    assert calibration["param"] == "noise_multiplier" and calibration["epsilon"] <= 2.0
    # the report's mechanism is the calibrated one, and the claim is the calibration target, certified
    assert report.mechanism.components[0]["noise_multiplier"] == calibration["value"]
    assert report.claim.epsilon == 2.0 and report.claim.delta == 1e-5
    assert report.claim.certified_by_accountant is True
    assert report.accounting.epsilon <= 2.0 and report.accounting.tightest.method == "pld"
    assert {r.method for r in report.accounting.routes} == {"rdp", "pld"}
    # a correctly calibrated mechanism: a valid lower bound stays below the claim (at 95 % confidence)
    assert report.audit is not None and report.audit.trials == 2_000
    assert report.verdict.status.value == "CONSISTENT"
    assert 0 < report.audit.epsilon_lower_bound <= report.accounting.epsilon


def test_demo_calibration_matches_the_accountant():
    q = DEMO_CONFIG["expected_batch_size"] / DEMO_CONFIG["dataset_size"]
    result = calibrate_dp_sgd_noise(sampling_rate=q, steps=1000, target_epsilon=2.0, target_delta=1e-5)
    spec = demo_spec(result.value)
    assert spec.claim.epsilon == 2.0
    assert spec.accountant().epsilon(1e-5) <= 2.0
    assert spec.with_param("noise_multiplier", result.value * 0.99).accountant().epsilon(1e-5) > 2.0


def test_demo_cli_default_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(DEMO_CONFIG, "audit_trials", 1_000)
    assert main(["demo", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out == f"dplens demo: wrote {(tmp_path / 'dplens-demo' / 'report.html').resolve()}\n"


@pytest.mark.slow
def test_demo_under_a_minute(tmp_path):
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dplens.cli", "demo", "-o", str(tmp_path)], capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 60, elapsed
