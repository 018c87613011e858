"""Matrix-factorisation trainings under their samplers: amplification, unamplified bounds, labels, calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import conversions, pld_engine
from dplens.accountant import events as ev
from dplens.accountant import matrix_factorization as mf
from dplens.accountant.dp_sgd import dp_sgd_epsilon
from dplens.accountant.mf_accounting import mf_epsilon, mf_noise_multiplier
from dplens.research.dp_ftrl import accounting as ftrl

DELTA = 1e-6
RUN = dict(dataset_size=60_000, batch_size=256, epochs=10)  # 2344 steps


def _dpsgd_bracket(q: float, sigma: float, rounds: int):
    step = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma))
    return pld_engine.epsilon_bracket([(step, rounds)], DELTA)


def test_cyclic_poisson_bandmf_is_dp_sgd_with_ceil_t_over_b_rounds_certified():
    r = mf_epsilon(mechanism="bandmf", sampling="cyclic-poisson", bands=8, noise_multiplier=1.0, delta=DELTA, **RUN)
    assert (r.steps, r.rounds, r.bound, r.lower_bound) == (2344, 293, "certified", "certified")
    bracket = _dpsgd_bracket(256 * 8 / 60_000, 1.0, 293)
    assert r.epsilon == pytest.approx(bracket.upper, rel=1e-12)
    assert r.epsilon_lower == pytest.approx(bracket.lower, rel=1e-12)
    assert r.epsilon_lower <= r.epsilon <= r.epsilon_lower * (1 + 1e-3)


def test_cyclic_poisson_equals_jax_privacy_event_under_dp_accounting_pld():
    """jax_privacy's amplified_bandmf_event is dpsgd_event(σ, q, ⌈T/b⌉) (experimental/accounting.py): built here
    directly in dp_accounting, so no JAX is loaded."""
    import dp_accounting

    for bands, sigma in ((8, 1.0), (4, 0.8)):
        r = mf_epsilon(
            mechanism="bandmf", sampling="cyclic-poisson", bands=bands, noise_multiplier=sigma, delta=DELTA, **RUN
        )
        event = dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(r.sampling_rate, dp_accounting.GaussianDpEvent(sigma)),
            math.ceil(r.steps / bands),
        )
        theirs = dp_accounting.pld.PLDAccountant().compose(event).get_epsilon(DELTA)
        assert abs(r.epsilon - theirs) <= 1e-3 * theirs


def test_partial_last_round_with_coefficients_is_certified_and_between_the_dp_sgd_bounds():
    coefs = np.array([1.0, 0.6, 0.3, 0.1, 0.05, 0.02, 0.01])
    coefs /= np.linalg.norm(coefs)
    r = mf_epsilon(
        mechanism="bandmf", sampling="cyclic-poisson", bands=7, strategy=coefs, noise_multiplier=1.0, delta=DELTA, **RUN
    )
    assert r.steps % 7 and r.bound == "certified"
    q = 256 * 7 / 60_000
    assert r.epsilon <= _dpsgd_bracket(q, 1.0, math.ceil(2344 / 7)).upper
    assert r.epsilon_lower >= _dpsgd_bracket(q, 1.0, 2344 // 7).lower
    blind = mf_epsilon(mechanism="bandmf", sampling="cyclic-poisson", bands=7, noise_multiplier=1.0, delta=DELTA, **RUN)
    assert blind.bound == "upper" and blind.lower_bound == "lower bound"
    assert blind.epsilon == pytest.approx(_dpsgd_bracket(q, 1.0, math.ceil(2344 / 7)).upper, rel=1e-12)
    assert blind.epsilon_lower <= r.epsilon_lower <= r.epsilon <= blind.epsilon


def test_general_banded_matrix_without_a_dominating_group_is_an_upper_bound():
    steps, bands = 40, 4
    i, j = np.indices((steps, steps))
    m = np.where((i >= j) & (i - j < bands), 1.0, 0.0)
    m /= np.linalg.norm(m, axis=0)
    m[:, 1::4] *= 0.9  # group 1 below the others
    m[:, 2] *= 0.5  # group 2 has one weak column: no group dominates? groups 0 and 3 keep norm 1
    run = dict(dataset_size=400, batch_size=10, epochs=1)
    r = mf_epsilon(mechanism="matrix", sampling="cyclic-poisson", strategy=m, noise_multiplier=0.8, delta=DELTA, **run)
    assert r.bound == "certified"  # group 0 has every column at norm 1: it dominates
    m[:, 0] *= 0.5
    m[:, 7] *= 0.5  # now group 0 and group 3 each have a weak column
    m[:, 11] *= 0.5
    r2 = mf_epsilon(mechanism="matrix", sampling="cyclic-poisson", strategy=m, noise_multiplier=0.8, delta=DELTA, **run)
    assert r2.bound == "upper" and r2.lower_bound == "lower bound"
    assert r2.epsilon_lower <= r2.epsilon <= r.epsilon


def test_truncated_cyclic_poisson_ledger_is_labelled_upper():
    from dplens.accountant.mf_accounting import MfTraining

    event = MfTraining(
        mechanism="bandmf",
        sampling="cyclic-poisson",
        bands=4,
        noise_multiplier=1.0,
        max_batch_size=80,
        dataset_size=6000,
        batch_size=64,
        epochs=1,
    )
    inner = event.standard_event()
    assert isinstance(getattr(inner, "event", inner), ev.TruncatedSubsampledGaussian)
    (lower,) = event.lower_bound_events()  # the Poisson pair at the rate an example is surely kept: attained
    assert getattr(lower, "event", lower).sampling_rate < 64 * 4 / 6000


@pytest.mark.slow  # dp-accounting's truncated PLD takes several seconds
def test_truncated_cyclic_poisson_is_an_upper_bound_above_the_untruncated_pair():
    run = dict(dataset_size=6000, batch_size=64, epochs=1)
    kw = dict(mechanism="bandmf", sampling="cyclic-poisson", bands=4, noise_multiplier=1.0, delta=DELTA, **run)
    plain = mf_epsilon(**kw)
    cut = mf_epsilon(max_batch_size=80, **kw)
    assert cut.bound == "upper" and cut.lower_bound == "lower bound"
    assert cut.epsilon_lower <= plain.epsilon_lower * (1 + 1e-9) and cut.epsilon >= cut.epsilon_lower


def test_one_band_poisson_is_dp_sgd():
    r = mf_epsilon(mechanism="bandmf", sampling="poisson", bands=1, noise_multiplier=1.1, delta=DELTA, **RUN)
    reference = dp_sgd_epsilon(noise_multiplier=1.1, delta=DELTA, method="pld", **RUN)
    assert r.rounds == reference.steps and r.bound == "certified"
    assert r.epsilon == pytest.approx(reference.epsilon, rel=1e-9)


@pytest.mark.parametrize("mechanism", ["bandmf", "bsr"])
def test_iid_poisson_on_a_banded_strategy_is_refused_never_dp_sgd(mechanism):
    with pytest.raises(ValueError, match="needs MMCC") as err:
        mf_epsilon(mechanism=mechanism, sampling="poisson", bands=4, noise_multiplier=1.0, delta=DELTA, **RUN)
    assert "\n" not in str(err.value)


def test_min_sep_nu_ftrl_is_the_seed_accounting():
    steps, b = 1000, 100
    run = dict(dataset_size=1000, batch_size=1, epochs=1)  # T = 1000
    sigma_paper = 12.0
    seed = ftrl.dp_ftrl_accounting(
        ftrl.DpFtrl(nu=0.0, noise_multiplier=sigma_paper, steps=steps, min_separation=b), DELTA
    )
    gamma = ftrl.nu_ftrl_gamma(0.0, steps)
    ours = mf_epsilon(
        mechanism="nu-ftrl",
        nu=0.0,
        sampling="min-sep",
        min_separation=b,
        noise_multiplier=sigma_paper / gamma,
        delta=DELTA,
        **run,
    )
    assert ours.bound == "certified" and ours.sensitivity * gamma == pytest.approx(9.154043, abs=1e-6)  # note F5
    assert ours.epsilon == pytest.approx(seed.epsilon, rel=1e-8)


def test_cyclic_identity_is_sqrt_epochs_gdp():
    r = mf_epsilon(mechanism="nu-ftrl", nu=1.0, sampling="cyclic", noise_multiplier=2.0, delta=DELTA, **RUN)
    assert r.bound == "certified" and r.sensitivity == pytest.approx(math.sqrt(10))
    assert r.epsilon == pytest.approx(conversions.gdp_epsilon(math.sqrt(10) / 2.0, DELTA), rel=1e-8)
    reference = dp_sgd_epsilon(noise_multiplier=2.0, delta=DELTA, sampling="cyclic", **RUN)
    assert r.epsilon == pytest.approx(reference.epsilon, rel=1e-8)


def test_balls_and_bins_is_bounded_through_dp_sgd_at_sigma_over_the_spectral_norm():
    """The MF run is a post-processing of DP-SGD under the same sampler at σ/‖C‖₂ (``_post_processing_bound``): on the
    identity it is DP-SGD itself (up to the norm bound's 1e-12 margin); for BSR far below the unamplified bound."""
    kw = dict(sampling="balls-and-bins", noise_multiplier=3.0, delta=DELTA, epochs=3, **SMALL)
    ident = mf_epsilon(mechanism="nu-ftrl", nu=1.0, **kw)
    assert ident.epsilon == pytest.approx(dp_sgd_epsilon(method="pld", **kw).epsilon, rel=1e-6)
    r = mf_epsilon(mechanism="bsr", bands=8, **kw)
    norm = mf.operator_norm_bound(mf.bsr_strategy(8, r.steps))
    assert norm == pytest.approx(np.linalg.norm(mf.bsr_strategy(8, r.steps).dense(), 2), rel=1e-2)
    reference = dp_sgd_epsilon(**{**kw, "noise_multiplier": 3.0 / norm}, method="pld")
    assert r.epsilon == pytest.approx(reference.epsilon, rel=1e-9) and r.amplified and r.bound == "upper"
    assert r.epsilon < conversions.gdp_epsilon(r.sensitivity / 3.0, DELTA)
    assert any("post-processing" in note for note in r.notes)


def test_spectral_norm_bound_is_never_below_the_norm():
    for s in (mf.nu_ftrl_strategy(0.0, 300), mf.bsr_strategy(5, 300), mf.dense_strategy(_signed_dense_small())):
        assert mf.operator_norm_bound(s) >= np.linalg.norm(s.dense(), 2) * (1 - 1e-12)


def _signed_dense_small() -> np.ndarray:
    i, j = np.indices((30, 30))
    m = np.tril(np.cos(1.3 * i + 0.7 * j) + 0.5 * (i == j))
    return m / np.linalg.norm(m, axis=0).max()


@pytest.mark.parametrize("sampling", ["shuffle", "shuffle-once", "b-min-sep"])
def test_random_samplers_get_the_unamplified_bound_labelled_upper(sampling):
    # fixed bins: the smallest of three valid bounds, the Rényi one amplified (tests/accountant/test_mf_renyi.py)
    extra = {"min_separation": 200} if sampling == "b-min-sep" else {}
    r = mf_epsilon(mechanism="bsr", bands=8, sampling=sampling, noise_multiplier=3.0, delta=DELTA, **RUN, **extra)
    assert r.bound == "upper" and not r.amplified and r.epsilon_lower is None
    assert any("research" in note for note in r.notes)
    assert r.epsilon == pytest.approx(conversions.gdp_epsilon(r.sensitivity / 3.0, DELTA), rel=1e-8)


def test_replace_one_doubles_the_unamplified_sensitivity():
    kw = dict(mechanism="bsr", bands=4, sampling="cyclic", noise_multiplier=3.0, delta=DELTA, **RUN)
    assert mf_epsilon(neighboring="replace_one", **kw).sensitivity == pytest.approx(2 * mf_epsilon(**kw).sensitivity)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(mechanism="bandmf", bands=4, strategy=np.ones(5) / 5**0.5), "bands=4 does not match the strategy"),
        (dict(mechanism="bandmf", bands=300), "exceeds the number of groups"),
        (dict(mechanism="bandmf", bands=3000), "exceeds the number of steps"),
        (dict(mechanism="bandmf"), "needs bands"),
        (dict(mechanism="matrix", strategy=np.eye(5)), "T = 2344 steps"),
        (dict(mechanism="nu-ftrl", nu=0.1), "needs bands"),
        (dict(mechanism="nu-ftrl", nu=0.1, bands=4), "does not match the strategy, which has 2344 bands"),
        (dict(mechanism="bandmf", bands=4, neighboring="replace_one"), "replace_one' is not defined"),
        (dict(mechanism="fancy", bands=4), "mechanism must be one of"),
        (dict(mechanism="bandmf", bands=4, min_separation=3), "min_separation applies"),
    ],
)
def test_bad_input_is_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        mf_epsilon(sampling="cyclic-poisson", noise_multiplier=1.0, delta=DELTA, **RUN, **kwargs)
    assert "\n" not in str(err.value)


