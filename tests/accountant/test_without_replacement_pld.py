"""The PLD route of fixed-size batches (sampling without replacement, replace-one): the symmetrised Poisson pair.

Checked against the mechanism itself, not against the pair: for configurations of the step's centres (the record h
that a batch without it holds instead, the record g and its replacement g′, each of norm ≤ C = 1), the run's δ(ε)
computed from the mechanism's own outputs (a lower bound on its exact value: each step's output merged into cells,
a post-processing, and the cells' losses rounded down) never exceeds the engine's upper δ; the collinear
configuration attains the Poisson pair, the bracket's lower end.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal, stats

from dplens import Accountant
from dplens.accountant import events as ev

REPLACE_ONE = ev.NeighboringRelation.REPLACE_ONE


def _event(rate: float, sigma: float) -> ev.SampledWithoutReplacement:
    # DP-SGD's step with clip 1: a replaced record moves the sum by up to 2, so the inner σ′ is σ/2.
    n = 1000
    return ev.SampledWithoutReplacement(
        sample_size=round(rate * n),
        dataset_size=n,
        event=ev.Gaussian(noise_multiplier=sigma / 2, neighboring=REPLACE_ONE),
    )


def _engine_delta(rate: float, sigma: float, steps: int, epsilon: float) -> float:
    return Accountant(neighboring=REPLACE_ONE).compose(_event(rate, sigma), count=steps).delta(epsilon, method="pld")


def _mechanism_delta(rate, sigma, centres, steps, epsilons, width=1e-4):
    """A lower bound on δ(ε) of ``steps`` runs of the step P = (1 − γ)N(h, σ²) + γN(g, σ²) against
    Q = (1 − γ)N(h, σ²) + γN(g′, σ²) (1-D centres): the real line cut into cells (merging each cell's outputs is a
    post-processing), each cell's loss rounded down to a multiple of ``width``, composed by convolution."""
    h, g, g_prime = centres
    low, high = min(centres) - 12 * sigma, max(centres) + 12 * sigma
    edges = np.linspace(low, high, int((high - low) / (sigma / 400)) + 1)

    def cells(centre):
        return np.diff(stats.norm.cdf(edges, loc=centre, scale=sigma))

    p = (1 - rate) * cells(h) + rate * cells(g)
    q = (1 - rate) * cells(h) + rate * cells(g_prime)
    keep = (p > 0) & (q > 0)
    p, q = p[keep], q[keep]
    index = np.floor(np.log(p / q) / width).astype(int)
    start = int(index.min())
    pmf = np.bincount(index - start, weights=p)
    composed = pmf
    for _ in range(steps - 1):  # FFT rounding: ~1e-16 of the mass per point, far below the margins asserted
        composed = np.maximum(signal.fftconvolve(composed, pmf), 0.0)
    losses = (steps * start + np.arange(composed.size)) * width
    return [float(np.sum(composed * np.maximum(0.0, 1.0 - np.exp(e - losses)))) for e in epsilons]


EPSILONS = (0.0, 0.5, 1.0, 2.0)


@pytest.mark.parametrize(("rate", "sigma"), [(0.1, 1.0), (0.3, 2.0)])
def test_every_configuration_of_three_steps_is_below_the_engine(rate, sigma):
    rng = np.random.default_rng(7)
    configurations = [(-1.0, 1.0, 0.0), (0.3, -1.0, 1.0), (1.0, 1.0, -1.0)]  # zero-out, a random-like one, h = g
    configurations += [tuple(rng.uniform(-1, 1, 3)) for _ in range(3)]
    upper = [_engine_delta(rate, sigma, 3, e) for e in EPSILONS]
    for centres in configurations:
        exact_or_below = _mechanism_delta(rate, sigma, centres, 3, EPSILONS)
        for e, mine, theirs in zip(EPSILONS, exact_or_below, upper, strict=True):
            assert mine <= theirs, (centres, e, mine, theirs)


