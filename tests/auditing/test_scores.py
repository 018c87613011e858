"""Audits from scores: the acceptance case (10^6 + 10^6 Gaussian scores), the a-priori grid against the auditing
notes' §5.2 reference values, Clopper–Pearson by hand, both directions without abs(), the one-run route, validity
over repeated audits of mechanisms exactly at their claim (with a negative control showing the check can fail),
result round trips and bad input."""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest
from scipy import stats

from dplens.accountant import conversions
from dplens.auditing import one_run as orun
from dplens.auditing import scores as sc
from dplens.auditing.games import Verdict

TRUE_EPS_GDP1 = 4.377  # μ = 1 GDP at δ = 1e-5 (auditing-anchors §5.1)


def _gaussian_scores(n: int, seed: int, mu: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)])
    return scores, np.arange(2 * n) < n


def test_true_epsilon_of_the_acceptance_case():
    # The reference the acceptance numbers are checked against: the exact GDP profile (Dong, Roth, Su Cor. 2.13).
    assert conversions.gdp_epsilon(1.0, 1e-5) == pytest.approx(TRUE_EPS_GDP1, abs=1e-3)


def test_acceptance_a_million_scores_per_side():
    scores, member = _gaussian_scores(10**6, seed=2026)
    at_truth = sc.audit_scores(scores, member, claim=TRUE_EPS_GDP1, delta=1e-5)
    below = sc.audit_scores(scores, member, claim=2.0, delta=1e-5)
    assert at_truth.verdict is Verdict.CONSISTENT
    assert below.verdict is Verdict.VIOLATION
    assert below.epsilon_lower_bound == at_truth.epsilon_lower_bound  # the claim never changes the bound
    assert 0.6 * TRUE_EPS_GDP1 <= at_truth.epsilon_lower_bound <= TRUE_EPS_GDP1
    # The GDP μ lower bound is valid for μ (here exactly 1); its ε is labelled an estimate and close to the truth.
    assert 0.95 <= at_truth.gdp_mu_estimate <= 1.0
    assert at_truth.gdp_epsilon_estimate == pytest.approx(TRUE_EPS_GDP1, rel=0.03)
    payload = at_truth.to_dict()
    assert payload["is_estimate"] is False and "not a bound" in payload["gdp_assumption"]
    assert {"gdp_mu_estimate", "gdp_epsilon_estimate", "auc_estimate", "tpr_at_fpr_estimates"} <= set(payload)
    # Empirical TPR at low FPR against the exact Gaussian ROC (an estimate, so a loose tolerance).
    for point in at_truth.tpr_at_fpr_estimates:
        exact = stats.norm.sf(stats.norm.isf(point["fpr"]) - 1.0)
        assert point["tpr_estimate"] == pytest.approx(exact, rel=0.1)
        assert point["fpr_realised"] <= point["fpr"]
    assert at_truth.auc_estimate == pytest.approx(stats.norm.cdf(1 / math.sqrt(2)), abs=2e-3)
    assert len(at_truth.roc_estimate) <= 402


@pytest.mark.parametrize(("n", "reference", "gdp_reference"), [(10**4, 1.869, 3.987), (10**5, 2.546, 4.215)])
def test_a_priori_grid_matches_the_notes_reference(n, reference, gdp_reference):
    # auditing-anchors §5.2, "CP realistic (grid + Bonferroni)": 1001 thresholds on [−2, 8], mean of 3 seeds.
    grid = sc.ThresholdGrid(tuple(np.linspace(-2.0, 8.0, 1001)))
    bounds, gdp = [], []
    for seed in range(3):
        scores, member = _gaussian_scores(n, seed)
        result = sc.audit_scores(scores, member, claim=TRUE_EPS_GDP1, delta=1e-5, selection=grid)
        assert result.threshold_selection["hypotheses"] == 1001
        bounds.append(result.epsilon_lower_bound)
        gdp.append(result.gdp_epsilon_estimate)
    assert np.mean(bounds) == pytest.approx(reference, abs=0.05)
    assert np.mean(gdp) == pytest.approx(gdp_reference, abs=0.05)


def test_one_fixed_threshold_is_clopper_pearson_by_hand():
    scores, member = _gaussian_scores(5000, seed=3)
    t, alpha, delta = 2.0, 0.05, 1e-5
    result = sc.audit_scores(scores, member, claim=1.0, delta=delta, selection=sc.ThresholdGrid((t,)))
    fp = int(np.sum(scores[~member] >= t))
    fn = int(np.sum(scores[member] < t))
    fpr_u = stats.beta.ppf(1 - alpha / 2, fp + 1, 5000 - fp)
    fnr_u = stats.beta.ppf(1 - alpha / 2, fn + 1, 5000 - fn)
    forward = math.log((1 - delta - fnr_u) / fpr_u)
    reverse = math.log((1 - delta - fpr_u) / fnr_u)
    assert result.epsilon_lower_bound == pytest.approx(max(forward, reverse, 0.0), rel=1e-9)
    point = result.operating_point
    assert (point["false_positives"], point["false_negatives"]) == (fp, fn)
    assert point["fpr_upper"] == pytest.approx(fpr_u, rel=1e-9)


