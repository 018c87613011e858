"""The calibration root finder (Illinois regula falsi with a safe end) never returns an unsafe point, and converges."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant.calibrate import _Counter, _solve


@settings(max_examples=200, deadline=None)
@given(
    root=st.floats(0.06, 400.0),
    power=st.floats(0.2, 5.0),
    kink=st.booleans(),
    decreasing=st.booleans(),
    wide=st.booleans(),
)
def test_solve_returns_the_safe_side_within_tolerance(root, power, kink, decreasing, wide):
    """ε(x) monotone (smooth or with a kink), target 1 at ``root``; the answer has ε ≤ target and is within xtol."""

    def epsilon(x: float) -> float:
        ratio = root / x if decreasing else x / root
        value = ratio**power
        return value if not kink or value < 1 else 1 + 10 * (value - 1)

    lower, upper = (0.05, 500.0) if wide else (root * 0.5, min(root * 3, 500.0))
    safe, unsafe = (upper, lower) if decreasing else (lower, upper)
    counter = _Counter(epsilon)
    xtol = 1e-9 * root
    x = _solve(counter, target=1.0, safe=safe, unsafe=unsafe, integer=False, xtol=xtol)
    assert epsilon(x) <= 1.0
    assert abs(x - root) <= 2 * xtol + 1e-12 * root
    assert counter.calls <= 80  # superlinear: a bisection alone would need ~40 halvings of a log-wide bracket


def test_solve_integer_and_plateaus():
    counter = _Counter(lambda x: 0.0 if x < 30 else x / 40)
    assert _solve(counter, target=1.0, safe=1.0, unsafe=100.0, integer=True, xtol=1.0) == 40.0
    flat = _Counter(lambda x: math.inf if x < 2 else 0.5)
    assert flat(_solve(flat, target=1.0, safe=10.0, unsafe=0.1, integer=False, xtol=1e-9)) <= 1.0
