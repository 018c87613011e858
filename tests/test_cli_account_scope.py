"""``dplens account SPEC --json`` names the privacy unit where the spec's dp_sgd tables state one, and the tuning
searches its ε includes (issue 49); a spec without either is unchanged."""

from __future__ import annotations

import json

import pytest

from dplens.cli import main

RUN = 'type = "dp_sgd"\nnoise_multiplier = 2.0\ndataset_size = 20000\nbatch_size = 200\nepochs = 1\n'


def account(capsys, tmp_path, text, *extra):
    path = tmp_path / "spec.toml"
    path.write_text(text)
    code = main(["account", str(path), *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (f"[[mechanism]]\n{RUN}", {"privacy_unit": "example"}),
        (
            f'[[mechanism]]\n{RUN}privacy_unit = "user"\nmax_examples_per_user = 3\n',
            {"privacy_unit": "user", "max_examples_per_user": 3, "user_sampling": False, "users": None},
        ),
        (
            f'[[mechanism]]\n{RUN}privacy_unit = "user"\nuser_sampling = true\nusers = 5000\n',
            {"privacy_unit": "user", "max_examples_per_user": None, "user_sampling": True, "users": 5000},
        ),
    ],
)
def test_account_json_names_the_privacy_unit(capsys, tmp_path, table, expected):
    payload = json.loads(account(capsys, tmp_path, table, "--delta", "1e-6", "--method", "rdp", "--json"))
    assert {k: payload.get(k) for k in expected} == expected
    assert "includes_tuning" not in payload
    text = account(capsys, tmp_path, table, "--delta", "1e-6", "--method", "rdp")
    assert f"privacy unit: {'one user' if expected['privacy_unit'] == 'user' else 'one training example'}" in text


def test_account_json_of_a_search(capsys, tmp_path):
    spec = f'[[mechanism]]\ntype = "repeat_and_select"\nmean = 10\nshape = "poisson"\n[mechanism.mechanism]\n{RUN}'
    payload = json.loads(account(capsys, tmp_path, spec, "--delta", "1e-6", "--method", "rdp", "--json"))
    assert payload["privacy_unit"] == "example" and payload["includes_tuning"] is True
    assert payload["tuning"] == [
        {"mean_runs": 10.0, "distribution": "poisson", "shape": None, "count": 1, "mechanism": "dp_sgd"}
    ]
    by_epsilon = json.loads(account(capsys, tmp_path, spec, "--epsilon", "3", "--method", "rdp", "--json"))
    assert by_epsilon["privacy_unit"] == "example" and by_epsilon["includes_tuning"] is True


def test_a_spec_without_dp_sgd_has_no_unit(capsys, tmp_path):
    payload = json.loads(
        account(
            capsys, tmp_path, '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 2.0\n', "--delta", "1e-5", "--json"
        )
    )
    assert "privacy_unit" not in payload and "tuning" not in payload


def test_mixed_units_are_accounted_for_an_example(capsys, tmp_path):
    spec = f'[[mechanism]]\n{RUN}privacy_unit = "user"\nmax_examples_per_user = 3\n\n[[mechanism]]\n{RUN}'
    payload = json.loads(account(capsys, tmp_path, spec, "--delta", "1e-6", "--method", "rdp", "--json"))
    assert payload["privacy_unit"] == "example" and payload["mixed_privacy_units"] is True
    assert "max_examples_per_user" not in payload