@pytest.mark.parametrize(("rate", "sigma"), [(0.1, 1.0), (0.3, 2.0)])
def test_the_collinear_configuration_attains_the_poisson_pair_the_lower_end(rate, sigma):
    # The record at +1, its replacement and the record a batch holds instead at −1: P = (1 − γ)N(−1) + γN(1) against
    # Q = N(−1), the Poisson pair at γ with the shift 2 (σ′ = σ/2), composed three times.
    attained = _mechanism_delta(rate, sigma, (-1.0, 1.0, -1.0), 3, EPSILONS)
    poisson = ev.PoissonSampled(sampling_rate=rate, event=ev.Gaussian(noise_multiplier=sigma / 2))
    for e, mine in zip(EPSILONS, attained, strict=True):
        theirs = Accountant().compose(poisson, count=3).delta(e, method="pld")
        assert mine <= theirs and mine >= 0.999 * theirs, (e, mine, theirs)
        assert mine <= _engine_delta(rate, sigma, 3, e)


@pytest.mark.parametrize(("rate", "sigma"), [(0.05, 1.0), (0.4, 3.0)])
def test_one_step_equals_the_remove_pair_at_every_positive_epsilon(rate, sigma):
    # δ(ε) = γ·δ_G(ε′) with e^{ε′} = 1 + (e^ε − 1)/γ and δ_G the Gaussian pair at distance 2/σ (the bound of the
    # proof's step 2, attained): the engine's upper δ is above it and within its discretisation of it.
    mu = 2.0 / sigma
    for e in EPSILONS:
        shifted = math.log1p(math.expm1(e) / rate)
        gaussian = stats.norm.cdf(-shifted / mu + mu / 2) - math.exp(shifted) * stats.norm.cdf(-shifted / mu - mu / 2)
        closed = rate * gaussian
        engine = _engine_delta(rate, sigma, 1, e)
        assert closed <= engine <= closed * (1 + 1e-3) + 1e-12, (e, closed, engine)


def test_two_dimensional_centres_are_below_the_bound_of_one_step():
    # Step 2 of the argument in the plane, where the centres need not be collinear (h, g, g′ on the unit circle at
    # 120° and at 90°): δ(ε) of one step by quadrature on a grid of σ/50, against γ·δ_G(ε′) at distance 2/σ.
    rate, sigma = 0.3, 1.0
    axis = np.arange(-8.0, 8.0, sigma / 50)
    x, y = np.meshgrid(axis, axis)
    area = (axis[1] - axis[0]) ** 2

    def density(centre):
        return np.exp(-((x - centre[0]) ** 2 + (y - centre[1]) ** 2) / (2 * sigma**2)) / (2 * math.pi * sigma**2)

    turn = 2 * math.pi / 3
    for h, g, g_prime in [
        ((1.0, 0.0), (math.cos(turn), math.sin(turn)), (math.cos(-turn), math.sin(-turn))),
        ((1.0, 0.0), (0.0, 1.0), (0.0, -1.0)),
    ]:
        p = (1 - rate) * density(h) + rate * density(g)
        q = (1 - rate) * density(h) + rate * density(g_prime)
        for e in EPSILONS:
            quadrature = float(np.sum(np.maximum(p - math.exp(e) * q, 0.0)) * area)
            assert quadrature <= _engine_delta(rate, sigma, 1, e), (h, g, g_prime, e)


def test_the_bracket_of_a_fixed_size_run_holds_the_poisson_pair_and_beats_the_renyi_route():
    event = ev.SampledWithoutReplacement(
        sample_size=100, dataset_size=10_000, event=ev.Gaussian(noise_multiplier=1.0, neighboring=REPLACE_ONE)
    )
    accountant = Accountant().compose(event, count=100)
    result = accountant.epsilon_result(1e-5)
    poisson = ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.0))
    exact_pair = Accountant().compose(poisson, count=100).epsilon_result(1e-5)
    assert result.epsilon_lower <= exact_pair.epsilon and exact_pair.epsilon_lower <= result.epsilon
    assert result.epsilon < accountant.epsilon(1e-5, method="rdp")


# --- the attained zero-out pair: a zeroed record among others at −C (samplers.ZeroedInFixedSizeBatch)


