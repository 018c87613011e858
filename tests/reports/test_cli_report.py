"""``dplens report SPEC -o DIR`` and ``dplens reproduce all`` (index page) from the command line."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from dplens import cli
from dplens.reports.render import read_json

from .conftest import EXAMPLES


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_without_audit_writes_every_file(tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, out, err = run(
        capsys, "report", str(EXAMPLES / "gaussian_claim.toml"), "-o", str(out_dir), "--no-audit", "--delta", "1e-6"
    )
    assert code == 0, err
    html = out_dir / "report.html"
    assert out.strip().splitlines()[-1] == f"dplens report: wrote {html.resolve()}"
    assert "[report]" in err  # progress on stderr
    report = read_json(out_dir / "report.json")
    assert report.title == "under-claimed Gaussian" and report.audit is None
    assert report.verdict.status.value == "NOT_AUDITED" and "--no-audit" in report.not_audited_reason
    assert report.accounting.delta == 1e-6
    assert report.provenance.command[:3] == ("dplens", "report", str(EXAMPLES / "gaussian_claim.toml"))
    assert (out_dir / "privacy-statement.txt").is_file()
    assert sorted(p.name for p in out_dir.glob("*.png")) == [
        "attack_risk.png",
        "epsilon_delta.png",
        "rdp_curve.png",
        "trade_off.png",
    ]


def test_report_defaults_take_the_claims_delta_and_unit(tmp_path, capsys):
    code, _, err = run(
        capsys,
        "report",
        str(EXAMPLES / "gaussian_claim.toml"),
        "-o",
        str(tmp_path),
        "--quiet",
        "--unit",
        "one user's data",
    )
    assert code == 0 and err == ""
    report = read_json(tmp_path / "report.json")
    assert report.accounting.delta == 1e-5 and report.claim.epsilon == 1.0
    assert report.claim.privacy_unit == "one user's data"


def test_report_with_audit_flags_the_under_claimed_gaussian(tmp_path, capsys):
    code, out, err = run(
        capsys, "report", str(EXAMPLES / "gaussian_claim.toml"), "-o", str(tmp_path), "--trials", "20000", "--seed", "3"
    )
    assert code == 0, err
    report = read_json(tmp_path / "report.json")
    assert report.audit is not None and report.audit.trials == 20000 and report.audit.seed == 3
    assert report.provenance.seeds == {"audit": 3}
    # σ = 1 is 4.377-DP at δ = 1e-5 (note §5.2: ε_lb ≈ 1.9 at 1e4 trials), far above the claimed 1.0
    assert report.verdict.status.value == "VIOLATION"
    assert report.audit.epsilon_lower_bound <= report.accounting.epsilon
    assert (tmp_path / "audit_trials.png").is_file()
    assert "VIOLATION" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{spec}", "-o", "{out}", "--delta", "1.5"],
        ["report", "{spec}", "-o", "{out}", "--confidence", "1"],
        ["report", "{spec}", "-o", "{out}", "--trials", "0"],
        ["report", "{spec}", "-o", "{out}", "--trials", "10", "--no-audit"],
        ["report", "{spec}", "-o", "{out}", "--unit", " "],
        ["report", "missing.toml", "-o", "{out}"],
        ["report", "{spec}"],
    ],
)
def test_bad_report_arguments_exit_2_and_write_nothing(tmp_path, capsys, argv):
    out_dir = tmp_path / "out"
    argv = [a.replace("{spec}", str(EXAMPLES / "gaussian_claim.toml")).replace("{out}", str(out_dir)) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dplens: error:"), err
    assert not out_dir.exists()


def test_bad_spec_exit_2(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text('[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = -1\n')
    code, _out, err = run(capsys, "report", str(spec), "-o", str(tmp_path / "out"), "--no-audit")
    assert code == 2 and "noise_multiplier" in err and not (tmp_path / "out").exists()


# ---- reproduce all + index --------------------------------------------------------------------


def _fake_reproduction(title: str):
    def run_it(out_dir: Path, *, quick: bool = False) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        readme = out_dir / "README.md"
        readme.write_text(f"# {title}\n\nWhat matched <the paper> & what did not.\n\n## Figure 1\n\ntext\n")
        figure = out_dir / "figure1.png"
        figure.write_bytes(b"\x89PNG\r\n\x1a\n")
        data = out_dir / "values.csv"
        data.write_text(f"quick,{quick}\n")
        return [readme, figure, data]

    return types.SimpleNamespace(run=run_it)


def test_reproduce_all_runs_every_reproduction_and_writes_the_index(tmp_path, capsys, monkeypatch):
    modules = {"alpha": _fake_reproduction("Alpha <paper>"), "beta": _fake_reproduction("Beta & co")}
    monkeypatch.setattr(cli, "_available_reproductions", lambda: modules)
    code, out, _ = run(capsys, "reproduce", "all", "-o", str(tmp_path), "--quick")
    assert code == 0
    assert (tmp_path / "alpha" / "values.csv").read_text() == "quick,True\n"
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert f"[reproduce] index: {(tmp_path / 'index.html').resolve()}" in out
    for name in ("alpha", "beta"):
        for link in (f"{name}/README.md", f"{name}/figure1.png", f"{name}/values.csv"):
            assert f'href="{link}"' in index
    assert "Alpha &lt;paper&gt;" in index and "Beta &amp; co" in index and "<paper>" not in index
    assert "What matched &lt;the paper&gt; &amp; what did not." in index
    markdown = (tmp_path / "index.md").read_text(encoding="utf-8")
    assert "## [Alpha <paper>](alpha/README.md)" in markdown and "[values.csv](beta/values.csv)" in markdown


def test_reproduce_all_with_the_real_registry_quick(tmp_path, capsys, monkeypatch):
    # The real registry, each module's run() replaced by the fake one: every available reproduction is run.
    available = cli._available_reproductions()
    assert {"gaussmix", "corrdp"} <= set(available)
    fakes = {name: _fake_reproduction(name) for name in available}
    monkeypatch.setattr(cli, "_available_reproductions", lambda: fakes)
    code, out, _ = run(capsys, "reproduce", "-o", str(tmp_path), "--quick")
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted(available)
    assert out.count("[reproduce]") == 2 * len(available) + 1


def test_committed_index_links_every_committed_reproduction():
    root = Path(__file__).resolve().parents[2] / "reports"
    index = (root / "index.html").read_text(encoding="utf-8")
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        assert f'href="{folder.name}/README.md"' in index, folder.name


def test_index_links_are_relative(tmp_path, monkeypatch, capsys):
    # The reports/ folder is committed and browsed anywhere: no absolute path may leak into the index.
    monkeypatch.setattr(cli, "_available_reproductions", lambda: {"alpha": _fake_reproduction("A")})
    run(capsys, "reproduce", "all", "-o", str(tmp_path))
    assert str(tmp_path) not in (tmp_path / "index.html").read_text() + (tmp_path / "index.md").read_text()
