"""Reproductions of the seed papers' results (``dplens reproduce NAME``).

Each module exposes ``run(out_dir, *, quick=False) -> list[Path]`` writing figures, data and a ``README.md``
write-up (what matched the paper and what did not) into ``out_dir``.
"""

from __future__ import annotations

import html
import os
import tempfile
from pathlib import Path

__all__ = ["write_index"]


def _title(readme: Path) -> str:
    if readme.is_file():
        for line in readme.read_text(encoding="utf-8").splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return readme.parent.name


def write_index(root: Path, names: list[str]) -> Path:
    """Write ``root/index.html`` and ``root/index.md`` linking every reproduction (atomically)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    md = ["# dplens reproductions", "", "Regenerate with `dplens reproduce all`.", ""]
    items = []
    for name in names:
        folder = root / name
        title = _title(folder / "README.md")
        figures = sorted(p.name for p in folder.glob("*.png"))
        md.append(f"- [{title}]({name}/README.md)" + (f" — figures: {', '.join(figures)}" if figures else ""))
        links = "".join(
            f'<li><a href="{html.escape(name)}/{html.escape(f)}">{html.escape(f)}</a></li>' for f in figures
        )
        items.append(
            f'<section><h2><a href="{html.escape(name)}/README.md">{html.escape(title)}</a></h2><ul>{links}</ul>'
            "</section>"
        )
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>dplens reproductions</title></head>"
        f"<body><h1>dplens reproductions</h1>{''.join(items)}</body></html>\n"
    )
    for path, text in ((root / "index.md", "\n".join(md) + "\n"), (root / "index.html", page)):
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    return root / "index.html"
