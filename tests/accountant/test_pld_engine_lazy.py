"""The engine's economies at production scale (issue 47) change no bracket: lazy optimistic compositions, chunked
crossing search, folds without padded copies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dplens.accountant import events as ev
from dplens.accountant import pld_engine as pe


def _psg(q: float, sigma: float) -> ev.PoissonSampled:
    return ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))


@pytest.mark.parametrize(("q", "sigma", "steps", "delta"), [(1e-3, 0.6, 2000, 1e-6), (0.05, 1.0, 300, 1e-5)])
def test_skipped_lower_compositions_change_no_bracket(q, sigma, steps, delta):
    composed = pe.compose([(_psg(q, sigma), steps)], pe.LossGrid(interval=2e-4))
    low, high = composed.epsilon_bracket(delta)
    directions = composed.directions()
    skipped = [name for name, d in directions.items() if callable(d.compose_lower[0])]
    assert skipped == ["add"]  # the add direction's upper end is far below the remove one's lower end
    # Every direction's own bracket, all lower PMFs composed now: the same ledger bracket, and a skipped direction's
    # upper end was at most the lower end found (so its lower end could not raise it).
    lows = {name: d.epsilon_lower(delta) for name, d in directions.items()}
    highs = {name: d.epsilon_upper(delta) for name, d in directions.items()}
    best = max(lows.values())
    assert low == min(0.0 if best <= 0 else best * (1 - 1e-12), high)
    for name in skipped:
        assert highs[name] <= best and lows[name] <= highs[name]
    assert all(lows[n] <= highs[n] for n in directions)


def test_delta_bracket_with_lazy_lowers_is_the_full_one():
    composed = pe.compose([(_psg(0.01, 0.8), 500)], pe.LossGrid(interval=5e-4))
    low, high = composed.delta_bracket(1.0)
    eps = np.array([1.0])
    full = max(float(d.delta_lower(eps)[0]) for d in composed.directions().values())
    assert low == min(full * (1 - 1e-12), high)


def test_chunked_crossing_matches_the_whole_array_search():
    rng = np.random.default_rng(47)
    for size in (1, 5, pe._CHUNK - 1, pe._CHUNK, pe._CHUNK + 3, 3 * pe._CHUNK + 17):
        s = np.sort(rng.uniform(0, 10, size))
        p = rng.random(size) ** 6
        a = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        b = np.concatenate([np.cumsum((p * np.exp(-s))[::-1])[::-1], [0.0]])
        at_points = a[1:] - np.exp(s) * b[1:]
        for level in (0.0, 1e-12, float(at_points[size // 2]), float(at_points[0]) * 2, -1.0):
            expected = int(np.searchsorted(-at_points, -level, side="left"))
            assert pe._first_at_or_below(s, a, b, level) == expected


def test_fold_matches_the_padded_row_sum():
    rng = np.random.default_rng(2)
    for n, size in ((10, 4), (12345, 12000), (100003, 33333), (8, 8)):
        values = rng.random(n) ** 8
        if n > size:
            padded = np.pad(values, (0, -n % size)).reshape(-1, size).sum(axis=0)
            assert np.array_equal(pe._folded(values, size), padded)


def test_first_nonnegative_loss_matches_the_losses_array():
    for start, interval, offset in ((-50, 0.1, 0.0), (-7, 1e-3, 3e-4), (3, 0.25, -0.1), (-1000, 2.5e-6, -1.2e-6)):
        pmf = pe.ComposedPmf(
            start=start,
            interval=interval,
            offset=offset,
            pmf=np.ones(700),
            infinity_mass=0.0,
            above=0.0,
            outside=0.0,
            round_off=0.0,
        )
        losses = (start + np.arange(700)) * interval + offset
        assert pmf._first_nonnegative() == int(np.searchsorted(losses, 0.0, side="left"))
    assert math.isfinite(pmf.epsilon_for(0.5))
