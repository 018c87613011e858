"""Reproductions of the seed papers' results (``dplens reproduce NAME``).

Each module exposes ``run(out_dir, *, quick=False) -> list[Path]`` writing figures, data and a ``README.md``
write-up (what matched the paper and what did not) into ``out_dir``. :func:`write_index` writes the index page
(``index.html``, self-contained: inline style, no script, no external resource) and ``index.md`` linking every
reproduction's write-up, figures and data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ReproductionEntry", "describe_reproduction", "write_index"]

_FIGURE_SUFFIXES = (".png", ".svg")
_DATA_SUFFIXES = (".csv", ".json", ".npz", ".txt")


@dataclass(frozen=True, slots=True)
class ReproductionEntry:
    """What the index shows for one reproduction folder."""

    name: str
    title: str
    summary: str
    sections: tuple[str, ...]
    readme: str | None
    figures: tuple[str, ...]
    data: tuple[str, ...]


def describe_reproduction(root: Path, name: str) -> ReproductionEntry:
    """Read ``root/name/README.md`` (title, first paragraph, section headings) and list its files."""
    folder = Path(root) / name
    readme = folder / "README.md"
    title, summary, sections = name, "", []
    if readme.is_file():
        paragraph: list[str] = []
        seen_title = False
        for line in readme.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            if stripped.startswith("# ") and not seen_title:
                title, seen_title = stripped[2:].strip(), True
            elif stripped.startswith("## "):
                sections.append(stripped[3:].strip())
            elif not sections and stripped and not stripped.startswith("#"):
                paragraph.append(stripped)
            elif not sections and not stripped and paragraph and not summary:
                summary = " ".join(paragraph)
        summary = summary or " ".join(paragraph)
    files = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    return ReproductionEntry(
        name=name,
        title=title,
        summary=summary,
        sections=tuple(sections),
        readme=f"{name}/README.md" if readme.is_file() else None,
        figures=tuple(f"{name}/{f}" for f in files if f.lower().endswith(_FIGURE_SUFFIXES)),
        data=tuple(f"{name}/{f}" for f in files if f.lower().endswith(_DATA_SUFFIXES)),
    )


def _markdown(entries: list[ReproductionEntry]) -> str:
    lines = ["# dplens reproductions", "", "Regenerate with `dplens reproduce all`.", ""]
    for entry in entries:
        link = f"[{entry.title}]({entry.readme})" if entry.readme else entry.title
        lines.append(f"## {link}")
        lines.append("")
        if entry.summary:
            lines += [entry.summary, ""]
        if entry.figures:
            lines.append("Figures: " + ", ".join(f"[{Path(f).name}]({f})" for f in entry.figures))
        if entry.data:
            lines.append("Data: " + ", ".join(f"[{Path(f).name}]({f})" for f in entry.data))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_index(root: Path, names: list[str]) -> Path:
    """Write ``root/index.html`` and ``root/index.md`` linking every reproduction (atomically); return the HTML."""
    from dplens._version import __version__
    from dplens.reports.output import atomic_write_text, template_environment

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    entries = [describe_reproduction(root, name) for name in names]
    page = (
        template_environment().get_template("reproductions_index.html.j2").render(entries=entries, version=__version__)
    )
    atomic_write_text(root / "index.md", _markdown(entries))
    return atomic_write_text(root / "index.html", page)
