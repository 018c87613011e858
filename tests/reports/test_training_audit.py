"""Rendering of training audits (reports/training_audit.py): which figures each result kind gets, PNG bytes that
are deterministic, the HTML fragment (escaped, estimates labelled), and a result re-rendered from JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dplens.auditing import attribute as at
from dplens.auditing import canaries as cn
from dplens.auditing import scores as sc
from dplens.mechanisms.additive import SubsampledGaussianMechanism
from dplens.reports import training_audit as ta

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(1, 1, 5000), rng.normal(0, 1, 5000)])
    member = np.arange(10_000) < 5000
    training = cn.DpSgdTraining(noise_multiplier=1.0, sampling_rate=0.05, steps=100)
    claim = 3.5  # explicit: no accountant run needed to render
    out = {
        "attribute": at.audit(
            SubsampledGaussianMechanism(noise_multiplier=1.0, sampling_rate=0.05, steps=100),
            trials=2000,
            claim=at.DpClaim(epsilon=3.5, delta=1e-5),
            datasets=(0.0, 1.0),
            reading=at.ClaimReading.FEATURE_DP,
        ),
        "two_sample": sc.audit_scores(scores, member, claim=2.0, delta=1e-5),
        "one_run": cn.one_run_canary_audit(training, canaries=500, vectorised=True, claim=claim, seed=1),
        "distinguish": cn.multi_run_canary_audit(training, trials=3000, claim=claim, seed=1),
    }
    return {name: json.loads(json.dumps(result.to_dict())) for name, result in out.items()}


EXPECTED = {
    "attribute": {"attribute_audit"},
    "two_sample": {"training_audit_roc", "training_audit_scores"},
    "one_run": {"training_audit_roc", "training_audit_scores", "training_audit_epsilon_vs_canaries"},
    "distinguish": {"training_audit_roc", "training_audit_scores", "training_audit_epsilon_vs_trainings"},
}


@pytest.fixture(scope="module")
def rendered(results) -> dict[str, ta.TrainingAuditSection]:
    return {name: ta.render(result, figure_src=lambda stem: f"{stem}.png") for name, result in results.items()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_figures_of_each_kind(results, rendered, name):
    assert ta.kind(results[name]) == name
    figures = rendered[name].figures
    assert set(figures) == EXPECTED[name]
    assert all(png.startswith(PNG_MAGIC) and len(png) > 5000 for png in figures.values())


def test_figures_are_deterministic(results, rendered):
    # Equal inputs give equal bytes (no timestamp in the PNG): a report re-rendered from JSON is identical.
    assert ta.roc_figure(results["two_sample"]) == rendered["two_sample"].figures["training_audit_roc"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_html_fragment(results, rendered, name):
    section = rendered[name]
    html = section.html
    assert html.startswith('<section class="training-audit">') and html.rstrip().endswith("</section>")
    assert "ε lower bound" in html and "valid 95% lower bound" in html
    if name == "attribute":
        assert "Theorem 4" in html and "feature-DP reading" in html and "interval" in html
    else:
        assert "(ESTIMATE)" in html
    for stem in section.figures:
        assert f'src="{stem}.png"' in html
    embedded = ta.html_fragment(results[name], section.figures)
    assert embedded.count("data:image/png;base64,") == len(section.figures)


def test_one_run_shows_each_analysis_of_the_bound_and_labels_the_gaussian_family(rendered, results):
    # The bound of a one-run audit is the larger of two analyses run at α/5 and 4α/5 (issue 37): the report lists
    # both with their share, and the Gaussian-family f-DP number as an estimate.
    html = rendered["one_run"].html
    for part in results["one_run"]["analysis"]["components"]:
        assert f"{part['analysis']} (a bound at {part['share']:g} of α)" in html
    assert "f-DP one-run ε, Gaussian family (ESTIMATE)" in html


def test_the_claim_line_says_where_the_claim_came_from(results):
    from_accountant = dict(results["distinguish"], claim_source="accountant (pld: ...)")
    assert "the accountant's" in ta._claim_label(from_accountant)
    assert "claimed" in ta._claim_label(results["two_sample"])


def test_html_is_escaped(results):
    hostile = dict(results["two_sample"], claim_source="<script>alert(1)</script>")
    html = ta.html_fragment(hostile, {})
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_missing_data_gives_no_figure(results):
    bare = dict(results["two_sample"], roc_estimate=[], histogram={})
    assert ta.roc_figure(bare) is None and ta.histogram_figure(bare) is None
    assert ta.epsilon_vs_trainings_figure(results["two_sample"]) is None
    assert ta.epsilon_vs_canaries_figure(results["distinguish"]) is None
    with pytest.raises(ValueError, match="to_dict"):
        ta.kind({"verdict": "CONSISTENT"})


def test_importing_the_module_loads_no_matplotlib():
    import subprocess
    import sys

    code = "import dplens.reports.training_audit, sys; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