def test_unamplified_schemas_need_the_coefficients():
    with pytest.raises(ValueError, match="needs the strategy's coefficients"):
        mf_epsilon(mechanism="bandmf", bands=4, sampling="cyclic", noise_multiplier=1.0, delta=DELTA, **RUN)
    with pytest.raises(ValueError, match="needs min_separation"):
        mf_epsilon(mechanism="bsr", bands=4, sampling="min-sep", noise_multiplier=1.0, delta=DELTA, **RUN)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

SMALL = dict(dataset_size=2000, batch_size=50)


@settings(max_examples=12, deadline=None)
@given(
    sigma=st.floats(0.6, 4.0),
    bands=st.sampled_from([1, 2, 4, 8]),
    epochs=st.integers(1, 6),
    coefs=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=8),
)
def test_amplified_bound_properties(sigma, bands, epochs, coefs):
    c = np.sort(np.asarray(coefs))[::-1][:bands]
    c /= np.linalg.norm(c)
    kw = dict(mechanism="bandmf", bands=bands, strategy=c, delta=DELTA, **SMALL)
    r = mf_epsilon(sampling="cyclic-poisson", noise_multiplier=sigma, epochs=epochs, **kw)
    assert r.epsilon_lower <= r.epsilon
    assert mf_epsilon(sampling="cyclic-poisson", noise_multiplier=sigma * 1.2, epochs=epochs, **kw).epsilon <= (
        r.epsilon
    )
    assert mf_epsilon(sampling="cyclic-poisson", noise_multiplier=sigma, epochs=epochs + 1, **kw).epsilon >= r.epsilon
    # amplified ≤ unamplified: the same participations (b apart, at most ⌈T/b⌉) without the sampling
    worst = mf_epsilon(sampling="min-sep", min_separation=bands, noise_multiplier=sigma, epochs=epochs, **kw)
    assert r.epsilon <= worst.epsilon * (1 + 1e-9)


