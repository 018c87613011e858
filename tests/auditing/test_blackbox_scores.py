"""Black-box score families (issue 23): joint frequency, sentinel features, learned classifiers, the operating point,
the Poissonised conditional bound, the pilot budget, query-vector pairs, the float check's scope."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from dplens.auditing import target_game as tg
from dplens.auditing.blackbox import operating, poisson
from dplens.auditing.blackbox.features import fit_feature_map
from dplens.auditing.blackbox.frequency import row_hashes
from dplens.auditing.blackbox.reachability import REACH_RANK, ReachBinner
from dplens.auditing.bounds import RateCounts
from dplens.auditing.floats import SamplerModel
from dplens.auditing.pairs import query_vector_patterns, search_query_vector
from dplens.auditing.targets import TargetPair, as_target, batched

EPS_BIT = 0.5


@batched
def two_bit_rr(data, rng, size):
    """Randomized response on each of two bits (ε = 0.5 each): the whole output's largest ratio is e^{2·0.5}."""
    bits = np.asarray(data, dtype=np.int64)
    keep = rng.random((size, 2)) < math.exp(EPS_BIT) / (1 + math.exp(EPS_BIT))
    return np.where(keep, bits, 1 - bits)


@batched
def mixed_sentinel(data, rng, size):
    """A real answer or the sentinel −1000 ("aborted"); the abort probability carries the privacy loss:
    P[abort] = 0.5 on D, 0.5·e^{-1} on D′, the value is N(0, 1) either way (ε = log of the abort ratio = 1 at the
    sentinel; the rest has ratio (1 − 0.5e^{-1})/0.5 = 1.63 → ε = 0.49 on the other side)."""
    abort_p = 0.5 if data == 0 else 0.5 * math.exp(-1.0)
    value = np.round(rng.normal(0.0, 1.0, size), 3) + 0.0005  # never integral, never reachable from a query
    return np.where(rng.random(size) < abort_p, -1000.0, value)


@batched
def laplace_vector(data, rng, size):
    """Two coordinates with Laplace noise, rounded to 10⁻⁶ (no float leak); D′ shifts the first coordinate by 1."""
    x = np.asarray(data, dtype=float)
    return np.round(x + rng.laplace(0.0, 1.0, size=(size, 2)), 6)


# --------------------------------------------------------------------------------------------
# Frequency of whole outputs
# --------------------------------------------------------------------------------------------


def test_row_hashes_identify_rows():
    rows = np.array([[0.0, 1.0], [-0.0, 1.0], [1.0, 0.0], [np.nan, 1.0], [np.nan, 1.0]])
    h = row_hashes(rows)
    assert h[0] == h[1] and h[0] != h[2] and h[3] == h[4] and h[3] != h[0]


def test_joint_frequency_finds_the_whole_output_ratio():
    result = tg.audit_target(two_bit_rr, ([1, 1], [0, 0]), claim_epsilon=0.5, trials=40_000, seed=3)
    assert result.best_score.startswith("frequency ratio of whole outputs")
    # true ε of the pair = 2·0.5 (outputs (1,1) vs (0,0)); a valid bound stays below, a good score comes close
    assert 0.75 < result.epsilon_lower_bound <= 1.0
    assert result.verdict.value == "VIOLATION"  # ε ≥ 0.75 > 0.5 claimed


def test_joint_frequency_null_case_validity():
    """Over seeds, the bound exceeds the true ε = 1 no more often than α allows (20 runs: P[≥ 4 of 20] < 2 %)."""
    over = 0
    for seed in range(20):
        result = tg.audit_target(two_bit_rr, ([1, 1], [0, 0]), claim_epsilon=1.0, trials=3_000, seed=seed)
        over += result.epsilon_lower_bound > 1.0
    assert over <= 3


def test_identical_inputs_give_no_evidence():
    bounds = [
        tg.audit_target(two_bit_rr, ([1, 0], [1, 0]), claim_epsilon=0.1, trials=2_000, seed=s).epsilon_lower_bound
        for s in range(10)
    ]
    assert sum(b > 0 for b in bounds) <= 2


# --------------------------------------------------------------------------------------------
# Sentinels and learned classifiers
# --------------------------------------------------------------------------------------------


