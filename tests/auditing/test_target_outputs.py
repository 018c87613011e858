"""Target audits on any output (issue 30): degenerate outputs answered, wide outputs reduced as they arrive."""

from __future__ import annotations

import math
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from dplens.accountant.compose import Accountant
from dplens.accountant.events import Gaussian
from dplens.auditing import target_game as tg
from dplens.auditing.blackbox.frequency import bitwise_only_draws, row_hashes
from dplens.auditing.games import Verdict
from dplens.auditing.stages.reduction import Reduction, Screening, screen
from dplens.auditing.targets import batched

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "targets"
NAN_A = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
NAN_B = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000002))[0]


@pytest.fixture
def in_examples(monkeypatch):
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("gradients", None)


def _audit(target, pair=([1, 1], [1]), **kwargs):
    kwargs.setdefault("trials", 4_000)
    return tg.audit_target(target, pair, claim_epsilon=1.0, seed=0, **kwargs)


# --------------------------------------------------------------------------------------------
# Degenerate outputs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "constant",
    [3, 0.5, "released", True, None, np.array([1.0, 2.0]), np.array([0, 1, 1])],
    ids=["int", "float", "str", "bool", "none", "float-vector", "int-vector"],
)
def test_a_constant_target_is_consistent_with_bound_zero_and_a_note(constant):
    result = _audit(lambda data, rng: constant)
    assert result.verdict is Verdict.CONSISTENT and result.epsilon_lower_bound == 0.0
    assert any("outputs were all equal on both inputs" in note for note in result.notes)
    assert result.to_dict()["epsilon_lower_bound"] == 0.0


def test_a_constant_pilot_still_counts_another_output_in_the_counted_trials():
    # The pilot sees only 0; the counted trials see 1 on D (1 in 50): the table of "the pilot's value against any
    # other" finds it, so a rare leak is not hidden by a constant pilot.
    @batched
    def rare(data, rng, size):
        return np.where(rng.random(size) < (0.02 if len(data) == 2 else 0.0), 1, 0)

    result = tg.audit_target(rare, ([1, 1], [1]), claim_epsilon=1.0, trials=20_000, seed=0, pilot_trials=40)
    assert result.verdict is Verdict.VIOLATION and result.epsilon_lower_bound > 3


def test_identical_distributions_on_a_finite_support_are_consistent():
    result = _audit(lambda data, rng: int(rng.integers(0, 3)), trials=20_000)
    assert result.verdict is Verdict.CONSISTENT and result.epsilon_lower_bound < 0.1


@pytest.mark.parametrize(
    ("on_d", "on_neighbour"),
    [(-0.0, 0.0), (NAN_A, NAN_B), (np.array([1.0, -0.0]), np.array([1.0, 0.0]))],
    ids=["signed-zero", "nan-payload", "signed-zero-vector"],
)
def test_outputs_differing_only_in_their_bits_are_a_violation_by_bit_patterns(on_d, on_neighbour):
    result = _audit(lambda data, rng: on_d if len(data) == 2 else on_neighbour)
    assert result.verdict is Verdict.VIOLATION
    assert result.best_score.startswith("frequency ratio of the bit patterns")
    # every output identifies its input: the bound is the ceiling of the bit-pattern test (its share of alpha)
    assert result.epsilon_lower_bound > 5 and any("not in their bits" in note for note in result.notes)


def test_a_sign_of_zero_that_follows_the_noise_is_not_a_bitwise_difference():
    # Rounded Laplace noise gives −0.0 and 0.0 on both inputs alike: no bit-pattern table.
    rng = np.random.default_rng(0)
    first, second = (np.round(q + rng.laplace(0.0, 1.0, 20_000), 1) for q in (0.0, 0.3))
    assert bitwise_only_draws(first, second) == 0
    assert bitwise_only_draws(np.full(30, -0.0), np.full(30, 0.0)) == 60
    assert row_hashes(np.array([-0.0]))[0] == row_hashes(np.array([0.0]))[0]


def test_empty_none_and_mixed_outputs_keep_their_handling():
    with pytest.raises(ValueError, match="the target's outputs are empty"):
        _audit(lambda data, rng: np.zeros(0))
    mixed = _audit(lambda data, rng: [None, "a", 1, 2.5][int(rng.integers(0, 4))])
    assert mixed.output_kind == "categorical" and mixed.verdict is Verdict.CONSISTENT
    aborts = _audit(lambda data, rng: None if rng.random() < 0.5 else float(rng.integers(0, 3)))
    assert aborts.output_kind == "real" and aborts.verdict is Verdict.CONSISTENT


