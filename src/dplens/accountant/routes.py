"""The accounting routes (:class:`Method`), in a module of their own so that every layer can name them."""

from __future__ import annotations

import enum

__all__ = ["Method"]


class Method(enum.Enum):
    """An accounting route: RDP (Rényi DP, α optimised continuously), PLD (privacy-loss distribution, pessimistic),
    EXACT (a closed-form privacy profile) or BEST (the smallest ε among the routes that apply).

    Example:
        >>> Method("pld"), Method.RDP.value
        (<Method.PLD: 'pld'>, 'rdp')
    """

    RDP = "rdp"
    PLD = "pld"
    EXACT = "exact"
    BEST = "best"
