"""Fixed-size batches (a subset of B of N drawn afresh each step) under zero-out: a record in the batch displaces
another, so the Poisson pair at q is not an upper bound there (found while accounting users: issue 49).

The attained pair: others at −C, the record at +C; after a shift the two sides are (1 − q)N(0) + qN(2C) and
(1 − q)N(0) + qN(C). Its privacy profile is computed here by quadrature (scipy), independently of dplens's routes."""

from __future__ import annotations

import math

import pytest
from scipy import integrate, optimize
from scipy.stats import norm

from dplens.accountant.dp_sgd import dp_sgd_epsilon


def _delta(p, q, epsilon: float) -> float:
    """max of the two hockey-stick divergences H_{e^ε}(P‖Q), H_{e^ε}(Q‖P) by quadrature (densities p, q)."""
    scale = math.exp(epsilon)
    one = integrate.quad(lambda x: max(p(x) - scale * q(x), 0.0), -40, 40, limit=400, points=[0.0, 1.0, 2.0])[0]
    two = integrate.quad(lambda x: max(q(x) - scale * p(x), 0.0), -40, 40, limit=400, points=[0.0, 1.0, 2.0])[0]
    return max(one, two)


def _pairs(rate: float, sigma: float):
    def displaced(x):
        return (1 - rate) * norm.pdf(x, 0, sigma) + rate * norm.pdf(x, 2, sigma)

    def zeroed(x):
        return (1 - rate) * norm.pdf(x, 0, sigma) + rate * norm.pdf(x, 1, sigma)

    def poisson(x):
        return norm.pdf(x, 0, sigma)

    return displaced, zeroed, poisson


def _epsilon(p, q, delta: float) -> float:
    return optimize.brentq(lambda e: _delta(p, q, e) - delta, 0.0, 30.0, xtol=1e-9)


def test_the_displaced_pair_exceeds_the_poisson_pair():
    displaced, zeroed, poisson = _pairs(0.5, 1.0)
    assert _delta(displaced, zeroed, 1.0) == pytest.approx(0.05869, abs=1e-4)
    assert _delta(zeroed, poisson, 1.0) == pytest.approx(0.02887, abs=1e-4)


@pytest.mark.parametrize(("n", "b", "sigma", "delta"), [(2, 1, 1.0, 1e-3), (10, 2, 2.0, 1e-4)])
def test_zero_out_fixed_size_brackets_the_attained_displaced_pair(n, b, sigma, delta):
    """One step (epochs = B/N): dplens's ε is at least the attained pair's, its lower end at most."""
    displaced, zeroed, poisson = _pairs(b / n, sigma)
    attained = _epsilon(displaced, zeroed, delta)
    assert attained > _epsilon(zeroed, poisson, delta)  # the Poisson pair (the earlier number) is too small
    run = dp_sgd_epsilon(
        dataset_size=n, batch_size=b, epochs=b / n, noise_multiplier=sigma, delta=delta, sampling="fixed-size"
    )
    assert run.steps == 1 and run.neighboring == "zero_out"
    assert run.epsilon_lower <= attained <= run.epsilon
    assert "accounted as a substitution" in run.details


def test_zero_out_is_never_below_replace_one_less_than_its_lower_end():
    """Zero-out is accounted as a substitution: the same upper bound as replace-one, a lower end of its own."""
    common = dict(dataset_size=60000, batch_size=256, epochs=1, noise_multiplier=1.1, delta=1e-5, sampling="fixed-size")
    zero_out = dp_sgd_epsilon(neighboring="zero_out", **common)
    replace_one = dp_sgd_epsilon(neighboring="replace_one", **common)
    poisson = dp_sgd_epsilon(**(common | {"sampling": "poisson"}))
    assert zero_out.epsilon == replace_one.epsilon
    # its lower end is the zeroed record's attained pair (the others at −C), above the Poisson pair (the others at 0)
    assert poisson.epsilon_lower < zero_out.epsilon_lower < replace_one.epsilon_lower <= zero_out.epsilon
    assert zero_out.bracket_note and "wide" in zero_out.bracket_note
