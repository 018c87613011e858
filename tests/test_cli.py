"""The dplens command: the CLI contract of DESIGN.md, and bad input → one line on stderr, exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dplens.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_account_epsilon_json_keys(capsys):
    code, out, err = run(capsys, "account", str(EXAMPLES / "dp_sgd_mnist.toml"), "--delta", "1e-5", "--json")
    assert code == 0 and err == ""
    payload = json.loads(out)
    assert {"epsilon", "delta", "method"} <= set(payload)
    assert payload["epsilon"] == pytest.approx(2.3818, rel=5e-3)
    assert payload["method"] == "pld"


def test_account_delta_json(capsys):
    code, out, _ = run(
        capsys, "account", str(EXAMPLES / "dp_sgd_mnist.toml"), "--epsilon", "3", "--method", "rdp", "--json"
    )
    payload = json.loads(out)
    assert code == 0 and 0 < payload["delta"] < 1e-5 and payload["epsilon"] == 3


def test_account_classic_conversion_reproduces_legacy(tmp_path, capsys):
    spec = tmp_path / "abadi.toml"
    spec.write_text(
        '[[mechanism]]\ntype="poisson_subsampled_gaussian"\nnoise_multiplier=4\nsampling_rate=0.01\nsteps=10000\n'
    )
    _, out, _ = run(
        capsys, "account", str(spec), "--delta", "1e-5", "--method", "rdp", "--conversion", "classic", "--json"
    )
    assert round(json.loads(out)["epsilon"], 2) == 1.26


def test_calibrate_json_keys_and_no_overshoot(capsys):
    code, out, _ = run(
        capsys,
        "calibrate",
        str(EXAMPLES / "dp_sgd_mnist.toml"),
        "--param",
        "noise_multiplier",
        "--target-epsilon",
        "3",
        "--delta",
        "1e-5",
        "--json",
    )
    payload = json.loads(out)
    assert code == 0
    assert {"param", "value", "epsilon", "delta"} <= set(payload)
    assert payload["param"] == "noise_multiplier" and payload["epsilon"] <= 3
    assert payload["value"] == pytest.approx(0.96844, rel=5e-3)


def test_calibrate_integer_steps(capsys):
    code, out, _ = run(
        capsys,
        "calibrate",
        str(EXAMPLES / "dp_sgd_mnist.toml"),
        "--param",
        "steps",
        "--target-epsilon",
        "1",
        "--delta",
        "1e-5",
        "--method",
        "rdp",
        "--json",
    )
    payload = json.loads(out)
    assert code == 0 and isinstance(payload["value"], int) and payload["epsilon"] <= 1


def test_heterogeneous_and_laplace_and_rr_types(tmp_path, capsys):
    code, out, _ = run(capsys, "account", str(EXAMPLES / "heterogeneous.toml"), "--delta", "1e-6", "--json")
    assert code == 0 and json.loads(out)["epsilon"] == pytest.approx(11.1492, rel=5e-3)
    spec = tmp_path / "rr.json"
    spec.write_text(
        json.dumps({"mechanism": [{"type": "randomized_response", "epsilon": 1.0, "num_values": 3, "count": 2}]})
    )
    code, out, _ = run(capsys, "account", str(spec), "--delta", "1e-5", "--json")
    assert code == 0 and 0 < json.loads(out)["epsilon"] <= 2.0


BAD_SPECS = {
    "unknown_type.toml": '[[mechanism]]\ntype = "gausian"\nnoise_multiplier = 1\n',
    "negative_sigma.toml": '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = -1\n',
    "bad_rate.toml": '[[mechanism]]\ntype="poisson_subsampled_gaussian"\nnoise_multiplier=1\nsampling_rate=2\n',
    "extra_key.toml": '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 1\nsigma = 3\n',
    "negative_count.toml": '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 1\ncount = -4\n',
    "broken.toml": '[[mechanism]\ntype = "gaussian"\n',
    "empty.toml": 'name = "nothing"\n',
    "nan.json": '{"mechanism": [{"type": "gaussian", "noise_multiplier": NaN}]}',
}


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_specs_one_line_exit_2(tmp_path, capsys, name):
    spec = tmp_path / name
    spec.write_text(BAD_SPECS[name])
    code, out, err = run(capsys, "account", str(spec), "--delta", "1e-5", "--json")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dplens: error:")


@pytest.mark.parametrize(
    "argv",
    [
        ["account", "missing.toml", "--delta", "1e-5"],
        ["account", "{spec}", "--delta", "2"],
        ["account", "{spec}", "--delta", "nan"],
        ["account", "{spec}", "--epsilon", "-1"],
        ["account", "{spec}"],
        ["calibrate", "{spec}", "--param", "nonexistent", "--target-epsilon", "1", "--delta", "1e-5"],
        ["calibrate", "{spec}", "--param", "noise_multiplier", "--target-epsilon", "1e-9", "--delta", "1e-5"],
        ["frobnicate"],
    ],
)
def test_bad_arguments_one_line_exit_2(capsys, argv):
    argv = [a.replace("{spec}", str(EXAMPLES / "dp_sgd_mnist.toml")) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dplens: error:"), err


def test_console_script_has_no_traceback(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 0\n')
    proc = subprocess.run(
        [sys.executable, "-m", "dplens.cli", "account", str(spec), "--delta", "1e-5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "noise_multiplier" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_account_pld_json_has_the_certified_bracket_and_tolerance(capsys):
    spec = str(EXAMPLES / "dp_sgd_mnist.toml")
    code, out, _ = run(capsys, "account", spec, "--delta", "1e-5", "--method", "pld", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["epsilon_lower"] <= payload["epsilon"]
    assert payload["epsilon"] - payload["epsilon_lower"] <= 1e-3 * payload["epsilon"]
    code, out, _ = run(capsys, "account", spec, "--delta", "1e-5", "--method", "pld", "--json", "--tolerance", "1e-2")
    loose = json.loads(out)
    assert loose["epsilon"] - loose["epsilon_lower"] <= 1e-2 * loose["epsilon"]
    assert loose["epsilon_lower"] <= payload["epsilon"] and payload["epsilon_lower"] <= loose["epsilon"]
    code, out, _ = run(capsys, "account", spec, "--delta", "1e-5")
    assert "certified bracket: the true epsilon lies in [" in out
    code, _, err = run(capsys, "account", spec, "--delta", "1e-5", "--tolerance", "0")
    assert code == 2 and "tolerance" in err


def test_calibrate_pld_json_reports_the_bracket_at_the_answer(capsys):
    code, out, _ = run(
        capsys,
        "calibrate",
        str(EXAMPLES / "dp_sgd_mnist.toml"),
        "--param",
        "noise_multiplier",
        "--target-epsilon",
        "2",
        "--delta",
        "1e-5",
        "--tolerance",
        "1e-3",
        "--json",
    )
    payload = json.loads(out)
    assert code == 0 and payload["epsilon_lower"] <= payload["epsilon"] <= 2.0


def test_cli_default_tolerance_is_the_library_default():
    from dplens import cli
    from dplens.accountant import pld

    assert cli.DEFAULT_TOLERANCE == pld.DEFAULT_TOLERANCE


def test_a_closed_pipe_stops_quietly(monkeypatch, capsys):
    """``dplens ... | head``: the reader going away is no error of the input (no traceback, no error line)."""
    import io

    from dplens import cli

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = cli.main(["account", str(EXAMPLES / "gaussian_claim.toml"), "--delta", "1e-5", "--method", "rdp"])
    assert code == 1
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("sampling", "neighboring", "kind"),
    [
        ("poisson", "add_remove", "certified"),
        ("balls-and-bins", "add_remove", "certified"),
        ("shuffle", "zero_out", "lower bound"),
        ("cyclic", "zero_out", "certified"),
    ],
)
def test_dp_sgd_names_the_sampler_and_bounds_the_epsilon_from_both_sides(capsys, sampling, neighboring, kind):
    argv = [
        "dp-sgd",
        "--dataset-size",
        "2000",
        "--batch-size",
        "100",
        "--epochs",
        "2",
        "--noise-multiplier",
        "2",
        "--delta",
        "1e-5",
        "--sampling",
        sampling,
    ]
    code, out, err = run(capsys, *argv, "--json")
    payload = json.loads(out)
    assert code == 0 and err == ""
    assert payload["sampling"] == sampling and payload["neighboring"] == neighboring
    assert payload["epsilon_lower"] <= payload["epsilon"] and payload["lower_bound"] == kind
    code, out, _ = run(capsys, *argv)
    assert code == 0 and f"sampling: {sampling}; neighbouring relation: {neighboring}" in out
    assert ("LOWER BOUND only" in out) == (kind == "lower bound")


def test_dp_sgd_refuses_a_sampler_that_contradicts_the_run_in_one_line(capsys):
    base = [
        "dp-sgd",
        "--dataset-size",
        "2000",
        "--batch-size",
        "100",
        "--epochs",
        "2",
        "--noise-multiplier",
        "2",
        "--delta",
        "1e-5",
    ]
    for extra, message in (
        (["--sampling", "shuffle", "--neighboring", "add_remove"], "is not defined for sampling='shuffle'"),
        (["--sampling", "truncated-poisson"], "needs max_batch_size"),
        (["--sampling", "truncated-poisson", "--max-batch-size", "50"], "max_batch_size must be an integer >= "),
        (["--sampling", "unknown-sampler"], "invalid choice"),
    ):
        code, out, err = run(capsys, *base, *extra)
        assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, (extra, err)


def test_the_command_line_knows_every_sampler_the_accountant_does():
    from dplens.accountant.dp_sgd import Sampler
    from dplens.cli import SAMPLERS

    assert tuple(sampler.value for sampler in Sampler) == SAMPLERS
