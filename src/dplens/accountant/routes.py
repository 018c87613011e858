"""The accounting routes (:class:`Method`), in a module of their own so that every layer can name them."""

from __future__ import annotations

import enum

__all__ = ["Method"]


class Method(enum.Enum):
    """An accounting route."""

    RDP = "rdp"
    PLD = "pld"
    EXACT = "exact"
    BEST = "best"
