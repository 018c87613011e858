"""The PLD engine on ledgers of many distinct events (a budget ledger's releases, issue 29).

Events run many times are composed on a grid of their own and moved onto the shared grid once; the floating-point
bound of a factor run 10⁴ times and more is tightened by recomputing its low frequencies accurately. Checked here:

- the floating-point bound against exact compositions (integer polynomial powers of dyadic PMFs) and mpmath;
- the moves onto the shared grid keep dominance (pessimistic above, optimistic below, at every ε ∈ ℝ);
- brackets of heterogeneous ledgers that take the refined route contain the exact ε (μ-GDP closed form; binomial
  sums for randomized response) and are within the default tolerance;
- for Laplace counts (no closed form for distinct scales): the refined bracket meets the direct one on a grid
  aligned to the atoms, and its lower end stays below dp-accounting's pessimistic ε.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import optimize, special, stats

from dplens.accountant import events as ev
from dplens.accountant import pld_engine as pe

ADD_REMOVE = ev.NeighboringRelation.ADD_OR_REMOVE_ONE
REPLACE_ONE = ev.NeighboringRelation.REPLACE_ONE


def psg(q: float, sigma: float) -> ev.PoissonSampled:
    return ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))


def _levels(entries, interval=pe.FIRST_INTERVAL, neighboring=ADD_REMOVE) -> list[int]:
    grid = pe.LossGrid(interval=interval, neighboring=neighboring)
    leaves = pe._leaves(entries)
    items = list(leaves.items())
    plds = [pe.loss_distribution(event, grid) for event, _ in items]
    return pe._refinement_levels(items, plds, leaves.gaussian_mu2, grid)


# ------------------------------------------------------------------------------------------------
# The floating-point bound


def _integer_power(coefficients: list[int], count: int) -> np.ndarray:
    """(Σ cᵢxⁱ)^count with Python integers."""
    result = np.array([1], dtype=object)
    base = np.array(coefficients, dtype=object)
    while count:
        if count & 1:
            result = np.convolve(result, base)
        count >>= 1
        if count:
            base = np.convolve(base, base)
    return result


@pytest.mark.parametrize("precision", [1.0, 1e-18], ids=["plain", "tightened"])
@pytest.mark.parametrize(
    "spec",
    [
        [((3, 4, 0, 0, 0, 1), 3, 300, 0)],
        [((5, 7, 0, 1, 3), 4, 400, -2)],
        [((5, 7, 0, 1, 3), 4, 200, -2), ((1, 1), 1, 1, 0), ((3, 4, 0, 0, 0, 1), 3, 57, 1)],
    ],
    ids=["one", "many-runs", "three-factors"],
)
def test_floating_point_bound_holds_against_exact_compositions(spec, precision):
    """Every tail sum of (computed − exact) over the window is within round_off + outside; exact: integer powers of
    PMFs with dyadic masses (numerators over 2^bits), so the composition is known to the last bit."""
    exact = np.array([1], dtype=object)
    bits = start = 0
    factors = []
    for numerators, width, count, first in spec:
        exact = np.convolve(exact, _integer_power(list(numerators), count))
        bits += width * count
        start += first * count
        factors.append((pe.GridPmf(start=first, pmf=np.array(numerators, dtype=float) / 2**width), count))
    out = pe._compose_kind(factors, 0.01, 1e-20, precision)
    positions = out.start - start + np.arange(out.pmf.size)
    denominator = 1 << bits
    inside = [Fraction(int(exact[i]), denominator) if 0 <= i < exact.size else Fraction(0) for i in positions]
    difference = [Fraction(float(value)) - truth for value, truth in zip(out.pmf, inside, strict=True)]
    tails = np.cumsum(np.array(difference[::-1], dtype=object))
    worst = max(abs(float(tail)) for tail in tails)
    assert worst <= out.round_off + out.outside
    assert worst > 0  # the check is not vacuous: the transforms do round
    if precision < 1e-15:  # tightened: the bound is far below the plain one (n·E ~ 1e-11 for 400 runs)
        assert out.round_off < 1e-12


def test_tightening_shrinks_the_bound_of_a_factor_run_many_times():
    step = pe.GridPmf(start=-2, pmf=np.array([5, 7, 0, 1, 3], dtype=float) / 16)
    plain = pe._compose_kind([(step, 30_000)], 0.01, 1e-20, 1.0).round_off
    tight = pe._compose_kind([(step, 30_000)], 0.01, 1e-20, 1e-18).round_off
    assert plain > 1e-10  # ~count·E: the floor that held ledger brackets at 0.66 % before
    assert tight < plain / 100


@pytest.mark.parametrize("count", [2000, 30_000])
def test_floating_point_bound_holds_on_a_long_window_against_long_double(count):
    """On a window of 10⁵–10⁶ points (where the exact check above cannot go) the bound holds against the same
    circular composition in long double (64-bit significand: its own error ~2000× below double's): every tail sum of
    (computed − reference) is within round_off. Here each part of the error takes its own better bound (issue 47:
    balls-and-bins at δ = 10⁻⁹), and the clipped negative entries are paid for."""
    rng = np.random.default_rng(count)
    positions = np.arange(1000)
    factor = np.exp(-0.5 * ((np.log1p(positions) - 5.0) / 0.6) ** 2) * (1.0 + 0.1 * rng.random(positions.size))
    factor /= factor.sum()
    out = pe._compose_kind([(pe.GridPmf(start=0, pmf=factor), count)], 1e-5, 1e-20, 1e-13)
    size = out.pmf.size
    assert size >= 2**17
    circular = np.fft.irfft(np.fft.rfft(factor.astype(np.longdouble), n=size) ** count, n=size)
    reference = np.roll(circular, -out.start % size)
    tails = np.cumsum((out.pmf.astype(np.longdouble) - reference)[::-1])
    worst = float(np.max(np.abs(tails)))
    assert 0 < worst <= out.round_off
    assert out.outside < 1e-15  # the window holds the composition: the reference wraps the same negligible mass


@settings(max_examples=15, deadline=None)
@given(
    support=st.integers(2, 60),
    size=st.sampled_from([256, 1000, 4096, 12288]),
    count=st.sampled_from([1, 2, 17, 1000, 27_000, 100_000]),
    seed=st.integers(0, 2**32 - 1),
)
@example(support=2, size=256, count=1000, seed=2049)  # |F|^1000 ≈ 8e-319: subnormal, off by 3e-324 (50x examples)
@example(support=2, size=1000, count=1000, seed=3302)  # ≈ 5e-316, also subnormal (the same 50x run)
def test_accurate_spectrum_against_mpmath(support, size, count, seed):
    """F_k^count recomputed accurately is within its stated error of the 50-digit value, at low and random
    frequencies; where |F_k| ≈ 1 that error stays ~1e-15·(1 + count·|φ|), not count·1e-14."""
    rng = np.random.default_rng(seed)
    values = rng.random(support) ** 3
    values = np.concatenate([np.zeros(int(rng.integers(0, 5))), values / values.sum()])
    ks = np.unique(np.concatenate([np.arange(0, 4), rng.integers(0, size // 2 + 1, 6)]))
    value, bound = pe._accurate_spectrum([(pe.GridPmf(start=0, pmf=values), count)], size, ks)
    with mpmath.workdps(50):
        for j, k in enumerate(ks):
            phases = [mpmath.expj(-2 * mpmath.pi * int(k) * i / size) for i in range(values.size)]
            exact = mpmath.fsum(mpmath.mpf(float(v)) * p for v, p in zip(values, phases, strict=True)) ** count
            assert float(abs(mpmath.mpc(value[j]) - exact)) <= bound[j]
        assert bound[0] < 1e-13  # k = 0: the mass to the count, accurate whatever the count


# ------------------------------------------------------------------------------------------------
# Moving an event's composition onto the shared grid keeps dominance


def _hockey(losses: np.ndarray, masses: np.ndarray, ts: np.ndarray, infinity: float = 0.0) -> np.ndarray:
    """Σ p·(1 − e^{t − l})₊ (+ the mass at +∞) at each t."""
    gap = np.maximum(-np.expm1(ts[:, None] - losses[None, :]), 0.0)
    return gap @ masses + infinity


@settings(max_examples=40, deadline=None)
@given(
    points=st.integers(1, 400),
    start=st.integers(-300, 300),
    ratio=st.sampled_from([4.0, 16.0, 64.0, math.pi * 5]),
    trim=st.sampled_from([0.0, 1e-9, 1e-4]),
    seed=st.integers(0, 2**32 - 1),
)
def test_moves_onto_a_coarser_grid_keep_dominance(points, start, ratio, trim, seed):
    """_coarse_pessimistic's hockey stick is at or above the composition's at every t ∈ ℝ, _coarse_optimistic's at
    or below (both with their tails trimmed by up to ``trim``), on aligned and unaligned coarser grids."""
    rng = np.random.default_rng(seed)
    fine = 1e-3
    pmf = rng.random(points) ** 4 * (rng.random(points) < 0.8)
    pmf = pmf / max(pmf.sum(), 1e-300) * (1.0 - 1e-9)
    composed = pe.ComposedPmf(
        start=start, interval=fine, offset=0.0, pmf=pmf, infinity_mass=1e-9, above=0.0, outside=0.0, round_off=0.0
    )
    coarse = fine * ratio
    losses = (start + np.arange(points)) * fine
    ts = np.linspace(losses[0] - 2 * coarse, losses[-1] + 2 * coarse, 101)
    truth = _hockey(losses, pmf, ts, composed.infinity_mass)
    upper = pe._coarse_pessimistic(composed, coarse, trim)
    lower = pe._coarse_optimistic(composed, coarse, trim)
    upper_h = _hockey(upper.losses(coarse), upper.pmf, ts, upper.infinity_mass)
    lower_h = _hockey(lower.losses(coarse), lower.pmf, ts, lower.infinity_mass)
    assert np.all(upper_h >= truth - 1e-12)
    assert np.all(lower_h <= truth + 1e-12)


# ------------------------------------------------------------------------------------------------
# Which events are refined


def test_narrow_events_in_a_wide_ledger_are_refined_and_wide_ones_are_not():
    narrow = [(ev.SelfComposed(event=psg(q, s), count=20), 1000) for q, s in [(1e-4, 3.3), (2e-4, 4.1), (5e-4, 5.7)]]
    ledger = [*narrow, (ev.Gaussian(noise_multiplier=400.0), 50_000)]
    assert min(_levels(ledger)) >= pe._MIN_LEVEL
    # A heterogeneous DP-SGD schedule: each event 1–8× narrower than the ledger, refining it would cost more.
    schedule = [(psg(0.004, float(s)), 100) for s in np.linspace(0.8, 1.6, 100)]
    assert max(_levels(schedule)) == 0
    # One mechanism is the whole ledger: nothing to gain.
    assert _levels([(psg(256 / 60000, 1.1), 14063)]) == [0]


# ------------------------------------------------------------------------------------------------
# Heterogeneous ledgers against exact values


def _exact_gdp_epsilon(mu: float, delta: float) -> float:
    """ε with δ_μ(ε) = δ (Dong, Roth, Su 2022, Corollary 2.13), to 30 digits."""
    with mpmath.workdps(30):
        mu = mpmath.mpf(mu)

        def excess(eps):
            return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2) - delta

        return float(mpmath.findroot(excess, (mpmath.mpf(0), mpmath.mpf(50)), solver="bisect", tol=1e-25))


def test_heterogeneous_gaussian_ledger_contains_the_exact_gdp_epsilon():
    """25 distinct Gaussians (as one-shift mixtures: not merged, so each is composed on its own grid) run 200–1500
    times next to a wide Gaussian: exactly μ-GDP with μ² = Σ nᵢ/σᵢ²."""
    rng = np.random.default_rng(29)
    sigmas = rng.uniform(300.0, 600.0, 25)
    counts = rng.integers(200, 1501, 25)
    ledger = [
        (ev.MixtureOfGaussians(standard_deviation=float(s), sensitivities=(1.0,), sampling_probs=(1.0,)), int(n))
        for s, n in zip(sigmas, counts, strict=True)
    ]
    ledger.append((ev.Gaussian(noise_multiplier=0.6), 1))
    assert min(_levels(ledger)) >= pe._MIN_LEVEL
    mu = math.sqrt(float(np.sum(counts / sigmas**2)) + 1 / 0.36)
    delta = 1e-6
    exact = _exact_gdp_epsilon(mu, delta)
    bracket = pe.epsilon_bracket(ledger, delta)
    assert bracket.pld.refined_events == 25
    assert bracket.lower <= exact <= bracket.upper
    assert bracket.tolerance_met and bracket.relative_width <= 1e-3
    # δ(ε) too, at an ε below the answer.
    eps = 0.9 * exact
    delta_bracket = pe.delta_bracket(ledger, eps)
    with mpmath.workdps(30):
        m = mpmath.mpf(mu)
        exact_delta = float(mpmath.ncdf(-eps / m + m / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / m - m / 2))
    assert delta_bracket.lower <= exact_delta <= delta_bracket.upper
    assert delta_bracket.tolerance_met


def _gaussian_hockey(mu: float, t: np.ndarray) -> np.ndarray:
    """E[(1 − e^{t − L})₊], L ~ N(μ²/2, μ²), at any real t (log-space normal tails)."""
    return np.exp(special.log_ndtr(-t / mu + mu / 2)) - np.exp(t + special.log_ndtr(-t / mu - mu / 2))


def test_randomized_response_ledger_contains_the_exact_epsilon():
    """Two distinct binary randomized responses (ε = 0.002 ×2000, 0.0026 ×1500: losses ±εᵢ, binomial counts) and a
    Gaussian under replace-one: δ(ε) = Σ P(b₁)P(b₂)·δ_G(ε − Σ εᵢ(2bᵢ − nᵢ)) exactly."""
    rrs = [(0.002, 2000), (0.0026, 1500)]
    sigma = 0.8
    ledger = [(ev.RandomizedResponse(epsilon=e), n) for e, n in rrs] + [(ev.Gaussian(noise_multiplier=sigma), 1)]
    assert min(_levels(ledger, neighboring=REPLACE_ONE)) >= pe._MIN_LEVEL
    axes = []
    for eps, n in rrs:
        b = np.arange(n + 1)
        probability = stats.binom.pmf(b, n, math.exp(eps) / (1 + math.exp(eps)))
        keep = probability > 1e-30
        axes.append((eps * (2 * b[keep] - n), probability[keep]))
    losses = (axes[0][0][:, None] + axes[1][0][None, :]).ravel()
    weights = (axes[0][1][:, None] * axes[1][1][None, :]).ravel()

    def exact_delta(epsilon: float) -> float:
        return float(weights @ _gaussian_hockey(1 / sigma, epsilon - losses))

    delta = 1e-6
    exact = optimize.brentq(lambda e: exact_delta(e) - delta, 0.0, 30.0, xtol=1e-14)
    bracket = pe.epsilon_bracket(ledger, delta, neighboring=REPLACE_ONE)
    assert bracket.pld.refined_events == 2
    assert bracket.lower <= exact <= bracket.upper
    assert bracket.tolerance_met and bracket.relative_width <= 1e-3


def test_laplace_ledger_meets_the_direct_bracket_and_dp_accounting(monkeypatch):
    """Laplace counts next to Gaussian tables (the ledger's tables+counts mix, smaller). One scale: the refined
    bracket and the direct one on a grid aligned to its atoms (accurate there) both contain the truth, so they meet.
    Four scales: the lower end stays below dp-accounting's pessimistic ε, which is above the truth."""
    from dp_accounting.pld import pld_privacy_accountant

    tables = [(ev.Gaussian(noise_multiplier=450.0), 50_000)]
    one = [(ev.Laplace(noise_multiplier=4000.0), 1000), *tables]
    refined = pe.epsilon_bracket(one, 1e-6)
    assert refined.pld.refined_events == 1 and refined.tolerance_met
    with monkeypatch.context() as patch:
        patch.setattr(pe, "_OWN_SHARE", math.inf)  # every event on the shared grid, as before refinement existed
        direct = pe.compose(one, pe.LossGrid(interval=pe._atom_interval(one, 1.4e-5)), window_tail=1e-12)
    assert direct.refined_events == 0
    low, high = direct.epsilon_bracket(1e-6)
    assert high - low <= 1e-3 * high
    assert max(low, refined.lower) <= min(high, refined.upper)

    four = [(ev.Laplace(noise_multiplier=s), 1000) for s in (3000.0, 3700.0, 4400.0, 5100.0)] + tables
    bracket = pe.epsilon_bracket(four, 1e-6)
    assert bracket.pld.refined_events == 4 and bracket.tolerance_met
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    for event, count in four:
        accountant.compose(ev.to_dp_accounting(event), count)
    assert bracket.lower <= accountant.get_epsilon(1e-6)


def test_accurate_spectrum_of_a_long_heavy_tailed_pmf_against_mpmath():
    """Beyond _NEAR_ATOMS atoms the far atoms' terms come from one transform (a random allocation's coordinate:
    5·10⁵ atoms): the recomputed F_k^count stays within its stated error of the 30-digit value, and that error stays
    ~count·1e-16 at low frequencies (not the transform's count·1e-14)."""
    size, count = 16384, 1000
    positions = np.arange(6000)
    values = np.exp(-0.5 * np.log1p(positions / 8.0) ** 2 * 4.0)  # a log-normal-like tail far out
    values /= values.sum()
    ks = np.array([0, 1, 2, 3, 57, 4100])
    value, bound = pe._accurate_spectrum([(pe.GridPmf(start=0, pmf=values), count)], size, ks)
    nonzero = np.flatnonzero(values > 0)
    centre = round(float(np.sum(values * nonzero)))
    assert not pe._far_terms(values, nonzero, centre, count, size, ks)[3].all()  # the far path is taken
    with mpmath.workdps(30):
        masses = [mpmath.mpf(float(v)) for v in values]
        for j, k in enumerate(ks):
            step = mpmath.expj(-2 * mpmath.pi * int(k) / size)
            total, phase = mpmath.mpc(0), mpmath.mpc(1)
            for mass in masses:
                total += mass * phase
                phase *= step
            exact = total**count
            assert float(abs(mpmath.mpc(value[j]) - exact)) <= bound[j]
    assert bound[1] < 1e-12


def test_geometric_blocks_bound_the_log_mgf_from_above():
    """_log_mgf with GEOMETRIC_BLOCKS (blocks growing along a long PMF) is an upper bound on the exact log-MGF at
    every λ of either sign, and close to it (each position moves by at most 1/1024 of itself)."""
    rng = np.random.default_rng(7)
    values = rng.random(50_000) * np.exp(-np.arange(50_000) / 3000.0)
    pmf = pe.GridPmf(start=-20, pmf=values / values.sum())
    lambdas = np.array([-50.0, -1.0, -1e-3, 1e-3, 0.1, 1.0, 5.0])
    exact = pe._log_mgf(pmf, 0.01, lambdas)
    bound = pe._log_mgf(pmf, 0.01, lambdas, pe.GEOMETRIC_BLOCKS)
    assert np.all(bound >= exact - 1e-12 * np.abs(exact))
    assert np.all(bound - exact <= 0.01 * np.maximum(1.0, np.abs(exact)))
