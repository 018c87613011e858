"""Tests for dplens.research.gaussmix.accounting (seed 004) against research/gaussmix.md §7 and mpmath oracles."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.accountant.curves import RdpConversion
from dplens.research.gaussmix import accounting as gm


@pytest.fixture(autouse=True)
def _mpmath_digits():
    """The mpmath oracles' precision, set for each test (50 digits): it is process-wide state, and a module-level
    setting lasts only until another module's test changes it (a shuffled run caught this)."""
    with mpmath.workdps(50):
        yield


def _mp_phi(alpha: float, k: float, gamma: float) -> mpmath.mpf:
    a, g = mpmath.mpf(alpha), mpmath.mpf(gamma)
    return k / (2 * (a - 1)) * (a * mpmath.log(1 - 1 / g) - mpmath.log(1 - a / g))


def _mp_delta_remove(eps: float, k: float, t: float) -> mpmath.mpf:
    e, t = mpmath.mpf(eps), mpmath.mpf(t)
    c = 2 * (1 - t) / t * (e - k / 2 * mpmath.log(1 - t))
    sf = lambda x: mpmath.gammainc(mpmath.mpf(k) / 2, x / 2, mpmath.inf, regularized=True)  # noqa: E731
    return sf(c) - mpmath.exp(e) * sf(c / (1 - t))


def _mp_delta_add(eps: float, k: float, s: float) -> mpmath.mpf:
    e, s = mpmath.mpf(eps), mpmath.mpf(s)
    c = 2 * (1 + s) / s * (k / 2 * mpmath.log(1 + s) - e)
    if c <= 0:
        return mpmath.mpf(0)
    cdf = lambda x: mpmath.gammainc(mpmath.mpf(k) / 2, 0, x / 2, regularized=True)  # noqa: E731
    return cdf(c) - mpmath.exp(e) * cdf(c / (1 + s))


# Figure 1 grid of the notes §7 D: gamma = sigma^2, sigma in logspace(log10(4/3), 3.5, 25).
FIG1_GAMMA = (10 ** np.linspace(np.log10(4 / 3), 3.5, 25)) ** 2


# ---------------------------------------------------------------------------------------------
# §7 A/B: phi
# ---------------------------------------------------------------------------------------------

PHI_TABLE = [
    (2, 1, 10, 0.0062112599992785767),
    (1.5, 1, 10, 0.0044781560110354613),
    (5, 1, 10, 0.020793075283851725),
    (9.9, 1, 10, 0.20011803825705699),
    (2, 150, 100, 0.0076526707887424531),
    (10, 150, 100, 0.040476309356765745),
    (40, 150, 100, 0.20925421081910199),
    (2, 150, 1e4, 7.5015002625450078e-7),
    (100, 150, 1e4, 3.7754409216369432e-5),
    (2, 1, 1e12, 5.00000000001e-25),
    (2, 150, 2.5, 44.083999867658926),
    (50, 150, 500, 0.0080516052921006637),
    (200, 150, 500, 0.041617496092226839),
]


@pytest.mark.parametrize(("alpha", "k", "gamma", "expected"), PHI_TABLE)
def test_phi_reference_values(alpha, k, gamma, expected):
    assert float(gm.phi(alpha, k, gamma)) == pytest.approx(expected, rel=1e-12)


def test_phi_vectorised_matches_scalar():
    alphas = np.array([1.5, 2.0, 5.0, 9.9])
    values = gm.phi(alphas, 1, 10)
    assert values.shape == (4,)
    for a, v in zip(alphas, values, strict=True):
        assert v == pytest.approx(float(gm.phi(a, 1, 10)), rel=1e-15)


def test_phi_hand_identity():
    assert float(gm.phi(2, 1, 10)) == pytest.approx(math.log(0.9) - 0.5 * math.log(0.8), rel=1e-13)


def test_phi_infinite_at_and_beyond_gamma():
    assert math.isinf(float(gm.phi(2.0, 3, 2.0)))
    assert math.isinf(float(gm.phi(7.0, 3, 2.0)))


def test_kl_limit():
    assert gm.kl_divergence(1, 10) == pytest.approx(0.0028752977266424049, rel=1e-13)
    assert gm.kl_divergence(1, 10) == pytest.approx(0.5 * (1 / 9 + math.log(0.9)), rel=1e-12)
    # phi is continuous at alpha -> 1.
    assert float(gm.phi(1 + 1e-9, 1, 10)) == pytest.approx(gm.kl_divergence(1, 10), rel=1e-8)
    # huge gamma: KL ~ k/(4 gamma^2)
    assert gm.kl_divergence(2, 1e10) == pytest.approx(
        float(mpmath.mpf(1) * (1 / (1e10 - 1) + mpmath.log(1 - 1 / mpmath.mpf(1e10)))), rel=1e-12
    )


