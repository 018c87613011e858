"""``dplens check-dp-sgd`` (issue 46): the JSON contract, exit statuses, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import textwrap

import pytest

import dplens
from dplens.cli import main

STEPS = textwrap.dedent(
    """
    import numpy as np

    def _clipped(g):
        g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
        return np.minimum(1.0, 1.0 / np.maximum(np.linalg.norm(g, axis=1), 1e-300)) @ g

    def good(g, rng):
        return (_clipped(g) + rng.normal(0, 1.0, g.shape[1])) / 50

    def tenth(g, rng):
        return (_clipped(g) + rng.normal(0, 0.1, g.shape[1])) / 50

    def wrong_shape(g, rng):
        return np.zeros(3)

    def raises(g, rng):
        raise KeyError("boom")

    def nonfinite(g, rng):
        return np.full(g.shape[1], np.nan)

    def early(n, rng):
        return iter([np.arange(50)] * 3)

    def floats(n, rng):
        while True:
            yield np.arange(50) * 1.0

    def two_d(n, rng):
        while True:
            yield np.zeros((5, 10), dtype=int)

    def outside(n, rng):
        while True:
            yield np.array([0, n])

    def _closures():
        def step(g, rng):
            return good(g, rng)

        def sampler(n, rng):
            while True:
                yield rng.choice(n, 50, replace=False)

        return step, sampler

    local_step, local_sampler = _closures()
    """
)
BASE = ["--noise-multiplier", "1", "--max-grad-norm", "1", "--batch-size", "50", "--delta", "1e-5", "--quiet"]


@pytest.fixture
def steps_module(tmp_path, monkeypatch):
    (tmp_path / "h8_cli_steps.py").write_text(STEPS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "h8_cli_steps"


def test_json_contract_and_exit_zero(steps_module, capsys):
    argv = ["check-dp-sgd", "--step", f"{steps_module}:good", "--dataset-size", "500", "--steps", "3"]
    assert main([*argv, *BASE, "--trials", "300", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "PASS"
    assert {"name", "verdict", "measured", "declared"} <= set(data["checks"][0])
    assert {"epsilon_lower_bound", "claimed_epsilon", "verdict"} <= set(data["audit"])
    assert {"epsilon_lower_bound", "assumptions"} <= set(data["model_based"])
    assert data["stated_assumptions"] == [] and not any(c["excluded_from_overall"] for c in data["checks"])


def test_default_trials_are_printed(steps_module, capsys, monkeypatch):
    from dplens.auditing.training import check

    monkeypatch.setattr(check, "default_trials", lambda steps: 40)  # the real default is ~2e5 step calls per side
    argv = ["check-dp-sgd", "--step", f"{steps_module}:good", "--dataset-size", "500", "--steps", "3"]
    assert main([*argv, *BASE]) == 0
    assert "40 trainings per side (the default for 3 steps)" in capsys.readouterr().out
    assert check.default_trials.__class__ is type(lambda: 0)


def test_violation_exits_one_only_with_fail_on_violation(steps_module, capsys):
    argv = ["check-dp-sgd", "--step", f"{steps_module}:tenth", "--dataset-size", "500", "--steps", "3"]
    # the stated assumption reaches the result and its JSON, and does not hide the under-noising
    assert main([*argv, *BASE, "--trials", "100", "--json", "--assume-finite-gradients"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "VIOLATION"
    assert [a["option"] for a in data["stated_assumptions"]] == ["assume_finite_gradients"]
    found = {c["name"]: c for c in data["checks"]}
    assert found["noise_std"]["verdict"] == "VIOLATION" and not found["noise_std"]["excluded_from_overall"]
    leak = found["non_finite_rows"]
    assert leak["verdict"] == "PASS"  # tenth is nan_safe: a PASS stays a PASS, marked not counted as asked
    assert leak["excluded_from_overall"] and "is finite" in leak["exclusion_reason"]
    assert main([*argv, *BASE, "--trials", "100", "--fail-on-violation"]) == 1


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--step", "{m}:wrong_shape"], "returned shape (3,)"),
        (["--step", "{m}:raises"], "raised KeyError: 'boom' (probe call 0"),
        (["--step", "{m}:nonfinite"], "non-finite update on finite input (probe call 0"),
        (["--step", "{m}:good", "--sampler-function", "{m}:early"], "ended after 3 of 5 steps"),
        (["--step", "{m}:good", "--sampler-function", "{m}:floats"], "dtype float64; expected integers"),
        (["--step", "{m}:good", "--sampler-function", "{m}:two_d"], "2-D array of shape (5, 10)"),
        (["--step", "{m}:good", "--sampler-function", "{m}:outside"], "index 5000, outside [0, 5000)"),
        (["--step", "h8_no_such_module:f"], "step module 'h8_no_such_module' not found"),
        (["--step", "{m}:missing"], "has no attribute 'missing'"),
        (["--step", "{m}:good", "--epochs", "1"], "exactly one of --steps and --epochs"),
    ],
)
def test_bad_input_is_one_line_exit_two(steps_module, capsys, extra, words):
    extra = [part.format(m=steps_module) for part in extra]
    assert main(["check-dp-sgd", *extra, "--steps", "5", "--dataset-size", "5000", *BASE, "--trials", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--step", "{m}:local_step"], "the step function '{m}:local_step' cannot be sent to worker processes"),
        (
            ["--step", "{m}:good", "--sampler-function", "{m}:local_sampler"],
            "the sampler function '{m}:local_sampler' cannot be sent to worker processes",
        ),
    ],
)
def test_a_function_workers_cannot_receive_is_named(steps_module, capsys, monkeypatch, extra, words):
    # forkserver is what the pool uses once JAX or a GPU torch is loaded: the task is pickled, and a closure is not
    monkeypatch.setenv("DPLENS_START_METHOD", "forkserver")
    extra = [part.format(m=steps_module) for part in extra]
    argv = ["check-dp-sgd", *extra, "--steps", "5", "--dataset-size", "5000", *BASE, "--trials", "50", "--workers", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words.format(m=steps_module) in err and "Traceback" not in err, err
    monkeypatch.setenv("DPLENS_START_METHOD", "fork")  # forked workers inherit the closure: it runs
    assert main([*argv, "--json"]) == 0


def test_neither_steps_nor_epochs(steps_module, capsys):
    argv = ["check-dp-sgd", "--step", f"{steps_module}:good", "--dataset-size", "5000", *BASE]
    assert main(argv) == 2
    assert "exactly one of --steps and --epochs" in capsys.readouterr().err


def test_exported_lazily():
    assert "check_dp_sgd" in dplens.__all__ and callable(dplens.check_dp_sgd)
