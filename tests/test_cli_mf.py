"""``dplens dp-sgd --mechanism ...``: issue 48's CLI contract for matrix-factorisation trainings."""

import json

import numpy as np
import pytest

from dplens.cli import main

BASE = ["dp-sgd", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "10", "--delta", "1e-6"]
KEYS = {"epsilon", "bound", "epsilon_lower", "mechanism", "sampling", "bands", "sensitivity"}


def run(capsys, *argv):
    code = main([*BASE, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_bandmf_cyclic_poisson_json_contract(capsys):
    code, out, err = run(
        capsys,
        "--mechanism",
        "bandmf",
        "--bands",
        "8",
        "--sampling",
        "cyclic-poisson",
        "--noise-multiplier",
        "1",
        "--json",
    )
    assert code == 0 and err == ""
    payload = json.loads(out)
    assert payload.keys() >= KEYS
    assert payload["bound"] == "certified" and payload["mechanism"] == "bandmf" and payload["bands"] == 8
    assert payload["sampling"] == "cyclic-poisson" and payload["sensitivity"] == 1.0
    assert payload["epsilon_lower"] <= payload["epsilon"]
    assert "Infinity" not in out and "NaN" not in out


def test_strategy_file_and_calibration(tmp_path, capsys):
    steps = 2344
    coefs = np.array([1.0, 0.5, 0.25, 0.125])
    path = tmp_path / "c.npy"
    np.save(path, coefs / np.linalg.norm(coefs))
    code, out, _ = run(
        capsys,
        "--mechanism",
        "bandmf",
        "--bands",
        "4",
        "--strategy",
        str(path),
        "--sampling",
        "min-sep",
        "--min-separation",
        "100",
        "--max-participations",
        "10",
        "--target-epsilon",
        "4",
        "--json",
    )
    payload = json.loads(out)
    assert code == 0 and payload["epsilon"] <= 4 and payload["bound"] == "certified"
    assert payload["sensitivity"] == pytest.approx(10**0.5)  # bands <= separation: sqrt(k)
    assert payload["steps"] == steps


def test_text_output_labels_the_bound(capsys):
    code, out, _ = run(capsys, "--mechanism", "bsr", "--bands", "4", "--sampling", "shuffle", "--noise-multiplier", "3")
    assert code == 0 and "upper bound" in out and "research" in out and "none known" in out


def test_fixed_bins_reports_the_renyi_bound_with_the_monte_carlo_estimate_beside_it(capsys):
    """Issue 48's configuration (4-band BSR, 64 steps in cycles of 16, sigma 1.5, delta 1e-3)."""
    argv = ["dp-sgd", "--mechanism", "bsr", "--bands", "4", "--sampling", "fixed-bins", "--dataset-size", "160"]
    argv += ["--batch-size", "10", "--epochs", "4", "--noise-multiplier", "1.5", "--delta", "1e-3"]
    code = main([*argv, "--monte-carlo", "100000", "--seed", "1", "--json"])
    out, err = capsys.readouterr()
    payload = json.loads(out)
    assert code == 0 and err == "" and payload["bound"] == "upper" and payload["epsilon_lower"] is None
    assert payload["epsilon"] == payload["renyi"]["epsilon"] < 4.4  # below the unamplified 4.50
    assert (
        payload["renyi"]["epsilon_remove"] <= payload["epsilon"]
        and payload["renyi"]["epsilon_add"] <= (payload["epsilon"])
    )
    assert payload["monte_carlo"]["is_estimate"] and payload["epsilon_monte_carlo"] < payload["epsilon"]
    assert main(argv) == 0 and "Renyi bound" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mechanism", "bandmf", "--bands", "8", "--sampling", "poisson"], "needs MMCC"),
        (["--sampling", "cyclic-poisson"], "applies to matrix-factorisation training only"),
        (["--bands", "4"], "--bands applies to matrix-factorisation"),
        (["--mechanism", "bandmf", "--bands", "300", "--sampling", "cyclic-poisson"], "exceeds the number of groups"),
        (["--mechanism", "bandmf", "--sampling", "cyclic-poisson"], "needs bands"),
        (["--mechanism", "matrix", "--strategy", "/nonexistent.npy", "--sampling", "cyclic"], "cannot read"),
        (["--mechanism", "bsr", "--bands", "4", "--sampling", "min-sep"], "needs min_separation"),
        (["--mechanism", "bandmf", "--bands", "4", "--sampling", "cyclic-poisson", "--method", "rdp"], "rdp"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, extra, message):
    code, out, err = run(capsys, *extra, "--noise-multiplier", "1")
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.triu(np.ones((2344, 2344))) / 2344**0.5, "lower-triangular"),
        (2 * np.eye(2344), "got largest column norm 2"),
        (np.eye(100), "T = 2344 steps"),
    ],
)
def test_bad_strategy_files(tmp_path, capsys, matrix, message):
    path = tmp_path / "s.npy"
    np.save(path, matrix)
    code, out, err = run(
        capsys,
        "--mechanism",
        "matrix",
        "--strategy",
        str(path),
        "--sampling",
        "min-sep",
        "--min-separation",
        "100",
        "--noise-multiplier",
        "1",
    )
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, err


