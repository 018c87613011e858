"""The Dirac-canary game on a BandMF training: its exact LLR reproduces the certified PLD, and audits run on it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dplens
from dplens.accountant import pld
from dplens.accountant.mf_accounting import MfTraining
from dplens.mechanisms.registry import mechanism_for_event
from dplens.spec import parse_spec

TABLE = dict(
    mechanism="bandmf",
    bands=4,
    coefficients=[0.8, 0.4, 0.4, 0.2],
    sampling="cyclic-poisson",
    noise_multiplier=1.0,
    dataset_size=400,
    batch_size=20,
    epochs=2,
)


def test_the_canary_llr_reproduces_the_certified_privacy_profile():
    event = MfTraining(**TABLE)
    mechanism = mechanism_for_event(event)
    n = 60_000
    losses = mechanism.log_likelihood_ratio(mechanism.sample(1.0, n, np.random.default_rng(0)), 1.0, 0.0)
    for eps in (0.5, 1.5):
        values = -np.expm1(np.minimum(eps - losses, 0.0))
        exact = pld.pld_delta([(event, 1)], eps)
        assert abs(values.mean() - exact.delta) <= 5 * values.std() / math.sqrt(n) + (exact.delta - exact.delta_lower)


def test_the_noise_is_correlated_and_decodes_to_the_strategy_space():
    mechanism = mechanism_for_event(MfTraining(**TABLE))
    g = mechanism.sample(0.0, 20_000, np.random.default_rng(1))
    cov = np.cov(g[:, :6].T)
    assert abs(cov[0, 1]) > 0.1  # the noise of consecutive steps is correlated (B = C^-1 is not diagonal)
    y = g @ mechanism._c.T
    np.testing.assert_allclose(np.cov(y[:, :6].T), np.eye(6), atol=0.05)  # C g̃ = z ~ N(0, I) when absent


def test_audit_is_consistent_with_the_certified_epsilon_and_catches_a_false_claim():
    spec = parse_spec({"mechanism": [{"type": "matrix_factorization", **TABLE}]})
    epsilon = spec.accountant().epsilon(1e-3, method="pld")
    honest = dplens.audit(spec, trials=20_000, delta=1e-3, seed=0)
    assert honest.verdict.value in ("CONSISTENT", "INCONCLUSIVE") and honest.epsilon_lower_bound <= epsilon
    false = dplens.audit(spec, trials=20_000, delta=1e-3, seed=0, claim=(0.2, 1e-3))
    assert false.verdict.value == "VIOLATION" and false.epsilon_lower_bound > 0.2


def test_the_game_refuses_what_it_cannot_simulate():
    with pytest.raises(ValueError, match="needs the strategy's coefficients"):
        mechanism_for_event(MfTraining(**{**TABLE, "coefficients": None}))
    with pytest.raises(ValueError, match="cyclic-poisson"):
        mechanism_for_event(MfTraining(**{**TABLE, "sampling": "cyclic"}))