@pytest.mark.parametrize(
    ("alpha", "gamma"),
    [
        (1 + 1e-12, 10.0),
        (1 + 1e-7, 1.0001),
        (1.00005, 1.0001),
        (1.5, 1.6),
        (2.0, 1e12),
        (1e7, 1e12),
        (1e7, 1e8),
        (4e7, 1e8),
        (9.999999e7, 1e8),
        (3.0, 1e15),
        (2.5e6, 1e7),
        (0.4e7, 1e7),
        (5e6, 1e7),
        (5.0000001e6, 1e7),
        (9.99e6, 1e7),
        (1.9999, 2.0),
    ],
)
def test_phi_mpmath_oracle_extreme(alpha, gamma):
    for k in (1, 150):
        got = float(gm.phi(alpha, k, gamma))
        want = float(_mp_phi(alpha, k, gamma))
        assert got == pytest.approx(want, rel=1e-11), (alpha, gamma, k)
        assert got > 0


@settings(max_examples=60, deadline=None)
@given(
    log_gamma=st.floats(min_value=math.log(1.001), max_value=math.log(1e14)),
    frac=st.floats(min_value=1e-9, max_value=1 - 1e-9),
)
def test_phi_mpmath_oracle_property(log_gamma, frac):
    gamma = math.exp(log_gamma)
    alpha = 1 + frac * (gamma - 1)
    if not (1 < alpha < gamma):
        return
    got = float(gm.phi(alpha, 7, gamma))
    want = float(_mp_phi(alpha, 7, gamma))
    assert got == pytest.approx(want, rel=1e-9)


def test_phi_increasing_in_alpha_and_tcdp_bound():
    """phi is non-decreasing in alpha, and Corollary 1: phi <= k alpha/(2 gamma^2) on (1, 2gamma/5)."""
    for gamma in (2.6, 3.0, 10.0, 100.0, 1e4, 1e6):
        alphas = 1 + np.geomspace(1e-6, 2 * gamma / 5 - 1, 400)
        values = gm.phi(alphas, 1, gamma)
        assert np.all(np.diff(values) >= 0)
        assert np.all(values <= alphas / (2 * gamma**2))


def test_phi_add_against_mpmath_and_dominated():
    for s in (1e-10, 1e-3, 0.1, 0.5, 2.0):
        for alpha in (1.001, 2.0, 50.0, 1e4):
            a, sm = mpmath.mpf(alpha), mpmath.mpf(s)
            want = 3 / (2 * (a - 1)) * (a * mpmath.log(1 + sm) - mpmath.log(1 + a * sm))
            assert float(gm.phi_add(alpha, 3, s)) == pytest.approx(float(want), rel=1e-10)
    # Lemma 1's proof: the add direction at leverage t is dominated by the removal direction at t.
    for t in (0.01, 0.1, 0.3):
        alphas = np.linspace(1.01, 0.99 / t, 50)
        assert np.all(gm.phi_add(alphas, 5, t) <= gm.phi(alphas, 5, 1 / t))


# ---------------------------------------------------------------------------------------------
# §7 C: exact per-instance divergence
# ---------------------------------------------------------------------------------------------

C1_X = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
C1_ROWS = {
    2: [(0.232, 0.14353503936360794, 0.08299002108470528), (0.218, 0.12134992591563932, 0.07303555372368104),
        (0.2, 0.09680778170635676, 0.06123299178038269)],
    3: [(0.232, 0.29912320505439052, 0.11006900709735747), (0.218, 0.24271116646045116, 0.09745470468571463),
        (0.2, 0.18514505844864435, 0.08236114950540494)],
}  # fmt: skip


@pytest.mark.parametrize("alpha", [2, 3])
def test_per_instance_c1(alpha):
    result = gm.per_instance_divergence(C1_X, sigma=math.sqrt(3.0), k=3, alpha=alpha)
    for i, (t, d_rem, d_add) in enumerate(C1_ROWS[alpha]):
        assert result.leverage[i] == pytest.approx(t, rel=1e-12)
        assert result.remove[i] == pytest.approx(d_rem, rel=1e-11)
        assert result.add[i] == pytest.approx(d_add, rel=1e-11)
    # gamma = (lambda_min + sigma^2)/C^2 = 4: all below phi(alpha; 3, 4).
    phi_ref = {2: 0.17667455348457518, 3: 0.39243610782341088}[alpha]
    assert float(gm.phi(alpha, 3, 4)) == pytest.approx(phi_ref, rel=1e-12)
    assert result.maximum <= phi_ref
    assert result.to_dict()["maximum"] == result.maximum


def test_per_instance_c1_sigma1():
    result = gm.per_instance_divergence(C1_X, sigma=1.0, k=3, alpha=2)
    assert result.leverage[0] == pytest.approx(0.44, rel=1e-12)
    assert result.remove[0] == pytest.approx(1.4409398185413102, rel=1e-11)
    assert result.add[0] == pytest.approx(0.32276307249754932, rel=1e-11)
    assert math.isinf(float(gm.phi(2, 3, 2)))


