"""Privacy parameters stated in a record's free text (``privacy_parameters_details``), read conservatively.

Real records often state more than their structured fields: the 2020 Census DHC record gives ρ = 15.29 in
``privacy_parameters`` and, in its details, "Person Tables: ρ = 4.96 was used (corresponding to ε = 26.34 and
δ = 10⁻¹⁰)"; a record whose ε came from a μ-GDP analysis says so there. This module reads such statements — a
symbol (ρ, ε, δ, μ in LaTeX, Unicode or words), a relation (=, ≈, <, ≤, "is about", "of") and a number (decimal,
scientific, 10^{-k}, 10−k, m × 10−k) — sentence by sentence, and keeps the sentence so a reader can see where each
value came from. Subscripted symbols (ε₀, ε_{user}, ε′′) name other quantities and are skipped. It is a reader of
prose, not a parser of mathematics: what it cannot read it leaves out, and every value it reports is labelled as
read from the details text.

Example:
    >>> text = "Person Tables: \\\\(\\\\rho\\\\) = 4.96 was used (corresponding to \\\\(\\\\epsilon\\\\)=26.34 and "
    >>> text += "\\\\(\\\\delta = 10^{-10}\\\\)."
    >>> [(s.label, s.rho, s.epsilon, s.delta) for s in read_statements(text)]
    [('Person Tables', 4.96, 26.34, 1e-10)]
    >>> parse_delta("5.8 × 10−6"), parse_delta("10^{-10}"), parse_delta("1e-5"), parse_delta("n^{-2}")
    (5.8e-06, 1e-10, 1e-05, None)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Statement", "decimal_half_unit", "parse_delta", "read_statements"]

_MINUS = "[-−–]"
# m × 10^{-k}, 10^{-k}, 10−k (a PDF's lost superscript), then a plain or scientific number
_POWER = (
    rf"(?:(?P<mant>\d+(?:\.\d+)?)\s*(?:×|\\times|x|\*)\s*)?10\s*(?:\^\s*\{{?\s*|\^\s*)?(?P<exp>{_MINUS}\s*\d+)\s*\}}?"
)
_PLAIN = r"(?P<plain>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_NUMBER = re.compile(rf"(?:{_POWER}|{_PLAIN})")
_SYMBOLS = {
    "rho": r"\\rho|ρ|\brho\b",
    "epsilon": r"\\varepsilon|\\epsilon|ε|\bepsilon\b",
    "delta": r"\\delta|δ|\bdelta\b",
    "mu": r"\\mu|μ|\bmu\b",
}
# between a symbol and its value: closing/opening LaTeX delimiters, spaces and a relation
_GAP = (
    r"(?P<gap>(?:\s|\\+[()\[\]]|[$(){}]|=|≈|~|<|≤|\\leq|\\approx|:|-GDP|-zCDP"
    r"|\bis\b|\babout\b|\bof\b|\bapproximately\b)*)"
)
_RELATION = re.compile(r"=|≈|~|<|≤|\\leq|\\approx|\babout\b|\bof\b|\bis\b")
_PATTERNS = {name: re.compile(rf"(?:{symbol})(?![_\w′'])(?!\s*\\prime){_GAP}") for name, symbol in _SYMBOLS.items()}
# a sentence ends at a line break, or at ". " / "; " before a capital, a bullet or a LaTeX opener
_SENTENCES = re.compile(r"\n+|(?<=[.;])\s+(?=[A-Z•\-\\])")


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """The parameters read from one sentence of the details text (None where the sentence names none)."""

    sentence: str
    label: str
    rho: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    mu: float | None = None
    rho_text: str | None = None
    epsilon_text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "sentence": self.sentence,
            "rho": self.rho,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mu": self.mu,
        }


def _number_value(match: re.Match[str]) -> float:
    if match.group("plain") is not None:
        return float(match.group("plain"))
    exponent = int(re.sub(_MINUS, "-", match.group("exp")).replace(" ", ""))
    mantissa = float(match.group("mant")) if match.group("mant") else 1.0
    return float(f"{mantissa}e{exponent}")


def parse_delta(text: Any) -> float | None:
    """A δ given as a number or a string holding one number (``"1e-5"``, ``"10^{-10}"``, ``"5.8 × 10−6"``); None
    for anything else (a formula such as ``n^{-2}``)."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int | float):
        return float(text)
    if not isinstance(text, str):
        return None
    stripped = text.strip().strip("$").strip()
    match = _NUMBER.fullmatch(stripped)
    return _number_value(match) if match else None


def decimal_half_unit(text: str | None) -> float:
    """Half a unit of the last decimal written in ``text`` (``"2.56"`` → 0.005; ``"15"`` → 0.5; None → 0): how
    far a value rounded to that many decimals may be from the unrounded one."""
    if not text:
        return 0.0
    mantissa = re.split(r"[eE]", text)[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    scale = 10 ** int(re.split(r"[eE]", text)[1]) if re.search(r"[eE]", text) else 1
    return 0.5 * 10.0**-decimals * scale


def _label(sentence: str) -> str:
    text = sentence.strip().lstrip("-•* ").strip()
    head, sep, _ = text.partition(":")
    if sep and 0 < len(head) <= 60 and not re.search(r"\\\(|[=<]", head):
        return head.strip()
    return text[:60] + ("…" if len(text) > 60 else "")


def _values(sentence: str) -> dict[str, tuple[float, str]]:
    """The first value of each symbol in a sentence, with its text."""
    found: dict[str, tuple[float, str]] = {}
    for name, pattern in _PATTERNS.items():
        for symbol in pattern.finditer(sentence):
            if not _RELATION.search(symbol.group("gap")):
                continue
            number = _NUMBER.match(sentence, symbol.end())
            if number is None:
                continue
            value = _number_value(number)
            if name != "delta" and number.group("plain") is None:
                continue  # 10^{-k} is a δ's form; for ρ, ε, μ it is not what the sentence means
            if math.isfinite(value):
                found[name] = (value, number.group(0))
                break
    return found


def read_statements(text: Any) -> list[Statement]:
    """Every sentence of ``text`` that states at least one of ρ, ε, δ, μ (in order)."""
    if not isinstance(text, str):
        return []
    statements = []
    for sentence in _SENTENCES.split(text):
        if not sentence.strip():
            continue
        values = _values(sentence)
        if not values:
            continue
        statements.append(
            Statement(
                sentence=" ".join(sentence.split()),
                label=_label(sentence),
                rho=values["rho"][0] if "rho" in values else None,
                epsilon=values["epsilon"][0] if "epsilon" in values else None,
                delta=values["delta"][0] if "delta" in values else None,
                mu=values["mu"][0] if "mu" in values else None,
                rho_text=values["rho"][1] if "rho" in values else None,
                epsilon_text=values["epsilon"][1] if "epsilon" in values else None,
            )
        )
    return statements
