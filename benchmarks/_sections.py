"""One section of benchmarks/RESULTS.md per benchmark, kept between its own markers and replaced in place."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path, markers: tuple[str, str], section: str) -> None:
    """Replace the text between ``markers`` in ``path`` by ``section`` (appended with the markers if absent)."""
    text = path.read_text(encoding="utf-8")
    block = f"{markers[0]}\n{section}\n{markers[1]}"
    if markers[0] in text:
        head, rest = text.split(markers[0], 1)
        text = head + block + rest.split(markers[1], 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")