@pytest.mark.parametrize(
    ("alpha", "expected"), [(1.5, 0.067452038218247), (2, 0.110030942388401), (3, 0.365443754271396)]
)
def test_per_instance_tightness_c2(alpha, expected):
    result = gm.per_instance_divergence(2 * np.eye(3), sigma=3.0, k=1, alpha=alpha)
    assert result.remove.max() == pytest.approx(expected, rel=1e-12)
    assert float(gm.phi(alpha, 1, 3.25)) == pytest.approx(expected, rel=1e-12)


def test_per_instance_matches_generic_gaussian_formula():
    """Against the closed-form Renyi divergence of zero-mean Gaussians (Gil et al. 2013) on random data."""
    rng = np.random.default_rng(3)
    x = 0.4 * rng.normal(size=(6, 3))
    sigma, k, alpha = 1.5, 4, 1.7
    result = gm.per_instance_divergence(x, sigma=sigma, k=k, alpha=alpha)
    assert np.all(alpha * result.leverage < 1)

    def renyi(s1, s2):
        mix = alpha * s2 + (1 - alpha) * s1
        return (
            -0.5
            / (alpha - 1)
            * (np.linalg.slogdet(mix)[1] - (1 - alpha) * np.linalg.slogdet(s1)[1] - alpha * np.linalg.slogdet(s2)[1])
        )

    full = x.T @ x + sigma**2 * np.eye(3)
    for i in range(6):
        zeroed = full - np.outer(x[i], x[i])
        assert result.remove[i] == pytest.approx(k * renyi(full, zeroed), rel=1e-9)
        assert result.add[i] == pytest.approx(k * renyi(zeroed, full), rel=1e-9)


# ---------------------------------------------------------------------------------------------
# §7 D: Figure 1 (Prop. 1 with continuous alpha, Mironov, Sheffet 2019)
# ---------------------------------------------------------------------------------------------

FIG1 = [  # (index, eps_Prop1, alpha*, eps_Mironov, Sheffet19)
    (0, 116.4615014, 1.360625, 118.6409544, 109.0034377),
    (1, 31.14469407, 2.102804, 32.45958797, 57.04073193),
    (3, 5.490015958, 6.140986, 6.014784324, 15.61977879),
    (6, 0.6493756881, 38.10596, 0.7704543399, 2.238254999),
    (10, 0.04248711649, 470.297, 0.05680665762, 0.1678375542),
    (14, 0.002751406437, 5776.67, 0.004254333198, 0.0125854492),
    (18, 0.0001708779177, 69122.3, 0.0003189848452, 0.000943731171),
    (22, 9.786901047e-6, 787536, 2.391919464e-5, 7.076652641e-5),
    (24, 2.204555717e-6, 2569635, 6.549922497e-6, 1.937838893e-5),
]


@pytest.mark.parametrize(("index", "eps_prop1", "alpha_star", "eps_mironov", "sheffet"), FIG1)
def test_figure1_points(index, eps_prop1, alpha_star, eps_mironov, sheffet):
    gamma = float(FIG1_GAMMA[index])
    curve = gm.gaussmix_rdp_curve(gm.GaussMix(k=150, gamma=gamma))
    eps, alpha = curve.epsilon_and_order(1e-8)
    assert eps == pytest.approx(eps_prop1, rel=1e-8)
    assert gm.gaussmix_epsilon(gm.GaussMix(k=150, gamma=gamma), 1e-8) == eps
    # The optimum is flat: the notes print alpha* to ~6 digits.
    assert alpha == pytest.approx(alpha_star, rel=1e-4)
    assert curve.epsilon(1e-8, conversion=RdpConversion.CLASSIC) == pytest.approx(eps_mironov, rel=1e-8)
    assert gm.sheffet2019_epsilon(k=150, gamma=gamma, delta=1e-8) == pytest.approx(sheffet, rel=1e-8)


def test_optimal_alpha_in_the_millions():
    """alpha* ~ 0.26-0.45 gamma: a capped integer grid would be badly wrong (notes §5 item 4)."""
    for gamma in (1e6, 1e7):
        eps, alpha = gm.gaussmix_rdp_curve(gm.GaussMix(k=150, gamma=gamma)).epsilon_and_order(1e-8)
        assert 0.2 * gamma < alpha < 0.45 * gamma
        grid = np.arange(2, 257, dtype=float)
        grid_eps = gm.phi(grid, 150, gamma) + np.log1p(-1 / grid) - (math.log(1e-8) + np.log(grid)) / (grid - 1)
        assert eps < grid_eps.min() / 5


