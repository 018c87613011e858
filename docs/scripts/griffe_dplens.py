"""A griffe extension for dplens's docstring conventions (used by mkdocstrings when the site is built).

dplens docstrings are Google style with habits the Google parser does not know: several parameters described on one
line (``workers, scheduler: ...``), a singular ``Example:`` heading over doctests, and Sphinx roles
(``:class:`~dplens.accountant.compose.Accountant```, ``:func:`rewrite```, ``:mod:`.base```). This extension rewrites
them before parsing, so each parameter gets its own entry, doctests render as code (not as Markdown, where a printed
list would look like a broken link), and each role becomes a cross-reference to the entry it names.

Roles are resolved as Python would from the object whose docstring holds them (its members, its module's names and
imports, relative module names), then followed through re-exports — imports, and the lazy ``_EXPORTS`` tables of
``dplens`` and ``dplens.testing`` (``name → "module:attribute"`` or ``name → "module"``) — to the object itself:

- named object documented in the API reference: a link (``[`Accountant`][dplens.accountant.compose.Accountant]``,
  which mkdocs-autorefs checks: a link to an anchor that does not exist fails the strict build);
- an existing object with no entry of its own (a private helper, an undocumented constant) or outside dplens
  (numpy, the standard library): code, as before;
- a name that resolves to nothing: a warning, so ``mkdocs build --strict`` fails on the broken reference.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import griffe

_log = logging.getLogger("mkdocs.plugins.griffe_dplens")

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$")
_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Attributes|Keyword Args|Keyword Arguments):\s*$")
_GROUPED = re.compile(r"^(\s+)([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)\s*:\s*(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _fence_bare_doctests(lines: list[str]) -> list[str]:
    """Doctests in the body (not under an ``Examples:`` heading) become fenced ``pycon`` blocks."""
    out: list[str] = []
    examples_indent: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^\s*Examples?:\s*$", line):
            examples_indent = _indent(line)
        elif examples_indent is not None and line.strip() and _indent(line) <= examples_indent:
            examples_indent = None
        if examples_indent is None and line.lstrip().startswith(">>>"):
            indent = line[: _indent(line)]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].strip())
                i += 1
            out += [f"{indent}```pycon", *(indent + b for b in block), f"{indent}```"]
            continue
        out.append(line)
        i += 1
    return out


# The target may be wrapped onto the next line (``:class:`~dplens.accountant.`` / ``events.RandomizedResponse```).
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|const):`(~?)(\.*[\w.]+(?:\n\s*[\w.]+)*)(\(\))?`")

#: A role's target name → the identifier of its entry in the API reference, or None to show it as code.
Linker = Callable[[str], "str | None"]


def _role(match: re.Match[str], link: Linker | None) -> str:
    """A Sphinx role (``:class:`~dplens.x.Y```) as a Markdown cross-reference (``[`Y`][dplens.x.Y]``) when ``link``
    finds its entry, else as code (``Y``); ``~`` shows the last component only."""
    name = re.sub(r"\s+", "", match.group(2))
    shown = (name.rsplit(".", 1)[-1] if match.group(1) else name.lstrip(".")) + (match.group(3) or "")
    target = link(name) if link is not None else None
    return f"[`{shown}`][{target}]" if target else f"`{shown}`"


def rewrite(text: str, link: Linker | None = None) -> str:
    """``Example:`` → ``Examples:``; ``a, b: text`` in a parameter section → ``a: text`` and ``b: text``; bare
    doctests fenced; Sphinx roles as cross-references through ``link`` (as code without it)."""
    text = _ROLE.sub(lambda match: _role(match, link), text)
    lines = _fence_bare_doctests(text.splitlines())
    out: list[str] = []
    section_indent: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if (m := _EXAMPLE.match(line)) is not None:
            out.append(f"{m.group(1)}Examples:")
            section_indent = None
            i += 1
            continue
        if (m := _SECTION.match(line)) is not None:
            section_indent = len(m.group(1))
            out.append(line)
            i += 1
            continue
        if section_indent is not None and line.strip() and _indent(line) <= section_indent:
            section_indent = None
        if section_indent is not None and (m := _GROUPED.match(line)) is not None:
            body = [m.group(3)]
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > len(m.group(1))):
                if not lines[j].strip() and (j + 1 >= len(lines) or _indent(lines[j + 1]) <= len(m.group(1))):
                    break
                body.append(lines[j].strip())
                j += 1
            for name in re.split(r"\s*,\s*", m.group(2)):
                out.append(f"{m.group(1)}{name}: {' '.join(body)}")
            i = j
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _lazy_export(module: Any, name: str) -> str | None:
    """The dotted path a module's ``_EXPORTS`` table (imported on first access by its ``__getattr__``) gives
    ``name``, or None: griffe reads modules statically, so such names are no members of theirs."""
    table = module.members.get("_EXPORTS") if module.is_module else None
    if table is None or table.is_alias or not table.is_attribute:
        return None
    try:
        homes = ast.literal_eval(str(table.value))
    except (ValueError, SyntaxError):
        return None
    home = homes.get(name) if isinstance(homes, dict) else None
    if not isinstance(home, str):
        return None
    module_name, _, attribute = home.partition(":")
    return f"{module_name}.{attribute or name}"


def _find(collection: griffe.ModulesCollection, path: str) -> griffe.Object | None:
    """The object at a dotted ``path``, followed through re-exports (aliases and lazy ``_EXPORTS`` tables); None
    when nothing is there."""
    parts = path.split(".")
    try:
        obj: Any = collection.members[parts[0]]
        for index, part in enumerate(parts[1:], start=2):
            if obj.is_alias:
                obj = obj.final_target
            if part not in obj.members:
                home = _lazy_export(obj, part)
                if home is None or home == ".".join(parts[:index]):
                    return None
                return _find(collection, ".".join([home, *parts[index:]]))
            obj = obj.members[part]
        return obj.final_target if obj.is_alias else obj
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _scope_path(obj: griffe.Object, name: str) -> str | None:
    """The dotted path ``name`` stands for in the docstring of ``obj``, as Python would resolve it there."""
    if name.startswith("."):  # relative to the module's package, as in a relative import
        level = len(name) - len(name.lstrip("."))
        base = obj.module.path if obj.module.is_init_module else obj.module.path.rsplit(".", 1)[0]
        for _ in range(level - 1):
            base = base.rsplit(".", 1)[0]
        return f"{base}.{name.lstrip('.')}"
    head, _, rest = name.partition(".")
    try:
        head_path = obj.resolve(head)
    except griffe.NameResolutionError:
        if head == obj.package.name or importlib.util.find_spec(head) is not None:  # absolute: dplens.x, numpy.y
            return name
        return None
    return f"{head_path}.{rest}" if rest else head_path


def _rendered(package: griffe.Module) -> dict[str, str]:
    """Canonical path → identifier of its entry, for every object the generated API reference renders: the public
    modules, the members each one documents (docs_sources, as gen_reference.py uses them), their public members."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import docs_sources

    collection = package.modules_collection
    entries: dict[str, str] = {}

    def add(anchor: str, depth: int = 0) -> None:
        obj = _find(collection, anchor)
        if obj is None:
            return
        if entries.get(obj.path) != obj.path:  # an entry at the object's own path wins over a re-export
            entries[obj.path] = anchor
        if obj.is_class and depth < 3:
            for member in obj.members:
                if not member.startswith("_"):
                    add(f"{anchor}.{member}", depth + 1)

    for module in docs_sources.public_modules():
        entries.setdefault(module, module)
        for member in docs_sources.module_members(module):
            add(f"{module}.{member}")
    for home in docs_sources.export_homes().values():
        if any(part.startswith("_") for part in home.split(".")[:-1]):  # rendered on the dplens page itself
            add(home)
    return entries


