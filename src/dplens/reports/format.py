"""Number formatting for reports: bounds are rounded on their safe side, estimates to nearest.

An upper bound is shown rounded up and a lower bound rounded down, so the printed number is still a bound; used by
the HTML, the plain-text statement, the figures and the command line.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

__all__ = ["fmt_estimate", "fmt_lower", "fmt_upper", "percent", "readable"]


def _fmt(value: float | None, digits: int, rounding: str) -> str:
    if value is None:
        return "n/a"
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    exact = Decimal(repr(value))
    quantum = Decimal(1).scaleb(exact.adjusted() - (digits - 1))
    rounded = exact.quantize(quantum, rounding=rounding)
    if -5 <= rounded.adjusted() < 7:
        return f"{rounded:f}"
    return f"{rounded:.{digits - 1}E}"


def fmt_upper(value: float | None, digits: int = 4) -> str:
    """An upper bound shown with ``digits`` significant digits, rounded up (never below the bound)."""
    return _fmt(value, digits, ROUND_CEILING)


def fmt_lower(value: float | None, digits: int = 4) -> str:
    """A lower bound shown with ``digits`` significant digits, rounded down (never above the bound)."""
    return _fmt(value, digits, ROUND_FLOOR)


def fmt_estimate(value: float | None, digits: int = 4) -> str:
    """An estimate (not a bound), rounded to nearest."""
    return _fmt(value, digits, ROUND_HALF_EVEN)


def percent(probability: float) -> str:
    """0.95 → '95%'; 0.999 → '99.9%'."""
    return f"{probability * 100:.10g}%"


_ENUM_REPR = re.compile(r"<[A-Za-z_][\w.]*: '([^']*)'>")
_CALL = re.compile(r"\b([A-Z][A-Za-z0-9]*)\(")
_KEYWORD = re.compile(r"\b([a-z_][a-z0-9_]*)=(?!=)")
_LONG_FLOAT = re.compile(r"(?<![\w.])(\d+\.\d{10,})(?![\d])")


def readable(text: str) -> str:
    """A description that may hold a Python repr (an audit's ``mechanism`` field), in words for a page:
    ``Name(key=value)`` → ``Name (key = value)``, enum reprs → their value, reals to 8 significant digits.

    Example:
        >>> readable("GaussianMechanism(noise_multiplier=0.3333333333333333, neighboring=<Rel.ADD: 'add_remove'>)")
        'Gaussian Mechanism (noise_multiplier = 0.33333333, neighboring = add_remove)'
    """
    text = _ENUM_REPR.sub(r"\1", str(text))
    text = _CALL.sub(lambda m: re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", m.group(1)) + " (", text)
    text = _KEYWORD.sub(r"\1 = ", text)
    return _LONG_FLOAT.sub(lambda m: f"{float(m.group(1)):.8g}", text)