def test_grid_truncation_example():
    # notes §5 item 4: gamma = 1e4, k = 150, delta = 1e-8, continuous optimum alpha* = 3808.8, eps = 0.0043509.
    eps, alpha = gm.gaussmix_rdp_curve(gm.GaussMix(k=150, gamma=1e4)).epsilon_and_order(1e-8)
    assert eps == pytest.approx(0.0043509, abs=5e-8)
    assert alpha == pytest.approx(3808.8, rel=1e-4)


# ---------------------------------------------------------------------------------------------
# §7 E, F, G, H: Theorem 1, Algorithm 2 / 5 calibration, tCDP
# ---------------------------------------------------------------------------------------------

THEOREM1 = [
    (100, 150, 1e-8, 1.35234943884, 0.769592812803, 0.582756626034, 44.816),
    (1000, 150, 1e-8, 0.129033106521, 0.0769592812803, 0.0520738252404, 420.81),
    (50, 1, 1e-5, 0.290084661744, 0.101329882285, 0.188754779459, 47.73),
    (10, 1, 1e-5, 1.72813709214, 0.506649411427, 1.22148768071, 9.639),
    (500, 150, 1e-5, 0.195799442019, 0.124103253648, 0.071696188371, 170.65),
]


@pytest.mark.parametrize(("gamma", "k", "delta", "eps", "gauss", "rdp", "alpha"), THEOREM1)
def test_theorem1_reference(gamma, k, delta, eps, gauss, rdp, alpha):
    result = gm.theorem1_epsilon(eta=gamma / math.sqrt(k), gamma=gamma, k=k, delta=delta)
    assert result.epsilon == pytest.approx(eps, rel=1e-10)
    assert result.gaussian_term == pytest.approx(gauss, rel=1e-10)
    assert result.gaussmix_term == pytest.approx(rdp, rel=1e-10)
    assert result.alpha == pytest.approx(alpha, rel=1e-3)
    assert result.to_dict()["route"] == "rdp"
    exact = gm.theorem1_epsilon(eta=gamma / math.sqrt(k), gamma=gamma, k=k, delta=delta, route=gm.AccountingRoute.EXACT)
    assert exact.epsilon < result.epsilon
    assert exact.gaussian_term == result.gaussian_term


CALIBRATION = [  # (k, delta, eps, gamma* paper, gamma* repo-style)
    (150, 1e-8, 0.1, 1284.15882145, 907.923606907),
    (150, 1e-8, 1.0, 134.314987801, 96.8594962553),
    (150, 1e-8, 10.0, 14.5889985985, 11.0670766841),
    (150, 1e-5, 0.5, 201.49232029, 141.743821497),
    (150, 1e-5, 5.0, 22.0473183622, 16.3030935301),
    (1, 1e-5, 0.1, 133.367011566, 110.205916927),
    (1, 1e-5, 2.0, 8.813717394, 7.74466910233),
    (1, 1e-5, 10.0, 2.57637583019, None),
    (1000, 1e-6, 1.0, 281.947535265, 197.426012077),
    (1000, 1e-6, 10.0, 30.4723016863, 22.4055552374),
]


@pytest.mark.parametrize(("k", "delta", "eps", "paper", "repo"), CALIBRATION)
def test_algorithm2_calibration(k, delta, eps, paper, repo):
    gamma = gm.calibrate_gamma_linear_mixing(eps, delta, k=k)
    assert gamma == pytest.approx(paper, rel=1e-9)
    assert gm.theorem1_epsilon(eta=gamma / math.sqrt(k), gamma=gamma, k=k, delta=delta).epsilon <= eps
    if repo is not None:
        assert gm.calibrate_gamma_linear_mixing(eps, delta, k=k, eta_factor=2.0) == pytest.approx(repo, rel=1e-9)


def test_algorithm2_lower_limit():
    # Repo-style units at k = 1, eps = 10: the 5/2 floor binds (notes §7 F).
    gamma = gm.calibrate_gamma_linear_mixing(10.0, 1e-5, k=1, eta_factor=2.0)
    assert gamma > 2.5
    assert gamma == pytest.approx(2.5, rel=1e-15)


@pytest.mark.parametrize(
    ("k", "delta", "eps", "expected"),
    [
        (150, 1e-8, 1.0, 110.814145833),
        (150, 1e-8, 0.1, 988.959789651),
        (150, 1e-5, 2.0, 41.548919501),
        (1, 1e-5, 1.0, 19.2452179283),
    ],
)
def test_algorithm5_calibration(k, delta, eps, expected):
    # Prop. 1 with plain delta, target eps/2 (notes §7 G).
    assert gm.calibrate_gamma(eps / 2, delta, k=k) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("k", "gamma", "delta", "expected", "sheffet"),
    [
        (150, 1000, 1e-8, 0.07616711966, 0.1937838893),
        (150, 100, 1e-8, 0.7723251473, 1.937838893),
        (1, 10, 1e-5, 3.857641822, 3.595687253),
        (1, 100, 1e-5, 0.2972032171, 0.3595687253),
        (10000, 1000, 1e-5, 0.4848525912, 1.041641728),
    ],
)
def test_corollary1_tcdp(k, gamma, delta, expected, sheffet):
    tcdp = gm.gaussmix_tcdp(gm.GaussMix(k=k, gamma=gamma))
    assert tcdp.rho == pytest.approx(k / (2 * gamma**2), rel=1e-15)
    assert tcdp.omega == pytest.approx(2 * gamma / 5, rel=1e-15)
    assert tcdp.epsilon_bdrs(delta) == pytest.approx(expected, rel=1e-9)
    assert gm.sheffet2019_epsilon(k=k, gamma=gamma, delta=delta) == pytest.approx(sheffet, rel=1e-9)
    # Lemma 1 + Prop. 1 is never worse than the tCDP route.
    assert gm.gaussmix_epsilon(gm.GaussMix(k=k, gamma=gamma), delta) <= tcdp.epsilon_bdrs(delta)


