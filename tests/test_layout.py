"""The architecture, checked: layers import one way, no import cycle, the core names no research mechanism."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "dplens"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, *, module_level_only: bool, type_checking: bool = False) -> set[str]:
    """The dplens modules ``path`` imports (resolved to modules that exist), at module level or anywhere;
    ``type_checking``: also the imports of ``if TYPE_CHECKING:`` blocks (which never run, but which a reader and a
    documentation tool follow)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if not type_checking:
        tree.body = [n for n in tree.body if not (isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))]
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import module` imports the module; `from module import name` imports the module
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [m for m in submodules if m in MODULES] or [node.module]
        for name in names:
            if name.startswith("dplens") and name in MODULES:
                found.add(name)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _graph(*, module_level_only: bool, type_checking: bool = False) -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        # A package's __init__ may import its own submodules; the edge back from a submodule to its package is
        # implied by Python's import system and is not a cycle in the code.
        imported = _imports(path, module_level_only=module_level_only, type_checking=type_checking)
        graph[name] = {m for m in imported if not name.startswith(m + ".")}
    return graph


def test_no_import_cycle_anywhere():
    """Not at module level and not through the deferred imports inside functions either."""
    assert _cycle(_graph(module_level_only=False)) is None


def test_no_import_cycle_even_through_type_only_imports():
    """Each module documents one layer: not even an ``if TYPE_CHECKING:`` import points back up (this once caught
    ``accountant/compose.py`` <-> ``accountant/summary.py``)."""
    assert _cycle(_graph(module_level_only=False, type_checking=True)) is None


def test_cycle_detector_finds_a_cycle():
    # negative control for the two tests above
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_research_folder_is_a_regular_package_with_a_docstring():
    """``pkgutil`` (and documentation tools) list only regular packages."""
    import pkgutil

    import dplens.research

    folders = sorted(p.name for p in (PACKAGE / "research").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders, "no research folders"
    listed = {m.name for m in pkgutil.iter_modules(dplens.research.__path__) if m.ispkg}
    assert listed == set(folders)
    for folder in folders:
        init = PACKAGE / "research" / folder / "__init__.py"
        assert init.is_file(), f"{folder} has no __init__.py"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"{init} has no docstring"


def _importers(prefix: str) -> dict[str, set[str]]:
    return {
        name: _imports(path, module_level_only=False)
        for name, path in MODULES.items()
        if name == prefix or name.startswith(prefix + ".")
    }


@pytest.mark.parametrize("forbidden", ["dplens.research", "dplens.auditing", "dplens.reports", "dplens.mechanisms"])
def test_core_accountant_imports_no_upper_layer(forbidden):
    for name, imported in _importers("dplens.accountant").items():
        bad = sorted(m for m in imported if m == forbidden or m.startswith(forbidden + "."))
        assert not bad, f"{name} imports {bad}"


def test_standard_mechanisms_import_no_research_module():
    for name, imported in _importers("dplens.mechanisms").items():
        assert not [m for m in imported if m.startswith("dplens.research")], name


def test_reports_call_no_accounting_routine():
    """The report layer renders results: it imports no accounting route, audit game or mechanism."""
    allowed = {"dplens.accountant.events"}  # describing a ledger's events (names, parameters) is rendering
    for name, imported in _importers("dplens.reports").items():
        bad = sorted(
            m
            for m in imported
            if m.startswith(("dplens.accountant", "dplens.mechanisms", "dplens.research")) and m not in allowed
        )
        assert not bad, f"{name} imports {bad}"


def test_every_module_imports_on_its_own():
    """Each module imported first in a fresh interpreter (an import-order cycle fails here)."""
    code = (
        "import importlib, sys\n"
        "failed = []\n"
        f"for name in {sorted(MODULES)!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'dplens' or m.startswith('dplens.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as err:\n"
        "        failed.append(f'{name}: {err!r}')\n"
        "print('\\n'.join(failed))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == ""


def test_the_version_lives_on_the_ground_floor():
    """Modules read ``__version__`` from dplens._version, never from the package's face (an arrow back up), and
    pyproject.toml states the same number."""
    import tomllib

    from dplens._version import __version__

    pyproject = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["version"] == __version__
    offenders = []
    for path in sorted((SRC / "dplens").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "dplens" and path.name != "__init__.py":
                offenders += [
                    f"{path.relative_to(SRC)}: {alias.name}" for alias in node.names if alias.name == "__version__"
                ]
    assert offenders == []


def _code_lines() -> Any:
    """tests/auditing/test_structure.py's counter (code lines only: no docstring, comment or blank line)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("structure", SRC.parent / "tests" / "auditing" / "test_structure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.code_lines


def test_no_function_over_80_code_lines_anywhere_in_the_package():
    code_lines = _code_lines()
    long = {}
    for path in sorted((SRC / "dplens").rglob("*.py")):
        for name, count in code_lines(path.read_text(encoding="utf-8")).items():
            if count > 80:
                long[f"{path.relative_to(SRC / 'dplens')}: {name.split(' (')[0]}"] = count
    assert long == {}, f"over 80 code lines (split them at their natural steps): {long}"


# ---- the floors (docs/guides/architecture.md) -----------------------------------------------------------------------

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "architecture.md"


def _floors() -> dict[str, int]:
    """Room -> floor, read from the table between the ``floors`` markers of the architecture guide."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text.split("<!-- floors:begin -->")[1].split("<!-- floors:end -->")[0]
    floors: dict[str, int] = {}
    for line in table.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for room in cells[1].split(","):
            floors[room.strip().strip("`")] = int(cells[0])
    return floors


def _room(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _upward_imports(floors: dict[str, int]) -> list[str]:
    """Every import (at module level or in a function, type-only ones too) from a room to a room on its own floor
    or a higher one, as ``importer -> imported (floor a -> floor b)``."""
    found = []
    for module, path in MODULES.items():
        source = _room(module)
        for imported in sorted(_imports(path, module_level_only=False, type_checking=True)):
            target = _room(imported)
            if target != source and floors[target] >= floors[source]:
                found.append(f"{module} -> {imported} (floor {floors[source]} -> {floors[target]})")
    return found


def test_every_room_of_the_package_has_a_floor():
    rooms = {_room(module) for module in MODULES}
    assert rooms == set(_floors()), "docs/guides/architecture.md's floors table and src/dplens/ disagree"


def test_imports_only_go_down_a_floor():
    assert _upward_imports(_floors()) == []


def test_the_floor_check_sees_an_import_running_up():
    lowered = _floors() | {"ledger": 1}  # the ledger moved to the ground: its imports of the accountant run up
    assert any(line.startswith("dplens.ledger") and "dplens.accountant" in line for line in _upward_imports(lowered))
