"""Write one benchmark's section of ``benchmarks/RESULTS.md`` in place, so the file keeps only the present.

A section lives between ``<!-- KEY:begin -->`` and ``<!-- KEY:end -->``; writing it again replaces it (hand-written
notes after the end marker stay), and the first write appends it with its markers. Git keeps the history.

    from results_md import write_section
    write_section(Path("benchmarks/RESULTS.md"), "bench_cold_start", text)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def markers(key: str) -> tuple[str, str]:
    return f"<!-- {key}:begin -->", f"<!-- {key}:end -->"


def replace_section(document: str, key: str, section: str) -> str:
    """``document`` with the section ``key`` replaced by ``section`` (appended at the end if it has none)."""
    begin, end = markers(key)
    block = f"{begin}\n{section.strip()}\n{end}"
    if begin in document and end in document.split(begin, 1)[1]:
        head, rest = document.split(begin, 1)
        return head + block + rest.split(end, 1)[1]
    return (document.rstrip("\n") + "\n\n" if document.strip() else "") + block + "\n"


def write_section(path: Path | str, key: str, section: str) -> None:
    """Replace (or append) the section ``key`` of the Markdown file ``path``, atomically."""
    path = Path(path)
    document = path.read_text(encoding="utf-8") if path.exists() else ""
    updated = replace_section(document, key, section)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(updated)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