def test_gaussian_term_rules():
    # gamma small: the classical formula exceeds 1 (outside Dwork-Roth A.1).
    kwargs = {"eta": 2.6, "gamma": 2.6, "k": 1, "delta": 1e-5}
    paper = gm.theorem1_epsilon(**kwargs, gaussian_rule=gm.GaussianTermRule.PAPER)
    checked = gm.theorem1_epsilon(**kwargs)
    analytic = gm.theorem1_epsilon(**kwargs, gaussian_rule=gm.GaussianTermRule.ANALYTIC)
    assert paper.gaussian_term > 1
    assert checked.gaussian_term == max(paper.gaussian_term, analytic.gaussian_term)
    assert analytic.gaussian_term <= checked.gaussian_term


# ---------------------------------------------------------------------------------------------
# §7 I and beyond: the exact chi-square profile
# ---------------------------------------------------------------------------------------------

EXACT_TABLE = [(3, 5.1053686), (4, 2.4385341), (6, 0.59980601), (8, 0.15229142), (10, 0.038816631)]


def _half_ulp(printed: float) -> float:
    digits = len(repr(printed).replace(".", "").lstrip("0").split("e")[0])
    return 0.5 * 10 ** (math.floor(math.log10(printed)) - digits + 1)


@pytest.mark.parametrize(("index", "expected"), [*EXACT_TABLE, (None, 0.0039258614)])
def test_exact_profile_reference(index, expected):
    gamma = 1e4 if index is None else float(FIG1_GAMMA[index])
    eps = gm.exact_epsilon(1e-8, k=150, gamma=gamma)
    # The notes print 8 digits: agree to within half a unit in the last printed digit.
    assert abs(eps - expected) <= _half_ulp(expected) * 1.0000001
    # ... and to 1e-10 with an mpmath oracle of the profile at the returned eps.
    d_rem = float(_mp_delta_remove(eps, 150, 1 / gamma))
    assert d_rem == pytest.approx(1e-8, rel=1e-10)
    assert d_rem <= 1e-8
    assert float(_mp_delta_add(eps, 150, 1 / gamma)) < 1e-12
    rdp_eps = gm.gaussmix_epsilon(gm.GaussMix(k=150, gamma=gamma), 1e-8)
    assert 0.05 < 1 - eps / rdp_eps < 0.15  # "typically 7-12 % smaller"


@pytest.mark.parametrize(
    ("eps", "k", "u"),
    [(0.5, 5, 1 / 3), (0.0, 1, 0.5), (2.0, 150, 0.08), (1e-4, 150, 1e-7), (5.0, 3, 0.9), (30.0, 1000, 0.3)],
)
def test_exact_delta_mpmath_oracle(eps, k, u):
    rem = float(gm.exact_delta_remove(eps, k=k, t=u))
    add = float(gm.exact_delta_add(eps, k=k, s=u))
    want_rem, want_add = float(_mp_delta_remove(eps, k, u)), float(_mp_delta_add(eps, k, u))
    assert rem == pytest.approx(want_rem, rel=1e-8, abs=1e-300)
    assert add == pytest.approx(want_add, rel=1e-8, abs=1e-300)


def test_exact_profile_object():
    event = gm.GaussMix(k=5, gamma=3.0)
    profile = gm.gaussmix_privacy_profile(event)
    by_dir = profile.delta_by_direction(0.5)
    assert by_dir["remove"] == pytest.approx(float(_mp_delta_remove(0.5, 5, 1 / 3)), rel=1e-10)
    assert by_dir["add"] == pytest.approx(float(_mp_delta_add(0.5, 5, 1 / 3)), rel=1e-10)
    # notes §5 item 12 Monte Carlo values: remove 0.12645, add 0.008037.
    assert by_dir["remove"] == pytest.approx(0.12645, abs=5e-5)
    assert by_dir["add"] == pytest.approx(0.00804, abs=2e-5)
    eps = profile.epsilon(1e-3)
    assert eps == gm.exact_epsilon(1e-3, k=5, gamma=3.0)
    assert float(_mp_delta_remove(eps, 5, 1 / 3)) <= 1e-3
    assert profile.delta(eps * (1 - 1e-6)) > 1e-3
    deltas = profile.deltas(np.array([0.1, 0.5, 1.0, 2.0]))
    assert np.all(np.diff(deltas) < 0)


