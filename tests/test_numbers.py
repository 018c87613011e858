"""The ground floor's number helpers: one JSON convention for ±∞/NaN, bounds rounded on their safe side, no numpy."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dplens import _numbers
from dplens._numbers import finite_or_none, fmt_lower, fmt_short, fmt_upper, from_json_number, json_number


@pytest.mark.parametrize(
    ("value", "written"),
    [(None, None), (math.inf, "Infinity"), (-math.inf, "-Infinity"), (math.nan, None), (2, 2.0), (0.1, 0.1)],
)
def test_json_number_writes_infinity_as_a_string_and_nan_as_null(value, written):
    out = json_number(value)
    assert out == written and type(out) is type(written)
    json.dumps(out, allow_nan=False)  # always valid JSON


@given(st.floats(allow_nan=False) | st.none())
def test_json_number_round_trips_every_float_but_nan(value):
    assert from_json_number(json.loads(json.dumps(json_number(value)))) == value


def test_finite_or_none():
    assert [finite_or_none(v) for v in (None, math.inf, -math.inf, math.nan, 3)] == [None, None, None, None, 3.0]
    assert type(finite_or_none(3)) is float


@given(st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False))
def test_printed_bounds_stay_bounds(value):
    assert float(fmt_upper(value)) >= value
    assert float(fmt_lower(value)) <= value


def test_short_numbers_in_messages():
    assert [fmt_short(v) for v in (math.inf, -math.inf, 1 / 3, 2)] == ["inf", "inf", "0.333333", "2"]


def test_reports_format_re_exports_the_ground_floor_formatters():
    from dplens.reports import format as report_format

    assert report_format.fmt_upper is _numbers.fmt_upper
    assert report_format.fmt_lower is _numbers.fmt_lower
    assert report_format.fmt_estimate is _numbers.fmt_estimate


def test_the_ground_floor_loads_no_numpy():
    code = "import sys, dplens._numbers; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
