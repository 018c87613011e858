"""A tuning study in the ledger (issue 49): a repeat-and-select release is charged as ONE release whose ε includes
the search and its selection, and ``dplens budget status`` says which releases are studies (their runs on average,
the distribution, the run's privacy unit). SQLite only (the PostgreSQL store shares the SQL)."""

from __future__ import annotations

import json

import pytest

import dplens
from dplens.accountant.compose import Accountant
from dplens.accountant.selection import RepeatAndSelect
from dplens.cli import main
from dplens.ledger import Ledger
from dplens.ledger.studies import distribution_name, study_words, tuning_studies

RUN = dplens.Gaussian(noise_multiplier=20.0)
DELTA = 1e-6


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("shape", "name"),
    [(1.0, "geometric"), (0.0, "logarithmic"), (float("inf"), "poisson"), (2.5, "truncated-negative-binomial")],
)
def test_the_distribution_is_named(shape, name):
    assert distribution_name(shape).startswith(name)


def test_studies_are_found_inside_compositions():
    study = RepeatAndSelect(event=RUN, mean=40.0, shape=float("inf"))
    entries = [(dplens.Gaussian(noise_multiplier=5.0), 2), (study, 3)]
    (found,) = tuning_studies(entries)
    assert found["mean_runs"] == 40.0 and found["distribution"] == "poisson" and found["shape"] is None
    assert found["count"] == 3 and found["run"] == "Gaussian" and found["privacy_unit"] is None
    assert tuning_studies([(RUN, 1)]) == []
    assert "40 runs on average (poisson)" in study_words([found]) and "x3" in study_words([found])


def test_a_study_is_one_release_with_its_selection(tmp_path):
    study = RepeatAndSelect(event=RUN, mean=10.0, shape=1.0)
    with Ledger.open(tmp_path / "book.db", create=True) as book:
        book.create_budget(unit="one person", epsilon=5.0, delta=DELTA)
        assert book.charge(study, release="search").accepted
        assert book.charge(study, release="search-again").accepted  # the same events under another name
        assert book.charge(RUN, release="plain").accepted
        status = book.status().budgets[0]
    assert set(status.studies) == {"search", "search-again"}
    (row,) = status.studies["search"]
    assert row["mean_runs"] == 10.0 and row["distribution"] == "geometric" and row["selection"] == "best run released"
    releases = {r["name"]: r for r in status.to_dict()["releases"]}
    assert releases["search"]["tuning"][0]["distribution"] == "geometric" and "tuning" not in releases["plain"]
    assert status.to_dict()["tuning_studies"] == 2 and len(status.releases) == 3
    alone = releases["search"]["epsilon_alone"]
    one_run = Accountant().compose(RUN).epsilon(DELTA)
    # the study's own epsilon bounds the repeat-and-select event's (Papernot-Steinke; the budget rule's route, an
    # upper bound at least the accountant's tightest), which is above one run's: the selection is included
    study_epsilon = Accountant().compose(study).epsilon(DELTA)
    assert alone >= study_epsilon * (1 - 1e-12) and study_epsilon > one_run


def test_budget_status_shows_a_user_level_study(tmp_path, capsys):
    spec = tmp_path / "study.toml"
    spec.write_text(
        '[[mechanism]]\ntype = "repeat_and_select"\nmean = 10\nshape = "geometric"\n[mechanism.mechanism]\n'
        'type = "dp_sgd"\nnoise_multiplier = 3.0\ndataset_size = 20000\nbatch_size = 200\nepochs = 1\n'
        'privacy_unit = "user"\nmax_examples_per_user = 2\n'
    )
    book = str(tmp_path / "book.db")
    assert run(capsys, ["budget", "create", book, "--unit", "one user", "--epsilon", "50", "--delta", "1e-6"])[0] == 0
    code, out, err = run(capsys, ["budget", "charge", book, str(spec), "--release", "sweep-1", "--json"])
    assert code == 0 and json.loads(out)["accepted"], err
    code, out, _ = run(capsys, ["budget", "status", book])
    assert code == 0 and "release 'sweep-1': tuning study of 10 runs on average (geometric) of UserLevelRun" in out
    assert "user-level, best run released (charged as one release, the selection included)" in out
    code, out, _ = run(capsys, ["budget", "status", book, "--json"])
    (budget,) = json.loads(out)["budgets"]
    (release,) = budget["releases"]
    (row,) = release["tuning"]
    assert row["privacy_unit"] == "user" and row["max_examples_per_user"] == 2 and row["mean_runs"] == 10.0
    assert budget["tuning_studies"] == 1 and budget["releases_count"] == 1


def test_the_charge_and_the_reports_ledger_section_name_the_study(tmp_path, capsys):
    from dplens.ledger.report import ledger_section
    from dplens.reports.render import _ledger_statement_lines, render_html

    spec = tmp_path / "study.toml"
    spec.write_text(
        '[[mechanism]]\ntype = "repeat_and_select"\nmean = 40\nshape = "poisson"\n[mechanism.mechanism]\n'
        'type = "gaussian"\nnoise_multiplier = 30.0\n'
    )
    book = str(tmp_path / "book.db")
    assert run(capsys, ["budget", "create", book, "--unit", "one person", "--epsilon", "5", "--delta", "1e-6"])[0] == 0
    code, out, _ = run(capsys, ["budget", "charge", book, str(spec), "--release", "search", "--json"])
    payload = json.loads(out)
    assert code == 0 and payload["tuning"][0]["mean_runs"] == 40.0 and payload["tuning"][0]["distribution"] == "poisson"
    code, out, _ = run(capsys, ["budget", "charge", book, str(spec), "--release", "search-2"])
    assert code == 0 and "tuning study of 40 runs on average (poisson) of Gaussian" in out
    plain = tmp_path / "plain.toml"
    plain.write_text('[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 30.0\n')
    code, out, _ = run(capsys, ["budget", "charge", book, str(plain), "--release", "plain", "--json"])
    assert code == 0 and "tuning" not in json.loads(out)
    section = ledger_section(book)
    (budget,) = section["budgets"]
    assert budget["tuning_studies"] == 2 and set(budget["tuning_study_releases"]) == {"search", "search-2"}

    released = dplens.parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 30.0}]})
    report = dplens.build_report(
        spec=released,
        accounting=released.accountant().summary(DELTA),
        title="t",
        not_audited_reason="test",
        budget_ledger=section,
    )
    text = " ".join(" ".join(_ledger_statement_lines(report)).split())
    assert "2 release(s) are tuning studies, each charged as one release with its selection included" in text
    html = render_html(report)
    assert 'class="ledger-studies"' in html and "<code>search</code> (40 runs on average, poisson)" in html


def test_many_distinct_studies_are_listed_in_charge_order(tmp_path):
    """More distinct study event sets than one statement asks for (500 per query)."""
    with Ledger.open(tmp_path / "book.db", create=True) as book:
        book.create_budget(unit="one person", epsilon=1e9, delta=DELTA)
        with book._store.read() as db:
            assert db.release_names_of("default", []) == []
        for i in range(3):
            book.charge(RepeatAndSelect(event=RUN, mean=2.0 + i, shape=1.0), release=f"s{i}")
        with book._store.read() as db:
            shas = [sha for sha, _ in db.event_groups("default", "all")]
            fake = [f"{n:064x}" for n in range(1200)]  # digests of no release, around the real ones
            names = db.release_names_of("default", [*fake[:600], *reversed(shas), *fake[600:]])
    assert [name for name, _ in names] == ["s0", "s1", "s2"]