def test_feature_map_separates_sentinels_flags_and_values():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(2000, 3))
    values[:, 0] = np.where(rng.random(2000) < 0.3, -1000.0, values[:, 0])
    values[:, 1] = rng.integers(0, 2, 2000)  # a flag column
    values[::7, 2] = np.nan
    fmap = fit_feature_map(values)
    assert list(fmap.atoms[0]) == [-1000.0] and list(fmap.atoms[1]) == [0.0, 1.0] and fmap.nonfinite[2]
    assert list(fmap.real) == [0, 2] and fmap.pairs.size == 0  # columns 0 and 2 are not neighbours
    features = fmap(values)
    assert np.isfinite(features).all()
    assert features.shape == (2000, 1 + 1 + 1 + 2)  # indicators −1000, 1 (0 is implied), NaN; two real columns
    assert np.all(features[:, 0] == (values[:, 0] == -1000.0))


def test_mixed_outputs_use_sentinel_features():
    # Scalar outputs with a sentinel: the histogram and the logistic score see the abort atom (true ε = 1).
    result = tg.audit_target(mixed_sentinel, (0, 1), claim_epsilon=1.0, trials=40_000, seed=0)
    assert result.float_evidence == () and result.epsilon_lower_bound > 0.9
    assert any("atom indicators" in s["name"] for s in result.scores)
    # validity over seeds: above the truth in at most ~α of the runs (P[≥ 4 of 20] < 2 % at α = 0.05)
    over = sum(
        tg.audit_target(mixed_sentinel, (0, 1), claim_epsilon=1.0, trials=5_000, seed=s).epsilon_lower_bound > 1.0
        for s in range(20)
    )
    assert over <= 3


@pytest.mark.parametrize("score", [tg.LogisticRatio(), tg.BoostedTrees()], ids=["logistic", "boosted"])
def test_learned_scores_find_a_laplace_shift(score):
    pytest.importorskip("sklearn")
    result = tg.audit_target(
        laplace_vector, ([1.0, 0.0], [0.0, 0.0]), claim_epsilon=1.0, trials=30_000, seed=2, scores=(score,)
    )
    assert 0.6 < result.epsilon_lower_bound <= 1.0  # true ε = 1 (one coordinate shifted by the scale)


def test_real_vectors_get_both_classifiers_and_no_float_check_when_rounded():
    pytest.importorskip("sklearn")
    result = tg.audit_target(laplace_vector, ([1.0, 0.0], [0.0, 0.0]), claim_epsilon=1.0, trials=5_000, seed=0)
    kinds = {s["kind"] for s in result.scores}
    assert {"logistic-ratio", "boosted-trees"} <= kinds and "reachability" not in kinds
    assert result.output_profile["own_side_reachable"]["numpy-laplace"] < 0.5


# --------------------------------------------------------------------------------------------
# Operating point and the conditional bound
# --------------------------------------------------------------------------------------------


def test_allocation_focuses_on_the_best_predicted_test_and_sums_to_one():
    strong = RateCounts(
        thresholds=np.array([0.0, 1.0]), positives=np.array([100, 400, 500]), negatives=np.array([500, 400, 100])
    )
    weak = RateCounts(thresholds=np.array([0.0]), positives=np.array([500, 500]), negatives=np.array([500, 500]))
    allocation = operating.allocate([weak, strong], trials=10_000, delta=0.0, significance=0.05)
    assert allocation.focus_score == 1 and sum(allocation.shares) == pytest.approx(1.0)
    assert allocation.shares[1] > operating.FOCUS
    assert all(w.sum() == pytest.approx(1.0) for w in allocation.weights)


def test_predicted_bounds_respect_the_floor():
    rare = RateCounts(thresholds=np.array([0.0]), positives=np.array([990, 10]), negatives=np.array([1000, 0]))
    assert operating.predicted_bounds(rare, trials=10**6, delta=0.0, significance=0.05)[0] == -np.inf
    common = RateCounts(thresholds=np.array([0.0]), positives=np.array([900, 100]), negatives=np.array([1000, 0]))
    assert operating.predicted_bounds(common, trials=10**6, delta=0.0, significance=0.05)[0] > 5


