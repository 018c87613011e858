"""``dplens report SPEC --implementation-evidence FILE.json`` (issue 46, item 4): the check-dp-sgd result of the step
that ran, rendered in the JSON (validated, round trip), the HTML page and the privacy statement, its NIST items marked,
a VIOLATION carried into the report's verdict, and bad evidence refused in one line before any work; a check excluded
under an assumption the user stated (assume_finite_gradients) shown as not counted, and not a reason of the verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import dplens
from dplens.auditing.training.check import check_dp_sgd
from dplens.auditing.training.framework_free import reference_step
from dplens.cli import main
from dplens.reports.format import fmt_lower
from dplens.reports.model import Report
from dplens.reports.render import read_json

N, B, STEPS, SIGMA, C, DELTA = 500, 50, 3, 1.0, 1.0, 1e-5
SPEC = f"""
name = "DP-SGD, checked"
[[mechanism]]
type = "dp_sgd"
noise_multiplier = {SIGMA}
dataset_size = {N}
batch_size = {B}
epochs = {STEPS * B / N}
"""


def _clipped(g: np.ndarray) -> np.ndarray:
    g = np.where(np.all(np.isfinite(g), axis=1)[:, None], g, 0.0)
    return np.minimum(1.0, C / np.maximum(np.linalg.norm(g, axis=1), 1e-300)) @ g


def _unguarded(g: np.ndarray) -> np.ndarray:  # not nan_safe: a NaN row makes the sum NaN (Opacus 1.6's clipping)
    return np.minimum(1.0, C / np.maximum(np.linalg.norm(g, axis=1), 1e-300)) @ g


def tenth(g, rng):  # a tenth of the declared noise, and not nan_safe
    with np.errstate(invalid="ignore"):
        return (_unguarded(g) + rng.normal(0, 0.1 * SIGMA * C, g.shape[1])) / B


def nan_leak(g, rng):  # the declared noise, not nan_safe
    with np.errstate(invalid="ignore"):
        return (_unguarded(g) + rng.normal(0, SIGMA * C, g.shape[1])) / B


def shuffled(n, rng):  # shuffled fixed-size batches, where Poisson was declared
    while True:
        order = rng.permutation(n)
        yield from (order[i : i + B] for i in range(0, n - B + 1, B))


def _check(step, **options):
    return check_dp_sgd(
        step,
        noise_multiplier=SIGMA,
        max_grad_norm=C,
        batch_size=B,
        dataset_size=N,
        steps=STEPS,
        delta=DELTA,
        trials=100,
        seed=0,
        **options,
    )


# Session-scoped, not module-scoped: four check_dp_sgd runs (≈ 3 s of CPU) that a shuffled collection, which
# interleaves modules, would otherwise repeat before every test of this module. "violation" and "assumed" state that
# the gradients are finite: their non_finite_rows VIOLATION is not counted (the under-noising of "violation" is).
@pytest.fixture(scope="session")
def results():
    return {
        "pass": _check(reference_step(SIGMA, C, B)),
        "violation": _check(tenth, assume_finite_gradients=True),
        "loader": _check(reference_step(SIGMA, C, B), sampler_function=shuffled),
        "assumed": _check(nan_leak, assume_finite_gradients=True),
    }


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "dp_sgd.toml"
    path.write_text(SPEC)
    return path


def _report(spec, out, evidence, **options):
    return dplens.generate_report(
        spec, out, audit_mode=dplens.AuditMode.OFF, implementation_evidence=evidence, **options
    )


def test_json_section_holds_the_check_as_it_was_and_round_trips(tmp_path, spec, results):
    result = results["pass"]
    assert result.verdict == "PASS", result.summary()
    files = _report(spec, tmp_path / "out", result)
    data = json.loads(files.json.read_text())
    section = data["implementation_evidence"]
    check = json.loads(json.dumps(result.to_dict()))
    keys = ("verdict", "checks", "audit", "model_based", "declared", "claimed_epsilon", "alpha", "notes")
    for key in (*keys, "stated_assumptions"):
        assert section[key] == check[key], key  # rendered, not recomputed
    assert {"name", "verdict", "measured", "declared", "finding"} <= set(section["checks"][0])
    assert section["audit"]["kind"] == "assumption-free" and section["model_based"]["kind"] == "model-based"
    assert "model-based" in section["model_based"]["assumptions"]
    assert section["claim_comparison"] == {
        "claim_epsilon": data["claim"]["epsilon"],
        "claim_delta": DELTA,
        "audit_exceeds_claim": False,
        "model_based_exceeds_claim": False,
    }
    assert section["report_status"] == "CONSISTENT" and data["verdict"]["status"] == "CONSISTENT"
    assert read_json(files.json) == files.report == Report.from_dict(files.report.to_dict())


def test_a_report_without_evidence_has_no_section(tmp_path, spec):
    files = dplens.generate_report(spec, tmp_path / "out", audit_mode=dplens.AuditMode.OFF)
    assert "implementation_evidence" not in json.loads(files.json.read_text())
    assert 'id="implementation-evidence"' not in files.html.read_text()


def test_html_section_shows_each_check_and_labels_the_model_based_bound(tmp_path, spec, results):
    result = results["pass"]
    page = _report(spec, tmp_path / "out", result).html.read_text()
    assert '<h2 id="implementation-evidence">' in page
    rows = re.findall(r'<tr class="implementation-check" data-verdict="(\w+)"><td><code>([^<]+)</code>', page)
    assert [name for _, name in rows] == [c.name for c in result.checks] + [
        "audit (assumption-free)",
        "model-based bound",
    ]
    assert [verdict for verdict, _ in rows][:-2] == [c.verdict for c in result.checks]
    model_row = page[page.index("<code>model-based bound</code>") :].split("</tr>")[0]
    assert "MODEL-BASED" in model_row and f"ε ≥ {fmt_lower(result.model_based.epsilon_lower_bound)}" in model_row
    assert "The model-based bound is <strong>model-based</strong>, not assumption-free" in page


def test_statement_states_both_bounds_and_labels_the_model_based_one(tmp_path, spec, results):
    result = results["pass"]
    statement = " ".join(_report(spec, tmp_path / "out", result).statement.read_text().split())
    assert f"Implementation evidence (dplens check-dp-sgd of {result.subject}" in statement
    assert f"is AT LEAST {fmt_lower(result.audit.epsilon_lower_bound)} (a LOWER BOUND, valid whatever" in statement
    assert (
        f"Model-based bound (NOT assumption-free): ε ≥ {fmt_lower(result.model_based.epsilon_lower_bound)}" in statement
    )
    assert "assumption-free: ε" not in statement.replace("NOT assumption-free", "")


def test_nist_marks_the_correctness_test_and_says_the_loader_was_not_tested(tmp_path, spec, results):
    nist = _report(spec, tmp_path / "out", results["pass"]).report.nist
    test = nist.item("algorithm_test")
    assert test.status.value == "shown" and test.where == "Implementation evidence section"
    assert "dplens check-dp-sgd ran the DP-SGD step that ran" in test.finding
    assert "did not test the loader" in nist.item("batch_sampling").finding


STATED = "stated by the user, not checked by dplens: every per-sample gradient is finite (assume_finite_gradients)"


def test_a_violation_check_is_the_reports_verdict_and_an_excluded_one_is_shown_not_counted(tmp_path, spec, results):
    result = results["violation"]  # under-noised and not nan_safe, finite gradients stated: noise_std still counts
    violations = [(c.name, c.excluded_from_overall) for c in result.checks if c.verdict == "VIOLATION"]
    assert violations == [("noise_std", False), ("non_finite_rows", True)], result.summary()
    assert result.verdict == "VIOLATION"
    files = _report(spec, tmp_path / "out", result)
    report = files.report
    assert report.verdict.status.value == "VIOLATION"
    assert "does not implement the accounted mechanism: noise_std (less noise than accounted" in report.verdict.sentence
    assert "non_finite_rows" not in report.verdict.sentence  # excluded: shown in the section, not a reason
    assert any(STATED in r for r in report.verdict.reasons)
    assert report.nist.item("algorithm_test").status.value == "flagged"
    data = report.to_dict()["implementation_evidence"]
    assert data["report_status"] == "VIOLATION" and data["checks"][0]["verdict"] == "VIOLATION"
    # the excluded check as it was, marked, in the JSON, the HTML page and the statement
    leak = next(c for c in result.checks if c.name == "non_finite_rows")
    section = json.loads(files.json.read_text())["implementation_evidence"]
    assert [a["option"] for a in section["stated_assumptions"]] == ["assume_finite_gradients"]
    marked = next(c for c in section["checks"] if c["name"] == "non_finite_rows")
    assert (marked["verdict"], marked["excluded_from_overall"], marked["exclusion_reason"]) == (
        "VIOLATION",
        True,
        leak.exclusion_reason,
    )
    assert read_json(files.json) == report
    page = files.html.read_text()
    row = page[page.index("<code>non_finite_rows</code>") :].split("</tr>")[0]
    assert "NOT COUNTED" in row and "not counted in the verdict: the user states every per-sample gradient" in row
    assert "NOT COUNTED" not in page[page.index("<code>noise_std</code>") :].split("</tr>")[0]
    assert f'<p class="implementation-assumption"><strong>Assumption</strong> {STATED}' in page
    statement = " ".join(files.statement.read_text().split())
    assert f"- Assumption {STATED}; non_finite_rows ran and is reported but not counted in the verdict." in statement
    assert "2 VIOLATION, 1 not counted under a stated assumption)" in statement
    assert f"- VIOLATION (not counted: {leak.exclusion_reason}): non_finite_rows:" in statement


def test_a_violation_only_from_an_excluded_check_is_not_the_reports_verdict(spec, results):
    from dplens._api import report_summary
    from dplens.reports.build import build_report
    from dplens.spec import load_spec

    result = results["assumed"]  # not nan_safe, finite gradients stated
    leak = next(c for c in result.checks if c.name == "non_finite_rows")
    assert leak.verdict == "VIOLATION" and leak.excluded_from_overall and result.verdict != "VIOLATION"
    loaded = load_spec(spec)
    report = build_report(
        spec=loaded,
        accounting=report_summary(loaded, DELTA),
        title="assumed",
        audit=None,
        not_audited_reason="not audited here",
        implementation_evidence=result,
    )
    expected = "CONSISTENT" if result.verdict == "PASS" else "INCONCLUSIVE"
    assert report.implementation_evidence["report_status"] == expected == report.verdict.status.value
    assert Report.from_dict(report.to_dict()) == report
    assert any(STATED in r for r in report.verdict.reasons)
    assert f"(dplens check-dp-sgd: {result.verdict} under an assumption the user stated)" in report.verdict.sentence
    test = report.nist.item("algorithm_test")
    assert test.status.value == "shown"
    assert "1 VIOLATION; not counted, under an assumption the user stated: non_finite_rows)" in test.finding


def test_a_loader_that_breaks_the_declared_sampler_flags_the_nist_sampling_item(tmp_path, spec, results):
    result = results["loader"]
    law = next(c for c in result.checks if c.name == "sampling_law")
    assert law.verdict == "VIOLATION", law.finding
    report = _report(spec, tmp_path / "out", result).report
    item = report.nist.item("batch_sampling")
    assert item.status.value == "flagged" and "sampling_law" in item.where
    assert report.verdict.status.value == "VIOLATION"


def test_a_bound_above_a_smaller_claim_refutes_it(tmp_path, results):
    result = results["pass"]
    claim = round(result.model_based.epsilon_lower_bound / 2, 3)  # the vendor claims less than the bound shows
    path = tmp_path / "claimed.toml"
    path.write_text(SPEC + f"[claim]\nepsilon = {claim}\ndelta = {DELTA}\n")
    report = _report(path, tmp_path / "out", result).report
    section = report.implementation_evidence
    assert section["verdict"] == "PASS" and section["claim_comparison"]["model_based_exceeds_claim"] is True
    assert report.verdict.status.value == "VIOLATION" and "the model-based bound (ε ≥" in report.verdict.sentence


def _cli(spec: Path, out: Path, evidence: Path, capsys) -> tuple[int, str, str]:
    code = main(
        ["report", str(spec), "-o", str(out), "--no-audit", "--quiet", "--implementation-evidence", str(evidence)]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_reads_the_json_of_check_dp_sgd(tmp_path, spec, results, capsys):
    evidence = tmp_path / "check.json"
    evidence.write_text(json.dumps(results["violation"].to_dict(), allow_nan=False))
    code, out, _ = _cli(spec, tmp_path / "out", evidence, capsys)
    assert code == 0 and out.startswith("verdict: VIOLATION.")
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["implementation_evidence"]["source"] == str(evidence)


def _without(data: dict, path: str) -> dict:
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    del node[last]
    return data


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: "{not json", "is not valid JSON"),
        (lambda d: json.dumps([d]), "must be the JSON object of dplens check-dp-sgd --json; got list"),
        (lambda d: json.dumps(_without(d, "audit")), "missing required field 'audit'"),
        (lambda d: json.dumps(_without(d, "model_based.assumptions")), "'model_based.assumptions'"),
        (lambda d: json.dumps(d | {"verdict": "OK"}), "field 'verdict' must be one of"),
        (lambda d: json.dumps(d | {"claimed_epsilon": float("nan")}), "field 'claimed_epsilon' must be of type number"),
        (lambda d: json.dumps(d | {"declared": d["declared"] | {"noise_multiplier": 0.8}}), "noise_multiplier 0.8"),
        (lambda d: json.dumps(d | {"declared": d["declared"] | {"steps": 30}}), "steps 30 (the spec's: 3)"),
        (lambda d: json.dumps(d | {"declared": d["declared"] | {"delta": 1e-6}}), "differs from the report's claim"),
        (
            lambda d: json.dumps(d | {"checks": [d["checks"][0] | {"excluded_from_overall": True}, *d["checks"][1:]]}),
            "check 'noise_std' is excluded_from_overall but no stated assumption excludes it",
        ),
        (lambda d: json.dumps(d | {"stated_assumptions": [{"option": "x"}]}), "'stated_assumptions[0].statement'"),
    ],
)
def test_malformed_or_foreign_evidence_is_one_line_exit_two(tmp_path, spec, results, capsys, edit, words):
    evidence = tmp_path / "check.json"
    evidence.write_text(edit(json.loads(json.dumps(results["pass"].to_dict()))))
    code, _, err = _cli(spec, tmp_path / "out", evidence, capsys)
    assert code == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "out" / "report.json").exists()


def test_missing_file_and_a_spec_without_training_are_refused(tmp_path, spec, results, capsys):
    code, _, err = _cli(spec, tmp_path / "out", tmp_path / "nope.json", capsys)
    assert code == 2 and "implementation evidence file not found" in err
    laplace = tmp_path / "laplace.toml"
    laplace.write_text('[[mechanism]]\ntype = "laplace"\nepsilon = 1.0\n')
    evidence = tmp_path / "check.json"
    evidence.write_text(json.dumps(results["pass"].to_dict()))
    code, _, err = _cli(laplace, tmp_path / "out", evidence, capsys)
    assert code == 2 and err.count("\n") == 1 and "the spec has no example-level DP-SGD mechanism" in err


@pytest.mark.parametrize(
    ("main", "evidence", "expected"),
    [
        ("CONSISTENT", "pass", "CONSISTENT"),
        ("INCONCLUSIVE", "pass", "INCONCLUSIVE"),
        ("CONSISTENT", "violation", "VIOLATION"),
        ("VIOLATION", "pass", "VIOLATION"),
        (None, "pass", "CONSISTENT"),
        (None, "violation", "VIOLATION"),
    ],
)
def test_the_verdict_combines_the_main_audit_and_the_evidence(spec, results, audit_dict, main, evidence, expected):
    from dplens._api import report_summary
    from dplens.reports.build import build_report
    from dplens.spec import load_spec

    loaded = load_spec(spec)
    report = build_report(
        spec=loaded,
        accounting=report_summary(loaded, DELTA),
        title="combined",
        audit=None if main is None else audit_dict(verdict=main, delta=DELTA),
        not_audited_reason="not audited here",
        implementation_evidence=results[evidence],
    )
    assert report.verdict.status.value == expected
    assert Report.from_dict(report.to_dict()) == report  # the report's own invariant holds
    assert any(r.startswith("Implementation evidence (dplens check-dp-sgd of") for r in report.verdict.reasons)
