"""The training audit's threshold selection (issue 46): it reads only the pilot, its rate bounds cover the true rates
at the level they claim, and it finds a separated tail that a grid of bulk quantiles at the pilot's size misses."""

from __future__ import annotations

import numpy as np
from scipy import stats

from dplens.auditing import bounds
from dplens.auditing.training import audit, harness
from dplens.auditing.training.check import check_dp_sgd
from dplens.auditing.training.declared import Declaration
from dplens.auditing.training.framework_free import reference_step

DECL = Declaration(noise_multiplier=1.0, max_grad_norm=1.0, batch_size=50, dataset_size=5000, steps=3, delta=1e-5)
EXACT = harness.Statistic(construction=harness.VARIABLE, sigma=1.0, q=0.01)  # the score is read as the exact ratio
PROXY = harness.Statistic(construction=harness.FIXED, sigma=1.0, q=0.01, centre=np.zeros(3))  # a proxy score


def _runs(pilot: np.ndarray, counted: np.ndarray, statistic: harness.Statistic) -> audit.TrainingRuns:
    """Training runs whose every-step scores are ``pilot`` and ``counted`` (2 × trainings: D, then D′)."""

    def table(scores: np.ndarray) -> np.ndarray:
        out = np.zeros((2, scores.shape[1], len(harness.COLUMNS)))
        out[:, :, 0] = scores
        return out

    return audit.TrainingRuns(counted=table(counted), pilot=table(pilot), statistic=statistic, layout=None)


def _bound(pilot, counted, statistic, significance=0.05):
    return audit.audit_bound(
        _runs(pilot, counted, statistic), DECL, claimed=1.0, significance=significance, observe="every"
    )


def _separated_tail(rng: np.random.Generator, n: int) -> np.ndarray:
    """D: 99.2 % N(0, 1) and a separated tail of 0.8 % at N(8, 0.1²); D′: N(0, 1)."""
    d = np.where(rng.random(n) < 0.008, rng.normal(8.0, 0.1, n), rng.normal(0.0, 1.0, n))
    return np.stack([d, rng.normal(0.0, 1.0, n)])


def test_the_selection_finds_a_separated_tail_that_bulk_quantiles_miss():
    # The tail holds 0.4 % of the pooled pilot, above its top bulk quantile (1/97): the old grid of 96 quantiles,
    # judged at the pilot's size, chose a bulk threshold (2.46 here: 317 counted false positives, a bound of 0.64);
    # a threshold in the gap, whose counted false positives are about 0, gives 4.13.
    rng = np.random.default_rng(5)
    pilot, counted = _separated_tail(rng, 20000), _separated_tail(rng, 50000)
    result = _bound(pilot, counted, PROXY)
    assert result.bound["false_positives"] <= 2 and 3.0 < result.bound["threshold"] < 7.6, result.bound
    assert result.epsilon_lower_bound > 3.5, result.bound
    assert result.bound["selection"]["rates"] == "the pilot's counts, projected to the counts"
    # Declared the exact ratio, these scores are not one (the pilot's calibration test rejects it): the counts decide.
    declared = _bound(pilot, counted, EXACT)
    assert "not the exact likelihood ratio" in declared.bound["selection"]["rates"]
    assert declared.epsilon_lower_bound == result.epsilon_lower_bound


def test_the_selection_reads_only_the_pilot():
    rng = np.random.default_rng(6)
    pilot = _separated_tail(rng, 2000)
    first = _bound(pilot, _separated_tail(rng, 10000), EXACT)
    second = _bound(pilot, rng.normal(0.0, 1.0, (2, 10000)), EXACT)  # other counted trainings: the same choice
    assert first.bound["selection"] == second.bound["selection"]
    assert first.bound["threshold"] == second.bound["threshold"] == first.bound["selection"]["threshold"]
    scores = np.unique(pilot)
    between = np.searchsorted(scores, first.bound["threshold"])  # midway between two consecutive pilot scores
    assert scores[between - 1] < first.bound["threshold"] < scores[between]


def test_the_rate_bounds_at_the_chosen_threshold_cover_the_true_rates():
    # Gaussian shift by mu: the exact log-likelihood ratio L = mu x - mu^2/2 is N(+-mu^2/2, mu^2) under D / D'; the
    # true rates at the chosen threshold are closed forms. Both rate bounds must hold in >= 1 - alpha of the runs,
    # and then the bound is at most the mechanism's epsilon at delta.
    mu, alpha, runs, pilot_n, counted_n = 1.5, 0.2, 400, 200, 1000
    rng = np.random.default_rng(7)
    epsilon = float(bounds.conversions.gdp_epsilon(mu, DECL.delta))

    def draws(n):
        return np.stack([rng.normal(mu * mu / 2, mu, n), rng.normal(-mu * mu / 2, mu, n)])

    missed = above = 0
    for _ in range(runs):
        result = _bound(draws(pilot_n), draws(counted_n), EXACT, significance=alpha)
        t = result.bound["threshold"]
        fnr, fpr = stats.norm.cdf(t, mu * mu / 2, mu), stats.norm.sf(t, -mu * mu / 2, mu)
        missed += fnr > result.bound["fnr_upper"] or fpr > result.bound["fpr_upper"]
        above += result.epsilon_lower_bound > epsilon
    assert stats.binomtest(missed, runs, alpha, alternative="greater").pvalue > 0.01, missed
    assert above <= missed


def test_a_correct_step_is_not_flagged_by_the_audit():
    # The reference step at the sizes of the implementation checks' tests: the bound stays below the claim.
    for seed in range(3):
        result = check_dp_sgd(
            reference_step(1.0, 1.0, 50), noise_multiplier=1.0, max_grad_norm=1.0, batch_size=50, dataset_size=500,
            steps=3, delta=1e-5, trials=300, seed=seed,
        )  # fmt: skip
        assert result.audit.epsilon_lower_bound <= result.claimed_epsilon, result.summary()
        assert result.audit.verdict == "PASS" and "importance-weighted" in result.audit.bound["selection"]["rates"]