@settings(max_examples=5, deadline=None)
@given(target=st.floats(0.5, 8.0), sampling=st.sampled_from(["cyclic-poisson", "cyclic", "min-sep", "shuffle"]))
def test_calibration_never_overshoots(target, sampling):
    extra = {"min_separation": 10} if sampling == "min-sep" else {}
    kw = dict(mechanism="bsr", bands=4, sampling=sampling, delta=DELTA, epochs=3, **SMALL, **extra)
    r = mf_noise_multiplier(target_epsilon=target, **kw)
    assert r.epsilon <= target and r.target_epsilon == target
    again = mf_epsilon(noise_multiplier=r.noise_multiplier, **kw)
    assert again.epsilon <= target
    if r.noise_multiplier > 0.05:  # minimal up to the solver's relative 1e-3
        assert mf_epsilon(noise_multiplier=r.noise_multiplier / (1 + 1e-3), **kw).epsilon > target * (1 - 1e-3)


def test_unamplified_sensitivity_matches_the_core():
    s = mf.bsr_strategy(4, 2344)
    r = mf_epsilon(
        mechanism="bsr", bands=4, sampling="min-sep", min_separation=50, noise_multiplier=2.0, delta=DELTA, **RUN
    )
    assert r.sensitivity == pytest.approx(mf.minsep_sensitivity(s, min_separation=50).value, rel=1e-14)


