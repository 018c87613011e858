"""``dplens dp-sgd --privacy-unit``: the issue-49 contract (JSON keys, ELS and ULS, the example default) and its bad
input (one line naming the flag and the value, exit 2)."""

import json

import pytest

from dplens.cli import main

BASE = [
    "dp-sgd",
    "--dataset-size",
    "200000",
    "--batch-size",
    "1000",
    "--epochs",
    "25",
    "--noise-multiplier",
    "1.5",
    "--delta",
    "1e-6",
]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_example_unit_is_todays_output_plus_the_unit(capsys):
    code, out, err = run(capsys, *BASE, "--json")
    payload = json.loads(out)
    assert code == 0 and err == "" and payload["privacy_unit"] == "example"
    assert "max_examples_per_user" not in payload and "user_sampling" not in payload
    code, text, _ = run(capsys, *BASE)
    assert "privacy unit: example" in text


def test_user_unit_with_at_most_k_examples(capsys):
    code, out, err = run(capsys, *BASE, "--privacy-unit", "user", "--max-examples-per-user", "2", "--json")
    payload = json.loads(out)
    assert code == 0 and err == ""
    assert payload["privacy_unit"] == "user" and payload["max_examples_per_user"] == 2
    assert payload["user_sampling"] is False and payload["steps"] == 5000 and payload["sampling_rate"] == 0.005
    # dp-accounting's MixtureOfGaussiansDpEvent PLD gives 2.46 here (issue 49): a certified bracket around it.
    assert payload["epsilon_lower"] <= 2.465 <= payload["epsilon"] <= 2.47
    example = json.loads(run(capsys, *BASE, "--json")[1])
    assert payload["epsilon"] > example["epsilon"]
    code, text, _ = run(capsys, *BASE, "--privacy-unit", "user", "--max-examples-per-user", "2")
    assert "privacy unit: user (at most 2 examples per user" in text


def test_user_sampling_counts_users(capsys):
    argv = [*BASE, "--privacy-unit", "user", "--user-sampling", "--users", "50000", "--max-examples-per-user", "8"]
    payload = json.loads(run(capsys, *argv, "--json")[1])
    assert payload["user_sampling"] is True and payload["users"] == 50000 and payload["steps"] == 1250
    assert payload["sampling_rate"] == 0.02 and payload["dataset_size"] == 200000


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (
            ["--privacy-unit", "user", "--max-examples-per-user", "0"],
            "--max-examples-per-user: expected a positive integer; got '0'",
        ),
        (["--privacy-unit", "user"], "--privacy-unit user needs --max-examples-per-user"),
        (["--privacy-unit", "user", "--user-sampling"], "--user-sampling needs --users"),
        (
            ["--privacy-unit", "user", "--max-examples-per-user", "4", "--users", "300000"],
            "--users 300000 exceeds --dataset-size 200000",
        ),
        (["--privacy-unit", "user", "--user-sampling", "--users", "500"], "--batch-size 1000 exceeds --users 500"),
        (["--max-examples-per-user", "4"], "--max-examples-per-user 4 needs --privacy-unit user"),
        (["--privacy-unit", "example", "--user-sampling", "--users", "5000"], "needs --privacy-unit user"),
        (
            ["--privacy-unit", "user", "--max-examples-per-user", "2", "--users", "1000"],
            "--dataset-size 200000 exceeds --max-examples-per-user 2 times --users 1000",
        ),
    ],
)
def test_bad_privacy_unit_input_is_one_line_exit_2(capsys, extra, needle):
    code, out, err = run(capsys, *BASE, *extra, "--json")
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1, err


def _spec(tmp_path, extra: str) -> str:
    path = tmp_path / "run.toml"
    path.write_text(
        '[[mechanism]]\ntype = "dp_sgd"\nnoise_multiplier = 1.5\ndataset_size = 200000\nbatch_size = 1000\n'
        f"epochs = 25\n{extra}",
        encoding="utf-8",
    )
    return str(path)


