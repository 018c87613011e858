"""``dplens budget create|charge|status|verify``: the CLI contract (exit 0 accepted, 3 refused, 2 bad input; the
status JSON keys) and every kind of bad input — one line on stderr, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dplens.cli import LEDGER_MODES, LEDGER_PERIODS, RELATIONS, main
from dplens.ledger import Ledger, Mode, Period

SMALL = '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 20.0\n'
BIG = '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 1.0\n'
REPLACE = '[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 20.0\nneighboring = "replace_one"\n'


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, out: str, err: str) -> bool:
    return code == 2 and out == "" and err.count("\n") == 1 and err.startswith("dplens: error: ")


@pytest.fixture
def specs(tmp_path):
    paths = {}
    for name, text in (("small", SMALL), ("big", BIG), ("replace", REPLACE)):
        paths[name] = tmp_path / f"{name}.toml"
        paths[name].write_text(text)
    return paths


def _snapshot(path: Path) -> dict[str, str]:
    """The bytes of a ledger file and its WAL companions (to show that nothing was written)."""
    out = {}
    for suffix in ("", "-wal"):
        p = Path(str(path) + suffix)
        out[suffix] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "absent"
    return out


def test_choices_are_the_library_enums():
    import dplens

    assert tuple(m.value for m in Mode) == LEDGER_MODES
    assert tuple(p.value for p in Period) == LEDGER_PERIODS
    assert tuple(r.value for r in dplens.NeighboringRelation) == RELATIONS


def test_create_charge_refuse_status(location, specs, capsys):
    code, out, err = run(
        capsys, ["budget", "create", location, "--unit", "one person", "--epsilon", "1", "--delta", "1e-6"]
    )
    assert code == 0 and "budget 'default'" in out and err == ""
    code, out, _ = run(capsys, ["budget", "charge", location, str(specs["small"]), "--release", "t1", "--json"])
    charged = json.loads(out)
    assert code == 0 and charged["accepted"] is True and charged["budgets"][0]["spent_epsilon"] <= 1.0
    code, out, err = run(capsys, ["budget", "charge", location, str(specs["big"]), "--release", "t2"])
    assert code == 3 and out.count("\n") == 1 and "refused release 't2'" in out and "remaining" in out
    code, out, _ = run(capsys, ["budget", "charge", location, str(specs["big"]), "--release", "t2", "--json"])
    assert code == 3 and json.loads(out)["accepted"] is False
    code, out, _ = run(capsys, ["budget", "charge", location, str(specs["small"]), "--release", "t1"])
    assert code == 0 and "already charged" in out  # a retry: stored once
    code, out, _ = run(capsys, ["budget", "status", location, "--json"])
    status = json.loads(out)
    (budget,) = status["budgets"]
    assert [r["name"] for r in budget["releases"]] == ["t1"]
    assert 0 < budget["spent_epsilon"] <= 1.0 and budget["remaining_epsilon"] == pytest.approx(
        1.0 - budget["spent_epsilon"]
    )
    assert budget["mode"] == "planned" and budget["unit"] == "one person"
    code, out, _ = run(capsys, ["budget", "status", location])
    assert code == 0 and "spent epsilon <=" in out and "remaining >=" in out
    code, out, _ = run(capsys, ["budget", "verify", location, "--json"])
    assert code == 0 and json.loads(out)["ok"] is True


def test_create_with_rho_mu_modes_and_periods(tmp_path, capsys):
    db = str(tmp_path / "ledger.db")
    census = ["--unit", "one person-day", "--rho", "4.96", "--delta", "1e-10"]
    census += ["--period", "month", "--mode", "adaptive", "--name", "census"]
    code, out, _ = run(capsys, ["budget", "create", db, *census, "--json"])
    created = json.loads(out)
    assert code == 0 and created["rule"]["kind"] == "zcdp_filter" and created["period"] == "month"
    assert created["target"]["epsilon"] <= 26.34  # ρ = 4.96 at δ = 1e-10: the optimal conversion beats 26.33
    again = ["budget", "create", db, *census]
    assert run(capsys, again)[0] == 0  # the same budget again: unchanged
    code, out, err = run(capsys, [*again[:-1], "census", "--neighbouring", "replace_one"])
    assert one_line_error(code, out, err) and "already exists with other settings" in err


def test_a_charge_from_a_ci_job_without_a_terminal(tmp_path, specs):
    """As a CI step runs it: a subprocess, no stdin, its own session; the exit status is the answer."""
    db = str(tmp_path / "ledger.db")
    base = [sys.executable, "-m", "dplens.cli", "budget"]
    kwargs = {"capture_output": True, "text": True, "stdin": subprocess.DEVNULL, "start_new_session": True}
    done = subprocess.run([*base, "create", db, "--unit", "one person", "--epsilon", "1", "--delta", "1e-6"], **kwargs)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*base, "charge", db, str(specs["small"]), "--release", "nightly-1"], **kwargs)
    assert done.returncode == 0 and done.stderr == ""
    done = subprocess.run([*base, "charge", db, str(specs["big"]), "--release", "nightly-2"], **kwargs)
    assert done.returncode == 3 and done.stderr == ""


# ---- bad input: one line, exit 2, nothing written --------------------------------------------------------------------


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
    return path


def test_relation_mismatch_and_unknown_event(location, specs, tmp_path, capsys):
    run(capsys, ["budget", "create", location, "--unit", "one person", "--epsilon", "1", "--delta", "1e-6"])
    code, out, err = run(capsys, ["budget", "charge", location, str(specs["replace"]), "--release", "r"])
    assert one_line_error(code, out, err) and "neighbouring relation 'replace_one'" in err
    bogus = tmp_path / "bogus.json"
    bogus.write_text(
        json.dumps({"format": "dplens-ledger", "version": 1, "entries": [{"event": {"type": "Bogus"}, "count": 1}]})
    )
    code, out, err = run(capsys, ["budget", "charge", location, str(bogus), "--release", "r"])
    assert one_line_error(code, out, err) and "Bogus" in err
    code, out, _ = run(capsys, ["budget", "status", location, "--json"])
    assert json.loads(out)["budgets"][0]["releases"] == []


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "foreign", "empty", "text"])
def test_damaged_or_foreign_files(tmp_path, specs, capsys, damage):
    path = _ledger(tmp_path)
    if damage == "corrupt":
        data = bytearray(path.read_bytes())
        data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree: garbage
        path.write_bytes(bytes(data))
    elif damage == "truncated":
        with sqlite3.connect(path) as conn:  # make it several pages long, then cut it
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2 + 100])
    elif damage == "foreign":
        path.unlink()
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance REAL)")
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_text("name,epsilon\nq1,0.5\n")
    before = _snapshot(path)
    for argv in (
        ["budget", "charge", str(path), str(specs["small"]), "--release", "r"],
        ["budget", "status", str(path)],
        ["budget", "create", str(path), "--unit", "u", "--epsilon", "1", "--delta", "1e-6", "--name", "other"],
    ):
        code, out, err = run(capsys, argv)
        assert one_line_error(code, out, err), (argv, err)
        assert "ledger" in err
    assert _snapshot(path) == before


def test_read_only_file(tmp_path, specs, capsys):
    path = _ledger(tmp_path)
    path.chmod(0o444)
    try:
        before = _snapshot(path)
        code, out, err = run(capsys, ["budget", "charge", str(path), str(specs["small"]), "--release", "r"])
        assert one_line_error(code, out, err) and "read-only" in err
        assert _snapshot(path) == before
        code, out, _ = run(capsys, ["budget", "status", str(path), "--json"])  # reading still works
        assert code == 0 and json.loads(out)["budgets"][0]["name"] == "default"
    finally:
        path.chmod(0o644)


def test_locked_ledger_waits_then_says_so(tmp_path, specs, capsys):
    path = _ledger(tmp_path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        code, out, err = run(
            capsys, ["budget", "charge", str(path), str(specs["small"]), "--release", "r", "--lock-timeout", "0.3"]
        )
        assert one_line_error(code, out, err) and "locked" in err and "nothing was written" in err
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Ledger.open(path) as ledger:
        assert ledger.status().budgets[0].releases == ()
        assert ledger.charge(ledger_event(), release="r").accepted  # free again


def ledger_event():
    import dplens

    return dplens.Gaussian(noise_multiplier=20.0)


@pytest.mark.parametrize(
    ("location", "words"),
    [
        ("postgresql://nobody@/nodb?host=/nonexistent-socket-dir", "cannot connect"),
        ("mysql://root@localhost/ledger", "not supported"),
        ("/nonexistent-dir/ledger.db", "not found"),
    ],
)
def test_wrong_locations(location, words, specs, capsys):
    code, out, err = run(capsys, ["budget", "charge", location, str(specs["small"]), "--release", "r"])
    assert one_line_error(code, out, err) and words in err


def test_missing_directory_on_create_and_bad_values(tmp_path, capsys):
    code, out, err = run(
        capsys, ["budget", "create", str(tmp_path / "no" / "l.db"), "--unit", "u", "--epsilon", "1", "--delta", "1e-6"]
    )
    assert one_line_error(code, out, err) and "does not exist" in err
    assert not (tmp_path / "no").exists()
    db = str(tmp_path / "l.db")
    for argv, words in (
        (["--epsilon", "0", "--delta", "1e-6"], "epsilon must be > 0"),
        (["--epsilon", "1", "--delta", "2"], "delta"),
        (["--epsilon", "1", "--rho", "1", "--delta", "1e-6"], "not allowed with"),
        (["--epsilon", "1", "--delta", "1e-6", "--mode", "sometimes"], "invalid choice"),
    ):
        code, out, err = run(capsys, ["budget", "create", db, "--unit", "u", *argv])
        assert one_line_error(code, out, err) and words in err, err
    code, out, err = run(capsys, ["budget", "create", db, "--unit", "u", "--epsilon", "1", "--delta", "1e-6"])
    assert code == 0
    code, out, err = run(capsys, ["budget", "charge", db, str(tmp_path / "missing.toml"), "--release", "r"])
    assert one_line_error(code, out, err) and "not found" in err
    code, out, err = run(
        capsys, ["budget", "charge", db, str(tmp_path / "missing.toml"), "--release", "r", "--time", "yesterday"]
    )
    assert one_line_error(code, out, err) and "--time" in err


@pytest.mark.parametrize(
    ("key", "value", "words"), [("schema_version", "0", "schema version '0'"), ("format", "x", "format")]
)
def test_a_ledger_of_another_version_or_format_is_refused_in_one_line(tmp_path, specs, capsys, key, value, words):
    path = _ledger(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE dplens_ledger_meta SET value = ? WHERE key = ?", (value, key))
    before = _snapshot(path)
    for argv in (
        ["budget", "status", str(path)],
        ["budget", "charge", str(path), str(specs["small"]), "--release", "r"],
    ):
        code, out, err = run(capsys, argv)
        assert one_line_error(code, out, err) and words in err
    assert _snapshot(path) == before
