"""Sweeps: every configuration's ε equals one-by-one accounting, in CSV/JSON and on the command line."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from dplens.accountant.compose import Method
from dplens.accountant.sweep import parameter_values, parse_parameter, sweep
from dplens.cli import main
from dplens.spec import parse_spec

DPSGD = {"type": "poisson_subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 0.01, "steps": 1000}


def _spec(*tables):
    return parse_spec({"mechanism": list(tables or [DPSGD])})


def _one_by_one(spec, names, configuration, delta, method):
    for name, value in zip(names, configuration, strict=True):
        spec = spec.with_param(name, value)
    return spec.accountant().epsilon_result(delta, method=method)


def test_rdp_sweep_equals_one_by_one_accounting():
    # Large and small ε, orders near 1 (σ = 0.5) and far from it, and a composition with a second mechanism.
    spec = _spec(DPSGD, {"type": "gaussian", "noise_multiplier": 20.0, "count": 10})
    params = {"noise_multiplier": [0.5, 0.9, 1.7, 3.0], "sampling_rate": [0.002, 0.03], "steps": [50, 3000, 20000]}
    result = sweep(spec, params=params, delta=1e-5)
    assert len(result.epsilon) == 24 and result.method is Method.RDP
    for configuration, epsilon in zip(result.configurations, result.epsilon, strict=True):
        expected = _one_by_one(spec, result.params, configuration, 1e-5, Method.RDP).epsilon
        # Both search α continuously from the same RDP curve (the sweep on shared orders, then bracketed and
        # parabolic refinement): equal to ~1e-9; 1e-6 allows for where the two searches end.
        assert epsilon == pytest.approx(expected, rel=1e-6)


def test_pld_sweep_rows_are_one_by_one_results_with_their_certified_bracket():
    spec = _spec()
    result = sweep(spec, params={"noise_multiplier": [0.9, 1.4], "steps": [200, 2000]}, delta=1e-6, method="pld")
    assert result.epsilon_lower is not None
    for configuration, epsilon, lower in zip(result.configurations, result.epsilon, result.epsilon_lower, strict=True):
        expected = _one_by_one(spec, result.params, configuration, 1e-6, Method.PLD)
        assert (epsilon, lower) == (expected.epsilon, expected.epsilon_lower)
        assert lower <= epsilon <= lower * (1 + 1e-3) / (1 - 1e-3)


def test_sweep_is_monotone_where_accounting_is():
    result = sweep(_spec(), params={"noise_multiplier": parameter_values(0.6, 3.0, 12)}, delta=1e-5)
    assert all(a > b for a, b in zip(result.epsilon, result.epsilon[1:], strict=False))


def test_outputs_csv_json_and_write(tmp_path):
    result = sweep(_spec(), params={"noise_multiplier": [1.0, 2.0], "steps": [10, 20]}, delta=1e-5)
    rows = list(csv.DictReader(io.StringIO(result.to_csv())))
    assert [r["steps"] for r in rows] == ["10", "20", "10", "20"]  # integer parameters stay integers
    assert float(rows[0]["epsilon"]) == result.epsilon[0]
    data = result.to_dict()
    assert data["params"] == ["noise_multiplier", "steps"] and len(data["rows"]) == 4
    path = result.write(tmp_path / "out.json")
    assert json.loads(path.read_text())["rows"][3]["epsilon"] == result.epsilon[3]
    assert not list(tmp_path.glob("*.partial"))


def test_parameter_parsing():
    assert parse_parameter("steps=100:300:3") == ("steps", [100.0, 200.0, 300.0])
    assert parse_parameter("sampling_rate=0.001:0.1:3:log")[1] == pytest.approx([0.001, 0.01, 0.1])
    assert parse_parameter("noise_multiplier=0.5,1,2") == ("noise_multiplier", [0.5, 1.0, 2.0])
    for bad in ("steps", "steps=1:2", "steps=a:b:3", "x=2:1:3", "x=1:2:0", "x=0:1:3:log"):
        with pytest.raises(ValueError):
            parse_parameter(bad)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"params": {}}, "params"),
        ({"params": {"nonsense": [1.0]}}, "nonsense"),
        ({"params": {"noise_multiplier": []}}, "at least one value"),
        ({"params": {"noise_multiplier": [-1.0]}}, "noise_multiplier"),
        ({"params": {"noise_multiplier": [1.0]}, "delta": 0.0}, "delta"),
        ({"params": {"noise_multiplier": [1.0]}, "method": "magic"}, "method"),
    ],
)
def test_bad_input_is_a_value_error(kwargs, match):
    arguments = {"delta": 1e-5} | kwargs
    with pytest.raises(ValueError, match=match):
        sweep(_spec(), **arguments)


def test_cli_sweep_writes_csv_and_figure(tmp_path, capsys):
    spec = tmp_path / "dpsgd.toml"
    spec.write_text("\n".join(["[[mechanism]]", *(f"{k} = {json.dumps(v)}" for k, v in DPSGD.items())]))
    out = tmp_path / "grid.csv"
    code = main(
        [
            "sweep",
            str(spec),
            "--param",
            "noise_multiplier=0.8:1.6:3",
            "--param",
            "sampling_rate=0.005:0.01:2",
            "--delta",
            "1e-5",
            "-o",
            str(out),
        ]
    )
    assert code == 0 and "wrote" in capsys.readouterr().out
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 6 and out.with_suffix(".png").stat().st_size > 0
    code = main(["sweep", str(spec), "--param", "steps=100,1000", "--delta", "1e-5", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and [row["steps"] for row in payload["rows"]] == [100, 1000]
    assert np.all(np.diff([row["epsilon"] for row in payload["rows"]]) > 0)


def test_cli_sweep_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    spec = tmp_path / "dpsgd.toml"
    spec.write_text("\n".join(["[[mechanism]]", *(f"{k} = {json.dumps(v)}" for k, v in DPSGD.items())]))
    out = tmp_path / "grid.csv"
    for argv in (
        ["--param", "noise=1:2:3"],
        ["--param", "noise_multiplier=1:2"],
        ["--param", "noise_multiplier=2:1:3"],
        ["--param", "noise_multiplier=1:2:3", "--param", "noise_multiplier=1:2:3"],
    ):
        code = main(["sweep", str(spec), *argv, "--delta", "1e-5", "-o", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("dplens: error:") and err.count("\n") == 1, argv
        assert not out.exists()
