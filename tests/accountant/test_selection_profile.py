"""The privacy-profile bound of repeat-and-select (dplens.accountant.selection_profile).

Validity is checked on attained instances: the base mechanism releases y ~ N(μ, 1) under D and N(0, 1) under D′ with
y itself (or −y) as the score, so the best of K runs has density p(y)·φ′(F(y)) exactly and its hockey stick is a
quadrature; the bound must lie above it at every ε, in both directions. (Dropping the bound's first term,
1 − φ(1 − δ_Q(ε₁)), puts it below these instances at 5 of 12 points: the check can fail.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant
from dplens.accountant.curves import Gdp
from dplens.accountant.selection import RepeatAndSelect
from dplens.accountant.selection_profile import _generating_function, repeat_and_select_delta

GRID = np.linspace(-14.0, 18.0, 200_001)


def _instance(epsilon: float, mu: float, mean: float, shape: float) -> float:
    """max over {best, worst score} × {both directions} of the exact δ(ε) of the best of K Gaussian outputs."""
    slope, _ = _generating_function(mean, shape)
    out = 0.0
    for order in (norm.cdf, norm.sf):  # the score y, or −y
        a = norm.pdf(GRID - mu) * slope(order(GRID - mu))
        b = norm.pdf(GRID) * slope(order(GRID))
        for p, q in ((a, b), (b, a)):
            out = max(out, float(np.sum(np.maximum(p - math.exp(epsilon) * q, 0.0)) * (GRID[1] - GRID[0])))
    return out


@pytest.mark.parametrize(
    ("mu", "mean", "shape"),
    [(1.0, 10, 1.0), (0.5, 10, 1.0), (1.0, 10, math.inf), (2.0, 5, 1.0), (1.0, 10, 0.0), (1.0, 5, -0.5), (3.0, 3, 2.0)],
)
def test_the_bound_lies_above_attained_selections(mu, mean, shape):
    profile = Gdp(mu=mu).profile()
    epsilons = [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0]
    bounds = repeat_and_select_delta(epsilons, base_delta=profile.remove, mean=mean, shape=shape)
    for epsilon, bound in zip(epsilons, bounds, strict=True):
        assert _instance(epsilon, mu, mean, shape) <= bound, (epsilon, bound)
    assert np.all(np.diff(bounds) <= 1e-15) and bounds[0] <= 1.0  # non-increasing in ε, a probability


def test_one_run_is_the_base_profile():
    profile = Gdp(mu=1.0).profile()
    epsilons = np.array([0.0, 0.5, 2.0, 4.0])
    got = repeat_and_select_delta(epsilons, base_delta=profile.remove, mean=1.0, shape=1.0)
    np.testing.assert_allclose(got, profile.remove(epsilons), rtol=1e-8)


def test_more_runs_cost_more():
    profile = Gdp(mu=1.0).profile()
    values = [
        float(repeat_and_select_delta([3.0], base_delta=profile.remove, mean=m, shape=1.0)[0]) for m in (2, 5, 10, 40)
    ]
    assert values == sorted(values) and values[0] < values[-1]


def test_the_accountant_takes_the_smaller_route_and_each_stays_above_one_run():
    cases = {
        (1.0, 10, math.inf): "exact",  # Poisson K: PS22's Theorem 6 is loose, the profile bound wins
        (2.0, 5, 1.0): "exact",
        (0.3, 100, 1.0): "rdp",  # many runs in the high-privacy regime: RDP wins
    }
    for (mu, mean, shape), winner in cases.items():
        study = Accountant().compose(
            RepeatAndSelect(event=ev.Gaussian(noise_multiplier=1 / mu), mean=mean, shape=shape)
        )
        by_rdp, by_profile = study.epsilon(1e-5, method="rdp"), study.epsilon(1e-5, method="exact")
        best = study.epsilon(1e-5)
        assert best == min(by_rdp, by_profile)
        assert (by_profile < by_rdp) == (winner == "exact"), (mu, mean, by_rdp, by_profile)
        one = Accountant().compose(ev.Gaussian(noise_multiplier=1 / mu)).epsilon(1e-5)
        assert one < by_profile and one < by_rdp


def test_tuning_epsilon_reports_both_routes():
    from dplens.accountant.dp_sgd import DpSgdRun
    from dplens.accountant.tuning import tuning_epsilon

    run = DpSgdRun(noise_multiplier=0.8, dataset_size=60000, batch_size=256, epochs=10)
    out = tuning_epsilon(run, distribution="poisson", mean=10, delta=1e-5)
    assert out.epsilon == min(out.epsilon_rdp, out.epsilon_profile) and out.epsilon_profile < out.epsilon_rdp
    assert out.epsilon > out.one_run_epsilon and "privacy profile" in out.method
    assert out.to_dict()["tuning"]["routes"] == {"rdp": out.epsilon_rdp, "profile": out.epsilon_profile}