@pytest.mark.parametrize(("rate", "sigma"), [(0.01, 1.0), (0.3, 0.7), (0.9, 2.0)])
def test_the_two_mixture_loss_masses_match_roots_found_independently(rate, sigma):
    # The loss from scipy's log-densities, its minimum and the two ends of {ℓ ≤ l} by Brent's method, the masses from
    # scipy's normal CDF: against the engine's bisection on its own loss.
    from scipy import optimize

    from dplens.accountant import pld_engine

    remove, add = pld_engine.two_mixture_losses(rate, sigma, 2.0, 1.0)

    def log_mixture(x, high):
        return np.logaddexp(
            math.log1p(-rate) + stats.norm.logpdf(x, 0, sigma), math.log(rate) + stats.norm.logpdf(x, high, sigma)
        )

    def loss(x):
        return float(log_mixture(x, 2.0) - log_mixture(x, 1.0))

    def cdf(x, high):
        return (1 - rate) * stats.norm.cdf(x, 0, sigma) + rate * stats.norm.cdf(x, high, sigma)

    x_star = optimize.minimize_scalar(loss, bounds=(-20 * sigma, 1.5), method="bounded", options={"xatol": 1e-12}).x
    floor = loss(x_star)
    levels = np.array([0.9 * floor, 0.5 * floor, 0.1 * floor, 0.0, 0.3, 1.5, 4.0])
    cdf_p, sf_p, cdf_q, sf_q = remove.masses(levels)
    for i, level in enumerate(levels):
        x2 = optimize.brentq(lambda x, level=level: loss(x) - level, x_star, 2 + 40 * sigma, xtol=1e-14)
        if level < 0:
            x1 = optimize.brentq(lambda x, level=level: loss(x) - level, -40 * sigma, x_star, xtol=1e-14)
        else:
            x1 = -math.inf
        assert cdf_p[i] == pytest.approx(cdf(x2, 2.0) - cdf(x1, 2.0), rel=1e-9, abs=1e-15)
        assert cdf_q[i] == pytest.approx(cdf(x2, 1.0) - cdf(x1, 1.0), rel=1e-9, abs=1e-15)
        assert cdf_p[i] + sf_p[i] == pytest.approx(1.0, abs=1e-12)
        assert cdf_q[i] + sf_q[i] == pytest.approx(1.0, abs=1e-12)
    below_floor = remove.masses(np.array([1.1 * floor]))
    assert below_floor[0][0] == 0.0 and below_floor[2][0] == 0.0
    add_cdf_p, _, add_cdf_q, _ = add.masses(-levels)  # the reverse pair: L_add = −ℓ, X ~ Q
    assert np.allclose(add_cdf_p, sf_q, rtol=1e-12) and np.allclose(add_cdf_q, sf_p, rtol=1e-12)


@pytest.mark.parametrize(("rate", "sigma"), [(0.05, 1.0), (0.3, 2.0)])
def test_the_zeroed_record_pair_is_bracketed_around_its_exact_profile(rate, sigma):
    from scipy import integrate

    from dplens.accountant.samplers import ZeroedInFixedSizeBatch

    event = ZeroedInFixedSizeBatch(noise_multiplier=sigma, sampling_rate=rate)

    def mixture(x, high):
        return (1 - rate) * stats.norm.pdf(x, 0, sigma) + rate * stats.norm.pdf(x, high, sigma)

    for e in EPSILONS:
        for first, second in ((2.0, 1.0), (1.0, 2.0)):  # both directions
            exact = integrate.quad(
                lambda x, a=first, b=second, e=e: max(0.0, mixture(x, a) - math.exp(e) * mixture(x, b)),
                -12 * sigma,
                2 + 12 * sigma,
                points=[0.5, 1.0, 1.5],
                limit=400,
                epsabs=1e-13,
            )[0]
            accountant = Accountant(neighboring=ev.NeighboringRelation.REPLACE_SPECIAL).compose(event)
            assert exact <= accountant.delta(e, method="pld") + 1e-12, (e, first, exact)
    # the bracket's lower end: below the larger direction's exact δ at each ε
    result = Accountant(neighboring=ev.NeighboringRelation.REPLACE_SPECIAL).compose(event).epsilon_result(1e-3)
    assert result.epsilon_lower <= result.epsilon