def test_exact_trade_off_consistent_with_profile():
    event = gm.GaussMix(k=5, gamma=3.0)
    f = gm.gaussmix_trade_off(event)
    alphas = np.linspace(0, 1, 201)
    beta = f(alphas)
    assert beta[0] == pytest.approx(1.0) and beta[-1] == pytest.approx(0.0, abs=1e-12)
    assert np.all(np.diff(beta) <= 1e-15)
    assert np.all(beta <= 1 - alphas + 1e-12)
    profile = gm.gaussmix_privacy_profile(event)
    for eps in (0.0, 0.3, 1.0):
        # DRS Prop. 2.12: delta(eps) = sup_a 1 - f(a) - e^eps a; the grid version is an upper bound.
        grid_delta = float(f.delta(eps)[0])
        assert grid_delta >= profile.delta(eps) - 1e-12
        assert grid_delta == pytest.approx(profile.delta(eps), abs=2e-3)


@pytest.mark.parametrize("k", [1, 5, 150])
def test_profile_monotone_in_leverage(k):
    """delta(eps) is non-decreasing in the leverage t (remove) and s (add): the worst case is t = s = 1/gamma."""
    leverages = np.geomspace(1e-4, 0.5, 60)
    for eps in (0.0, 0.05, 0.3, 1.0, 3.0, 8.0):
        rem = np.array([float(gm.exact_delta_remove(eps, k=k, t=t)) for t in leverages])
        add = np.array([float(gm.exact_delta_add(eps, k=k, s=s)) for s in leverages])
        assert np.all(np.diff(rem) >= -1e-15 * np.maximum(rem[1:], 1e-300))
        assert np.all(np.diff(add) >= -1e-15 * np.maximum(add[1:], 1e-300))


def test_exact_profile_monte_carlo_gaussian_densities():
    """1e6 draws of k = 5 Gaussian vectors; privacy loss from the two Gaussian densities (not the chi-square form)."""
    rng = np.random.default_rng(20240601)
    k, gamma, n = 5, 3.0, 1_000_000
    t = 1 / gamma
    z = rng.standard_normal((n, k))

    def log_density(x, var):
        return -0.5 * (x**2).sum(axis=1) / var - 0.5 * k * np.log(2 * np.pi * var)

    for eps in (0.2, 0.5, 1.0):
        # remove: P = N(0,1), Q = N(0,1-t); delta = E_P[(1 - e^{eps - L})_+].
        loss = log_density(z, 1.0) - log_density(z, 1 - t)
        terms = np.maximum(0.0, -np.expm1(eps - loss))
        est, se = terms.mean(), terms.std() / math.sqrt(n)
        exact = float(gm.exact_delta_remove(eps, k=k, t=t))
        assert abs(est - exact) <= 4.0 * se
        # add: P = N(0,1), Q = N(0,1+s).
        loss = log_density(z, 1.0) - log_density(z, 1 + t)
        terms = np.maximum(0.0, -np.expm1(eps - loss))
        est, se = terms.mean(), terms.std() / math.sqrt(n)
        exact = float(gm.exact_delta_add(eps, k=k, s=t))
        assert abs(est - exact) <= 4.0 * se


def test_exact_profile_monte_carlo_large_k():
    """k = 150: 2e6 chi-square draws of W under P."""
    rng = np.random.default_rng(7)
    k, gamma, n = 150, 12.0, 2_000_000
    t = 1 / gamma
    w = rng.chisquare(k, size=n)
    loss = 0.5 * w * (1.0 - 1.0 / (1 - t)) * -1.0 + 0.5 * k * math.log1p(-t)
    for eps in (1.0, 2.0, 3.0):
        terms = np.maximum(0.0, -np.expm1(eps - loss))
        est, se = terms.mean(), terms.std() / math.sqrt(n)
        assert abs(est - float(gm.exact_delta_remove(eps, k=k, t=t))) <= 4.0 * se


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(min_value=1, max_value=2000),
    log_gamma=st.floats(min_value=math.log(1.05), max_value=math.log(1e7)),
    log_delta=st.floats(min_value=math.log(1e-12), max_value=math.log(0.1)),
)
def test_exact_never_exceeds_rdp(k, log_gamma, log_delta):
    event = gm.GaussMix(k=k, gamma=math.exp(log_gamma))
    delta = math.exp(log_delta)
    exact = gm.gaussmix_epsilon(event, delta, route=gm.AccountingRoute.EXACT)
    rdp = gm.gaussmix_epsilon(event, delta)
    assert exact <= rdp
    # the returned eps is on the safe side of the profile (mpmath oracle, both directions)
    assert float(_mp_delta_remove(exact, k, 1 / event.gamma)) <= delta
    assert float(_mp_delta_add(exact, k, 1 / event.gamma)) <= delta


