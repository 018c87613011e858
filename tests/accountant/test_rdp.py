"""RDP of mechanisms: dp-accounting agreement on its order grid, mpmath oracles, pinned values, properties."""

import math
import warnings

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.accountant import rdp
from dplens.accountant.curves import RdpConvergenceWarning

ORDERS = np.array(dpa_rdp.DEFAULT_RDP_ORDERS, dtype=float)


def _both_finite_rel(mine, ref, orders=ORDERS):
    # Where log A = (α − 1)·RDP < 1e-8, float64 cannot resolve 1e-6 relative (the sum is 1 + tiny): those
    # values are checked against mpmath instead (test_tiny_sampling_rate_against_mpmath).
    mask = np.isfinite(mine) & np.isfinite(ref) & ((orders - 1) * np.abs(ref) > 1e-8)
    return np.abs(mine[mask] - ref[mask]) / np.maximum(np.abs(ref[mask]), 1e-300)


@pytest.mark.parametrize(
    ("q", "sigma"),
    [
        (0.01, 1.1),
        (0.01, 4.0),
        (256 / 60000, 1.1),
        (0.04, 1.5),
        (0.1, 2.0),
        (1e-6, 0.5),
        (0.5, 0.7),
        (0.9, 5.0),
        (1e-3, 0.8),
        (0.2, 0.5),
    ],
)
def test_poisson_subsampled_gaussian_matches_dp_accounting(q, sigma):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = dpa_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, ORDERS)
        mine = rdp.subsampled_gaussian_rdp(ORDERS, sampling_rate=q, noise_multiplier=sigma)
    # Integer orders: both evaluate MTZ19's exact finite sum.
    integer = np.floor(ORDERS) == ORDERS
    assert np.all(_both_finite_rel(mine[integer], ref[integer], ORDERS[integer]) <= 1e-6)
    # Fractional orders: ours is exact (quadrature), dp-accounting's |terms| series an upper bound (or ∞).
    resolvable = np.isfinite(ref) & ((ORDERS - 1) * ref > 1e-8)
    assert np.all(mine[resolvable] <= ref[resolvable] * (1 + 1e-6))
    assert np.all(np.isfinite(mine))


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.1), (0.05, 2.0), (0.01, 4.0)])
def test_without_replacement_matches_dp_accounting(q, sigma):
    orders = ORDERS[(ORDERS < 40) | (ORDERS == 128)]
    ref = dpa_rdp._compute_rdp_sample_wor_gaussian(q, sigma, orders)
    mine = rdp.subsampled_without_replacement_gaussian_rdp(orders, sampling_rate=q, noise_multiplier=sigma)
    assert np.all(_both_finite_rel(mine, ref, orders) <= 1e-6)


@pytest.mark.parametrize("b", [0.1, 0.5, 1.0, 10.0])
def test_laplace_matches_dp_accounting(b):
    ref = np.array([dpa_rdp._laplace_rdp(1 / b, a) for a in ORDERS])
    assert np.all(_both_finite_rel(rdp.laplace_rdp(ORDERS, noise_multiplier=b), ref) <= 1e-9)


def test_laplace_kl_limit():
    # α → 1: ε₀ + e^{−ε₀} − 1 (Mironov 2017 Prop. 6 in the limit).
    for b in (0.3, 1.0, 5.0):
        eps0 = 1 / b
        assert rdp.laplace_rdp(np.array([1 + 1e-10]), noise_multiplier=b)[0] == pytest.approx(
            eps0 + math.expm1(-eps0), rel=1e-6
        )


@pytest.mark.parametrize(("eps", "k"), [(0.5, 2), (1.0, 2), (2.0, 5), (3.0, 10)])
def test_randomized_response_matches_dp_accounting(eps, k):
    p = k / (math.exp(eps) + k - 1)
    ref = np.array([dpa_rdp._randomized_response_rdp_replace_one(p, k, a) for a in ORDERS])
    assert np.all(_both_finite_rel(rdp.randomized_response_rdp(ORDERS, epsilon=eps, num_values=k), ref) <= 1e-9)


