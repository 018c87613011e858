"""The privacy unit: user-level DP-SGD (example-level sampling with at most K examples, user-level sampling).

Truth comes from dp-accounting's ``MixtureOfGaussiansDpEvent`` PLD (the tight ELS analysis, a test-time reference),
the exact Binomial tail (mpmath), μ-GDP closed forms for the unamplified samplers, the example-level DP-SGD event
(K = 1 is that event), dplens's GroupPrivacy (a valid but looser bound the tight one must never exceed), and properties
any valid user-level bound must have (≥ the example-level ε, monotone in K, calibration never above its target).
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.approx_dp import ApproxDp
from dplens.accountant.compose import Accountant
from dplens.accountant.dp_sgd import dp_sgd_epsilon
from dplens.accountant.group import GroupPrivacy
from dplens.accountant.user_level import (
    TRUNCATION_DELTA,
    UserLevelRun,
    binomial_tail_bound,
    els_step,
    user_epsilons,
    user_level_epsilon,
    user_level_noise_multiplier,
)


def _dpa_mixture_epsilon(sigma: float, q: float, steps: int, delta: float, k: int, interval: float) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from scipy.stats import binom

    probs = binom.pmf(range(k + 1), k, q)
    event = dp_event.MixtureOfGaussiansDpEvent(sigma, [float(i) for i in range(k + 1)], [float(p) for p in probs])
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    return accountant.compose(event, steps).get_epsilon(delta)


def _els(sigma: float, q: float, steps: int, k: int, n: int = 100_000) -> UserLevelRun:
    batch = round(q * n)
    return UserLevelRun(
        noise_multiplier=sigma, dataset_size=n, batch_size=batch, epochs=steps * batch / n, max_examples_per_user=k
    )


def test_els_matches_dp_accounting_mixture_pld():
    """σ = 1.5, q = 0.01, T = 200, K = 2: within 1 % of dp-accounting's (pessimistic) PLD, and our certified lower
    end is below it (so we are never below the truth it bounds)."""
    reference = _dpa_mixture_epsilon(1.5, 0.01, 200, 1e-5, 2, interval=2e-3)
    result = Accountant().compose(_els(1.5, 0.01, 200, 2)).epsilon_result(1e-5, method="pld")
    assert abs(result.epsilon - reference) <= 0.01 * reference
    assert result.epsilon_lower <= reference


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 4, 8])
def test_els_headline_configuration_against_dp_accounting(k):
    """The issue's (σ, q, T, δ) = (1.5, 0.005, 5000, 1e-6): within 1 % of dp-accounting at its default grid."""
    reference = _dpa_mixture_epsilon(1.5, 0.005, 5000, 1e-6, k, interval=1e-4)
    result = Accountant().compose(_els(1.5, 0.005, 5000, k, n=200_000)).epsilon_result(1e-6, method="pld")
    assert abs(result.epsilon - reference) <= 0.01 * reference
    assert result.epsilon_lower <= reference


@pytest.mark.parametrize("k", [2, 4, 8])
def test_els_never_looser_than_group_privacy(k):
    run = _els(1.5, 0.005, 5000, k, n=200_000)
    tight = Accountant().compose(run).epsilon(1e-6, method="pld")
    group = GroupPrivacy(event=run.record_run().standard_event(), group_size=k)
    assert tight <= Accountant().compose(group).epsilon(1e-6, method="rdp")


