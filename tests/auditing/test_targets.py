"""Targets: adapters, import by path, pair files, errors in the user's own words."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from dplens.auditing.targets import (
    Target,
    TargetError,
    TargetKind,
    as_target,
    batched,
    load_pair,
    load_target,
    randomise,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "targets"


@pytest.fixture
def in_examples(monkeypatch):
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("mechanisms", None)


def test_kinds_are_detected():
    def plain(data, rng):
        return 1.0

    @batched
    def vectorised(data, rng, size):
        return np.zeros(size)

    class Releaser:
        def release(self, data, rng):
            return 0

    class Randomiser:
        def randomise(self, value):
            return value

    assert as_target(plain).kind is TargetKind.CALLABLE
    assert as_target(vectorised).kind is TargetKind.BATCHED
    assert as_target(Releaser()).kind is TargetKind.RELEASE
    assert as_target(Randomiser()).kind is TargetKind.RANDOMISE
    with pytest.raises(ValueError, match="target must be a callable"):
        as_target(42)


def test_load_target_by_path_and_pickle_by_path(in_examples):
    target = load_target("mechanisms:textbook_laplace")
    assert target.path == "mechanisms:textbook_laplace" and target.kind is TargetKind.CALLABLE
    clone = pickle.loads(pickle.dumps(target))  # workers import it by path: the function is not pickled
    assert clone.function is target.function
    assert load_target("mechanisms:noisy_sum_batched").kind is TargetKind.BATCHED


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("nomodule_xyz:f", "target module 'nomodule_xyz' not found"),
        ("mechanisms:missing", "target module 'mechanisms' has no attribute 'missing'"),
        ("no-colon", "target must be 'module:name'"),
    ],
)
def test_load_target_errors_are_one_line(in_examples, path, message):
    with pytest.raises(ValueError, match=message) as info:
        load_target(path)
    assert "\n" not in str(info.value)


def test_a_lambda_cannot_go_to_workers():
    target = as_target(lambda data, rng: 0.0)
    assert target.path is None
    with pytest.raises(ValueError, match="cannot be sent to worker processes"):
        pickle.dumps(target)
    from dplens.auditing.target_game import audit_target

    with pytest.raises(ValueError, match="workers=2 needs a target that worker processes can import by path"):
        audit_target(lambda data, rng: 0.0, (1, 0), claim_epsilon=1.0, trials=10, workers=2)


def test_user_code_fails_in_its_own_words():
    def fragile(data, rng):
        if rng.random() < 0.5:
            raise KeyError("no such column 'age'")
        return 1.0

    target = as_target(fragile)
    with pytest.raises(TargetError, match=r"target .*fragile failed at trial \d+ of 50 \(chunk 3\): KeyError") as info:
        target.draw([1], 50, np.random.default_rng(0), where="chunk 3")
    assert "no such column 'age'" in str(info.value)


def test_randomise_adapter_is_seeded_through_random_state():
    class Mechanism:
        def __init__(self):
            self._rng = None

        def randomise(self, value):
            return value + self._rng.random()

    adapter = randomise(Mechanism(), query=sum)
    first = adapter.draw([1, 2], 5, np.random.default_rng(1))
    second = adapter.draw([1, 2], 5, np.random.default_rng(1))
    assert first == second and all(3 <= v < 4 for v in first)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pair.json"
    path.write_text(text)
    return path


def test_pair_files(tmp_path):
    np.save(tmp_path / "d.npy", np.arange(4.0))
    (tmp_path / "n.csv").write_text("0\n1\n2\n")
    pair = load_pair(_write(tmp_path, json.dumps({"data": "d.npy", "neighbour": "n.csv", "query": [6, 3]})))
    assert pair.data.tolist() == [0, 1, 2, 3] and pair.neighbour.tolist() == [0, 1, 2]
    assert pair.query == (6, 3)
    pair = load_pair(_write(tmp_path, '{"data": [1, 2], "relation": "add_remove"}'))
    assert pair.neighbour is None and pair.relation == "add_remove"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"data": [1]}', "has no 'neighbour'"),
        ('{"data": [1], ', "is not valid JSON"),
        ('{"neighbour": [1]}', "has no 'data'"),
        ('{"data": 1, "neighbour": 0, "colour": 1}', "unknown key 'colour'"),
        ('{"data": 1, "neighbour": 0, "query": [1]}', "'query' must be"),
        ('{"data": 1, "neighbour": 0, "noise": {"sampler": "x", "scale": 1}}', "'noise' must be"),
        ('{"data": "missing.npy", "neighbour": 0}', "file not found"),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
def test_pair_file_errors_are_one_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message) as info:
        load_pair(_write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_target_is_frozen():
    target = as_target(lambda d, r: 0)
    assert isinstance(target, Target)
    with pytest.raises(AttributeError):
        target.name = "x"
