"""``dplens risk``, ``dplens calibrate --max-tpr/--at-fpr/--max-advantage`` and ``dplens budget status --risk``:
the JSON contract, the words, and bad input as one line with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dplens.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MNIST = str(EXAMPLES / "dp_sgd_mnist.toml")


@pytest.fixture
def small(tmp_path) -> str:
    """A short DP-SGD run (300 steps at q = 0.02): calibrations of it take a fraction of a second."""
    path = tmp_path / "small.toml"
    path.write_text(
        '[[mechanism]]\ntype = "poisson_subsampled_gaussian"\nnoise_multiplier = 1.0\nsampling_rate = 0.02\n'
        "steps = 300\n"
    )
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_risk_json_has_the_contract_keys(capsys):
    code, out, err = run(capsys, "risk", MNIST, "--fpr", "0.01", "0.1", "--prior", "0.5", "--json")
    assert code == 0 and err == ""
    payload = json.loads(out)
    assert set(payload["tpr_upper"]) == {"0.01", "0.1"}  # FPR → the bound
    assert 0.0401 <= payload["tpr_upper"]["0.01"] <= 0.0403 and 0.2394 <= payload["tpr_upper"]["0.1"] <= 0.2398
    assert 0.2244 <= payload["advantage_upper"] <= 0.2246
    lower, upper = payload["bracket"]["tpr"]["0.01"]
    assert lower <= upper == payload["tpr_upper"]["0.01"] and payload["tpr_lower"]["0.01"] == lower
    assert payload["bracket"]["advantage"] == [payload["advantage_lower"], payload["advantage_upper"]]
    assert payload["is_upper_bound"] is True and payload["method"] == "pld" and payload["neighboring"] == "add_remove"
    assert 0.5 < payload["bayes"]["success_upper"] < 0.62 and payload["spec_sha256"]


def test_risk_text_names_the_bounds_and_the_route(capsys):
    code, out, _ = run(capsys, "risk", str(EXAMPLES / "gaussian_claim.toml"))
    assert code == 0
    assert "at FPR 1 %: TPR <= 9.237 %" in out  # Φ(Φ⁻¹(0.01) + 1) = 0.092362…, rounded up
    assert "route exact" in out and "upper bound" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fpr", "0"], "argument --fpr: expected a number in (0, 1); got '0'"),
        (["--fpr", "1.5"], "argument --fpr: expected a number in (0, 1); got '1.5'"),
        (["--prior", "1"], "argument --prior: expected a number in (0, 1); got '1'"),
        (["--method", "nope"], "argument --method: invalid choice"),
    ],
)
def test_risk_bad_input_is_one_line(capsys, argv, message):
    code, out, err = run(capsys, "risk", MNIST, *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and message in err


def test_calibrate_to_a_tpr_target(capsys, small):
    code, out, err = run(
        capsys, "calibrate", small, "--param", "noise_multiplier", "--max-tpr", "0.05", "--at-fpr", "0.01", "--json"
    )
    assert code == 0 and err == ""
    payload = json.loads(out)
    assert payload["param"] == "noise_multiplier" and payload["target"] == {"max_tpr": 0.05, "at_fpr": 0.01}
    assert payload["achieved"] <= 0.05 and payload["tpr_upper"]["0.01"] <= 0.05
    assert payload["delta"] == 1e-5 and payload["epsilon"] > 0 and payload["warnings"] == []
    code, out, _ = run(capsys, "calibrate", small, "--param", "noise_multiplier", "--max-tpr", "0.05", "--at-fpr",
                       "0.01", "--delta", "1e-6")  # fmt: skip
    assert code == 0 and "gives TPR <= 0.05 at FPR 0.01" in out and "at delta = 1e-06" in out


def test_calibrate_to_an_advantage_warns_about_low_fprs(capsys, small):
    code, out, err = run(capsys, "calibrate", small, "--param", "noise_multiplier", "--max-advantage", "0.2")
    assert code == 0
    assert err.startswith("dplens: warning: --max-advantage bounds TPR - FPR only: at FPR 0.001 an attack may still")
    assert "gives advantage TPR - FPR <= 0.2" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-tpr", "0.05"], "--max-tpr and --at-fpr go together"),
        (["--max-tpr", "0.05", "--at-fpr", "0.01", "--max-advantage", "0.1"], "either --max-advantage"),
        (["--target-epsilon", "1", "--max-advantage", "0.1"], "either --target-epsilon or a risk target"),
        (["--target-epsilon", "1"], "--target-epsilon needs --delta"),
        ([], "a target is required"),
        (["--max-tpr", "0.01", "--at-fpr", "0.02"], "unreachable: an attack that guesses at random"),
        (["--max-tpr", "0.0101", "--at-fpr", "0.01", "--bracket", "1", "2"], "is unreachable for noise_multiplier"),
        (["--max-advantage", "0"], "argument --max-advantage: expected a number in (0, 1)"),
    ],
)
def test_calibrate_risk_bad_input_is_one_line(capsys, small, argv, message):
    code, out, err = run(capsys, "calibrate", small, "--param", "noise_multiplier", *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and message in err


def test_budget_status_as_risk(tmp_path, capsys):
    db = str(tmp_path / "budget.db")
    assert run(capsys, "budget", "create", db, "--unit", "one person", "--epsilon", "3", "--delta", "1e-5")[0] == 0
    assert run(capsys, "budget", "charge", db, MNIST, "--release", "model")[0] == 0
    code, out, _ = run(capsys, "budget", "status", db, "--risk")
    assert code == 0
    assert "as attack risk (upper bounds; at FPR 0.1 % / 1 % / 10 %): the whole budget allows TPR <=" in out
    assert "all: spent so far TPR <= 0.6053 % / 4.022 % / 23.97 %" in out
    code, out, _ = run(capsys, "budget", "status", db, "--fpr", "0.01", "--json")
    view = json.loads(out)["risk"]
    (budget,) = view["budgets"]
    spent, allowed = budget["periods"][0]["spent"], budget["budget"]
    assert view["fprs"] == [0.01] and spent["tpr_upper"]["0.01"] <= allowed["tpr_upper"]["0.01"]
    code, out, _ = run(capsys, "budget", "status", db, "--json")
    assert "risk" not in json.loads(out)