def _docstring_owners(obj: griffe.Object) -> Any:
    """``obj`` and every object defined inside it (not re-exports), depth first."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _docstring_owners(member)


class DplensDocstrings(griffe.Extension):
    """Apply :func:`rewrite` to every docstring of a loaded package, with its roles resolved in their own scope."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        entries = _rendered(pkg) if pkg.name == "dplens" else {}
        for obj in _docstring_owners(pkg):
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value, link=self._linker(obj, entries))

    @staticmethod
    def _linker(obj: griffe.Object, entries: dict[str, str]) -> Linker:
        def link(name: str) -> str | None:
            path = _scope_path(obj, name)
            target = _find(obj.modules_collection, path) if path else None
            if target is not None:
                return entries.get(target.path)  # None: an object with no entry of its own, shown as code
            if path and path.split(".")[0] != obj.package.name:
                return None  # outside this package (numpy, the standard library): code, not a link
            # Not in scope: like Sphinx, accept a name that exactly one documented object ends with.
            matches = sorted({anchor for path, anchor in entries.items() if path.endswith(f".{name.lstrip('.')}")})
            if len(matches) == 1:
                return matches[0]
            found = f"{len(matches)} documented objects end with it" if matches else "it resolves to no object"
            _log.warning("%s: the docstring names %r, but %s", obj.path, name, found)
            return None

        return link
