"""Writing report files: atomic writes and the Jinja2 environment of dplens's HTML templates."""

from __future__ import annotations

import json
import math
import os
import secrets
from pathlib import Path

from dplens.reports.format import fmt_estimate, fmt_lower, fmt_upper, percent, readable

__all__ = ["atomic_write_bytes", "atomic_write_text", "raw_number", "significant", "template_environment"]


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``.

    An interruption at any point leaves either the old file or the new one, never a partial file, and no
    temporary file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    # O_EXCL: never follow or reuse an existing file; mode 0o666 & ~umask like an ordinary new file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------


def template_environment():
    """The Jinja2 environment of dplens' HTML templates (package data): autoescaping on, strict undefined."""
    import jinja2

    from dplens.reports.risk_card import percent_lower, percent_upper

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dplens.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["upper_bound"] = fmt_upper
    env.filters["lower_bound"] = fmt_lower
    env.filters["estimate"] = fmt_estimate
    env.filters["percent"] = percent
    env.filters["percent_upper"] = percent_upper
    env.filters["percent_lower"] = percent_lower
    env.filters["g"] = lambda v: "n/a" if v is None else f"{v:g}"
    env.filters["raw_number"] = raw_number
    env.filters["significant"] = significant
    env.filters["readable"] = readable
    env.filters["to_json"] = lambda v: json.dumps(v, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return env


def significant(value: float | None, digits: int = 8) -> str:
    """A parameter value (not a bound): integers as they are, reals to ``digits`` significant digits, as the command
    line prints a calibrated value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e15):
        return str(int(value))
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.{digits}g}"


def raw_number(value: float | None) -> str:
    """The exact value (for ``data-value`` attributes): repr, or 'Infinity' / 'null'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)