# --------------------------------------------------------------------------------------------
# The event and the spec type: the same numbers through the Accountant
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(mechanism="bandmf", bands=8, sampling="cyclic-poisson"),
        dict(mechanism="bandmf", bands=7, sampling="cyclic-poisson"),
        dict(mechanism="bsr", bands=8, sampling="min-sep", min_separation=40),
        dict(mechanism="bsr", bands=8, sampling="cyclic"),
    ],
)
def test_the_event_accounts_like_mf_epsilon(kwargs):
    from dplens.accountant.compose import Accountant
    from dplens.accountant.mf_accounting import MfTraining

    event = MfTraining(noise_multiplier=1.0, epochs=3, **SMALL, **kwargs)
    result = Accountant().compose(event).epsilon_result(DELTA, method="pld")
    direct = mf_epsilon(noise_multiplier=1.0, delta=DELTA, epochs=3, **SMALL, **kwargs)
    # μ-GDP schemas: the Accountant's PLD engine discretises the Gaussian (pessimistically), mf_epsilon is exact
    assert direct.epsilon * (1 - 1e-12) <= result.epsilon <= direct.epsilon * (1 + 1e-4)
    if direct.epsilon_lower is None:
        assert result.epsilon_lower is None
    else:
        assert result.epsilon_lower <= direct.epsilon_lower * (1 + 1e-6)
    assert (event.lower_bound_events() is None) == (direct.bound == "certified")


