"""Reports of audits without a spec (``dplens report --audit RESULT.json``) and a spec's additional audits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dplens import cli
from dplens._api import report_summary
from dplens.auditing.scores import audit_scores
from dplens.reports.audit_page import audit_kind, render_section, write_audit_report
from dplens.reports.build import build_report
from dplens.reports.model import Report, Status
from dplens.reports.render import read_json, write_report
from dplens.spec import load_spec

from .conftest import EXAMPLES, FIXED_TIME


def _scores_result(claim: float) -> dict:
    rng = np.random.default_rng(7)
    scores = np.concatenate([rng.normal(1.0, 1.0, 5_000), rng.normal(0.0, 1.0, 5_000)])
    member = np.concatenate([np.ones(5_000, bool), np.zeros(5_000, bool)])
    return audit_scores(scores, member, claim=claim, delta=1e-5).to_dict()


def _target_result(verdict: str = "VIOLATION") -> dict:
    return {
        "format": "dplens-target-audit",
        "verdict": verdict,
        "verdict_reason": "test data",
        "epsilon_lower_bound": 7.5,
        "epsilon_claimed": 1.0,
        "delta": 0.0,
        "confidence": 0.95,
        "trials": 1000,
        "target": {"name": "m.<f>", "call": "f(data, rng)"},
        "pair": {"description": "D vs D'", "data": "[1]", "neighbour": "[]"},
        "scores": [],
        "float_evidence": [],
        "reproducible": False,
        "reproducibility_note": "draws from the global RNG",
    }


def test_kinds_and_sections():
    result = _scores_result(claim=4.5)
    assert audit_kind(result) == "two_sample" and audit_kind(_target_result()) == "target"
    section = render_section(result, prefix="x_")
    assert section.verdict == "CONSISTENT" and set(section.figures) >= {"x_training_audit_roc.png"}
    assert "data:image/png;base64," in section.html  # embedded: the page's CSP admits data: images only
    target = render_section(_target_result())
    assert "m.&lt;f&gt;" in target.html and "<f>" not in target.html
    with pytest.raises(ValueError, match="must be the to_dict"):
        audit_kind({"format": "something else"})
    with pytest.raises(ValueError, match="verdict must be one of"):
        render_section(_target_result(verdict="NOT_AUDITED"))


def test_write_audit_report(tmp_path):
    result = _scores_result(claim=2.0)
    files = write_audit_report(result, tmp_path, title="scores <audit>", source="s.json", command=("dplens", "report"))
    document = json.loads(files.json.read_text())
    assert document["format"] == "dplens-audit-report" and document["kind"] == "two_sample"
    assert document["result"] == json.loads(json.dumps(result)) and document["verdict"] == result["verdict"]
    assert (
        document["provenance"]["command"] == ["dplens", "report"] and len(document["provenance"]["result_sha256"]) == 64
    )
    page = files.html.read_text()
    assert "scores &lt;audit&gt;" in page and "Content-Security-Policy" in page
    assert sorted(p.name for p in files.figures) == sorted(document["figures"]) and files.figures


def test_cli_report_of_a_saved_audit(tmp_path, capsys):
    saved = tmp_path / "audit.json"
    saved.write_text(json.dumps(_target_result()))
    code = cli.main(["report", "--audit", str(saved), "-o", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[0] == "verdict: VIOLATION" and (tmp_path / "out" / "report.html").is_file()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "not found"),
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"format": "x"}', "must be the to_dict"),
    ],
)
def test_cli_report_of_a_bad_audit_file(tmp_path, capsys, content, message):
    saved = tmp_path / "audit.json"
    if content is not None:
        saved.write_text(content)
    code = cli.main(["report", "--audit", str(saved), "-o", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_cli_report_needs_a_spec_or_an_audit(tmp_path, capsys):
    assert cli.main(["report", "-o", str(tmp_path)]) == 2
    assert "SPEC file, or --audit" in capsys.readouterr().err
    assert cli.main(["report", str(EXAMPLES / "gaussian_claim.toml"), "--audit", "x.json", "-o", str(tmp_path)]) == 2
    assert "not both" in capsys.readouterr().err


def test_an_additional_violation_makes_the_report_a_violation(tmp_path):
    spec = load_spec(EXAMPLES / "dp_sgd_mnist.toml")
    report = build_report(
        spec=spec,
        accounting=report_summary(spec, 1e-5),
        title="t",
        not_audited_reason="main audit off",
        additional_audits=[_scores_result(claim=0.5)],  # a 1-GDP mechanism claimed at ε = 0.5
        created_utc=FIXED_TIME,
    )
    assert report.additional_audits[0]["verdict"] == "VIOLATION"
    assert report.verdict.status is Status.VIOLATION and report.verdict.sentence.startswith("Violation: the additional")
    assert any(r.startswith("Additional audit (two_sample): VIOLATION") for r in report.verdict.reasons)
    files = write_report(report, tmp_path)
    again = read_json(files.json)
    assert again.additional_audits == report.additional_audits and again.verdict.status is Status.VIOLATION
    assert (tmp_path / "additional_1_training_audit_roc.png").is_file()
    assert "Training audit from scores" in files.html.read_text()
    tampered = report.to_dict()
    tampered["verdict"]["status"] = "NOT_AUDITED"
    with pytest.raises(ValueError, match="combined"):
        Report.from_dict(tampered)


def test_generate_report_runs_the_specs_audit_game(tmp_path, capsys):
    code = cli.main(["report", str(EXAMPLES / "dp_sgd_training.toml"), "-o", str(tmp_path), "--trials", "2000"])
    _, err = capsys.readouterr()
    assert code == 0, err
    report = read_json(tmp_path / "report.json")
    assert [a["kind"] for a in report.additional_audits] == ["one_run"]
    assert report.audit is not None and "[audit] game (one_run)" in err