def test_k_one_is_the_example_level_event():
    assert els_step(1.5, 1, 0.005, 1e-20)[0] == ev.PoissonSampled(
        sampling_rate=0.005, event=ev.Gaussian(noise_multiplier=1.5)
    )
    example = dp_sgd_epsilon(dataset_size=200_000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    user = user_level_epsilon(
        dataset_size=200_000,
        batch_size=1000,
        epochs=25,
        noise_multiplier=1.5,
        delta=1e-6,
        max_examples_per_user=1,
    )
    assert user.epsilon == example.epsilon and user.privacy_unit == "user" and example.privacy_unit == "example"


@settings(max_examples=8, deadline=None)
@given(k=st.integers(1, 6), sigma=st.floats(0.8, 3.0), q=st.floats(0.002, 0.05))
def test_user_level_at_least_example_level_and_monotone_in_k(k, sigma, q):
    def eps(kk: int) -> float:
        return Accountant().compose(_els(sigma, q, 50, kk)).epsilon(1e-5, method="pld")

    low, here, high = eps(1), eps(k), eps(k + 1)
    assert low <= here * (1 + 1e-9) and here <= high * (1 + 1e-9)


@pytest.mark.parametrize(("trials", "p", "k"), [(1000, 0.005, 20), (100, 0.01, 8), (50, 0.3, 30), (8, 0.005, 3)])
def test_binomial_tail_bound_is_above_the_exact_tail(trials, p, k):
    mpmath.mp.dps = 50
    exact = mpmath.fsum(
        mpmath.binomial(trials, i) * mpmath.mpf(p) ** i * (1 - mpmath.mpf(p)) ** (trials - i)
        for i in range(k + 1, trials + 1)
    )
    assert binomial_tail_bound(trials, p, k) >= float(exact)


def test_large_k_is_truncated_with_a_certified_delta_in_seconds():
    runs = {k: _els(30.0, 0.005, 5000, k, n=200_000) for k in (8, 100, 1000)}
    values = {k: Accountant().compose(r).epsilon(1e-6, method="pld") for k, r in runs.items()}
    assert values[8] < values[100] < values[1000]
    for k in (100, 1000):
        assert 0 < runs[k].truncation_delta() <= TRUNCATION_DELTA
        step = runs[k].standard_event()
        assert isinstance(step, ev.Composed) and step.events[1] == ApproxDp(
            epsilon=0.0, delta=runs[k].truncation_delta()
        )


def test_truncated_mixture_contains_the_full_mixture():
    """K = 100 truncated against the full 101-component mixture (all masses representable at q = 0.05): the
    truncated ledger's ε is an upper bound, at most the width of a bracket above the full one."""
    from scipy.stats import binom

    run = _els(40.0, 0.05, 200, 100)
    truncated = Accountant().compose(run).epsilon_result(1e-6, method="pld")
    probs = binom.pmf(range(101), 100, 0.05)
    full = ev.MixtureOfGaussians(
        standard_deviation=40.0,
        sensitivities=tuple(float(i) for i in range(101)),
        sampling_probs=tuple(float(p) / float(probs.sum()) for p in probs),
    )
    exact = Accountant().compose(full, count=200).epsilon_result(1e-6, method="pld")
    assert run.truncation_delta() > 0
    assert truncated.epsilon >= exact.epsilon_lower
    assert truncated.epsilon <= exact.epsilon * 1.001


def test_delta_only_guarantee_composes_exactly_in_the_engine():
    """Gaussian(σ) ⊗ (0, δ₀): δ(ε) = δ₀ + (1 − δ₀)·δ_G(ε), so ε at δ is the Gaussian's at (δ − δ₀)/(1 − δ₀)."""
    sigma, d0, delta = 2.0, 1e-7, 1e-5
    result = Accountant().compose(
        ev.Composed(events=(ev.Gaussian(noise_multiplier=sigma), ApproxDp(epsilon=0.0, delta=d0)))
    )
    got = result.epsilon_result(delta, method="pld")
    exact = conversions.gdp_epsilon(1.0 / sigma, (delta - d0) / (1 - d0))
    assert got.epsilon_lower <= exact <= got.epsilon
    assert "dplens engine" in got.details


def test_user_sampling_is_the_run_over_users():
    user = user_level_epsilon(
        dataset_size=200_000,
        batch_size=1000,
        epochs=25,
        noise_multiplier=1.5,
        delta=1e-6,
        user_sampling=True,
        users=50_000,
    )
    over_users = dp_sgd_epsilon(dataset_size=50_000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    assert user.epsilon == over_users.epsilon and user.steps == 1250 and user.sampling_rate == 0.02
    assert user.dataset_size == 200_000 and user.to_dict()["user_sampling"] is True


@pytest.mark.parametrize("sampling", ["shuffle", "balls-and-bins", "cyclic"])
def test_unamplified_samplers_give_k_times_the_gdp_mu(sampling):
    result = user_level_epsilon(
        dataset_size=10_000,
        batch_size=100,
        epochs=3,
        noise_multiplier=20.0,
        delta=1e-5,
        sampling=sampling,
        max_examples_per_user=4,
    )
    assert result.epsilon == pytest.approx(conversions.gdp_epsilon(4 * math.sqrt(3) / 20.0, 1e-5), rel=1e-9)
    example = dp_sgd_epsilon(
        dataset_size=10_000, batch_size=100, epochs=3, noise_multiplier=20.0, delta=1e-5, sampling=sampling
    )
    assert result.lower_bound == "lower bound" and result.epsilon_lower <= example.epsilon <= result.epsilon


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(max_examples_per_user=0), "max_examples_per_user must be an integer >= 1; got 0"),
        (dict(), "needs max_examples_per_user"),
        (dict(user_sampling=True), "user_sampling needs users"),
        (dict(max_examples_per_user=2, users=2000), "users must be <= dataset_size=1000; got users=2000"),
        (dict(user_sampling=True, users=5), "batch_size must be <= users=5"),
        (dict(max_examples_per_user=2, users=100), "exceeds max_examples_per_user"),
    ],
)
def test_bad_user_level_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        UserLevelRun(noise_multiplier=1.0, dataset_size=1000, batch_size=10, epochs=1, **kwargs)