def test_a_spec_names_the_privacy_unit(capsys, tmp_path):
    from dplens.accountant.user_level import user_level_epsilon

    spec = _spec(tmp_path, 'privacy_unit = "user"\nmax_examples_per_user = 4\n')
    code, out, _ = run(capsys, "account", spec, "--delta", "1e-6", "--method", "pld", "--json")
    expected = user_level_epsilon(
        dataset_size=200000,
        batch_size=1000,
        epochs=25,
        noise_multiplier=1.5,
        delta=1e-6,
        max_examples_per_user=4,
        method="pld",
    )
    assert code == 0 and json.loads(out)["epsilon"] == expected.epsilon


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("max_examples_per_user = 4\n", "max_examples_per_user needs privacy_unit = 'user'"),
        ('privacy_unit = "person"\n', "privacy_unit must be 'example' or 'user'; got 'person'"),
        ('privacy_unit = "user"\n', "needs max_examples_per_user"),
        ('privacy_unit = "user"\nuser_sampling = true\n', "user_sampling needs users"),
    ],
)
def test_bad_privacy_unit_in_a_spec(capsys, tmp_path, extra, needle):
    code, out, err = run(capsys, "account", _spec(tmp_path, extra), "--delta", "1e-6")
    assert out == ""
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_report_of_a_user_level_spec_names_the_user_as_the_unit():
    import dplens
    from dplens.reports.build import build_report

    table = {"type": "dp_sgd", "noise_multiplier": 1.5, "dataset_size": 200000, "batch_size": 1000, "epochs": 25}
    for extra, words in (({"privacy_unit": "user", "max_examples_per_user": 4}, "one user"), ({}, "training example")):
        spec = dplens.parse_spec({"mechanism": [{**table, **extra}]})
        summary = spec.accountant().summary(1e-6)
        report = build_report(spec=spec, accounting=summary, title="run", not_audited_reason="test")
        assert words in report.claim.privacy_unit


def test_tuning_runs_put_the_search_in_the_epsilon(capsys):
    from dplens.accountant.dp_sgd import DpSgdRun
    from dplens.accountant.tuning import tuning_epsilon

    small = ["dp-sgd", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "10", "--noise-multiplier", "1.1"]
    code, out, err = run(capsys, *small, "--delta", "1e-5", "--tuning-runs", "10", "--json")
    assert err == ""
    payload = json.loads(out)
    run_event = DpSgdRun(noise_multiplier=1.1, dataset_size=60000, batch_size=256, epochs=10)
    expected = tuning_epsilon(run_event, distribution="geometric", mean=10, delta=1e-5)
    assert code == 0 and payload["epsilon"] == expected.epsilon and payload["includes_tuning"] is True
    assert payload["epsilon"] > payload["epsilon_one_run"] and payload["epsilon_lower"] is None
    routes = {"rdp": expected.epsilon_rdp, "profile": expected.epsilon_profile}
    assert payload["tuning"] == {"distribution": "geometric", "mean_runs": 10.0, "shape": 1.0, "routes": routes}
    assert payload["epsilon"] == max(min(routes.values()), payload["epsilon_one_run"])


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--tuning-runs", "0"], "--tuning-runs: expected a finite number >= 1 (runs on average); got '0'"),
        (["--tuning-runs", "-2"], "--tuning-runs: expected a finite number >= 1 (runs on average); got '-2'"),
        (
            ["--tuning-runs", "5", "--tuning-distribution", "truncated-negative-binomial", "--tuning-shape", "0"],
            "--tuning-shape: expected a finite number > 0; got '0'",
        ),
        (
            ["--tuning-runs", "5", "--tuning-distribution", "truncated-negative-binomial"],
            "--tuning-shape ETA goes with",
        ),
        (["--tuning-shape", "2"], "need --tuning-runs"),
    ],
)
def test_bad_tuning_input_is_one_line_exit_2(capsys, extra, needle):
    code, out, err = run(capsys, *BASE, *extra, "--json")
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1, err