def test_reverse_direction_and_null_scores():
    # The evidence lies below every member score: non-members are half U(−1, 0), half U(0, 1); members U(0, 1).
    # Only the reverse direction (D' against D on "score < t", TNR against FNR) sees it — a separate statistic
    # under the same union bound, never an absolute value of the forward one (jax_privacy PR #270).
    rng = np.random.default_rng(4)
    n = 20_000
    scores = np.concatenate([rng.random(n), np.where(rng.random(n) < 0.5, -rng.random(n), rng.random(n))])
    member = np.arange(2 * n) < n
    result = sc.audit_scores(scores, member, claim=2.0, delta=1e-5)
    assert result.bound_direction == "D'_vs_D" and result.verdict is Verdict.VIOLATION
    assert result.operating_point["fnr"] < 0.01  # the threshold sits near 0, where the members begin
    # Identical distributions: no evidence, and the μ estimate stays ~0 (an |μ| would report ~3.5 here).
    null_scores, null_member = _gaussian_scores(50_000, seed=5, mu=0.0)
    null = sc.audit_scores(null_scores, null_member, claim=0.0, delta=1e-5)
    assert null.epsilon_lower_bound == 0.0 and null.verdict is Verdict.CONSISTENT
    assert null.gdp_mu_estimate < 0.05
    # Scores oriented against the convention (members LOWER): no evidence is claimed; negate such a score.
    low_scores, low_member = _gaussian_scores(50_000, seed=6, mu=-1.5)
    assert sc.audit_scores(low_scores, low_member, claim=0.5, delta=1e-5).epsilon_lower_bound == 0.0
    assert sc.audit_scores(-low_scores, low_member, claim=0.5, delta=1e-5).verdict is Verdict.VIOLATION


def test_the_split_is_seeded_and_the_claim_is_recorded():
    scores, member = _gaussian_scores(20_000, seed=6)
    a = sc.audit_scores(scores, member, claim=3.0, delta=1e-5, selection=sc.SplitSelection(seed=1))
    b = sc.audit_scores(scores, member, claim=3.0, delta=1e-5, selection=sc.SplitSelection(seed=1))
    c = sc.audit_scores(scores, member, claim=3.0, delta=1e-5, selection=sc.SplitSelection(seed=2))
    assert a.epsilon_lower_bound == b.epsilon_lower_bound
    assert a.operating_point["members"] + a.operating_point["non_members"] < 40_000  # only the held-out part
    assert c.threshold_selection["seed"] == 2
    # A shuffled order gives a valid, comparable bound (the split never reads the order or the values).
    order = np.random.default_rng(0).permutation(scores.size)
    d = sc.audit_scores(scores[order], member[order], claim=3.0, delta=1e-5, selection=sc.SplitSelection(seed=1))
    assert d.epsilon_lower_bound == a.epsilon_lower_bound  # sorted per class first: order-invariant


def test_a_perfect_attack_hits_the_ceiling_and_a_small_audit_is_inconclusive():
    member = np.arange(200) < 100
    scores = member.astype(float)
    result = sc.audit_scores(scores, member, claim=1.0, delta=0.0, selection=sc.ThresholdGrid((0.5,)))
    assert result.epsilon_lower_bound == pytest.approx(result.ceiling)
    u = 1 - (0.025) ** (1 / 100)
    assert result.ceiling == pytest.approx(math.log((1 - u) / u), rel=1e-9)
    assert sc.audit_scores(scores, member, claim=10.0, delta=0.0).verdict is Verdict.INCONCLUSIVE


# --------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------