def test_the_example_unit_is_refused_by_the_user_level_entry_point():
    with pytest.raises(ValueError, match="privacy_unit='user'"):
        user_level_epsilon(
            dataset_size=1000, batch_size=10, epochs=1, noise_multiplier=1.0, delta=1e-5, privacy_unit="example"
        )


@pytest.mark.parametrize(
    "unit",
    [
        dict(max_examples_per_user=3),
        dict(user_sampling=True, users=20_000),
        dict(max_examples_per_user=3, sampling="shuffle"),
    ],
)
def test_user_level_calibration_never_overshoots(unit):
    result = user_level_noise_multiplier(
        dataset_size=50_000, batch_size=500, epochs=2, target_epsilon=4.0, delta=1e-5, **unit
    )
    assert result.epsilon <= 4.0 and result.privacy_unit == "user"
    recomputed = user_level_epsilon(
        dataset_size=50_000,
        batch_size=500,
        epochs=2,
        noise_multiplier=result.noise_multiplier,
        delta=1e-5,
        method="pld",
        **unit,
    )
    assert recomputed.epsilon <= 4.0 * (1 + 1e-3)  # the same value re-accounted (its own grid)
    less = user_level_epsilon(
        dataset_size=50_000,
        batch_size=500,
        epochs=2,
        noise_multiplier=result.noise_multiplier * 0.99,
        delta=1e-5,
        method="pld",
        **unit,
    )
    assert less.epsilon > 4.0  # and it is the smallest such σ to 1 %