def test_conditional_bound_is_valid_on_poisson_counts():
    """The conditional bound at level α exceeds the true log-ratio in at most ≈ α of repetitions (exactly
    Binomial(m, p/(p+q)) given the sum), and is tighter than two separate Clopper–Pearson rates."""
    rng = np.random.default_rng(7)
    lam, p, q, alpha = 100_000, 0.02, 0.02 * math.exp(-0.1), 0.05
    reps = 4000
    n_d, n_n = rng.poisson(lam, reps), rng.poisson(lam, reps)
    a, b = rng.binomial(n_d, p), rng.binomial(n_n, q)
    counts = [
        RateCounts(
            thresholds=np.array([0.0]),
            positives=np.array([n_d[i] - a[i], a[i]]),
            negatives=np.array([n_n[i] - b[i], b[i]]),
        )
        for i in range(200)
    ]
    bounds = np.array(
        [poisson.conditional_bounds(c, delta=0.0, levels=np.array([alpha]), lam=lam)[0][0] for c in counts]
    )
    truth = math.log(p / q)
    # exceedances over all 4000 via the closed form: the bound exceeds the truth iff the CP lower bound on
    # p/(p+q) exceeds its true value
    pi_true = p / (p + q)
    lower = stats.beta.ppf(alpha, np.maximum(a, 1), b + 1)
    rate = float(np.mean((a > 0) & (lower > pi_true)))
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    assert np.all(bounds <= truth + 0.2) and np.median(bounds) > 0.02
    # two separate rates at α/2 each: wider
    from dplens.auditing import bounds as bd

    separate = [
        bd.evaluate(c, delta=0.0, significance=alpha, strategy=bd.BonferroniGrid(size=1, focus=0)).epsilon
        for c in counts
    ]
    assert np.median(bounds) > np.median(separate)


def test_poisson_trials_are_reproducible_and_near_the_mean():
    first, second = poisson.poisson_trials(10**6, 5), poisson.poisson_trials(10**6, 5)
    assert first == second and all(abs(n - 10**6) < 6 * 1000 for n in first)
    result = tg.audit_target(two_bit_rr, ([1, 1], [0, 0]), claim_epsilon=1.0, trials=2_000, seed=5)
    assert tuple(result.side_trials) == poisson.poisson_trials(2_000, 5)
    assert result.to_dict()["side_trials"] == list(result.side_trials)


# --------------------------------------------------------------------------------------------
# Budget
# --------------------------------------------------------------------------------------------


def test_pilot_grows_with_the_trials_and_is_capped():
    assert tg.pilot_sizes(10_000) == (4_000, 2_000, 2_000)  # the floor
    assert tg.pilot_sizes(10**6) == (100_000, 50_000, 50_000)  # 10 %
    assert tg.pilot_sizes(10**7) == (10**6, tg.MAX_FIT_TRIALS, 10**6 - tg.MAX_FIT_TRIALS)  # fit half capped
    pilot, fit, selection = tg.pilot_sizes(10**9)
    assert pilot == tg.MAX_FIT_TRIALS + tg.MAX_SELECTION_TRIALS and fit == tg.MAX_FIT_TRIALS
    assert selection == tg.MAX_SELECTION_TRIALS
    assert tg.pilot_sizes(10**6, pilot_fraction=0.3)[0] == 300_000
    assert tg.pilot_sizes(10**6, pilot_trials=1_000) == (1_000, 500, 500)
    # Discrete outputs get the larger pilot (their table scores need the counts); real ones the 10 %.
    result = tg.audit_target(two_bit_rr, ([1, 1], [0, 0]), claim_epsilon=1.0, trials=50_000, seed=0)
    assert (result.pilot_trials, result.fit_trials, result.selection_trials) == (50_000, 25_000, 25_000)
    assert result.to_dict()["pilot_fraction"] == pytest.approx(tg.DISCRETE_PILOT_FRACTION) == 1.0
    assert tg.TargetAuditResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    result = tg.audit_target(two_bit_rr, ([1, 1], [0, 0]), claim_epsilon=1.0, trials=50_000, seed=0, pilot_fraction=0.1)
    assert (result.pilot_trials, result.fit_trials, result.selection_trials) == (5_000, 2_500, 2_500)
    result = tg.audit_target(laplace_vector, ([1.0, 0.0], [0.0, 0.0]), claim_epsilon=1.0, trials=50_000, seed=0)
    assert (result.pilot_trials, result.fit_trials) == (5_000, 2_500) and result.pilot_fraction == pytest.approx(0.1)


@pytest.mark.parametrize("value", [0, 1.5, -0.1, True, "0.1"])
def test_bad_pilot_fraction(value):
    with pytest.raises(ValueError, match="pilot_fraction must be in"):
        tg.audit_target(two_bit_rr, ([1, 1], [0, 0]), claim_epsilon=1.0, trials=100, pilot_fraction=value)


# --------------------------------------------------------------------------------------------
# Query-vector pairs
# --------------------------------------------------------------------------------------------


