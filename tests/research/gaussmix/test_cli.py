"""The ``gaussmix`` and ``modified_gaussmix`` CLI types (issue 3): both routes, composition under RDP, calibration.

The builders are unit-tested in test_gaussmix.py::test_spec_types; here the whole ``dplens account`` /
``dplens calibrate`` path is checked against the Python API and the notes' reference values.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dplens.accountant import events as ev
from dplens.accountant import rdp
from dplens.cli import main
from dplens.research.gaussmix import accounting as gm

# notes §7 D / I: γ = σ² at the fourth Figure-1 grid point (C_X = 1, λ̄_min = 0).
GAMMA = float((10 ** np.linspace(np.log10(4 / 3), 3.5, 25))[3] ** 2)


def _spec(tmp_path, body: str) -> str:
    path = tmp_path / "spec.toml"
    path.write_text(body)
    return str(path)


def _account(capsys, path: str, *args: str) -> dict:
    code = main(["account", path, *args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    return json.loads(out)


def test_gaussmix_from_noise_both_routes(tmp_path, capsys):
    # σ, C_X, λ̄_min give γ = (σ² + λ̄_min)/C_X²: here σ = 2, C_X = 1, λ̄_min = γ − 4.
    path = _spec(
        tmp_path,
        '[[mechanism]]\ntype = "gaussmix"\nk = 150\nsigma = 2.0\nrow_bound = 1.0\n'
        f"lambda_min_bound = {GAMMA - 4.0!r}\n",
    )
    event = gm.GaussMix(k=150, gamma=GAMMA)
    by_rdp = _account(capsys, path, "--delta", "1e-8", "--method", "rdp")
    assert by_rdp["method"] == "rdp"
    assert by_rdp["epsilon"] == pytest.approx(5.490015958, rel=1e-8)  # §7 D
    assert by_rdp["epsilon"] == pytest.approx(gm.gaussmix_epsilon(event, 1e-8), rel=1e-12)
    by_exact = _account(capsys, path, "--delta", "1e-8", "--method", "exact")
    assert by_exact["method"] == "exact"
    assert abs(by_exact["epsilon"] - 5.1053686) <= 5e-8  # §7 I, printed to 8 digits
    best = _account(capsys, path, "--delta", "1e-8")
    assert best["epsilon"] == by_exact["epsilon"] < by_rdp["epsilon"]
    # δ at a given ε, both routes
    assert 0 < _account(capsys, path, "--epsilon", "5.2", "--method", "exact")["delta"] <= 1e-8
    assert _account(capsys, path, "--epsilon", "5.2", "--method", "rdp")["delta"] > 1e-8


def test_gaussmix_composes_with_standard_types_under_rdp(tmp_path, capsys):
    path = _spec(
        tmp_path,
        f'[[mechanism]]\ntype = "gaussmix"\nk = 150\ngamma = {GAMMA!r}\n'
        '[[mechanism]]\ntype = "poisson_subsampled_gaussian"\nnoise_multiplier = 1.1\nsampling_rate = 0.01\n'
        "steps = 100\n"
        '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 20.0\ncount = 3\n',
    )
    payload = _account(capsys, path, "--delta", "1e-8", "--method", "rdp")
    curve = (
        rdp.rdp_curve(gm.GaussMix(k=150, gamma=GAMMA))
        + rdp.rdp_curve(ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.1))) * 100
        + rdp.rdp_curve(ev.Gaussian(noise_multiplier=20.0)) * 3
    )
    assert payload["epsilon"] == pytest.approx(curve.epsilon(1e-8), rel=1e-12)
    assert payload["epsilon"] > gm.gaussmix_epsilon(gm.GaussMix(k=150, gamma=GAMMA), 1e-8)
    assert payload["optimal_order"] < GAMMA  # φ is +∞ beyond γ
    # No exact profile is known for the mixture: a clear one-line refusal, exit 2.
    assert main(["account", path, "--delta", "1e-8", "--method", "exact", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err


def test_gaussmix_count_is_a_larger_sketch(tmp_path, capsys):
    three = _spec(tmp_path, f'[[mechanism]]\ntype = "gaussmix"\nk = 50\ngamma = {GAMMA!r}\ncount = 3\n')
    payload = _account(capsys, three, "--delta", "1e-8", "--method", "exact")
    assert payload["epsilon"] == pytest.approx(gm.exact_epsilon(1e-8, k=150, gamma=GAMMA), rel=1e-12)


def test_modified_gaussmix_is_theorem_1(tmp_path, capsys):
    eta = 100 / math.sqrt(150)
    path = _spec(tmp_path, f'[[mechanism]]\ntype = "modified_gaussmix"\nk = 150\ngamma = 100\neta = {eta!r}\n')
    payload = _account(capsys, path, "--delta", "1e-8", "--method", "exact")
    # The accountant uses Theorem 1 with the exact χ² GaussMix term at δ/3: valid, and below the paper's
    # RDP-term value 1.35234943884 (§7 E), which stays available from Python.
    exact_term = gm.theorem1_epsilon(eta=eta, gamma=100.0, k=150, delta=1e-8, route=gm.AccountingRoute.EXACT)
    paper = gm.theorem1_epsilon(eta=eta, gamma=100.0, k=150, delta=1e-8)
    assert paper.epsilon == pytest.approx(1.35234943884, rel=1e-10)  # §7 E
    assert payload["epsilon"] == pytest.approx(exact_term.epsilon, rel=1e-9)
    assert payload["epsilon"] < paper.epsilon
    assert _account(capsys, path, "--delta", "1e-8")["epsilon"] == payload["epsilon"]


def test_calibrate_gaussmix_noise_by_both_routes(tmp_path, capsys):
    path = _spec(tmp_path, '[[mechanism]]\ntype = "gaussmix"\nk = 150\nsigma = 5.0\nrow_bound = 1.0\n')
    values = {}
    for method in ("rdp", "exact"):
        argv = ["calibrate", path, "--param", "sigma", "--target-epsilon", "1", "--delta", "1e-8", "--method", method]
        # The default σ bracket starts at 1e-3, where γ = σ²/C_X² ≤ 1 is refused: the CLI moves it up itself.
        assert main([*argv, "--json"]) == 0
        payload = json.loads(capsys.readouterr().out)
        assert main([*argv, "--bracket", "1.01", "1000", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["value"] == pytest.approx(payload["value"], rel=1e-6)
        assert payload["param"] == "sigma" and payload["epsilon"] <= 1.0
        values[method] = payload["value"]
    # γ = σ² here: the RDP route's answer is Lemma 1's calibration, the exact route needs less noise.
    assert values["rdp"] ** 2 == pytest.approx(gm.calibrate_gamma(1.0, 1e-8, k=150), rel=1e-6)
    assert values["exact"] ** 2 == pytest.approx(
        gm.calibrate_gamma(1.0, 1e-8, k=150, route=gm.AccountingRoute.EXACT), rel=1e-6
    )
    assert values["exact"] < values["rdp"]


@pytest.mark.parametrize(
    "body",
    [
        'type = "gaussmix"\ngamma = 10.0\n',
        'type = "gaussmix"\nk = 3\ngamma = 0.5\n',
        'type = "gaussmix"\nk = 3\ngamma = 10.0\nsigma = 1.0\n',
        'type = "gaussmix"\nk = 3\nsigma = 0.5\nrow_bound = 1.0\n',
        'type = "modified_gaussmix"\nk = 3\ngamma = 2.0\neta = 1.0\n',
    ],
)
def test_bad_gaussmix_specs_exit_2(tmp_path, capsys, body):
    path = _spec(tmp_path, "[[mechanism]]\n" + body)
    assert main(["account", path, "--delta", "1e-8"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("dplens: error:")
