"""assert_dp outside a pytest run's accounting: bad input, inconclusive audits, options."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dplens.auditing.targets import batched
from dplens.testing import DpAssertionError, DpInconclusiveWarning, assert_dp, choose_trials


@batched
def geometric_count(data, rng, size):
    p = 1.0 - math.exp(-1.0)
    return int(np.sum(data)) + rng.geometric(p, size) - rng.geometric(p, size)


def float_laplace(data, rng):
    return float(np.sum(data)) + rng.laplace(0.0, 1.0)


PAIR = ([1, 1, 0, 1], [1, 1, 0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": -1.0}, "epsilon must be a finite number >= 0.0; got -1.0"),
        ({"epsilon": 1.0, "delta": 2.0}, "delta must be a finite number >= 0.0 and <= 1.0; got 2.0"),
        ({"epsilon": 1.0, "search": "sideways"}, "search must be one of"),
        ({"epsilon": 1.0, "on_inconclusive": "shrug"}, "on_inconclusive must be one of"),
        ({"epsilon": 1.0, "trials": 0}, "trials must be an integer >= 1; got 0"),
        ({"epsilon": 1.0, "budget": 0}, "budget must be a finite number > 0.0; got 0"),
        ({"epsilon": 1.0, "float_check": "yes"}, "float_check must be True or False; got 'yes'"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        assert_dp(geometric_count, PAIR, **kwargs)


def test_a_pair_must_have_two_sides():
    with pytest.raises(ValueError, match="pair must be \\(data, neighbour\\)"):
        assert_dp(geometric_count, [1, 2, 3], epsilon=1.0)


def test_inconclusive_warns_or_fails():
    # 1 000 trials cannot certify ε = 20: the audit is INCONCLUSIVE, which warns (default) or fails.
    with pytest.warns(DpInconclusiveWarning, match="checked nothing") as caught:
        assert_dp(geometric_count, PAIR, epsilon=20.0, trials=1000)
    assert caught[0].filename == __file__  # attributed to the test that asserted, not to dplens
    with pytest.raises(DpAssertionError, match="checked nothing"):
        assert_dp(geometric_count, PAIR, epsilon=20.0, trials=1000, on_inconclusive="fail")


def test_float_check_off_audits_the_values_only():
    # The float leak is the only thing wrong with the textbook Laplace at its true ε: without the float check the
    # values alone are consistent with ε = 1 (the design is right), with it the leak fails the assertion.
    result = assert_dp(float_laplace, PAIR, epsilon=1.0, trials=5000, float_check=False)
    assert result.verdict.value == "CONSISTENT"
    assert not any(s["name"].startswith("float") for s in result.scores)
    with pytest.raises(DpAssertionError, match="FLOATING-POINT LEAK"):
        assert_dp(float_laplace, PAIR, epsilon=1.0, trials=5000)


@batched
def clipped_count(data, rng, size):
    p = 1.0 - math.exp(-1.0)
    return int(np.sum(np.clip(data, 0, 1))) + rng.geometric(p, size) - rng.geometric(p, size)


def test_pair_search():
    # No neighbour stated: dplens searches D' under add/remove and audits the pair it found (listed in the result).
    # The unclipped count is not 1-DP once a record can be 2.9 (what the search adds): it fails; the clipped one holds.
    result = assert_dp(clipped_count, [1, 1, 0, 1], epsilon=1.0, search="add_remove", trials=5000)
    assert result.pairs_tried and result.verdict.value in ("CONSISTENT", "INCONCLUSIVE")
    with pytest.raises(DpAssertionError, match=r"OUTPUT DISTRIBUTION.*\n.*\n.*\n.*python: dplens\.audit"):
        assert_dp(geometric_count, [1, 1, 0, 1], epsilon=1.0, search="add_remove", trials=5000)


def test_choose_trials_follows_the_budget():
    fast = choose_trials(geometric_count, [1, 1, 0], 2.0)
    slow = choose_trials(float_laplace, [1, 1, 0], 2.0)
    assert fast > slow >= 500
    assert str(fast)[0] in "125" and set(str(fast)[1:]) <= {"0"}  # 1-2-5 rounding: stable under small changes
    assert choose_trials(geometric_count, [1, 1, 0], 0.2) <= fast