def test_the_command_line_knows_every_mf_sampler_and_mechanism():
    from dplens.accountant.dp_sgd import Sampler
    from dplens.accountant.mf_accounting import MECHANISMS, SAMPLINGS
    from dplens.cli import MF_MECHANISMS, MF_SAMPLERS, SAMPLERS

    assert MF_MECHANISMS == MECHANISMS
    assert set(SAMPLINGS) <= set(SAMPLERS + MF_SAMPLERS)
    assert set(MF_SAMPLERS).isdisjoint(s.value for s in Sampler)


def test_monte_carlo_keys_beside_the_bound(tmp_path, capsys):
    path = tmp_path / "c.npy"
    coefs = np.array([1.0, 0.5, 0.375, 0.3125])
    np.save(path, coefs / np.linalg.norm(coefs))
    code = main(
        [
            "dp-sgd",
            "--mechanism",
            "bandmf",
            "--bands",
            "4",
            "--strategy",
            str(path),
            "--sampling",
            "fixed-bins",
            "--dataset-size",
            "160",
            "--batch-size",
            "10",
            "--epochs",
            "4",
            "--noise-multiplier",
            "1.5",
            "--delta",
            "1e-3",
            "--monte-carlo",
            "100000",
            "--seed",
            "0",
            "--json",
        ]
    )
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["bound"] == "upper" and payload["epsilon_monte_carlo"] < payload["epsilon"]
    assert payload["monte_carlo"]["samples_per_direction"] == 100000 and payload["monte_carlo"]["is_estimate"]
    assert "delta_accounting" in payload["monte_carlo"] and payload["monte_carlo"]["delta"] == 1e-3


def test_b_min_sep_gets_a_verified_monte_carlo_estimate_beside_the_unamplified_bound(capsys, tmp_path):
    path = tmp_path / "bandmf3.npy"
    coefficients = np.array([0.8, 0.5, 0.33])
    np.save(path, coefficients / np.linalg.norm(coefficients))
    argv = ["dp-sgd", "--mechanism", "bandmf", "--strategy", str(path), "--sampling", "b-min-sep"]
    argv += ["--min-separation", "4", "--dataset-size", "400", "--batch-size", "40", "--epochs", "4"]
    argv += ["--noise-multiplier", "1", "--delta", "1e-3", "--monte-carlo", "80000", "--seed", "1"]
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    payload = json.loads(out)
    assert code == 0 and err == "" and payload["bound"] == "upper" and payload["sampling"] == "b-min-sep"
    assert 0 < payload["epsilon_monte_carlo"] < payload["epsilon"]  # the estimate below the unamplified bound
    assert payload["monte_carlo"]["is_estimate"] and "b-min-sep" in payload["monte_carlo"]["dominating_pair"]
    assert main(argv) == 0 and "Monte Carlo ESTIMATE" in capsys.readouterr().out
    # a batch too large for the separation: one line, exit 2
    code = main([*argv[:8], "12", *argv[9:]])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "too large for b-min-sep with min_separation=12" in err