@pytest.mark.parametrize(("k", "delta", "eps"), [(150, 1e-8, 1.0), (1, 1e-5, 0.5), (1000, 1e-6, 4.0)])
def test_exact_calibration_gives_less_noise(k, delta, eps):
    g_rdp = gm.calibrate_gamma(eps, delta, k=k)
    g_exact = gm.calibrate_gamma(eps, delta, k=k, route=gm.AccountingRoute.EXACT)
    assert g_exact < g_rdp
    assert gm.exact_epsilon(delta, k=k, gamma=g_exact) <= eps
    assert gm.exact_epsilon(delta, k=k, gamma=g_exact * (1 - 1e-9)) > eps
    assert gm.gaussmix_epsilon(gm.GaussMix(k=k, gamma=g_rdp), delta) <= eps


@settings(max_examples=6, deadline=None)
@given(
    k=st.integers(min_value=1, max_value=500),
    log_eps=st.floats(min_value=math.log(0.05), max_value=math.log(10.0)),
    log_delta=st.floats(min_value=math.log(1e-10), max_value=math.log(1e-3)),
)
def test_exact_calibration_smaller_property(k, log_eps, log_delta):
    eps, delta = math.exp(log_eps), math.exp(log_delta)
    g_exact = gm.calibrate_gamma(eps, delta, k=k, route=gm.AccountingRoute.EXACT)
    g_rdp = gm.calibrate_gamma(eps, delta, k=k)
    assert g_exact <= g_rdp
    assert gm.exact_epsilon(delta, k=k, gamma=g_exact) <= eps


def test_events_normalise_numpy_scalars():
    event = gm.GaussMix(k=np.int64(5), gamma=np.float64(3.0))
    assert type(event.k) is int and type(event.gamma) is float
    assert ev.event_from_dict(ev.event_to_dict(event)) == event


def test_exact_linear_mixing_calibration_smaller():
    g_rdp = gm.calibrate_gamma_linear_mixing(1.0, 1e-8, k=150)
    g_exact = gm.calibrate_gamma_linear_mixing(1.0, 1e-8, k=150, route=gm.AccountingRoute.EXACT)
    assert g_exact < g_rdp
    result = gm.theorem1_epsilon(
        eta=g_exact / math.sqrt(150), gamma=g_exact, k=150, delta=1e-8, route=gm.AccountingRoute.EXACT
    )
    assert result.epsilon <= 1.0


# ---------------------------------------------------------------------------------------------
# Events, registration, spec builders, bad input
# ---------------------------------------------------------------------------------------------


def test_events_and_from_noise():
    event = gm.GaussMix.from_noise(k=150, sigma=3.0, row_bound=2.0, lambda_min_bound=7.0)
    assert event.gamma == pytest.approx(4.0)
    assert event.neighboring is ev.NeighboringRelation.ADD_OR_REMOVE_ONE
    zero_out = gm.GaussMix(k=3, gamma=2.0, neighboring=ev.NeighboringRelation.REPLACE_SPECIAL)
    assert ev.event_from_dict(ev.event_to_dict(zero_out)) == zero_out
    assert ev.event_from_dict(ev.event_to_dict(event)) == event
    modified = gm.ModifiedGaussMix(k=10, gamma=30.0, eta=1.5)
    assert ev.event_from_dict(ev.event_to_dict(modified)) == modified


def test_rdp_registration_and_composition():
    from dplens.accountant import rdp

    event = gm.GaussMix(k=150, gamma=100.0)
    curve = rdp.rdp_curve(event)
    assert float(curve(2.0)) == pytest.approx(0.0076526707887424531, rel=1e-12)
    composed = curve + rdp.rdp_curve(ev.Gaussian(noise_multiplier=10.0))
    assert composed.alpha_max == 100.0
    assert float(composed(3.0)) == pytest.approx(float(gm.phi(3.0, 150, 100.0)) + 3.0 / 200.0, rel=1e-12)
    assert composed.epsilon(1e-6) > curve.epsilon(1e-6)
    assert (curve * 3).epsilon(1e-6) > curve.epsilon(1e-6)


def test_modified_gaussmix_profile():
    event = gm.ModifiedGaussMix(k=150, gamma=100.0, eta=100 / math.sqrt(150))
    profile = gm.modified_gaussmix_privacy_profile(event)
    assert profile.epsilon(1e-8) == pytest.approx(1.35234943884, rel=1e-10)
    delta = profile.delta(1.4)
    assert 0 < delta < 1e-8
    assert gm.theorem1_epsilon(eta=event.eta, gamma=100.0, k=150, delta=delta).epsilon <= 1.4
    # vectorised queries (grid path) are pessimistic by at most one grid step and still valid
    eps_grid = np.array([1.2, 1.3, 1.4, 1.6, 2.0, 3.0])
    deltas = profile.deltas(eps_grid)
    assert np.all(np.diff(deltas) <= 0)
    assert delta <= deltas[2] <= delta * 1.2
    for e, d in zip(eps_grid, deltas, strict=True):
        assert gm.theorem1_epsilon(eta=event.eta, gamma=100.0, k=150, delta=min(d, 0.999)).epsilon <= e


