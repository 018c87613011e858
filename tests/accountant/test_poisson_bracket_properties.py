"""Properties of the Poisson-subsampled Gaussian's certified bracket through the driver (issue 47, item 3).

The true ε(δ) of T Poisson-subsampled Gaussian steps decreases in σ and increases in the sampling rate q and in T
(post-processing: a larger σ, a smaller q or fewer steps is a post-processing of the other run). A certified bracket
[lower, upper] must therefore be ordered, and two brackets of ordered runs may cross by no more than their own widths:
lower(smaller) ≤ upper(larger) always (both are certified), and each end of the smaller run exceeds the same end of the
larger one by at most the width of a bracket. Small sizes (q ≥ 1e-4 needs a grid of q/2; T ≤ 2000 keeps it to a
fraction of a second), through :func:`dplens.accountant.pld.pld_epsilon` — the route ``dp_sgd_epsilon`` and
``Accountant.epsilon_result`` take for Poisson sampling — and ``dp_sgd_epsilon`` itself.
"""

from __future__ import annotations

import functools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.accountant import pld


@functools.cache
def _bracket(q: float, sigma: float, steps: int, delta: float) -> tuple[float, float]:
    step = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))
    result = pld.pld_epsilon([(step, steps)], delta)
    lower, upper = result.epsilon_lower, result.epsilon
    assert lower is not None and math.isfinite(upper)
    assert 0.0 <= lower <= upper
    return lower, upper


def _ordered(smaller: tuple[float, float], larger: tuple[float, float]) -> None:
    """ε(smaller run) ≤ ε(larger run), seen through two certified brackets."""
    (lo_s, hi_s), (lo_l, hi_l) = smaller, larger
    assert lo_s <= hi_l * (1 + 1e-12)
    assert hi_s - hi_l <= (hi_s - lo_s) + 1e-12 * hi_s
    assert lo_s - lo_l <= (hi_l - lo_l) + 1e-12 * hi_l


rates = st.sampled_from([1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.05])
sigmas = st.sampled_from([0.45, 0.5, 0.6, 0.8, 1.0, 2.0])
counts = st.sampled_from([20, 100, 500, 2000])
deltas = st.sampled_from([1e-5, 1e-6, 1e-9])


@settings(max_examples=10, deadline=None)
@given(q=rates, sigma=sigmas, steps=counts, delta=deltas)
def test_bracket_is_ordered_and_decreasing_in_sigma(q, sigma, steps, delta):
    _ordered(_bracket(q, sigma * 1.2, steps, delta), _bracket(q, sigma, steps, delta))


@settings(max_examples=10, deadline=None)
@given(q=rates, sigma=sigmas, steps=counts, delta=deltas)
def test_bracket_is_increasing_in_the_sampling_rate(q, sigma, steps, delta):
    _ordered(_bracket(q, sigma, steps, delta), _bracket(q * 1.5, sigma, steps, delta))


@settings(max_examples=10, deadline=None)
@given(q=rates, sigma=sigmas, steps=counts, delta=deltas)
def test_bracket_is_increasing_in_the_steps(q, sigma, steps, delta):
    _ordered(_bracket(q, sigma, steps, delta), _bracket(q, sigma, 2 * steps, delta))


@settings(max_examples=6, deadline=None)
@given(
    n=st.sampled_from([2000, 10000, 50000]),
    sigma=st.sampled_from([0.5, 0.7, 1.0]),
    epochs=st.sampled_from([1, 2, 4]),
)
def test_dp_sgd_bracket_is_ordered_and_monotone_in_epochs(n, sigma, epochs):
    from dplens.accountant.dp_sgd import dp_sgd_epsilon

    def run(e):
        r = dp_sgd_epsilon(dataset_size=n, batch_size=10, epochs=e, noise_multiplier=sigma, delta=1e-6)
        assert r.epsilon_lower is not None and 0.0 <= r.epsilon_lower <= r.epsilon
        assert r.lower_bound == "certified"
        return r.epsilon_lower, r.epsilon

    _ordered(run(epochs), run(2 * epochs))
