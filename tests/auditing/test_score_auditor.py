"""ScoreAuditor: every estimator of jax_privacy's CanaryScoreAuditor, labelled bound / estimate / heuristic (issue 37).

Cross-implementation: on the same scores, jax_privacy 2.0 (run in a child process: importing it starts JAX's
threads) and dplens agree on every estimator they define alike; they differ, by design and documented, on the GDP
estimate (jax_privacy takes abs() of a one-sided statistic: a large ε on null scores). Validity of the bounds over
seeded repetitions, bootstrap intervals, and bad input.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dplens.accountant import conversions
from dplens.auditing import one_run as orun
from dplens.auditing import score_auditor as sa

SRC = Path(__file__).resolve().parents[2] / "src"


def _gaussian(n: int, mu: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)


# --------------------------------------------------------------------------------------------
# Against jax_privacy 2.0 on the same scores
# --------------------------------------------------------------------------------------------

_JAX_PROBE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from jax_privacy import auditing as ja

    def gaussian(n, mu, seed):
        rng = np.random.default_rng(seed)
        return rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)

    out = {}
    for name, (i, o) in {
        "ramp": (np.arange(100) + 9.5, np.arange(100.0)),
        "gauss": gaussian(2000, 1.0, 0),
        "null": gaussian(2000, 0.0, 1),
    }.items():
        a = ja.CanaryScoreAuditor(i, o)
        t = float(np.median(i))
        out[name] = {
            "auroc": float(a.attack_auroc()),
            "tpr": [float(a.tpr_at_given_fpr(f)) for f in (0.0, 0.001, 0.01, 0.1, 0.5, 1.0)],
            "raw": [float(a.epsilon_raw_counts(min_count=m, delta=d, one_sided=s))
                    for m in (10, 50) for d in (0.0, 1e-5) for s in (True, False)],
            "acc": [float(a.max_accuracy()), float(a.max_accuracy(prevalence=0.3)),
                    float(a.max_accuracy(significance=0.05))],
            "cp": [float(a.epsilon_clopper_pearson(0.05, d, s)) for d in (0.0, 1e-5) for s in (True, False)],
            "cp_explicit": float(a.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=ja.Explicit(t))),
            "threshold": t,
            "one_run": float(a.epsilon_one_run(0.05, 1e-5)),
            "one_run_fdp": float(a.epsilon_one_run_fdp(0.05, 1e-5)),
            "gdp": float(a.epsilon_from_gdp(0.05, 1e-5)),
        }
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def jax_numbers():
    if importlib.util.find_spec("jax_privacy") is None:
        pytest.skip("jax_privacy is not installed: the cross-implementation test needs it")
    env = {"PYTHONPATH": str(SRC), "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", _JAX_PROBE], capture_output=True, text=True, timeout=600, check=False, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _scores(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "ramp":
        return np.arange(100) + 9.5, np.arange(100.0)
    return _gaussian(2000, 1.0, 0) if name == "gauss" else _gaussian(2000, 0.0, 1)


@pytest.mark.parametrize("name", ["ramp", "gauss", "null"])
def test_estimates_agree_with_jax_privacy(jax_numbers, name):
    ref = jax_numbers[name]
    a = sa.ScoreAuditor(*_scores(name))
    assert a.auroc().value == pytest.approx(ref["auroc"], rel=1e-12)
    assert [a.tpr_at_fpr(f).value for f in (0.0, 0.001, 0.01, 0.1, 0.5, 1.0)] == pytest.approx(ref["tpr"], rel=1e-12)
    raw = [
        a.epsilon_raw_counts(min_count=m, delta=d, one_sided=s).value
        for m in (10, 50)
        for d in (0.0, 1e-5)
        for s in (True, False)
    ]
    assert raw == pytest.approx(ref["raw"], rel=1e-12)
    accuracy = [
        a.max_accuracy().value,
        a.max_accuracy(prevalence=0.3).value,
        a.max_accuracy(significance=0.05).value,
    ]
    assert accuracy == pytest.approx(ref["acc"], rel=1e-12)


@pytest.mark.parametrize("name", ["ramp", "gauss", "null"])
def test_bounds_agree_with_jax_privacy_with_its_thresholds(jax_numbers, name):
    ref = jax_numbers[name]
    a = sa.ScoreAuditor(*_scores(name))
    pareto = sa.ParetoBonferroni()
    cp = [
        a.epsilon_clopper_pearson(0.05, d, s, threshold_strategy=pareto).value
        for d in (0.0, 1e-5)
        for s in (True, False)
    ]
    assert cp == pytest.approx(ref["cp"], rel=1e-9, abs=1e-12)
    explicit = a.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=sa.Explicit(ref["threshold"]))
    assert explicit.value == pytest.approx(ref["cp_explicit"], rel=1e-9, abs=1e-12) and explicit.kind == "bound"
    heuristic = orun.ParetoFrontierHeuristic()
    # jax_privacy's Brent tolerance is 1e-6 in epsilon.
    assert a.epsilon_one_run(0.05, 1e-5, correction=heuristic).value == pytest.approx(ref["one_run"], abs=2e-6)
    gaussian = a.epsilon_one_run_fdp(0.05, 1e-5, gaussian=True, correction=heuristic)
    assert gaussian.value == pytest.approx(ref["one_run_fdp"], abs=2e-6) and gaussian.kind == "estimate"


def test_the_gdp_estimate_differs_from_jax_privacy_where_it_takes_abs(jax_numbers):
    # Positive evidence: the forward direction wins and both agree. Null scores: jax_privacy 2.0 takes abs() of the
    # one-sided statistic (the PR #270 bug) and reports a large ε; dplens keeps the directions apart and reports 0.
    gauss = sa.ScoreAuditor(*_scores("gauss")).epsilon_from_gdp(0.05, 1e-5)
    assert gauss.value == pytest.approx(jax_numbers["gauss"]["gdp"], rel=1e-4)
    assert gauss.kind == "estimate" and "GDP-shape" in gauss.details["assumption"]
    null = sa.ScoreAuditor(*_scores("null")).epsilon_from_gdp(0.05, 1e-5)
    assert null.value == 0.0 and jax_numbers["null"]["gdp"] > 1.0


def test_every_estimator_is_labelled():
    a = sa.ScoreAuditor(*_gaussian(1000, 2.0, 3))
    kinds = {
        "cp_split": a.epsilon_clopper_pearson(0.05, 1e-5).kind,
        "cp_pareto": a.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=sa.ParetoBonferroni()).kind,
        "cp_grid": a.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=sa.GridBonferroni((0, 1, 2))).kind,
        "cp_multi": a.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=sa.MultiSplit(samples=5)).kind,
        "raw": a.epsilon_raw_counts().kind,
        "tpr": a.tpr_at_fpr(0.01).kind,
        "auroc": a.auroc().kind,
        "acc": a.max_accuracy().kind,
        "acc_upper": a.max_accuracy(significance=0.05).kind,
        "gdp": a.epsilon_from_gdp(0.05, 1e-5).kind,
        "one_run": a.epsilon_one_run(0.05, 1e-5).kind,
        "one_run_pareto": a.epsilon_one_run(0.05, 1e-5, correction=orun.ParetoFrontierHeuristic()).kind,
        "fdp": a.epsilon_one_run_fdp(0.05, 1e-5).kind,
        "fdp_gaussian": a.epsilon_one_run_fdp(0.05, 1e-5, gaussian=True).kind,
    }
    assert kinds == {
        "cp_split": "bound", "cp_pareto": "heuristic", "cp_grid": "bound", "cp_multi": "bound", "raw": "estimate",
        "tpr": "estimate", "auroc": "estimate", "acc": "estimate", "acc_upper": "heuristic", "gdp": "estimate",
        "one_run": "bound", "one_run_pareto": "heuristic", "fdp": "bound", "fdp_gaussian": "estimate",
    }  # fmt: skip
    record = a.epsilon_one_run_fdp(0.05, 1e-5).to_dict()
    assert json.loads(json.dumps(record))["is_estimate"] is False and record["kind"] == "bound"


# --------------------------------------------------------------------------------------------
# Validity of the bounds; bootstrap intervals
# --------------------------------------------------------------------------------------------


def _laplace(n: int, eps: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """In: 1 + Laplace(1/ε), out: Laplace(1/ε): every threshold ≥ 1 has TPR/FPR = e^ε exactly (a sharp case)."""
    return 1.0 + rng.laplace(0.0, 1 / eps, n), rng.laplace(0.0, 1 / eps, n)


@pytest.mark.parametrize(
    "strategy",
    [sa.Split(), sa.Explicit(1.5), sa.GridBonferroni((1.0, 1.5, 2.0, 2.5)), sa.MultiSplit(samples=9)],
    ids=["split", "explicit", "grid", "multisplit"],
)
def test_clopper_pearson_strategies_are_valid(strategy):
    # 100 repetitions at α = 0.2 on a mechanism exactly at ε = 2: the count above 2 passes a binomial test.
    count = 0
    for seed in range(100):
        a = sa.ScoreAuditor(*_laplace(1000, 2.0, np.random.default_rng(500 + seed)))
        count += a.epsilon_clopper_pearson(0.2, threshold_strategy=strategy).value > 2.0
    assert stats.binomtest(count, 100, 0.2, alternative="greater").pvalue > 1e-3


def test_bootstrap_intervals_are_seeded_estimates():
    a = sa.ScoreAuditor(*_gaussian(500, 1.0, 4))
    params = sa.BootstrapParams.confidence_interval(samples=100, confidence=0.9, seed=3)
    interval = a.auroc(bootstrap=params)
    again = a.auroc(bootstrap=params)
    assert interval.values == again.values and interval.kind == "estimate"
    low, high = interval.values
    assert low < interval.estimate.value < high and high - low < 0.1
    assert "not a confidence bound" in interval.to_dict()["note"]
    # The true AUC of N(1, 1) against N(0, 1) is Φ(1/√2) ≈ 0.760; the area under the frontier is a bit above it.
    assert low < stats.norm.cdf(1 / math.sqrt(2)) + 0.02
    small = sa.ScoreAuditor(*_gaussian(100, 1.0, 4))  # acceleration: one jackknife evaluation per score
    raw = small.epsilon_raw_counts(min_count=5, bootstrap=sa.BootstrapParams(samples=50, acceleration=True))
    assert raw.values[0] <= raw.values[1] and raw.params.acceleration
    tpr = a.tpr_at_fpr(0.05, bootstrap=sa.BootstrapParams(samples=50, bias_correction=False, quantiles=(0.5,)))
    assert tpr.quantiles == (0.5,)


def test_one_run_methods_match_one_run_py():
    scores_in, scores_out = _gaussian(600, 2.0, 5)
    a = sa.ScoreAuditor(scores_in, scores_out)
    scores = np.concatenate([np.sort(scores_in), np.sort(scores_out)])
    labels = np.arange(1200) < 600
    direct = orun.one_run_audit(scores, labels, delta=1e-5, analysis=orun.EpsilonDeltaFDP())
    assert a.epsilon_one_run_fdp(0.05, 1e-5).value == direct.epsilon_lower_bound
    assert a.epsilon_one_run_fdp(0.05, 1e-5).value < conversions.gdp_epsilon(2.0, 1e-5)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: sa.ScoreAuditor([], [1.0]), r"in_scores.*non-empty"),
        (lambda: sa.ScoreAuditor([1.0, np.nan], [1.0]), r"in_scores.*NaN at index 1"),
        (lambda: sa.ScoreAuditor([[1.0]], [1.0]), r"in_scores.*1-D"),
        (lambda: sa.ScoreAuditor([1.0], ["a"]), r"out_scores.*numbers"),
        (lambda: sa.Explicit(float("nan")), r"threshold.*nan"),
        (lambda: sa.GridBonferroni(()), r"thresholds.*non-empty"),
        (lambda: sa.Split(fraction=1.0), r"fraction.*1\.0"),
        (lambda: sa.MultiSplit(samples=0), r"samples.*0"),
        (lambda: sa.BootstrapParams(quantiles=(0.0,)), r"quantiles.*\(0\.0,\)"),
        (lambda: sa.BootstrapParams(acceleration=True, bias_correction=False), r"acceleration.*bias_correction"),
        (lambda: sa.BootstrapParams.confidence_interval(confidence=1.0), r"confidence.*1\.0"),
        (lambda: sa.ScoreAuditor([1.0], [0.0]).tpr_at_fpr(1.5), r"fpr.*1\.5"),
        (lambda: sa.ScoreAuditor([1.0], [0.0]).epsilon_raw_counts(min_count=0), r"min_count.*0"),
        (lambda: sa.ScoreAuditor([1.0], [0.0]).epsilon_from_gdp(0.05, 0.0), r"delta.*0"),
        (lambda: sa.ScoreAuditor([1.0], [0.0]).epsilon_clopper_pearson(0.0), r"significance.*0\.0"),
        (lambda: sa.ScoreAuditor([1.0], [0.0]).epsilon_clopper_pearson(0.05, threshold_strategy="x"), r"strategy"),
        (lambda: sa.ScoreAuditor([1.0], [0.0]).max_accuracy(prevalence=2), r"prevalence.*2"),
    ],
)
def test_bad_input_is_one_line(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()
