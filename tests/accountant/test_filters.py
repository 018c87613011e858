"""Privacy filters (dplens.accountant.filters): exact sums, the closed-form ρ and μ² the filters add, and the
filters' readouts against the accountant's own routes."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dplens
from dplens.accountant import filters, rdp


@given(st.lists(st.floats(0, 1e6, allow_nan=False), max_size=30))
def test_exact_sums_do_not_depend_on_the_order_and_round_up(values):
    exact = [filters.exact(v) for v in values]
    shuffled = exact[:]
    random.Random(0).shuffle(shuffled)
    assert filters.exact_sum(exact) == filters.exact_sum(shuffled)
    total = filters.from_exact(filters.exact_sum(exact))
    assert filters.exact(total) >= filters.exact_sum(exact)  # never below the exact sum
    assert total <= math.fsum(values) * (1 + 1e-15) + 5e-324


def test_infinite_quantities_propagate():
    assert filters.exact(math.inf) is None and filters.exact_sum([filters.exact(1.0), None]) is None
    assert filters.from_exact(None) == math.inf
    with pytest.raises(ValueError, match="filter quantity"):
        filters.exact(-1.0)


@pytest.mark.parametrize(
    "event",
    [
        dplens.Gaussian(noise_multiplier=0.7),
        dplens.Laplace(noise_multiplier=2.0),
        dplens.RandomizedResponse(epsilon=1.5),
        dplens.SingleEpochTreeAggregation(noise_multiplier=4.0, step_counts=100),
        dplens.SelfComposed(event=dplens.Gaussian(noise_multiplier=3.0), count=7),
        dplens.Composed(events=(dplens.Gaussian(noise_multiplier=2.0), dplens.Laplace(noise_multiplier=5.0))),
    ],
)
def test_closed_form_rho_bounds_the_rdp_curve_at_every_order(event):
    """ρ-zCDP means ε_RDP(α) ≤ ρα for every α > 1: checked against the accountant's curve on a wide grid."""
    rho = filters.zcdp_rho(event)
    alphas = np.concatenate([1 + np.logspace(-3, 0, 20), np.linspace(2, 200, 100)])
    curve = rdp.rdp_curve(event)(alphas)
    assert np.all(curve <= rho * alphas * (1 + 1e-9) + 1e-15)
    if isinstance(event, dplens.Gaussian | dplens.SelfComposed):
        assert np.allclose(curve, rho * alphas)  # and it is tight for Gaussians


def test_events_without_a_closed_form_have_none():
    step = dplens.PoissonSampled(sampling_rate=0.01, event=dplens.Gaussian(noise_multiplier=1.0))
    assert filters.zcdp_rho(step) is None and filters.gdp_mu_squared(step) is None
    assert (
        filters.zcdp_rho(dplens.NonPrivate()) is None and filters.zcdp_rho(dplens.ZcdpMechanism(rho=1, xi=0.1)) is None
    )
    assert filters.gdp_mu_squared(dplens.Laplace(noise_multiplier=1.0)) is None


def test_gdp_filter_readout_is_the_exact_composition_of_gaussians():
    sigmas = [3.0, 5.0, 8.0, 13.0]
    gdp = filters.GdpFilter(mu=2.0)
    total = gdp.quantity([(dplens.Gaussian(noise_multiplier=s), 1) for s in sigmas])
    exact = dplens.Accountant()
    for s in sigmas:
        exact.compose(dplens.Gaussian(noise_multiplier=s))
    assert gdp.epsilon(total, 1e-6) == pytest.approx(exact.epsilon(1e-6), rel=1e-9)
    assert gdp.epsilon(total, 1e-6) >= exact.epsilon(1e-6) * (1 - 1e-12)


def test_zcdp_filter_readout_matches_the_rdp_route_for_gaussians():
    sigma, count = 10.0, 30
    zcdp = filters.ZcdpFilter(rho=1.0)
    total = zcdp.quantity([(dplens.Gaussian(noise_multiplier=sigma), count)])
    rdp_route = dplens.Accountant().compose(dplens.Gaussian(noise_multiplier=sigma), count).epsilon(1e-6, method="rdp")
    assert zcdp.epsilon(total, 1e-6) == pytest.approx(rdp_route, rel=1e-9)


def test_renyi_filter_rejects_bad_orders_and_hopeless_targets():
    with pytest.raises(ValueError, match="orders"):
        filters.RenyiFilter.build(epsilon=1.0, delta=1e-6, orders=[1.0, 2.0])
    with pytest.raises(ValueError, match="no Rényi order"):
        filters.RenyiFilter.build(epsilon=0.01, delta=1e-12, orders=[2.0])
    built = filters.RenyiFilter.build(epsilon=1.0, delta=1e-6)
    assert built.orders[0] > 2.0  # small orders cannot hold ε = 1 at δ = 1e-6 / k: dropped, raising the others


def test_integer_only_curves_refuse_fractional_orders(monkeypatch):
    """A curve exact only at integer orders (RdpCurve.integer_only) is never evaluated between them."""
    import functools

    from dplens.accountant.curves import RdpCurve

    curve = RdpCurve.from_function(functools.partial(rdp.gaussian_rdp, noise_multiplier=1.0), integer_only=True)
    monkeypatch.setattr(rdp, "rdp_curve", lambda event: curve)
    event = dplens.Gaussian(noise_multiplier=1.0)
    assert filters.rdp_at_orders([(event, 2)], [2.0, 3.0]) == [pytest.approx(2.0), pytest.approx(3.0)]
    with pytest.raises(rdp.UnsupportedEventError, match="integer orders"):
        filters.rdp_at_orders([(event, 2)], [2.5])
