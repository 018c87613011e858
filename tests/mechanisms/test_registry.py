"""Spec / event → runnable mechanism: every auditable spec type maps to a mechanism whose event has the spec's ε,
self-composition and composition add log-likelihood ratios, and types without a mechanism are refused by name."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method
from dplens.mechanisms.additive import (
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponseMechanism,
    SubsampledGaussianMechanism,
)
from dplens.mechanisms.registry import MAX_REPEATS, ProductMechanism, Repeated, mechanism_for_event, mechanism_from_spec
from dplens.spec import parse_spec, spec_types

DELTA = 1e-5
P_MIN = 1e-3

# Spec tables of every type that has a runnable mechanism (several variants where the parameters differ in kind).
RUNNABLE = {
    "gaussian": [
        {"noise_multiplier": 1.5},
        {"noise_multiplier": 1.5, "count": 3},
        {"noise_multiplier": 0.9, "neighboring": "replace_one"},
    ],
    "laplace": [{"scale": 2.0}, {"epsilon": 0.5, "count": 4}],
    "randomized_response": [{"epsilon": 1.0}, {"epsilon": 0.7, "num_values": 5, "count": 3}],
    "poisson_subsampled_gaussian": [
        {"noise_multiplier": 1.0, "sampling_rate": 0.1, "steps": 5},
        {"noise_multiplier": 0.8, "sampling_rate": 0.02, "count": 50},
        {"noise_multiplier": 1.0, "sampling_rate": 0.1, "steps": 5, "neighboring": "zero_out"},
    ],
    "dp_sgd_training": [
        {"noise_multiplier": 1.0, "sampling_rate": 0.1, "steps": 5},
        {"noise_multiplier": 0.8, "sampling_rate": 0.02, "steps": 50, "clip_norm": 0.5, "dataset_size": 500},
    ],
    "gaussmix": [{"k": 3, "gamma": 50.0}, {"k": 2, "sigma": 3.0, "row_bound": 1.5, "lambda_min_bound": 0.5}],
    "feature_dp_sgd": [
        {"noise_multiplier": 1.0, "sampling_rate": 0.1, "steps": 5},
        {"noise_multiplier": 1.0, "sampling_rate": 0.1, "steps": 5, "count": 2},
    ],
    "corrdp_laplace": [{"epsilon": 0.5}, {"epsilon": 0.5, "count": 2}],
    # Issue 48: a BandMF training under cyclic Poisson, audited on a Dirac canary (its correlated noise simulated).
    "matrix_factorization": [
        {
            "mechanism": "bandmf",
            "bands": 4,
            "coefficients": [0.8, 0.4, 0.4, 0.2],
            "sampling": "cyclic-poisson",
            "noise_multiplier": 1.0,
            "dataset_size": 400,
            "batch_size": 20,
            "epochs": 2,
        }
    ],
    "dp_ftrl": [
        {"nu": 0.5, "noise_multiplier": 2.0, "steps": 8},
        {"nu": 0.3, "noise_multiplier": 3.0, "steps": 12, "epochs": 2, "count": 2},
    ],
}
# Spec types the accountant handles but no runnable mechanism exists for: (table, the event type named in the error).
NOT_RUNNABLE = {
    "modified_gaussmix": ({"k": 3, "gamma": 50.0, "eta": 0.5}, "ModifiedGaussMix"),
    "bcdp_mean": ({"delta": [0.1, 0.2], "epsilon": 1.0, "q": 0.5}, "CoordinateDpRelease"),
    "coordinate_dp_release": ({"coordinate_dp": [0.5, 0.5]}, "CoordinateDpRelease"),
    # Issue 17: accounting-only types (no sampler to audit).
    "zcdp": ({"rho": 0.1}, "ZcdpMechanism"),
    "mixture_of_gaussians": (
        {"standard_deviation": 1.0, "sensitivities": [0, 1], "sampling_probs": [0.5, 0.5]},
        "MixtureOfGaussians",
    ),
    "single_epoch_tree_aggregation": ({"noise_multiplier": 1.0, "step_counts": 7}, "SingleEpochTreeAggregation"),
    "truncated_subsampled_gaussian": (
        {"dataset_size": 100, "sampling_rate": 0.1, "truncated_batch_size": 12, "noise_multiplier": 1.0},
        "TruncatedSubsampledGaussian",
    ),
    "sampled_without_replacement_gaussian": (
        {"noise_multiplier": 1.0, "sample_size": 10, "dataset_size": 100},
        "SampledWithoutReplacement",
    ),
    "sampled_with_replacement_gaussian": (
        {"noise_multiplier": 1.0, "sample_size": 10, "dataset_size": 100},
        "SampledWithReplacement",
    ),
    "discrete_laplace": ({"noise_parameter": 0.5}, "DiscreteLaplace"),
    "discrete_gaussian": ({"sigma": 2.0}, "DiscreteGaussian"),
    "approx_dp": ({"epsilon": 1.0, "delta": 1e-6}, "ApproxDp"),
    "exponential_mechanism": ({"epsilon": 1.0}, "ExponentialMechanism"),
    "report_noisy_max": ({"epsilon": 1.0}, "ReportNoisyMax"),
    "permute_and_flip": ({"epsilon": 1.0}, "PermuteAndFlip"),
    "repeat_and_select": (
        {"mean": 2, "shape": 1, "mechanism": {"type": "gaussian", "noise_multiplier": 3.0}},
        "RepeatAndSelect",
    ),
    "group_privacy": ({"group_size": 2, "mechanism": {"type": "gaussian", "noise_multiplier": 3.0}}, "GroupPrivacy"),
    # Issue 36: a training under its batch sampler, and balls-and-bins epochs (audited through an Opacus training).
    "dp_sgd": (
        {"noise_multiplier": 2.0, "dataset_size": 200, "batch_size": 20, "epochs": 1, "sampling": "shuffle"},
        "DpSgdRun",
    ),
    "random_allocation": ({"noise_multiplier": 2.0, "steps": 10}, "RandomAllocation"),
    # Issue 49: adaptive clipping (the clipped-count query with the gradient noise).
    "adaptive_clipping": (
        {"noise_multiplier": 1.1, "count_noise": 12.8, "sampling_rate": 0.01, "steps": 10},
        "AdaptiveClipping",
    ),
}


def spec_of(type_name: str, table: dict, **top) -> object:
    return parse_spec({"mechanism": [{"type": type_name, **table}], **top})


def rdp_epsilon(accountant: Accountant) -> float:
    return accountant.epsilon(DELTA, method=Method.RDP)


def test_every_spec_type_is_classified():
    # A new spec type must be added to RUNNABLE or NOT_RUNNABLE (and so be tested) here.
    assert set(spec_types()) == set(RUNNABLE) | set(NOT_RUNNABLE)


CASES = [(name, table) for name, tables in RUNNABLE.items() for table in tables]


@pytest.mark.parametrize(("type_name", "table"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_spec_mechanism_has_the_spec_epsilon(type_name, table):
    spec = spec_of(type_name, table)
    mechanism = mechanism_from_spec(spec)
    expected = rdp_epsilon(spec.accountant())
    got = rdp_epsilon(Accountant().compose(mechanism.event))
    assert math.isfinite(expected) and got == pytest.approx(expected, rel=1e-9)
    # and it runs: vectorised draws on its worst-case pair, scored by a finite exact LLR
    pair = mechanism.worst_case_pair()
    outputs = mechanism.sample(pair.data, 16, np.random.default_rng(0))
    losses = np.asarray(mechanism.log_likelihood_ratio(outputs, pair.data, pair.neighbour))
    assert losses.shape == (16,) and np.all(np.isfinite(losses))


@pytest.mark.parametrize("type_name", sorted(NOT_RUNNABLE))
def test_types_without_mechanism_are_refused_by_name(type_name):
    table, event_type = NOT_RUNNABLE[type_name]
    with pytest.raises(ValueError, match=event_type):
        mechanism_from_spec(spec_of(type_name, table))


@pytest.mark.parametrize(
    "event",
    [
        ev.NoOp(),
        ev.NonPrivate(),
        ev.PoissonSampled(sampling_rate=0.1, event=ev.Laplace(noise_multiplier=1.0)),
        ev.SampledWithoutReplacement(sample_size=10, dataset_size=100, event=ev.Gaussian(noise_multiplier=1.0)),
    ],
    ids=lambda e: type(e).__name__,
)
def test_events_without_mechanism_are_refused_by_name(event):
    with pytest.raises(ValueError, match=type(event).__name__):
        mechanism_for_event(event)
    # also inside a composition, before anything runs
    with pytest.raises(ValueError, match=type(event).__name__):
        mechanism_for_event(ev.Composed(events=(ev.Gaussian(noise_multiplier=1.0), event)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="event"):
        mechanism_for_event("gaussian")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="count"):
            mechanism_for_event(ev.Laplace(noise_multiplier=1.0), bad)
    with pytest.raises(ValueError, match="count"):
        Repeated(LaplaceMechanism(scale=1.0), MAX_REPEATS + 1)
    zero = parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 1.0, "count": 0}]})
    with pytest.raises(ValueError, match="count"):
        mechanism_from_spec(zero)


# --------------------------------------------------------------------------------------------
# Self-composition and composition
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base",
    [
        LaplaceMechanism(scale=0.8),
        RandomizedResponseMechanism(epsilon=0.9, num_values=3),
        SubsampledGaussianMechanism(noise_multiplier=1.0, sampling_rate=0.3, steps=2),
        GaussianMechanism(noise_multiplier=1.0),
    ],
    ids=lambda m: type(m).__name__,
)
def test_repeated_llrs_add_up(base):
    count, n = 4, 200
    repeated = Repeated(base, count)
    pair = repeated.worst_case_pair()
    assert pair.data == base.worst_case_pair().data and f"{count} releases" in pair.description
    outputs = repeated.sample(pair.data, n, np.random.default_rng(1))
    single = np.asarray(base.sample(pair.data, 1, np.random.default_rng(0)))
    assert outputs.shape == (n, count, *single.shape[1:])
    per_release = [base.log_likelihood_ratio(outputs[:, j], pair.data, pair.neighbour) for j in range(count)]
    np.testing.assert_allclose(
        repeated.log_likelihood_ratio(outputs, pair.data, pair.neighbour), np.sum(per_release, axis=0), rtol=1e-12
    )
    assert repeated.event == ev.SelfComposed(event=base.event, count=count)
    assert rdp_epsilon(Accountant().compose(repeated.event)) == pytest.approx(
        rdp_epsilon(Accountant().compose(base.event, count)), rel=1e-9
    )
    assert np.shape(repeated.release(pair.data, np.random.default_rng(2))) == outputs.shape[1:]


def test_product_llrs_add_up():
    replace = ev.NeighboringRelation.REPLACE_ONE  # randomized response is replace-one; a ledger has one relation
    parts = (
        GaussianMechanism(noise_multiplier=1.2, neighboring=replace),
        LaplaceMechanism(scale=1.5, neighboring=replace),
        RandomizedResponseMechanism(epsilon=0.5, num_values=2),
    )
    product = ProductMechanism(parts)
    pair = product.worst_case_pair()
    assert pair.data == tuple(p.worst_case_pair().data for p in parts)
    outputs = product.sample(pair.data, 300, np.random.default_rng(3))
    assert isinstance(outputs, tuple) and [o.shape for o in outputs] == [(300,)] * 3
    expected = sum(
        p.log_likelihood_ratio(o, d, e) for p, o, d, e in zip(parts, outputs, pair.data, pair.neighbour, strict=True)
    )
    np.testing.assert_allclose(product.log_likelihood_ratio(outputs, pair.data, pair.neighbour), expected)
    # the event is the composition: the accountant sees the same ε as composing the parts one by one
    one_by_one = Accountant()
    for p in parts:
        one_by_one.compose(p.event)
    assert rdp_epsilon(Accountant().compose(product.event)) == pytest.approx(rdp_epsilon(one_by_one), rel=1e-9)
    assert product.output_size() == 3


def test_repeated_product_from_a_composed_event():
    # Composed with count > 1 (and SelfComposed(Composed)) is a Repeated ProductMechanism with tuple outputs
    composed = ev.Composed(events=(ev.Gaussian(noise_multiplier=1.0), ev.Laplace(noise_multiplier=1.0)))
    for mechanism in (mechanism_for_event(composed, 3), mechanism_for_event(ev.SelfComposed(event=composed, count=3))):
        assert isinstance(mechanism, Repeated) and isinstance(mechanism.mechanism, ProductMechanism)
        pair = mechanism.worst_case_pair()
        outputs = mechanism.sample(pair.data, 50, np.random.default_rng(4))
        assert isinstance(outputs, tuple) and [o.shape for o in outputs] == [(50, 3), (50, 3)]
        gauss, laplace = mechanism.mechanism.parts
        (dg, dl), (ng, nl) = pair.data, pair.neighbour
        expected = sum(
            gauss.log_likelihood_ratio(outputs[0][:, j], dg, ng)
            + laplace.log_likelihood_ratio(outputs[1][:, j], dl, nl)
            for j in range(3)
        )
        np.testing.assert_allclose(mechanism.log_likelihood_ratio(outputs, pair.data, pair.neighbour), expected)
        release = mechanism.release(pair.data, np.random.default_rng(5))
        assert isinstance(release, tuple) and [np.shape(r) for r in release] == [(3,), (3,)]
        assert rdp_epsilon(Accountant().compose(mechanism.event)) == pytest.approx(
            rdp_epsilon(Accountant().compose(composed, 3)), rel=1e-9
        )
        assert mechanism.output_size() == 6


@pytest.mark.parametrize(("sigma", "count"), [(1.0, 4), (2.0, 9), (0.7, 2)])
def test_gaussian_count_is_sigma_over_root_count(sigma, count):
    mechanism = mechanism_for_event(ev.Gaussian(noise_multiplier=sigma), count)
    assert isinstance(mechanism, GaussianMechanism)
    assert mechanism.noise_multiplier == pytest.approx(sigma / math.sqrt(count), rel=1e-12)
    # same LLR distribution as count independent releases at σ: both N(μ²/2, μ²) with μ = √count/σ
    explicit = Repeated(GaussianMechanism(noise_multiplier=sigma), count)
    n = 30_000
    fast = mechanism.log_likelihood_ratio(mechanism.sample(1.0, n, np.random.default_rng(6)), 1.0, 0.0)
    slow = explicit.log_likelihood_ratio(explicit.sample(1.0, n, np.random.default_rng(7)), 1.0, 0.0)
    assert stats.ks_2samp(fast, slow).pvalue > P_MIN
    mu = math.sqrt(count) / sigma
    assert stats.kstest(fast, stats.norm(mu**2 / 2, mu).cdf).pvalue > P_MIN
    assert stats.kstest(slow, stats.norm(mu**2 / 2, mu).cdf).pvalue > P_MIN
    # and the same ε
    assert rdp_epsilon(Accountant().compose(mechanism.event)) == pytest.approx(
        rdp_epsilon(Accountant().compose(ev.Gaussian(noise_multiplier=sigma), count)), rel=1e-9
    )


def test_spec_composition_is_a_product_in_order():
    spec = parse_spec(
        {
            "mechanism": [
                {"type": "gaussian", "noise_multiplier": 2.0, "count": 4},
                {"type": "laplace", "scale": 3.0, "count": 0},  # skipped
                {"type": "poisson_subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 0.2, "steps": 3},
                {"type": "laplace", "epsilon": 0.25, "count": 2},
            ]
        }
    )
    mechanism = mechanism_from_spec(spec)
    assert isinstance(mechanism, ProductMechanism)
    kinds = [type(p) for p in mechanism.parts]
    assert kinds == [GaussianMechanism, SubsampledGaussianMechanism, Repeated]
    assert mechanism.parts[0].noise_multiplier == pytest.approx(1.0)  # 2/√4
    assert rdp_epsilon(Accountant().compose(mechanism.event)) == pytest.approx(rdp_epsilon(spec.accountant()), rel=1e-9)
    pair = mechanism.worst_case_pair()
    outputs = mechanism.sample(pair.data, 20, np.random.default_rng(8))
    assert [np.shape(o) for o in outputs] == [(20,), (20, 3), (20, 2)]
    assert mechanism.output_size() == 1 + 3 + 2


@pytest.mark.parametrize("second", ["dp_ftrl", "randomized_response"])
def test_neighbouring_relation_is_kept(second):
    # A zero-out spec: the mechanism's event must state the spec's relation, or the accountant refuses the mix.
    tables = {
        "dp_ftrl": {"type": "dp_ftrl", "nu": 0.5, "noise_multiplier": 2.0, "steps": 8},
        "randomized_response": {"type": "randomized_response", "epsilon": 1.0},
    }
    spec = parse_spec(
        {
            "neighboring": "zero_out",
            "mechanism": [
                {"type": "poisson_subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 0.1, "steps": 3},
                tables[second],
            ],
        }
    )
    mechanism = mechanism_from_spec(spec)
    assert mechanism.parts[0].neighboring is ev.NeighboringRelation.REPLACE_SPECIAL
    assert rdp_epsilon(Accountant().compose(mechanism.event)) == pytest.approx(rdp_epsilon(spec.accountant()), rel=1e-9)
