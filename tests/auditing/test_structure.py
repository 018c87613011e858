"""The auditing package stays readable (issue 30): no function longer than 80 lines of code, measured with ``ast``
(its docstring, blank lines and comment lines not counted), and the target audit's stages never import the
orchestrator."""

from __future__ import annotations

import ast
from pathlib import Path

AUDITING = Path(__file__).resolve().parents[2] / "src" / "dplens" / "auditing"
MAX_LINES = 80


def code_lines(source: str) -> dict[str, int]:
    """Lines of code per function (qualified by its line): decorators and signature included; its docstring,
    blank lines and comment lines left out."""
    lines = source.splitlines()
    out = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        skipped: set[int] = set()
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            skipped = set(range(first.lineno, first.end_lineno + 1))
        start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        counted = [
            i
            for i in range(start, node.end_lineno + 1)
            if i not in skipped and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#")
        ]
        out[f"{node.name} (line {node.lineno})"] = len(counted)
    return out


def test_the_line_counter_counts_code_only():
    source = '''
def f(x):
    """A docstring
    of three
    lines."""
    # a comment

    y = x + 1
    return y
'''
    assert code_lines(source) == {"f (line 2)": 3}
    long = "def g():\n" + "    x = 1\n" * (MAX_LINES + 1)
    assert code_lines(long)["g (line 1)"] == MAX_LINES + 2  # negative control: a long function is seen


def test_no_function_in_auditing_is_longer_than_80_lines():
    long = {
        f"{path.relative_to(AUDITING)}: {name}": count
        for path in sorted(AUDITING.rglob("*.py"))
        for name, count in code_lines(path.read_text(encoding="utf-8")).items()
        if count > MAX_LINES
    }
    assert long == {}


def test_no_stage_imports_the_orchestrator():
    for path in sorted((AUDITING / "stages").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module is not None
        } | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not any(name.endswith("target_game") for name in imported), path.name


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }


def test_auditing_knows_no_plug_in_by_name():
    """issue 39: the attribute audit reaches feature DP's Theorem 4 through the plug-in registry
    (:func:`dplens.accountant.plugins.attribute_inference_bounds`), as the core reaches every plug-in."""
    for path in sorted(AUDITING.rglob("*.py")):
        assert not any(name.startswith("dplens.research") for name in _imports(path)), path.name
    assert "research" not in (AUDITING / "attribute.py").read_text(encoding="utf-8")


def test_the_target_audit_runs_its_stages_in_the_order_of_one_table(monkeypatch):
    from dplens.auditing import target_game as tg

    names = [name for name, _ in tg.STAGES]
    assert names == [
        "checks before the pilot",
        "memory plan",
        "profile the outputs",
        "choose the candidate scores",
        "pick the operating point",
        "run the counted trials",
    ]
    ran = []

    def recorded(name, stage):
        return lambda run: (ran.append(name), stage(run))[1]

    monkeypatch.setattr(tg, "STAGES", tuple((name, recorded(name, stage)) for name, stage in tg.STAGES))
    result = tg.audit_target(_coin, ([1], [0]), claim_epsilon=1.0, trials=200, seed=0)
    assert ran == names and result.trials == 200


def _coin(data, rng):
    return int(rng.random() < (0.7 if data[0] else 0.3))