@batched
def first_query_geometric(data, rng, size):
    """Only the first query is released (two-sided geometric, ε = 1): only patterns that move it leak."""
    x = np.asarray(data, dtype=np.int64)
    noise = rng.geometric(1 - math.exp(-1.0), size) - rng.geometric(1 - math.exp(-1.0), size)
    return x[0] + noise


def test_query_vector_patterns_are_the_standard_ones():
    patterns = dict(query_vector_patterns(4))
    assert list(patterns["one up"]) == [1, 0, 0, 0] and list(patterns["all down"]) == [-1] * 4
    assert list(patterns["half up, half down"]) == [1, 1, -1, -1]
    assert list(patterns["one up, rest down"]) == [1, -1, -1, -1]
    assert all(set(np.unique(d)) <= {-1.0, 0.0, 1.0} for d in patterns.values())


def test_query_vector_search_moves_the_leaking_query_and_audits_fresh_trials():
    pair = TargetPair(data=[3, 3, 3, 3], relation="query_vector")
    searched = search_query_vector(as_target(first_query_geometric), pair, seed=0, budget=12, trials=20_000)
    neighbour = np.asarray(searched.pair.neighbour)
    assert neighbour[0] != 3 and np.all(np.abs(neighbour - 3) <= 1)
    assert all(t["is_estimate"] for t in searched.tried) and len(searched.tried) == 12
    result = tg.audit_target(first_query_geometric, pair, claim_epsilon=1.0, trials=20_000, seed=0)
    assert result.pairs_tried and 0.7 < result.epsilon_lower_bound <= 1.0


@batched
def laplace_answers(data, rng, size):
    x = np.asarray(data, dtype=float)
    return x + rng.laplace(0.0, 1.0, size=(size, x.size))


def test_query_vector_search_draws_d_and_every_candidate_from_common_random_numbers():
    # Coupled draws: the j-th outputs of D and of a candidate D + Δ share their noise, so they differ by Δ exactly.
    seen = []

    def strength(first, second, audit_trials):
        seen.append(np.asarray(second) - np.asarray(first))
        return float(len(seen))

    pair = TargetPair(data=[1.0, 2.0, 3.0], relation="query_vector")
    search_query_vector(as_target(laplace_answers), pair, seed=3, budget=6, trials=600, strength=strength)
    patterns = dict(query_vector_patterns(3))
    assert len(seen) >= 6
    for difference in seen:
        assert any(np.allclose(difference, delta, atol=1e-12) for delta in patterns.values())


def test_query_vector_bad_input():
    with pytest.raises(ValueError, match="query_vector"):
        tg.audit_target(
            first_query_geometric, {"data": [[1, 2], [3, 4]], "relation": "query_vector"}, claim_epsilon=1.0, trials=100
        )
    with pytest.raises(ValueError, match="search budget"):
        search_query_vector(
            as_target(first_query_geometric), TargetPair(data=[1, 2], relation="query_vector"), seed=0, budget=0
        )