def _laplace_canaries(m: int, epsilon: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """m canaries included with probability ½; score = inclusion bit + Laplace(1/ε): ε-DP in each bit, and tight
    (for scores ≥ 1 the posterior of "in" is exactly e^ε/(1 + e^ε))."""
    included = rng.random(m) < 0.5
    return included + rng.laplace(0.0, 1.0 / epsilon, m), included


def test_one_run_route_matches_one_run_py_and_labels_its_estimate():
    rng = np.random.default_rng(7)
    scores, included = _laplace_canaries(5000, 4.0, rng)
    result = sc.audit_scores(scores, included, claim=1.0, delta=1e-5, one_run=True)
    direct = orun.one_run_audit(
        scores, included, significance=0.05, delta=1e-5, rule=orun.Symmetric(), analysis=orun.Combined.default()
    )
    assert result.epsilon_lower_bound == pytest.approx(direct.epsilon_lower_bound, rel=1e-12)  # α = 1 − 0.95
    assert (result.analysis.guesses, result.analysis.correct) == (direct.guesses, direct.correct)
    # The combined bound is the larger of its two analyses, each run alone at its share of α.
    alone = [
        orun.one_run_audit(
            scores, included, significance=0.05 * share, delta=1e-5, rule=orun.Symmetric(), analysis=part
        ).epsilon_lower_bound
        for part, share in ((orun.ApproximateDP(), 0.2), (orun.EpsilonDeltaFDP(), 0.8))
    ]
    assert result.epsilon_lower_bound == pytest.approx(max(alone), rel=1e-12)
    assert [c["epsilon_lower_bound"] for c in result.analysis.components] == pytest.approx(alone, rel=1e-12)
    assert result.epsilon_lower_bound > 1.0
    assert result.verdict is Verdict.VIOLATION and result.route == "one_run"
    assert result.fdp_epsilon_estimate >= result.epsilon_lower_bound  # the GDP-family estimate is the bolder one
    assert "estimate" in result.to_dict()["fdp_assumption"]
    assert result.trajectory[-1] == {"canaries": 5000, "epsilon_lower_bound": result.epsilon_lower_bound}
    assert [p["canaries"] for p in result.trajectory] == sorted(p["canaries"] for p in result.trajectory)
    assert result.ceiling >= result.epsilon_lower_bound


# --------------------------------------------------------------------------------------------
# Validity: a mechanism exactly at its claim is a VIOLATION at most 1 − confidence of the time
# --------------------------------------------------------------------------------------------


def _violations(make, repetitions: int, *, claim: float, confidence: float, one_run: bool) -> int:
    count = 0
    for seed in range(repetitions):
        scores, member = make(np.random.default_rng(10_000 + seed))
        result = sc.audit_scores(scores, member, claim=claim, delta=0.0, confidence=confidence, one_run=one_run)
        count += result.verdict is Verdict.VIOLATION
    return count


def _raw_count_epsilon(scores: np.ndarray, member: np.ndarray, min_count: int = 10) -> float:
    """NOT a bound: max over thresholds (with ≥ ``min_count`` false positives) of log(TPR/FPR) from raw counts."""
    s_in, s_out = np.sort(scores[member]), np.sort(scores[~member])
    t = np.unique(scores)
    tp = s_in.size - np.searchsorted(s_in, t, side="left")
    fp = s_out.size - np.searchsorted(s_out, t, side="left")
    keep = (fp >= min_count) & (tp > 0)
    return float(np.max(np.log((tp[keep] / s_in.size) / (fp[keep] / s_out.size))))


def _laplace_pair(n: int, epsilon: float):
    def make(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        scores = np.concatenate([1.0 + rng.laplace(0.0, 1 / epsilon, n), rng.laplace(0.0, 1 / epsilon, n)])
        return scores, np.arange(2 * n) < n

    return make


def _allowed(repetitions: int, alpha: float) -> float:
    """α·R plus three binomial standard deviations."""
    return alpha * repetitions + 3 * math.sqrt(repetitions * alpha * (1 - alpha))


def test_validity_two_samples_small():
    # Laplace at ε = 3: every threshold ≥ 1 has TPR/FPR = e^ε exactly, so a valid audit sits at the edge; at
    # confidence 0.8 violations would be frequent enough to count with 40 repetitions.
    make = _laplace_pair(2000, 3.0)
    assert _violations(make, 40, claim=3.0, confidence=0.8, one_run=False) <= _allowed(40, 0.2)


def test_the_validity_check_can_fail():
    # Negative control: the raw-count ε at the best threshold (what results label an ESTIMATE) exceeds the true ε
    # in far more than α of the same repetitions: the check above would catch a procedure like it.
    make = _laplace_pair(2000, 3.0)
    exceed = sum(_raw_count_epsilon(*make(np.random.default_rng(10_000 + seed))) > 3.0 for seed in range(40))
    assert exceed > _allowed(40, 0.2)


def test_validity_one_run_small():
    def make(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return _laplace_canaries(2000, 1.0, rng)

    count = _violations(make, 30, claim=1.0, confidence=0.8, one_run=True)
    assert count <= _allowed(30, 0.2)


@pytest.mark.slow
@pytest.mark.parametrize(("epsilon", "confidence"), [(1.0, 0.8), (3.0, 0.8), (3.0, 0.95)])
def test_validity_two_samples_repeated(epsilon, confidence):
    make = _laplace_pair(20_000, epsilon)
    count = _violations(make, 300, claim=epsilon, confidence=confidence, one_run=False)
    assert count <= _allowed(300, 1 - confidence)


@pytest.mark.slow
@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_validity_one_run_repeated(confidence):
    def make(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return _laplace_canaries(10_000, 1.0, rng)

    count = _violations(make, 300, claim=1.0, confidence=confidence, one_run=True)
    assert count <= _allowed(300, 1 - confidence)


# --------------------------------------------------------------------------------------------
# Results, files, bad input
# --------------------------------------------------------------------------------------------


def test_results_round_trip_through_json():
    scores, member = _gaussian_scores(3000, seed=8)
    for result in (
        sc.audit_scores(scores, member, claim=1.0, delta=1e-5),
        sc.audit_scores(scores, member, claim=1.0, delta=0.0),  # GDP ε undefined at δ = 0: None ↔ inf
        sc.audit_scores(scores, member, claim=1.0, delta=1e-5, one_run=True),
    ):
        text = json.dumps(result.to_dict())
        back = type(result).from_dict(json.loads(text))
        assert back == result
        assert back.to_dict() == json.loads(text)
        assert "ESTIMATE" in result._repr_html_() and "estimate" in repr(result)
    two_sample = sc.audit_scores(scores, member, claim=1.0, delta=1e-5).to_dict()
    with pytest.raises(ValueError, match="missing required field 'verdict'"):
        sc.ScoresAuditResult.from_dict({k: v for k, v in two_sample.items() if k != "verdict"})


def test_memory_stays_of_the_order_of_the_scores():
    import tracemalloc

    scores, member = _gaussian_scores(250_000, seed=9)
    tracemalloc.start()
    sc.audit_scores(scores, member, claim=4.0, delta=1e-5)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2.0 * scores.nbytes  # one sorted copy, its split parts, masks; nothing per threshold


def test_load_scores_file_npz_and_csv(tmp_path):
    scores, member = _gaussian_scores(50, seed=10)
    np.savez(tmp_path / "s.npz", score=scores, member=member)
    loaded = sc.load_scores_file(tmp_path / "s.npz")
    assert np.array_equal(loaded[0], scores) and np.array_equal(loaded[1], member)
    rows = [f"{i},{s:.17g},{'true' if m else '0'}" for i, (s, m) in enumerate(zip(scores, member, strict=True))]
    lines = ["id,score,member", *rows]
    (tmp_path / "s.csv").write_text("\n".join(lines) + "\n")
    loaded = sc.load_scores_file(tmp_path / "s.csv")
    assert np.array_equal(loaded[0], scores) and np.array_equal(loaded[1], member)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (dict(score=np.ones(4)), "no array 'member'"),
        (dict(score=np.ones(4), member=np.array([True, False, True])), "same length"),
        (dict(score=np.array([1.0, np.nan, 0.0, 1.0]), member=np.array([1, 0, 1, 0])), "finite"),
        (dict(score=np.ones(4), member=np.ones(4, dtype=bool)), "no non-members"),
        (dict(score=np.ones(4), member=np.array([2, 0, 1, 0])), "booleans or 0/1"),
    ],
)
def test_bad_files(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=message):
        sc.load_scores_file(tmp_path / "bad.npz")


def test_unreadable_files(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not a readable"):
        sc.load_scores_file(tmp_path / "junk.npz")
    (tmp_path / "x.csv").write_text("score,label\n1,0\n")
    with pytest.raises(ValueError, match="no column 'member'"):
        sc.load_scores_file(tmp_path / "x.csv")
    (tmp_path / "y.csv").write_text("score,member\n1,maybe\n")
    with pytest.raises(ValueError, match="line 2"):
        sc.load_scores_file(tmp_path / "y.csv")
    with pytest.raises(ValueError, match="not found"):
        sc.load_scores_file(tmp_path / "missing.npz")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(claim=-1.0, delta=1e-5), "claim"),
        (dict(claim=1.0, delta=1.5), "delta"),
        (dict(claim=1.0, delta=1e-5, confidence=0.3), "confidence"),
        (dict(claim=1.0, delta=1e-5, fpr_targets=(0.0,)), "fpr_targets"),
        (dict(claim=1.0, delta=1e-5, one_run=True, selection=sc.SplitSelection()), "selection"),
        (dict(claim=1.0, delta=1e-5, rule=orun.TopK()), "rule"),
    ],
)
def test_bad_arguments(kwargs, message):
    scores, member = _gaussian_scores(100, seed=11)
    with pytest.raises(ValueError, match=message):
        sc.audit_scores(scores, member, **kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: sc.SplitSelection(fraction=1.0), "fraction"),
        (lambda: sc.SplitSelection(seed=-1), "seed"),
        (lambda: sc.ThresholdGrid(()), "thresholds"),
        (lambda: sc.ThresholdGrid((0.0, math.inf)), "thresholds"),
    ],
)
def test_bad_options(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_module_doctest():
    failures, _ = doctest.testmod(sc, verbose=False)
    assert failures == 0
