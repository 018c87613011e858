"""A griffe extension for dplens's docstring conventions (used by mkdocstrings when the site is built).

dplens docstrings are Google style with two habits the Google parser does not know: several parameters described
on one line (``workers, scheduler: ...``) and a singular ``Example:`` heading over doctests. This extension rewrites
them before parsing, so each parameter gets its own entry and doctests render as code (not as Markdown, where a
printed list would look like a broken link).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

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


_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`(~?)([\w.]+)(\(\))?`")


def _plain_role(match: re.Match[str]) -> str:
    """A Sphinx role (``:class:`~dplens.x.Y```) as Markdown code (``Y``); ``~`` keeps the last component."""
    name = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"`{name}{match.group(3) or ''}`"


def rewrite(text: str) -> str:
    """``Example:`` → ``Examples:``; ``a, b: text`` in a parameter section → ``a: text`` and ``b: text``; bare
    doctests fenced; Sphinx roles as code."""
    text = _ROLE.sub(_plain_role, text)
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


class DplensDocstrings(griffe.Extension):
    """Apply :func:`rewrite` to every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
