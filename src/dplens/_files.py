"""Reading the files users name (specs, pair files, score files, saved results): every failure is one line.

A path that does not exist, a directory, a pipe or device (reading it would block), a file larger than the reader
accepts, or an unreadable one raises ``ValueError`` naming the path; the CLI prints it as one line, exit status 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_input_file", "read_document", "read_input_bytes"]


def check_input_file(path: str | Path, *, what: str, max_bytes: int | None = None) -> Path:
    """``path`` as a :class:`Path` if it names a readable regular file (at most ``max_bytes``), else ``ValueError``.

    Example:
        >>> check_input_file("/", what="spec file")
        Traceback (most recent call last):
        ...
        ValueError: spec file '/' is a directory
    """
    path = Path(path)
    name = repr(str(path))
    if not path.exists():
        raise ValueError(f"{what} not found: {name}")
    if path.is_dir():
        raise ValueError(f"{what} {name} is a directory")
    if not path.is_file():
        raise ValueError(f"{what} {name} is not a regular file")
    if max_bytes is not None:
        try:
            size = path.stat().st_size
        except OSError as err:
            raise ValueError(f"cannot read {what} {name}: {err.strerror or err}") from None
        if size > max_bytes:
            raise ValueError(f"{what} {name} is larger than {max_bytes // 2**20} MiB")
    return path


def read_input_bytes(path: str | Path, *, what: str, max_bytes: int | None = None) -> bytes:
    """The bytes of a file checked by :func:`check_input_file`; a read error is a one-line ``ValueError``."""
    path = check_input_file(path, what=what, max_bytes=max_bytes)
    try:
        return path.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read {what} {str(path)!r}: {err.strerror or err}") from None


def read_document(path: str | Path, *, what: str, max_bytes: int) -> tuple[Any, bytes]:
    """A TOML (``.toml``) or JSON (any other suffix) file, decoded, and its bytes; not UTF-8, not valid TOML/JSON
    or nested too deeply is a one-line ``ValueError`` naming the file."""
    import json
    import tomllib

    path = Path(path)
    name = repr(str(path))
    raw = read_input_bytes(path, what=what, max_bytes=max_bytes)
    kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
    try:
        text = raw.decode("utf-8")
        return (tomllib.loads(text) if kind == "TOML" else json.loads(text)), raw
    except UnicodeDecodeError:
        raise ValueError(f"{what} {name} is not UTF-8 text") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{what} {name} is not valid {kind}: {err}") from None
    except RecursionError:
        raise ValueError(f"{what} {name} is nested too deeply to be read") from None