def _mp_log_a(q: float, sigma: float, alpha: float) -> float:
    """log E_{z∼N(0,σ²)}[((1 − q) + q·exp((2z − 1)/(2σ²)))^α] by mpmath quadrature (MTZ19 §3.3)."""
    with mpmath.workdps(40):
        q, sigma, alpha = mpmath.mpf(q), mpmath.mpf(sigma), mpmath.mpf(alpha)

        def integrand(z):
            base = (1 - q) + q * mpmath.exp((2 * z - 1) / (2 * sigma**2))
            return mpmath.npdf(z, 0, sigma) * base**alpha

        z0 = sigma**2 * mpmath.log(1 / q - 1) + mpmath.mpf(0.5)
        points = sorted({-mpmath.inf, -10 * sigma, 0, z0, alpha, 10 * sigma + alpha, mpmath.inf})
        return float(mpmath.log(mpmath.quad(integrand, points)))


@pytest.mark.parametrize(
    ("q", "sigma", "alpha"),
    [(1e-5, 0.5, 2.5), (0.01, 1.0, 1.5), (0.01, 1.0, 20.5), (0.5, 3.0, 4.25), (0.1, 10.0, 27.0), (0.001, 1.0, 7.0)],
)
def test_subsampled_gaussian_against_mpmath(q, sigma, alpha):
    expected = _mp_log_a(q, sigma, alpha) / (alpha - 1)
    got = rdp.subsampled_gaussian_rdp(np.array([alpha]), sampling_rate=q, noise_multiplier=sigma)[0]
    # Exact at every order (finite sum at integers, quadrature otherwise), and never below the truth.
    assert expected * (1 - 1e-14) <= got <= expected * (1 + 1e-9)


@pytest.mark.parametrize("alpha", [2.0, 3.0, 8.0, 1.1, 1.5, 10.5])
def test_tiny_sampling_rate_against_mpmath(alpha):
    expected = _mp_log_a(1e-6, 0.5, alpha) / (alpha - 1)
    got = rdp.subsampled_gaussian_rdp(np.array([alpha]), sampling_rate=1e-6, noise_multiplier=0.5)[0]
    # A_α − 1 ≈ 1e-12 here: the sum (integers) and the integral of the non-negative excess (fractional orders)
    # keep full relative precision.
    assert expected * (1 - 1e-14) <= got <= expected * (1 + 1e-9)


def test_fractional_order_is_exact_not_capped_at_the_next_integer():
    # The case: q = 0.2, σ = 2, α = 1.25. Capping at ⌈α⌉ gave RDP(2) = log(1 + q²(e^{1/σ²} − 1)) = 0.011297;
    # the exact value (MTZ19's integral, mpmath at 40 digits) is 0.0068248.
    capped = math.log1p(0.2**2 * math.expm1(1 / 2.0**2))
    assert capped == pytest.approx(0.011297, abs=5e-7)
    expected = _mp_log_a(0.2, 2.0, 1.25) / 0.25
    assert expected == pytest.approx(0.0068248, abs=5e-8)
    got = rdp.subsampled_gaussian_rdp(np.array([1.25]), sampling_rate=0.2, noise_multiplier=2.0)[0]
    assert expected <= got <= expected * (1 + 1e-10)


@pytest.mark.parametrize(
    ("q", "sigma", "alpha"),
    [(0.3, 0.4, 1.7), (0.05, 0.25, 3.3), (0.9, 1.0, 1.05), (1e-3, 30.0, 80.5), (0.02, 0.6, 150.25), (0.5, 5.0, 1.001)],
)
def test_fractional_orders_across_regimes_against_mpmath(q, sigma, alpha):
    expected = _mp_log_a(q, sigma, alpha) / (alpha - 1)
    got = rdp.subsampled_gaussian_rdp(np.array([alpha]), sampling_rate=q, noise_multiplier=sigma)[0]
    assert expected * (1 - 1e-14) <= got <= expected * (1 + 1e-9)


