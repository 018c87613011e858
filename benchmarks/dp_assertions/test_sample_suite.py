"""The sample suite of the DP-assertion experiment: ten correct mechanisms and four planted bugs.

Run by benchmarks/bench_dp_assertions.py (``pytest benchmarks/dp_assertions --dplens-seed S``); every test is marked,
so the 14 assertions share the run's α at collection.
"""

import pytest

from dplens.testing import assert_dp
from mechanisms import (
    clipped_sum,
    diffprivlib_binary,
    diffprivlib_geometric,
    dplens_laplace,
    forgotten_clip,
    gaussian_claim,
    geometric_count,
    histogram,
    opendp_gaussian_count,
    opendp_laplace_count,
    randomized_response,
    report_noisy_max,
    sensitivity_slip,
    textbook_float_laplace,
)

COUNT_PAIR = ([1, 1, 0, 1], [1, 1, 0])
LABEL_PAIR = ([0, 1, 1, 2, 2, 2], [0, 1, 1, 2, 2])
pytestmark = pytest.mark.dplens


# ---- correct ----------------------------------------------------------------------------------------------------


def test_correct_geometric_count():
    assert_dp(geometric_count, COUNT_PAIR, epsilon=1.0)


def test_correct_randomized_response():
    assert_dp(randomized_response, ([1], [0]), epsilon=1.0)


def test_correct_clipped_sum():
    assert_dp(clipped_sum, ([1, 2, 100], [1, 2]), epsilon=1.0)


def test_correct_histogram():
    assert_dp(histogram, LABEL_PAIR, epsilon=1.0)


def test_correct_report_noisy_max():
    assert_dp(report_noisy_max, LABEL_PAIR, epsilon=1.0)


def test_correct_diffprivlib_geometric():
    assert_dp(diffprivlib_geometric, COUNT_PAIR, epsilon=1.0)


def test_correct_diffprivlib_binary():
    assert_dp(diffprivlib_binary, ([1], [0]), epsilon=1.0)


def test_correct_opendp_laplace():
    assert_dp(opendp_laplace_count, COUNT_PAIR, epsilon=1.0)


def test_correct_opendp_gaussian():
    assert_dp(opendp_gaussian_count, COUNT_PAIR, epsilon=gaussian_claim(1e-5), delta=1e-5)


def test_correct_dplens_laplace():
    assert_dp(dplens_laplace(), ([1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0]), epsilon=1.0)


# ---- planted bugs -----------------------------------------------------------------------------------------------


def test_bug_sensitivity_slip():
    assert_dp(sensitivity_slip, ([2, 1, 0], [1, 0]), epsilon=1.0)


def test_bug_half_epsilon_claim():
    assert_dp(geometric_count, COUNT_PAIR, epsilon=0.5)


def test_bug_textbook_float_laplace():
    assert_dp(textbook_float_laplace, COUNT_PAIR, epsilon=1.0)


def test_bug_forgotten_clip():
    assert_dp(forgotten_clip, ([1, 2, 100], [1, 2]), epsilon=1.0)