def test_heterogeneous_users_give_worst_case_and_distribution():
    out = user_epsilons({1: 150_000, 5: 10_000}, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    single = user_level_epsilon(
        dataset_size=200_000,
        batch_size=1000,
        epochs=25,
        noise_multiplier=1.5,
        delta=1e-6,
        max_examples_per_user=5,
        method="pld",
    )
    assert out.worst_case.epsilon == single.epsilon and out.dataset_size == 200_000 and out.users == 160_000
    assert out.quantile(0.5) == out.rows[0][2] < out.quantile(1.0) == single.epsilon
    with pytest.raises(ValueError, match="histogram"):
        user_epsilons({}, batch_size=10, epochs=1, noise_multiplier=1.0, delta=1e-5)


def test_zero_out_of_a_users_examples_is_the_add_remove_pair_under_poisson():
    common = dict(dataset_size=200_000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    zero = user_level_epsilon(**common, max_examples_per_user=2, neighboring="zero_out", method="pld")
    add = user_level_epsilon(**common, max_examples_per_user=2, method="pld")
    assert zero.epsilon == add.epsilon and zero.neighboring == "zero_out" and "same dominating pair" in zero.details


@pytest.mark.parametrize("sampling", ["balls-and-bins", "shuffle", "fixed-size", "truncated-poisson"])
def test_k_one_is_the_example_level_run_under_every_sampler(sampling):
    common = dict(dataset_size=2000, batch_size=100, epochs=2, noise_multiplier=2.0, delta=1e-5, sampling=sampling)
    if sampling == "truncated-poisson":
        common["max_batch_size"] = 150
    example = dp_sgd_epsilon(**common)
    user = user_level_epsilon(**common, max_examples_per_user=1)
    assert user.epsilon == example.epsilon and user.epsilon_lower == example.epsilon_lower


# ---- fixed-size batches and truncated Poisson for a user (K >= 2) ----------------------------------------------


def _dpa_hypergeometric_mixture(sigma, n, b, k, steps, delta, shift):
    """jax_privacy's user-level accountant for FIXED_BATCH_SIZE (Ganesh 2024): dp-accounting's mixture PLD with
    Hypergeometric(N, K, B) weights and shifts ``shift``·j (2 under substitution)."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from scipy.stats import hypergeom

    probs = [float(hypergeom(n, k, b).pmf(j)) for j in range(k + 1)]
    event = dp_event.MixtureOfGaussiansDpEvent(sigma, [float(shift * j) for j in range(k + 1)], probs)
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-2)  # pessimistic
    return accountant.compose(event, steps).get_epsilon(delta)


def test_hypergeometric_pmf_is_the_closed_form():
    from dplens.accountant.user_level import _hypergeometric_pmf

    for n, k, b in ((50, 7, 10), (1000, 3, 999), (20, 20, 5)):
        for j in range(min(k, b) + 1):
            exact = mpmath.binomial(k, j) * mpmath.binomial(n - k, b - j) / mpmath.binomial(n, b)
            assert _hypergeometric_pmf(n, k, b, j) == pytest.approx(float(exact), rel=1e-10, abs=1e-300)
    assert _hypergeometric_pmf(20, 20, 5, 4) == 0.0  # below max(0, B + K - N) = 5


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 400), st.integers(1, 60), st.integers(1, 400), st.integers(0, 59))
def test_the_chernoff_bound_is_above_the_exact_hypergeometric_tail(n, k, b, j):
    from dplens.accountant.user_level import _hypergeometric_pmf

    k, b = min(k, n), min(b, n)
    exact = math.fsum(_hypergeometric_pmf(n, k, b, i) for i in range(j + 1, min(k, b) + 1))
    assert binomial_tail_bound(k, b / n, j) >= exact * (1 - 1e-9) - 1e-300


@pytest.mark.parametrize(("neighboring", "shift"), [("zero_out", 1), ("replace_one", 2)])
def test_fixed_size_user_bracket_holds_ganesh_mixture_and_is_group_privacy_above(neighboring, shift):
    common = dict(dataset_size=2000, batch_size=20, epochs=1, noise_multiplier=2.0, delta=1e-5, sampling="fixed-size")
    user = user_level_epsilon(**common, max_examples_per_user=3, neighboring=neighboring)
    run = UserLevelRun(
        **{k: v for k, v in common.items() if k != "delta"}, max_examples_per_user=3, neighboring=neighboring
    )
    group = GroupPrivacy(event=run.group_base().standard_event(), group_size=3)  # zero-out: as substitution
    assert user.epsilon == pytest.approx(Accountant().compose(group).epsilon(1e-5), rel=1e-12)
    reference = _dpa_hypergeometric_mixture(2.0, 2000, 20, 3, user.steps, 1e-5, shift)  # an upper end of the pair
    assert user.lower_bound == "lower bound" and "group privacy" in user.details and user.bracket_note
    assert ("Ganesh 2024" in user.details) == (neighboring == "replace_one")
    assert user.epsilon_lower <= reference and reference <= user.epsilon
    example = dp_sgd_epsilon(**common, neighboring=neighboring)
    assert user.epsilon_lower >= example.epsilon_lower  # K aligned examples attain more than one
    assert user.epsilon >= example.epsilon


def test_fixed_size_users_are_monotone_in_k_and_calibrated_below_target():
    common = dict(dataset_size=2000, batch_size=20, epochs=0.5, noise_multiplier=1.5, delta=1e-5, sampling="fixed-size")
    values = [user_level_epsilon(**common, max_examples_per_user=k) for k in (1, 2, 4)]
    assert [v.epsilon for v in values] == sorted(v.epsilon for v in values)
    assert [v.epsilon_lower for v in values] == sorted(v.epsilon_lower for v in values)
    found = user_level_noise_multiplier(
        **{k: v for k, v in common.items() if k != "noise_multiplier"}, target_epsilon=3.0, max_examples_per_user=2
    )
    assert found.epsilon <= 3.0 and found.epsilon_lower <= found.epsilon


def test_truncated_poisson_users_get_group_privacy_or_a_one_line_refusal():
    common = dict(dataset_size=2000, batch_size=20, epochs=1, noise_multiplier=1.0, delta=1e-5)
    kwargs = dict(sampling="truncated-poisson", max_batch_size=30, max_examples_per_user=2)
    try:
        user = user_level_epsilon(**common, **kwargs)
    except ValueError as err:
        message = str(err)
        assert "no user-level bound for sampling='truncated-poisson'" in message and "user_sampling" in message
        return
    example = dp_sgd_epsilon(**common, sampling="truncated-poisson", max_batch_size=30)
    assert user.epsilon >= example.epsilon and user.epsilon_lower <= example.epsilon
    assert "group privacy" in user.details


def test_substitution_doubles_the_unamplified_mu():
    common = dict(dataset_size=10_000, batch_size=100, epochs=3, noise_multiplier=20.0, delta=1e-5)
    zero = user_level_epsilon(**common, sampling="shuffle", max_examples_per_user=4, neighboring="zero_out")
    replace = user_level_epsilon(**common, sampling="shuffle", max_examples_per_user=4, neighboring="replace_one")
    assert zero.epsilon == pytest.approx(conversions.gdp_epsilon(4 * math.sqrt(3) / 20.0, 1e-5), rel=1e-9)
    assert replace.epsilon == pytest.approx(conversions.gdp_epsilon(8 * math.sqrt(3) / 20.0, 1e-5), rel=1e-9)
    one = dp_sgd_epsilon(**common, sampling="shuffle", neighboring="replace_one")
    assert replace.epsilon >= one.epsilon


# ---- heterogeneous users: the histogram ------------------------------------------------------------------------


def test_histogram_parsing_accepts_json_and_csv_and_refuses_bad_rows():
    from dplens.accountant.user_level import parse_histogram

    assert parse_histogram('{"1": 150000, "5": 10000}') == {1: 150000, 5: 10000}
    assert parse_histogram("[[1, 3], [4, 0]]") == {1: 3, 4: 0}
    assert parse_histogram("# counts\nexamples,users\n1, 3\n7,2\n") == {1: 3, 7: 2}
    for text, needle in [
        ("", "is empty"),
        ('{"1": -3}', "users >= 0"),
        ('{"1": 2.5}', "must be an integer"),
        ('{"1.5": 2}', "must be an integer"),
        ('{"1": true}', "must be an integer"),
        ("1,2\n1,3\n", "appears twice"),
        ("1,2,3\n", "must be 'examples,users'"),
        ("{", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"0": 4}', "examples per user must be >= 1"),
    ]:
        with pytest.raises(ValueError, match=needle):
            parse_histogram(text)


def test_histogram_checks_its_totals_against_the_run():
    common = dict(batch_size=10, epochs=1, noise_multiplier=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="histogram holds 120 examples, more than dataset_size=100"):
        user_epsilons({1: 100, 2: 10}, dataset_size=100, **common)
    with pytest.raises(ValueError, match="users with 5 examples, more than max_examples_per_user=3"):
        user_epsilons({5: 10}, max_examples_per_user=3, **common)
    with pytest.raises(ValueError, match="no user"):
        user_epsilons({5: 0}, **common)
    capped = user_epsilons({1: 90, 2: 5}, dataset_size=1000, max_examples_per_user=4, **common)
    assert capped.worst_case.max_examples_per_user == 4 and capped.dataset_size == 1000 and capped.examples == 100
    assert capped.worst_case.epsilon > capped.rows[-1][2]  # the cap is the guarantee, the histogram the users


def test_many_distinct_counts_are_bracketed_by_their_accounted_neighbours():
    from dplens.accountant.user_level import MAX_ACCOUNTED_COUNTS, accounted_counts

    counts = list(range(1, 301))
    grid = accounted_counts(counts)
    assert grid[0] == 1 and grid[-1] == 300 and len(grid) <= MAX_ACCOUNTED_COUNTS and set(grid) <= set(counts)
    histogram = {k: 1 for k in range(1, 61)}
    common = dict(batch_size=100, epochs=0.5, noise_multiplier=3.0, delta=1e-5, dataset_size=20_000)
    out = user_epsilons(histogram, **common, max_accounted=6)
    table = out.to_dict()["per_count"]
    assert len(table) == 60 and len(set(out.accounted_at)) <= 6
    for k in (7, 37):  # off-grid counts: the reported bracket holds their own accounting
        row = table[k - 1]
        assert row["accounted_at"] >= k
        own = user_level_epsilon(max_examples_per_user=k, method="pld", **common)
        assert row["epsilon"] >= own.epsilon_lower and (row["epsilon_lower"] or 0.0) <= own.epsilon
    assert [r["epsilon"] for r in table] == sorted(r["epsilon"] for r in table)


def test_large_counts_in_a_histogram_take_seconds():
    import time

    started = time.process_time()
    out = user_epsilons(
        {1: 90_000, 10: 500, 100: 40, 1000: 5}, batch_size=500, epochs=2, noise_multiplier=2.0, delta=1e-6
    )
    assert time.process_time() - started < 8.0
    assert out.worst_case.max_examples_per_user == 1000 and out.worst_case.truncation_delta is not None
    assert out.worst_case.truncation_delta <= TRUNCATION_DELTA
    epsilons = [row[2] for row in out.rows]
    assert epsilons == sorted(epsilons) and out.quantile(0.5) == out.rows[0][2]


def test_a_zeroed_example_under_fixed_size_batches_exceeds_the_poisson_pair():
    """Why a zeroed-out user under fixed-size batches is accounted as substituted: N = 2, B = 1 (q = ½), the record's
    gradient +1 and the other's −1 give one step's pair (1 − q)N(0) + qN(2) vs (1 − q)N(0) + qN(1) (shifted by +1),
    above the Poisson pair qN(1) + (1 − q)N(0) vs N(0) in both of its directions (mpmath quadrature)."""

    def hockey_stick(p, q, gamma):
        with mpmath.workdps(30):
            return mpmath.quad(lambda x: max(p(x) - gamma * q(x), 0), [-mpmath.inf, -1, 0, 1, 2, 3, mpmath.inf])

    def mix(*shifts):
        return lambda x: sum(mpmath.npdf(x, s, 1.0) for s in shifts) / len(shifts)

    gamma = mpmath.e
    fixed = hockey_stick(mix(0, 2), mix(0, 1), gamma)
    poisson = max(hockey_stick(mix(0, 1), mix(0), gamma), hockey_stick(mix(0), mix(0, 1), gamma))
    assert fixed > 2 * poisson and float(fixed) == pytest.approx(0.0587, abs=1e-4)
    run = UserLevelRun(
        noise_multiplier=1.0, dataset_size=100, batch_size=10, epochs=1, sampling="fixed-size", max_examples_per_user=2
    )
    assert run.neighboring.value == "zero_out" and run.group_base().neighboring.value == "replace_one"


def test_the_fixed_size_user_mixture_is_not_a_dominating_pair_at_epsilon_zero():
    """Why dplens does not take Σₖ Hyp(k)·N(2k, σ²) against N(0, σ²) as the upper bound of a fixed-size user.

    Two examples of one user, the others' gradients 0, the user's +C in D and −C in D′: each step's outputs are
    Σₖ Hyp(k)·N(k, σ²) against Σₖ Hyp(k)·N(−k, σ²), whose total variation (δ at ε = 0) is Σₖ Hyp(k)·(2Φ(k/σ) − 1)
    exactly (every component pair crosses at 0) — the joint-convexity bound, which the mixture against one Gaussian
    falls strictly short of when two or more k ≥ 1 carry mass. mpmath, 30 digits.
    """
    with mpmath.workdps(30):
        _check_the_mixture_falls_short(20, 6, mpmath.mpf(1))


def _check_the_mixture_falls_short(n, b, sigma):
    weights = [mpmath.binomial(2, k) * mpmath.binomial(n - 2, b - k) / mpmath.binomial(n, b) for k in range(3)]
    configuration = sum(w * (2 * mpmath.ncdf(k / sigma) - 1) for k, w in enumerate(weights))

    def excess(x):  # the mixture's density above N(0, σ²)'s
        mixture = sum(w * mpmath.npdf(x, 2 * k, sigma) for k, w in enumerate(weights))
        return max(mixture - mpmath.npdf(x, 0, sigma), 0)

    # the mixture exceeds N(0, σ²) exactly beyond its one crossing (the likelihood ratio increases in x)
    crossing = mpmath.findroot(
        lambda x: sum(w * mpmath.exp((4 * k * x - 4 * k * k) / (2 * sigma**2)) for k, w in enumerate(weights)) - 1, 0.5
    )
    claimed = sum(w * (1 - mpmath.ncdf((crossing - 2 * k) / sigma)) for k, w in enumerate(weights)) - (
        1 - mpmath.ncdf(crossing / sigma)
    )
    assert abs(claimed - mpmath.quad(excess, [-12, crossing, 16])) < 1e-20
    assert configuration > claimed + mpmath.mpf("0.008")  # 0.3771 against 0.3689


def test_fixed_size_users_get_the_label_pair_where_it_is_below_group_privacy():
    common = dict(dataset_size=200_000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
    example = dp_sgd_epsilon(**common, sampling="fixed-size", neighboring="replace_one")
    values = []
    for k in (2, 4):
        user = user_level_epsilon(**common, sampling="fixed-size", max_examples_per_user=k, neighboring="replace_one")
        run = UserLevelRun(
            **{key: v for key, v in common.items() if key != "delta"},
            sampling="fixed-size",
            max_examples_per_user=k,
            neighboring="replace_one",
        )
        group = Accountant().compose(GroupPrivacy(event=run.group_base().standard_event(), group_size=k))
        assert user.epsilon < group.epsilon(1e-6)  # 15.5 against 22.6 at K = 2
        assert "label pair" in user.details and "label pair" in user.bracket_note
        assert example.epsilon <= user.epsilon and user.epsilon_lower <= user.epsilon
        values.append(user)
    assert values[0].epsilon <= values[1].epsilon and values[0].epsilon_lower <= values[1].epsilon_lower
