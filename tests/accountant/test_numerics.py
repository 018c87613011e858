"""The scipy-free special functions (``dplens.accountant._numerics``) against mpmath: Φ, Φ⁻¹, log Φ, log Γ and the
binomial tail bound (an upper bound within a relative 10⁻⁵ of the exact tail, never below it)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dplens.accountant import _numerics as nm


def _phi(x: float) -> mpmath.mpf:
    return mpmath.ncdf(mpmath.mpf(x))


@pytest.mark.parametrize("x", [-37.5, -30.0, -12.3, -5.0, -1.0, -1e-3, 0.0, 0.7, 3.0, 8.0, 38.0])
def test_ndtr_is_accurate_in_relative_terms_where_it_is_small(x):
    # x/√2 is rounded (as in scipy's ndtr): a relative u in the argument is a relative ~x²·u in Φ's tail, the
    # conditioning of the problem, not the method; 2(x² + 2)u allows for it and for erfc's own few ulps.
    relative = 2.0 * (x * x + 2.0) * 2.0**-52
    with mpmath.workdps(40):
        exact = _phi(x)
        assert abs(float(nm.ndtr(x)) - float(exact)) <= relative * float(exact)
        upper = 1 - exact  # the survival function, as the laws take it: ndtr(-x)
        if upper > 1e-300:
            assert abs(float(nm.ndtr(-x)) - float(upper)) <= relative * float(upper)


def test_ndtr_keeps_the_shape_of_an_array():
    x = np.linspace(-3.0, 3.0, 12).reshape(3, 4)
    out = nm.ndtr(x)
    assert out.shape == (3, 4)
    assert np.all(np.diff(out.ravel()) > 0)


@pytest.mark.parametrize("p", [1e-300, 1e-20, 2.5e-4, 0.3, 0.5, 0.9, 1 - 1e-12])
def test_ndtri_inverts_the_normal_cdf(p):
    with mpmath.workdps(40):
        x = nm.ndtri(p)
        # the relative error in p of Φ(x) is |x|·(relative error in x)·|x|-ish: a few 1e-15 at these points
        assert abs(float(_phi(x)) - p) <= 1e-13 * min(p, 1 - p) * max(1.0, x * x)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, math.nan])
def test_ndtri_refuses_a_probability_outside_the_open_interval(p):
    with pytest.raises(ValueError, match="p must be in"):
        nm.ndtri(p)


def test_log_ndtr_and_gammaln_match_mpmath():
    with mpmath.workdps(40):
        for x in (-200.0, -38.0, -36.9, -3.0, 0.0, 2.0, 9.0):
            assert float(nm.log_ndtr(x)) == pytest.approx(float(mpmath.log(_phi(x))), rel=1e-14, abs=1e-300)
        for x in (0.5, 1.0, 7.3, 1e3, 1e8 + 1):
            assert float(nm.gammaln(x)) == pytest.approx(float(mpmath.loggamma(x)), rel=1e-14)


def _exact_tail(k: int, n: int, p: float) -> mpmath.mpf:
    """P(X > k), X ~ Binomial(n, p): the regularised incomplete beta I_p(k + 1, n − k)."""
    return mpmath.betainc(k + 1, n - k, 0, p, regularized=True)


@pytest.mark.parametrize(
    ("n", "p"), [(2, 0.5), (50, 0.9), (100, 0.3), (100, 1e-3), (10**4, 0.01), (10**6, 1e-4), (10**8, 1e-7)]
)
def test_the_binomial_tail_bound_is_above_the_tail_and_within_its_margin(n, p):
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    ks = {int(mean + c * sd) for c in (0, 1, 3, 8, 15, 25)} | {0, n - 1}
    with mpmath.workdps(50):
        for k in sorted(k for k in ks if 0 <= k < n):
            exact = float(_exact_tail(k, n, p))
            bound = nm.binomial_tail_bound(k, n, p)
            assert bound >= exact * (1 - 1e-13), (k, n, p, bound, exact)
            if k >= math.ceil(mean) or k == 0:  # below the mean the bound is 1 by design
                assert bound <= exact * (1 + 2e-5) + 1e-300, (k, n, p, bound, exact)


@given(
    n=st.integers(min_value=1, max_value=5000),
    p=st.floats(min_value=1e-6, max_value=0.999),
    position=st.floats(min_value=0.0, max_value=1.0),
)
def test_the_binomial_tail_bound_never_falls_below_the_tail(n, p, position):
    k = int(position * n)
    with mpmath.workdps(40):
        exact = float(_exact_tail(k, n, p)) if k < n else 0.0
    assert nm.binomial_tail_bound(k, n, p) >= exact * (1 - 1e-13)


def test_the_binomial_tail_bound_at_its_edges():
    assert nm.binomial_tail_bound(-1, 10, 0.5) == 1.0
    assert nm.binomial_tail_bound(10, 10, 0.5) == 0.0
    assert nm.binomial_tail_bound(3, 10, 0.0) == 0.0
    assert nm.binomial_tail_bound(0, 10, 0.1) == pytest.approx(1 - 0.9**10, rel=1e-15)