def test_spec_types():
    build = gm.SPEC_TYPES["gaussmix"]
    assert build({"type": "gaussmix", "k": 150, "gamma": 100.0}) == gm.GaussMix(k=150, gamma=100.0)
    from_noise = build({"k": 3, "sigma": 3.0, "row_bound": 1.0, "lambda_min_bound": 1.0})
    assert from_noise.gamma == pytest.approx(10.0)
    repeated = build({"k": 3, "gamma": 10.0, "count": 4})
    assert isinstance(repeated, ev.SelfComposed) and repeated.count == 4
    modified = gm.SPEC_TYPES["modified_gaussmix"]({"k": 150, "gamma": 100.0, "eta": 8.0})
    assert modified == gm.ModifiedGaussMix(k=150, gamma=100.0, eta=8.0)


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"gamma": 10.0}, "k"),
        ({"k": 3}, "sigma"),
        ({"k": 3, "gamma": "ten"}, "gamma"),
        ({"k": 3, "gamma": 0.5}, "gamma"),
        ({"k": 0, "gamma": 10.0}, "k"),
        ({"k": 3, "gamma": 10.0, "sigma": 1.0}, "either"),
        ({"k": 3, "gamma": 10.0, "colour": 1}, "colour"),
        ({"k": 3, "gamma": 10.0, "count": 0}, "count"),
        ({"k": 3, "sigma": 0.5, "row_bound": 1.0}, "gamma"),
    ],
)
def test_spec_bad_tables(table, needle):
    with pytest.raises(ValueError, match=needle):
        gm.SPEC_TYPES["gaussmix"](table)


@pytest.mark.parametrize(
    "call",
    [
        lambda: gm.GaussMix(k=0, gamma=10.0),
        lambda: gm.GaussMix(k=2.5, gamma=10.0),
        lambda: gm.GaussMix(k=3, gamma=1.0),
        lambda: gm.GaussMix(k=3, gamma=math.nan),
        lambda: gm.GaussMix(k=3, gamma=math.inf),
        lambda: gm.GaussMix(k=3, gamma=10.0, neighboring=ev.NeighboringRelation.REPLACE_ONE),
        lambda: gm.ModifiedGaussMix(k=3, gamma=2.5, eta=1.0),
        lambda: gm.ModifiedGaussMix(k=3, gamma=3.0, eta=0.0),
        lambda: gm.GaussMix.from_noise(k=3, sigma=-1.0, row_bound=1.0),
        lambda: gm.GaussMix.from_noise(k=3, sigma=1.0, row_bound=0.0),
        lambda: gm.phi(1.0, 1, 10),
        lambda: gm.phi(2.0, 1, 0.9),
        lambda: gm.phi(2.0, -1, 10),
        lambda: gm.theorem1_epsilon(eta=1.0, gamma=2.4, k=1, delta=1e-5),
        lambda: gm.theorem1_epsilon(eta=1.0, gamma=3.0, k=1, delta=1.5),
        lambda: gm.theorem1_epsilon(eta=1.0, gamma=3.0, k=1, delta=1e-5, route="rdp"),
        lambda: gm.calibrate_gamma(0.0, 1e-5, k=1),
        lambda: gm.calibrate_gamma(1.0, 0.0, k=1),
        lambda: gm.calibrate_gamma(1.0, 1e-5, k=1, route="exact"),
        lambda: gm.calibrate_gamma_linear_mixing(1.0, 1e-5, k=1, eta_factor=-1.0),
        lambda: gm.exact_delta_remove(-0.1, k=1, t=0.1),
        lambda: gm.exact_delta_remove(0.1, k=1, t=1.0),
        lambda: gm.exact_delta_add(0.1, k=1, s=0.0),
        lambda: gm.exact_epsilon(1e-5, k=1, gamma=1.0),
        lambda: gm.gaussmix_rdp_curve(ev.Gaussian(noise_multiplier=1.0)),
        lambda: gm.gaussmix_tcdp(gm.GaussMix(k=1, gamma=2.0)),
        lambda: gm.per_instance_divergence(np.ones(3), sigma=1.0, k=1, alpha=2.0),
        lambda: gm.per_instance_divergence(np.ones((3, 2)), sigma=1.0, k=1, alpha=1.0),
        lambda: gm.per_instance_divergence(np.ones((3, 2)), sigma=0.0, k=1, alpha=2.0),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()
