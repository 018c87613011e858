"""The audit's confidence corner lies above the certified trade-off curve (read-only use of the audit engine).

An audit's operating point has FPR and FNR upper limits that hold together with probability ≥ 1 − α (its
confidence); the true (FPR, FNR) of its test lies on or above the mechanism's trade-off curve, and the curve is
non-increasing, so the corner (FPR upper limit, FNR upper limit) lies on or above the curve in all but a fraction α
of seeds. In attack terms: 1 − FNR upper limit ≤ the certified TPR bound at the FPR upper limit. The curve is the
accountant's (``attack_risk`` on the mechanism's event: its relation and its sampler), the lower envelope of both
directions. A mechanism audited against another mechanism's curve (too little noise) breaks it in most seeds.
"""

from __future__ import annotations

import pytest
from scipy import stats

from dplens.accountant.compose import Accountant
from dplens.accountant.risk import attack_risk
from dplens.auditing.games import audit
from dplens.mechanisms.additive import (
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponseMechanism,
    SubsampledGaussianMechanism,
)

CONFIDENCE = 0.95
TRIALS = 4000


def _breaks(mechanism, curve_event, seeds) -> int:
    """In how many seeds the audit's corner lies strictly below the certified curve of ``curve_event``."""
    corners = []
    for seed in seeds:
        result = audit(
            mechanism, trials=TRIALS, delta=0.0, claimed_epsilon=1.0, confidence=CONFIDENCE, seed=seed, estimates=False
        )
        corners.append((result.operating_point["fpr_upper"], result.operating_point["fnr_upper"]))
    fprs = tuple(sorted({fpr for fpr, _ in corners}))
    risk = attack_risk(Accountant().compose(curve_event), fprs=fprs)
    return sum(1.0 - fnr > risk.tpr(fpr) + 1e-12 for fpr, fnr in corners)


def _allowed(runs: int) -> int:
    """Breaks consistent with α = 1 − confidence: the binomial(runs, α) quantile at 1 − 1e-4."""
    return int(stats.binom.ppf(1 - 1e-4, runs, 1 - CONFIDENCE))


MECHANISMS = [
    pytest.param(GaussianMechanism(noise_multiplier=1.0), id="gaussian"),
    pytest.param(LaplaceMechanism(scale=1.0), id="laplace"),
    pytest.param(SubsampledGaussianMechanism(noise_multiplier=0.8, sampling_rate=0.2, steps=2), id="subsampled"),
    pytest.param(RandomizedResponseMechanism(epsilon=1.0), id="randomized_response"),
]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_audit_corner_is_above_the_certified_curve(mechanism):
    runs = 25
    breaks = _breaks(mechanism, mechanism.event, range(runs))
    assert breaks <= _allowed(runs)


def test_a_curve_with_too_little_noise_is_broken_by_the_audit():
    # the audited Gaussian has σ = 0.5; the curve is σ = 1's: its guarantee is false, and the corner shows it
    runs = 10
    leaky, claimed = GaussianMechanism(noise_multiplier=0.5), GaussianMechanism(noise_multiplier=1.0).event
    breaks = _breaks(leaky, claimed, range(runs))
    assert breaks > _allowed(runs)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_audit_corner_rate_over_many_seeds(mechanism):
    runs = 400
    breaks = _breaks(mechanism, mechanism.event, range(1000, 1000 + runs))
    assert breaks <= _allowed(runs)