def test_the_spec_type_and_its_refusals():
    from dplens.spec import parse_spec

    table = dict(
        type="matrix_factorization", mechanism="bandmf", bands=8, sampling="cyclic-poisson", noise_multiplier=1.0, **RUN
    )
    spec = parse_spec({"mechanism": [table]})
    direct = mf_epsilon(
        mechanism="bandmf", bands=8, sampling="cyclic-poisson", noise_multiplier=1.0, delta=DELTA, **RUN
    )
    assert spec.accountant().epsilon(DELTA, method="pld") == pytest.approx(direct.epsilon, rel=1e-9)
    with pytest.raises(ValueError, match="needs MMCC"):
        parse_spec({"mechanism": [{**table, "sampling": "poisson"}]})
    with pytest.raises(ValueError, match=r"unknown|allowed"):
        parse_spec({"mechanism": [{**table, "strategy_file": "x.npy"}]})


@pytest.mark.slow  # about 17 allocation PLDs at small noise: 10-40 s on 2 shared cores
def test_balls_and_bins_calibration_uses_the_reported_bound_and_never_overshoots():
    kw = dict(mechanism="bsr", bands=4, sampling="balls-and-bins", delta=DELTA, epochs=3, **SMALL)
    r = mf_noise_multiplier(target_epsilon=2.0, **kw)
    assert r.epsilon <= 2.0 and mf_epsilon(noise_multiplier=r.noise_multiplier, **kw).epsilon <= 2.0
    closed = conversions.gdp_mu(2.0, DELTA)  # the unamplified calibration: sigma = sensitivity / mu*
    assert r.noise_multiplier < r.sensitivity / closed
    assert mf_epsilon(noise_multiplier=r.noise_multiplier / (1 + 1e-3), **kw).epsilon > 2.0 * (1 - 1e-3)
