"""Number formatting for reports: bounds are rounded on their safe side, estimates to nearest.

An upper bound is shown rounded up and a lower bound rounded down, so the printed number is still a bound; used by
the HTML, the plain-text statement, the figures and the command line. The bound formatters live on the ground floor
(:mod:`dplens._numbers`, so every floor rounds the same way) and are re-exported here.
"""

from __future__ import annotations

import re

from dplens._numbers import fmt_estimate, fmt_lower, fmt_upper

__all__ = ["fmt_estimate", "fmt_lower", "fmt_upper", "percent", "readable"]


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
