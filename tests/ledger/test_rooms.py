"""The ledger's rooms (issue 39): all SQL in the storage layer, no switch on a rule's kind outside the rule classes, no
per-call state on a ``Ledger`` — and, since it holds none, one instance charged from two threads at once stays exact.
"""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import pytest

import dplens
from dplens.ledger import Ledger, Mode
from dplens.ledger.rules import RULES, Rule, rule_of

LEDGER = Path(__file__).resolve().parents[2] / "src" / "dplens" / "ledger"
STORAGE = LEDGER / "storage"
RULES_MODULE = LEDGER / "rules.py"
_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|BEGIN|COMMIT|ROLLBACK|PRAGMA)\b")


def _modules(*, outside: tuple[Path, ...]) -> list[Path]:
    return [path for path in sorted(LEDGER.rglob("*.py")) if not any(path == o or o in path.parents for o in outside)]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose may name SQL statements)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    ]


def test_the_scanners_see_what_they_look_for():
    """The checks below can fail: SQL in a literal and a switch on ``.kind`` are found in a sample."""
    sample = 'def f(db, rule):\n    db.execute("SELECT name FROM t")\n    return rule.kind == "x"\n'
    tree = ast.parse(sample)
    assert [s for n in ast.walk(tree) if isinstance(n, ast.Constant) for s in _SQL.findall(str(n.value))] == ["SELECT"]
    assert _kind_switches(tree) == [3]


def test_no_sql_outside_the_storage_layer():
    offenders = [
        f"{path.relative_to(LEDGER)}:{line}: {text[:60]!r}"
        for path in _modules(outside=(STORAGE,))
        for line, text in _strings(path)
        if _SQL.search(text)
    ]
    assert offenders == []
    calls = [
        f"{path.relative_to(LEDGER)}:{node.lineno}"
        for path in _modules(outside=(STORAGE,))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "_conn")
    ]
    assert calls == []


def _kind_switches(tree: ast.AST) -> list[int]:
    """Lines comparing something's ``.kind`` or ``["kind"]`` / ``.get("kind")`` (an if/match on a rule's name)."""

    def is_kind(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "kind":
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "kind":
            return True
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and bool(node.args)
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "kind"
        )

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(is_kind(x) for x in [node.left, *node.comparators]):
            out.append(node.lineno)
        if isinstance(node, ast.Match) and is_kind(node.subject):
            out.append(node.lineno)
    return out


def test_no_switch_on_a_rules_kind_outside_the_rules():
    switches = {
        str(path.relative_to(LEDGER)): lines
        for path in _modules(outside=(RULES_MODULE,))
        if (lines := _kind_switches(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert switches == {}
    names = {
        f"{path.relative_to(LEDGER)}:{line}"
        for path in _modules(outside=(RULES_MODULE,))
        for line, text in _strings(path)
        if text in RULES
    }
    assert names == set(), "a rule's stored name is used outside dplens.ledger.rules"


def test_every_stored_kind_has_its_own_class_and_the_names_on_disk_are_unchanged():
    assert set(RULES) == {"planned_tightest", "renyi_filter", "zcdp_filter", "gdp_filter"}
    assert all(issubclass(cls, Rule) and cls is not Rule and cls.kind == kind for kind, cls in RULES.items())
    assert len(set(RULES.values())) == len(RULES)
    source = RULES_MODULE.read_text(encoding="utf-8")
    assert "match self.kind" not in source and "self.kind ==" not in source and "self.kind in" not in source
    with pytest.raises(ValueError, match="unknown ledger rule 'exotic'"):
        rule_of(Mode.PLANNED, None, {"kind": "exotic"})


def test_the_ledger_keeps_no_state_of_a_call(tmp_path):
    """Assigned only in ``__init__``, and unchanged by a charge, a refusal, status and verify."""
    source = (LEDGER / "core.py").read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name != "__init__":
            for target in ast.walk(node):
                assert not (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and isinstance(target.ctx, ast.Store)
                ), f"{node.name} sets self.{target.attr}"
    with Ledger.open(tmp_path / "l.db", create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        before = dict(vars(ledger))
        for i in range(24):  # the shortcut, the tightest route, then refusals
            ledger.charge(dplens.Gaussian(noise_multiplier=20.0), release=f"r{i}")
        ledger.status()
        ledger.verify()
        assert vars(ledger) == before


def test_two_threads_charging_one_ledger_stay_exact(location):
    """Two threads share one Ledger (one connection): together they admit exactly what fits, every outcome they
    report is what is stored, and the ledger verifies."""
    sigma = 20.0  # 22 of these fit in (1, 1e-6)
    event = dplens.Gaussian(noise_multiplier=sigma)
    outcomes: dict[str, bool] = {}
    errors: list[BaseException] = []
    with Ledger.open(location, create=True, timeout=120) as ledger:
        ledger.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        barrier = threading.Barrier(2)

        def work(worker: int) -> None:
            try:
                barrier.wait()
                for i in range(15):
                    name = f"t{worker}-{i}"
                    outcomes[name] = ledger.charge(event, release=name, charged_by=f"thread-{worker}").accepted
            except BaseException as err:  # reported below, not lost in the thread
                errors.append(err)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        assert errors == []
        stored = [name for name, _ in ledger.release_events("default")]
        verified = ledger.verify()
        spent = ledger.status().budgets[0].spent_epsilon
    capacity = 0
    while dplens.Accountant().compose(event, capacity + 1).epsilon(1e-6) <= 1.0:
        capacity += 1
    assert len(outcomes) == 30 and verified.problems == ()
    assert sorted(stored) == sorted(name for name, accepted in outcomes.items() if accepted)
    assert len(stored) == capacity == 22
    assert spent == dplens.Accountant().compose(event, capacity).epsilon_result(1e-6).epsilon <= 1.0
