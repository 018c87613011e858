"""Notebook display of result objects: a readable ``__repr__`` line and a small ``_repr_html_`` table."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any

__all__ = ["html_table", "number"]


def number(value: Any, digits: int = 6) -> str:
    """A number for display (``inf``, ``n/a`` for None/NaN); other values as ``str``."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.{digits}g}"


def html_table(caption: str, rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column HTML table (name, value), every cell escaped."""
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(str(name))}</th><td>{html.escape(number(value))}</td></tr>"
        for name, value in rows
    )
    return f"<table><caption>{html.escape(caption)}</caption>{body}</table>"