# --------------------------------------------------------------------------------------------
# Wide outputs
# --------------------------------------------------------------------------------------------


def test_the_reduction_keeps_the_differing_coordinates_and_projects_on_the_mean_difference():
    rng = np.random.default_rng(1)
    screening = Screening(500)
    shift = np.zeros(500)
    shift[[7, 300]] = 1.0
    for side, mean in ((0, shift), (1, np.zeros(500))):
        for _ in range(4):
            screening.add(side, mean + rng.normal(0.0, 0.5, size=(250, 500)))
    query = np.zeros(500)
    query[42] = 1.0
    reduction = screen(screening, [(query, np.zeros(500))])
    assert {7, 42, 300} <= set(reduction.columns.tolist()) and reduction.columns.size <= 64 + 28
    assert np.argsort(-np.abs(reduction.weights))[:2].tolist() in ([7, 300], [300, 7])
    values = np.ones((3, 500))
    reduced = reduction(values, 3)
    assert reduced.shape == (3, reduction.size)
    np.testing.assert_allclose(reduced[:, -1], reduction.weights.sum())
    assert reduction.reduce_query(query)[list(reduction.columns).index(42)] == 1.0
    np.testing.assert_array_equal(Reduction(dimension=2, columns=np.array([1]), weights=np.ones(2))(
        np.array([[1.0, np.nan]]), 1)[0, 1:], [np.nan])  # fmt: skip


def _gaussian_claim(noise_multiplier: float) -> float:
    return Accountant().compose(Gaussian(noise_multiplier=noise_multiplier)).epsilon(1e-5)


@pytest.mark.parametrize(("name", "violation"), [("release_2k_slipped", True), ("release_2k", False)])
def test_a_gradient_release_with_one_slipped_coordinate_is_a_violation(in_examples, name, violation):
    import gradients

    claim = _gaussian_claim(gradients.NOISE_MULTIPLIER)
    result = tg.audit_target(
        f"gradients:{name}", "gradients_pair.json", claim_epsilon=claim, claim_delta=1e-5, trials=20_000, seed=0
    )
    assert result.output_kind == "vector (dimension 2000)" and result.memory["reduced"]
    assert 0 in result.output_profile["reduction"]["kept"]
    assert (result.verdict is Verdict.VIOLATION) is violation
    assert result.verdict is (Verdict.VIOLATION if violation else Verdict.CONSISTENT)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "violation"), [("release_100k_slipped", True), ("release_100k", False)])
def test_acceptance_a_gradient_release_of_1e5_coordinates(in_examples, name, violation):
    import gradients

    claim = _gaussian_claim(gradients.NOISE_MULTIPLIER)
    result = tg.audit_target(
        f"gradients:{name}", "gradients_pair.json", claim_epsilon=claim, claim_delta=1e-5, trials=20_000, seed=0
    )
    assert result.output_kind == "vector (dimension 100000)"
    assert result.verdict is (Verdict.VIOLATION if violation else Verdict.CONSISTENT)


def test_wide_outputs_give_the_same_audit_with_workers(in_examples):
    kwargs = {"claim_epsilon": 2.0, "claim_delta": 1e-5, "trials": 3_000, "seed": 2}
    one = tg.audit_target("gradients:release_2k_slipped", "gradients_pair.json", **kwargs)
    two = tg.audit_target("gradients:release_2k_slipped", "gradients_pair.json", workers=2, **kwargs)
    assert one.epsilon_lower_bound == two.epsilon_lower_bound and one.scores == two.scores


def test_a_dense_difference_is_found_by_the_projection():
    # Every coordinate shifted by 0.05 σ: no coordinate stands out, their sum does (√400·0.05 = 1 σ).
    @batched
    def dense(data, rng, size):
        return float(data) * 0.05 + rng.normal(0.0, 1.0, size=(size, 400)).round(6)

    result = tg.audit_target(dense, (1, 0), claim_epsilon=0.1, trials=20_000, seed=0)
    assert result.memory["reduced"] and result.verdict is Verdict.VIOLATION
    assert result.epsilon_lower_bound > 0.5 and not math.isinf(result.epsilon_lower_bound)