# ---- heterogeneous users: --examples-per-user-histogram ---------------------------------------------------------


def _histogram_file(tmp_path, text: str, name: str = "users.json") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_histogram_gives_the_worst_case_and_every_users_epsilon(capsys, tmp_path):
    from dplens.accountant.user_level import user_epsilons

    path = _histogram_file(tmp_path, '{"1": 150000, "5": 10000}')
    argv = [*BASE, "--privacy-unit", "user", "--examples-per-user-histogram", path, "--method", "pld"]
    code, out, err = run(capsys, *argv, "--json")
    payload = json.loads(out)
    expected = user_epsilons({1: 150000, 5: 10000}, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    assert code == 0 and err == ""
    assert payload["privacy_unit"] == "user" and payload["user_sampling"] is False
    assert payload["epsilon"] == expected.worst_case.epsilon and payload["max_examples_per_user"] == 5
    assert payload["epsilon_lower"] <= payload["epsilon"] and payload["users"] == 160000
    assert [(r["examples"], r["users"]) for r in payload["per_count"]] == [(1, 150000), (5, 10000)]
    assert payload["per_count"][0]["epsilon"] < payload["epsilon"] == payload["per_count"][1]["epsilon"]
    assert payload["median_user_epsilon"] == payload["per_count"][0]["epsilon"]
    csv = _histogram_file(tmp_path, "examples,users\n1,150000\n5,10000\n", "users.csv")
    code, text, _ = run(capsys, *BASE, "--privacy-unit", "user", "--examples-per-user-histogram", csv)
    assert code == 0 and "upper bound for every user: the worst case" in text and "per-user epsilon" in text
    assert "privacy unit: user (at most 5 examples per user" in text


@pytest.mark.parametrize(
    ("content", "extra", "needle"),
    [
        ('{"1": -5}', [], "users >= 0"),
        ('{"1": 2.5}', [], "must be an integer"),
        ("", [], "is empty"),
        ('{"1": 150000, "5": 20000}', [], "250000 examples, more than --dataset-size 200000"),
        ('{"1": 1000}', ["--privacy-unit", "example"], "needs --privacy-unit user"),
        ('{"1": 1000}', ["--user-sampling", "--users", "1000"], "under --user-sampling every user"),
        ('{"1": 1000, "9": 3}', ["--max-examples-per-user", "4"], "more than --max-examples-per-user 4"),
        ('{"1": 1000}', ["--users", "999"], "--users 999 differs from the 1000 users"),
    ],
)
def test_bad_histograms_are_one_line_exit_2(capsys, tmp_path, content, extra, needle):
    path = _histogram_file(tmp_path, content)
    unit = [] if "--privacy-unit" in extra else ["--privacy-unit", "user"]
    code, out, err = run(capsys, *BASE, *unit, *extra, "--examples-per-user-histogram", path, "--json")
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_histogram_file_is_one_line(capsys, tmp_path):
    missing = str(tmp_path / "nope.json")
    code, out, err = run(capsys, *BASE, "--privacy-unit", "user", "--examples-per-user-histogram", missing)
    assert code == 2 and out == "" and "not found" in err and len(err.strip().splitlines()) == 1


def test_fixed_size_batches_give_a_labelled_user_bound(capsys):
    argv = [*BASE, "--privacy-unit", "user", "--max-examples-per-user", "2", "--sampling", "fixed-size", "--json"]
    code, out, err = run(capsys, *argv)
    payload = json.loads(out)
    assert code == 0 and err == "" and payload["privacy_unit"] == "user" and payload["sampling"] == "fixed-size"
    assert payload["lower_bound"] == "lower bound" and payload["epsilon_lower"] <= payload["epsilon"]
    assert "group privacy" in payload["details"] and "zero-out accounted as substitution" in payload["details"]
    assert "sampling='poisson'" in payload["bracket_note"]  # the wide bracket says what gives a tight number