def test_a_zeroed_record_in_fixed_size_batches_gets_the_attained_pair_as_its_lower_end():
    import dplens

    zero_out = dplens.dp_sgd_epsilon(
        dataset_size=60_000, batch_size=256, epochs=10, noise_multiplier=1.1, delta=1e-5, sampling="fixed-size"
    )
    poisson = dplens.dp_sgd_epsilon(dataset_size=60_000, batch_size=256, epochs=10, noise_multiplier=1.1, delta=1e-5)
    replaced = dplens.dp_sgd_epsilon(
        dataset_size=60_000,
        batch_size=256,
        epochs=10,
        noise_multiplier=1.1,
        delta=1e-5,
        sampling="fixed-size",
        neighboring="replace_one",
    )
    # zero-out: [the zeroed record's attained pair, the substitution bound], far above the Poisson ε
    assert poisson.epsilon < zero_out.epsilon_lower < zero_out.epsilon == replaced.epsilon
    assert zero_out.epsilon_lower < replaced.epsilon_lower


# --- a user with K examples under fixed-size batches: the label pair (samplers.FixedSizeUserStep)


def _user_step_delta(n, b, sigma, gradients, replaced, other, steps, epsilons, width=1e-4):
    """A lower bound on δ(ε) of ``steps`` fixed-size steps (B of N afresh) for a user whose examples have 1-D clipped
    gradients ``gradients`` in D and ``replaced`` in D′, every other example ``other``: the exact output law of a
    step (every subset of the user's examples, by its hypergeometric weight), cells merged and losses rounded down."""
    import itertools

    k = len(gradients)
    parts_p, parts_q = [], []
    for size in range(k + 1):
        if size > b or b - size > n - k:
            continue
        for subset in itertools.combinations(range(k), size):
            # P(this subset exactly) = C(N − K, B − |S|) / C(N, B)
            weight = math.comb(n - k, b - size) / math.comb(n, b)
            rest = (b - size) * other
            parts_p.append((weight, rest + sum(gradients[i] for i in subset)))
            parts_q.append((weight, rest + sum(replaced[i] for i in subset)))
    centres = [c for _, c in parts_p + parts_q]
    low, high = min(centres) - 12 * sigma, max(centres) + 12 * sigma
    edges = np.linspace(low, high, int((high - low) / (sigma / 400)) + 1)

    def cells(parts):
        return sum(w * np.diff(stats.norm.cdf(edges, loc=c, scale=sigma)) for w, c in parts)

    p, q = cells(parts_p), cells(parts_q)
    keep = (p > 0) & (q > 0)
    index = np.floor(np.log(p[keep] / q[keep]) / width).astype(int)
    start = int(index.min())
    pmf = np.bincount(index - start, weights=p[keep])
    composed = pmf
    for _ in range(steps - 1):
        composed = np.maximum(signal.fftconvolve(composed, pmf), 0.0)
    losses = (steps * start + np.arange(composed.size)) * width
    return [float(np.sum(composed * np.maximum(0.0, 1.0 - np.exp(e - losses)))) for e in epsilons]


def test_the_user_label_pair_bounds_every_configuration_of_two_and_three_examples():
    from dplens.accountant.user_level import UserLevelRun, fixed_size_user_ledger

    n, b, sigma, steps = 12, 3, 1.0, 3
    rng = np.random.default_rng(11)
    for k in (2, 3):
        run = UserLevelRun(
            noise_multiplier=sigma,
            dataset_size=n,
            batch_size=b,
            epochs=steps * b / n,
            sampling="fixed-size",
            max_examples_per_user=k,
            neighboring="replace_one",
        )
        assert run.steps == steps
        accountant = Accountant(neighboring=REPLACE_ONE).compose(fixed_size_user_ledger(run))
        upper = [accountant.delta(e, method="pld") for e in EPSILONS]
        configurations = [
            ([1.0] * k, [-1.0] * k, 0.0),  # the symmetric one that exceeds Ganesh's mixture at ε = 0
            ([1.0] * k, [-1.0] * k, -1.0),  # aligned: the mixture's own configuration
            ([1.0] * k, [0.0] * k, -1.0),  # zeroed out among others at −C
        ] + [(list(rng.uniform(-1, 1, k)), list(rng.uniform(-1, 1, k)), float(rng.uniform(-1, 1))) for _ in range(3)]
        for gradients, replaced, other in configurations:
            mine = _user_step_delta(n, b, sigma, gradients, replaced, other, steps, EPSILONS)
            for e, value, bound in zip(EPSILONS, mine, upper, strict=True):
                assert value <= bound, (k, gradients, replaced, other, e, value, bound)