def test_pinned_values_from_notes():
    # accounting-anchors.md §5.2 (dp-accounting 0.6.0 values, verified there).
    alphas = np.array([1.5, 2, 2.5, 3, 4, 8, 16, 32, 64, 256])
    poisson = [
        9.8587569680e-05,
        1.2851008161e-04,
        1.6215219756e-04,
        1.9627788992e-04,
        2.6671831463e-04,
        5.8407033552e-04,
        1.6998267278e00,
        8.4694164337e00,
        2.1768012866e01,
        1.0116189429e02,
    ]
    wor = [
        4.5693226931e-04,
        4.5693226931e-04,
        6.1697899111e-04,
        6.9700235202e-04,
        9.4550281974e-04,
        2.0421531238e-03,
        1.7460409811e00,
        8.4917760202e00,
        2.1779015202e01,
        1.0116461251e02,
    ]
    got = rdp.subsampled_gaussian_rdp(alphas, sampling_rate=0.01, noise_multiplier=1.1)
    integer = alphas == np.floor(alphas)
    assert got[integer] == pytest.approx(np.array(poisson)[integer], rel=1e-9)
    # dp-accounting's fractional values (|terms| series) are upper bounds; ours are exact (mpmath).
    assert np.all(got[~integer] < np.array(poisson)[~integer])
    for alpha, value in zip(alphas[~integer], got[~integer], strict=True):
        assert value == pytest.approx(_mp_log_a(0.01, 1.1, alpha) / (alpha - 1), rel=1e-9)
    got_wor = rdp.subsampled_without_replacement_gaussian_rdp(alphas, sampling_rate=0.01, noise_multiplier=1.1)
    assert got_wor == pytest.approx(wor, rel=1e-9)
    # Closed form at α = 2: log(1 + q²(e^{1/σ²} − 1)).
    assert got[1] == pytest.approx(math.log1p(0.01**2 * math.expm1(1 / 1.1**2)), rel=1e-10)
    assert rdp.gaussian_rdp(np.array([10.0]), noise_multiplier=2.0)[0] == 1.25


@pytest.mark.parametrize(
    ("q", "sigma", "alpha"), [(0.1, 1.0, 1.5), (0.5, 0.5, 1.5), (0.5, 0.5, 1.002), (0.01, 1.0, 1.01)]
)
def test_orders_where_the_series_stalls_are_exact(q, sigma, alpha):
    # dp-accounting gives up (∞) on these orders (its series does not converge in 1000 terms); the quadrature
    # is exact, silent and never below the truth.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RdpConvergenceWarning)
        value = rdp.subsampled_gaussian_rdp(np.array([alpha]), sampling_rate=q, noise_multiplier=sigma)[0]
    expected = _mp_log_a(q, sigma, alpha) / (alpha - 1)
    assert expected <= value <= expected * (1 + 1e-9)


def test_failed_quadrature_is_reported_and_still_an_upper_bound(monkeypatch):
    # Force the fallback (too many quadrature points): the order is reported and bounded by the convex
    # interpolation of log A between its integer neighbours, which brackets the exact value.
    monkeypatch.setattr(rdp, "_QUAD_MAX_POINTS", 10)
    rdp._FRACTIONAL_LOG_A_CACHE.clear()
    q, sigma, alpha = 1e-4, 15.0, 2000.5
    with pytest.warns(RdpConvergenceWarning, match="did not converge"):
        value = rdp.subsampled_gaussian_rdp(np.array([alpha]), sampling_rate=q, noise_multiplier=sigma)[0]
    rdp._FRACTIONAL_LOG_A_CACHE.clear()
    below, above = rdp.subsampled_gaussian_rdp(np.array([2000.0, 2001.0]), sampling_rate=q, noise_multiplier=sigma)
    assert np.isfinite(value)
    assert below <= value <= above
    assert value >= _mp_log_a(q, sigma, alpha) / (alpha - 1)


@settings(max_examples=30, deadline=None)
@given(
    q=st.floats(1e-4, 0.5),
    sigma=st.floats(0.5, 8.0),
    alphas=st.lists(st.floats(1.01, 200.0), min_size=2, max_size=6),
)
def test_rdp_curves_non_decreasing_in_alpha(q, sigma, alphas):
    a = np.sort(np.array(alphas))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RdpConvergenceWarning)
        for values in (
            rdp.subsampled_gaussian_rdp(a, sampling_rate=q, noise_multiplier=sigma),
            rdp.laplace_rdp(a, noise_multiplier=sigma),
            rdp.randomized_response_rdp(a, epsilon=1 / sigma, num_values=3),
        ):
            # log A_α is the log of a sum near 1, so its absolute resolution is ~machine ε, and RDP = log A/(α − 1)
            # inherits ε/(α − 1): orders one float apart (α = 1.01 and its successor, RDP ≈ 1.4e-9, q = 1e-4)
            # differ by 2.7e-18 either way, while the value stays above the mpmath truth by 7e-13.
            resolution = 4 * np.finfo(float).eps / (a[1:] - 1.0)
            assert np.all(np.diff(values) >= -(1e-9 * np.abs(values[1:]) + resolution))