def test_query_vector_from_the_cli(tmp_path, monkeypatch):
    module = tmp_path / "qv_target.py"
    module.write_text(
        "import math\nimport numpy as np\n\n"
        "def first(data, rng, size):\n"
        "    x = np.asarray(data, dtype=np.int64)\n"
        "    g = 1 - math.exp(-1.0)\n"
        "    return x[0] + rng.geometric(g, size) - rng.geometric(g, size)\n\n"
        "first.dplens_batched = True\n"
    )
    pair = tmp_path / "pair.json"
    pair.write_text(json.dumps({"data": [2, 2, 2], "relation": "query_vector"}))
    command = [sys.executable, "-m", "dplens.cli", "audit", "--target", "qv_target:first", "--pair", str(pair)]
    command += ["--claim-epsilon", "0.5", "--trials", "5000", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["verdict"] == "VIOLATION" and out["pair"]["relation"] == "query_vector" and out["pairs_tried"]


def test_query_vector_bad_data_from_the_cli_is_one_line(tmp_path):
    pair = tmp_path / "pair.json"
    pair.write_text(json.dumps({"data": "abc", "relation": "query_vector"}))
    command = [sys.executable, "-m", "dplens.cli", "audit", "--target", "numpy:sum", "--pair", str(pair)]
    command += ["--claim-epsilon", "0.5", "--trials", "100"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "query_vector" in done.stderr


# --------------------------------------------------------------------------------------------
# The float check's scope
# --------------------------------------------------------------------------------------------


@batched
def laplace_flags(data, rng, size):
    """SVT-like flags as floats, computed from numpy's float Laplace: no float check should run on them."""
    x = np.asarray(data, dtype=float)
    return (x + rng.laplace(0.0, 2.0, size=(size, x.size)) >= 1.0 + rng.laplace(0.0, 2.0, size=(size, 1))).astype(float)


@batched
def laplace_with_sentinels(data, rng, size):
    """Noisy values or −1000 (SVT3-like): the noisy values are floats drawn around the inputs, the −1000 are not."""
    x = np.asarray(data, dtype=float)
    noisy = x + rng.laplace(0.0, 2.0, size=(size, x.size))
    return np.where(noisy >= 1.0, noisy, -1000.0)


@batched
def float_histogram(data, rng, size):
    return np.asarray(data, dtype=float) + rng.laplace(0.0, 10.0, size=(size, 3))


def test_float_check_never_runs_on_flags_or_integers():
    for target, pair in ((laplace_flags, ([0, 1, 1], [1, 0, 0])), (first_query_geometric, ([3], [4]))):
        result = tg.audit_target(target, pair, claim_epsilon=1.0, trials=5_000, seed=0)
        assert all(s["kind"] != "reachability" for s in result.scores) and result.float_evidence == ()
    result = tg.audit_target(laplace_flags, ([0, 1, 1], [1, 0, 0]), claim_epsilon=1.0, trials=5_000, seed=0)
    assert result.scores[0]["kind"] == "joint-frequency"


@batched
def numerical_sparse_vector(data, rng, size):
    """NumericalSVT-like: threshold and comparison noise at two scales, fresh answers at a third, 0 when below."""
    x = np.asarray(data, dtype=float)
    threshold = 1.0 + rng.laplace(0.0, 3.0, size=(size, 1))
    above = x + rng.laplace(0.0, 6.0, size=(size, x.size)) >= threshold
    return np.where(above, x + rng.laplace(0.0, 4.0, size=(size, x.size)), 0.0)


@batched
def float_prefix_sum(data, rng, size):
    """Running sums of q + Lap(2): only the first coordinate is q₁ + one numpy Laplace draw."""
    x = np.asarray(data, dtype=float)
    return np.cumsum(x + rng.laplace(0.0, 2.0, size=(size, x.size)), axis=1)


def test_float_check_finds_the_scale_and_the_coordinates_the_model_describes():
    result = tg.audit_target(numerical_sparse_vector, ([1, 1, 0], [0, 0, 1]), claim_epsilon=1.0, trials=5_000, seed=0)
    profile = result.output_profile
    assert profile["own_side_reachable"]["numpy-laplace (scale 4)"] > 0.95  # the answers' scale describes them
    assert profile["own_side_reachable"]["numpy-laplace (scale 3)"] < 0.5  # the threshold's does not
    assert result.best_score == "float reachability (numpy-laplace, scale=4)" and result.verdict.value == "VIOLATION"
    # Prefix sums: the model q + noise describes the first coordinate only; the check runs there.
    result = tg.audit_target(float_prefix_sum, ([1, 1, 1], [0, 1, 1]), claim_epsilon=1.0, trials=5_000, seed=0)
    assert result.output_profile["own_side_coordinates"] == {"numpy-laplace": [0]}
    assert result.best_score.startswith("float reachability") and result.epsilon_lower_bound > 5.0
    # When the first coordinates agree, the check has nothing to judge: no reachability score runs.
    result = tg.audit_target(float_prefix_sum, ([1, 1, 1], [1, 0, 1]), claim_epsilon=1.0, trials=5_000, seed=0)
    assert all(s["kind"] != "reachability" for s in result.scores)


def test_float_checks_can_be_left_out_and_bad_values_are_refused():
    pair = ([1, 1, 0], [0, 0, 1])
    with_check = tg.audit_target(numerical_sparse_vector, pair, claim_epsilon=1.0, trials=5_000, seed=0)
    without = tg.audit_target(
        numerical_sparse_vector, pair, claim_epsilon=1.0, trials=5_000, seed=0, float_checks=False
    )
    assert any(s["kind"] == "reachability" for s in with_check.scores)
    assert all(s["kind"] != "reachability" for s in without.scores) and without.float_evidence == ()
    assert without.epsilon_lower_bound < 1.0 < with_check.epsilon_lower_bound  # the scores alone: a 1-DP answer
    with pytest.raises(ValueError, match="float_checks must be True or False; got 'no'"):
        tg.audit_target(numerical_sparse_vector, pair, claim_epsilon=1.0, trials=100, float_checks="no")


def test_float_check_judges_the_real_entries_beside_sentinels_and_keeps_its_power_on_float_vectors():
    # The zero-noise output is −1000 where the answer is "below": the inputs are the query values of the noisy
    # answers, the sentinels decide nothing, and the float leak of the answers is found (SVT3 of the suite).
    result = tg.audit_target(laplace_with_sentinels, ([0, 1, 1], [1, 0, 0]), claim_epsilon=1.0, trials=5_000, seed=0)
    assert any(s["kind"] == "reachability" for s in result.scores)
    assert any("inputs are the query values" in note for note in result.notes)
    assert result.best_score.startswith("float reachability") and result.verdict.value == "VIOLATION"
    binner = ReachBinner(
        name="reach",
        kind="reachability",
        rank=REACH_RANK.copy(),
        cut_scores=np.array([-0.5, 0.5]),
        sampler=SamplerModel("numpy-laplace"),
        scale=2.0,
        query_data=np.array([0.0, 1.0]),
        query_neighbour=np.array([1.0, 0.0]),
        dimension=2,
        numeric_kind=tg.OutputKind.VECTOR,
        coordinates=np.array([0, 1]),
        sentinels=(np.array([-1000.0]), np.array([-1000.0])),
    )
    only_sentinels = np.full((4, 2), -1000.0)
    assert np.all(binner.raw_bins(only_sentinels, 4) == 3)  # reachable from both: no evidence either way
    result = tg.audit_target(float_histogram, ([1, 1, 1], [2, 1, 1]), claim_epsilon=0.1, trials=20_000, seed=0)
    assert result.best_score.startswith("float reachability") and result.epsilon_lower_bound > 8
    assert result.verdict.value == "VIOLATION"


# --------------------------------------------------------------------------------------------
# Validity over many seeds (slow)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "pair"),
    [(two_bit_rr, ([1, 1], [0, 0])), (mixed_sentinel, (0, 1)), (first_query_geometric, ([3], [4]))],
    ids=["joint-frequency", "sentinel", "integer"],
)
def test_bound_exceeds_the_true_epsilon_at_most_alpha_of_the_time(target, pair):
    """True ε = 1 for all three pairs; 200 seeded audits at 95 %: P[Bin(200, 0.05) ≥ 20] < 0.5 %."""
    over = sum(
        tg.audit_target(target, pair, claim_epsilon=1.0, trials=4_000, seed=seed).epsilon_lower_bound > 1.0
        for seed in range(1000, 1200)
    )
    assert over < 20


def test_logistic_fit_is_the_same_whatever_its_chunks_and_the_trees_see_capped_rows(monkeypatch):
    # The logistic fit sums its gradient and Hessian over chunks of rows (memory flat in the pilot): the chunking
    # must not change the fit. Sentinels in the values exercise the atom features.
    from dplens.auditing.blackbox import learned

    rng = np.random.default_rng(4)
    sides = []
    for shift in (0.3, 0.0):
        values = rng.laplace(shift, 1.0, size=(3_000, 3))
        values[rng.random(values.shape) < 0.2] = -1000.0
        sides.append(values)
    features = fit_feature_map(np.concatenate(sides))
    whole = learned.fit_logistic(learned.LogisticRatio(), features, (sides[0], sides[1]))
    monkeypatch.setattr(learned, "CHUNK_ROWS", 257)
    chunked = learned.fit_logistic(learned.LogisticRatio(), features, (sides[0], sides[1]))
    np.testing.assert_allclose(chunked.weights, whole.weights, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(chunked(sides[0][:1000]), whole(sides[0][:1000]), rtol=1e-9, atol=1e-12)
    assert np.all(np.abs(whole.weights[:3]) > 0)  # a real signal was fitted
    width = features(sides[0][:1]).shape[1]
    monkeypatch.setattr(learned, "TREE_FEATURE_BYTES", 8 * width * 2 * 1_500)
    kept = learned.tree_rows((sides[0], sides[1]), width)
    assert [len(k) for k in kept] == [1_500, 1_500]  # every other row of each side
    np.testing.assert_array_equal(kept[0], sides[0][::2])
    monkeypatch.setattr(learned, "TREE_FEATURE_BYTES", 2**40)
    assert [len(k) for k in learned.tree_rows((sides[0], sides[1]), width)] == [3_000, 3_000]