@settings(max_examples=25, deadline=None)
@given(q=st.floats(1e-3, 0.3), sigma=st.floats(0.6, 4.0), t1=st.integers(1, 500), t2=st.integers(1, 500))
def test_composition_adds_rdp(q, sigma, t1, t2):
    step = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))
    a = np.array([1.5, 2.0, 3.7, 8.0, 32.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RdpConvergenceWarning)
        composed = rdp.rdp_curve(
            ev.Composed(events=(ev.SelfComposed(event=step, count=t1), ev.SelfComposed(event=step, count=t2)))
        )(a)
        single = rdp.rdp_curve(step)(a)
    assert composed == pytest.approx((t1 + t2) * single, rel=1e-12)


def test_subsampling_never_exceeds_the_unsubsampled_curve():
    a = np.array([1.1, 2.0, 10.0, 1000.0, 1e6])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RdpConvergenceWarning)
        sub = rdp.subsampled_gaussian_rdp(a, sampling_rate=0.3, noise_multiplier=1.0)
    assert np.all(sub <= a / 2 + 1e-12)


def test_effective_noise_multiplier_of_composed_inner_gaussians():
    inner = ev.Composed(events=(ev.Gaussian(noise_multiplier=2.0), ev.Gaussian(noise_multiplier=2.0)))
    nested = rdp.rdp_curve(ev.PoissonSampled(sampling_rate=0.01, event=inner))
    direct = rdp.rdp_curve(ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=math.sqrt(2))))
    a = np.array([2.0, 5.5])
    assert nested(a) == pytest.approx(direct(a), rel=1e-12)


def test_unsupported_events_are_refused():
    with pytest.raises(rdp.UnsupportedEventError):
        rdp.rdp_curve(ev.PoissonSampled(sampling_rate=0.1, event=ev.Laplace(noise_multiplier=1.0)))
    with pytest.raises(rdp.UnsupportedEventError, match="replace-one"):
        rdp.rdp_curve(ev.RandomizedResponse(epsilon=1.0, neighboring=ev.NeighboringRelation.ADD_OR_REMOVE_ONE))


@pytest.mark.parametrize("bad_alpha", [1.0, 0.5, -2.0, float("nan")])
def test_bad_alpha_is_value_error(bad_alpha):
    with pytest.raises(ValueError, match="alpha"):
        rdp.gaussian_rdp(np.array([bad_alpha]), noise_multiplier=1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_sigma_is_value_error(bad):
    with pytest.raises(ValueError, match="noise_multiplier"):
        rdp.subsampled_gaussian_rdp(np.array([2.0]), sampling_rate=0.1, noise_multiplier=bad)
    with pytest.raises(ValueError, match="noise_multiplier"):
        ev.Gaussian(noise_multiplier=bad)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_sampling_rate_is_value_error(bad):
    with pytest.raises(ValueError, match="sampling_rate"):
        rdp.subsampled_gaussian_rdp(np.array([2.0]), sampling_rate=bad, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        ev.PoissonSampled(sampling_rate=bad, event=ev.Gaussian(noise_multiplier=1.0))


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_count_is_value_error(bad):
    with pytest.raises(ValueError, match="count"):
        ev.SelfComposed(event=ev.Gaussian(noise_multiplier=1.0), count=bad)


def test_integer_cache_survives_eviction(monkeypatch):
    # Filling the cache past its size evicts it; values must be recomputed, not looked up from the cleared cache.
    monkeypatch.setattr(rdp, "_INTEGER_LOG_A_CACHE_SIZE", 3)
    rdp._INTEGER_LOG_A_CACHE.clear()
    first = rdp._cached_log_a_integer(0.01, 1.0, np.array([2.0, 3.0]))
    second = rdp._cached_log_a_integer(0.01, 1.0, np.array([2.0, 3.0, 4.0, 5.0]))
    assert second[:2] == pytest.approx(first, rel=1e-15)
    assert second == pytest.approx(rdp._log_a_integer(0.01, 1.0, np.array([2.0, 3.0, 4.0, 5.0])), rel=1e-15)
