"""The accounting routes (:class:`Method`), in a module of their own so that every layer can name them."""

from __future__ import annotations

import enum

__all__ = ["Method", "as_method"]


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


def as_method(method: Method | str, *, name: str = "method") -> Method:
    """``method`` as a :class:`Method`, from the enum or its value (``"rdp"``, ``"pld"``, ``"exact"``, ``"best"``).

    Example:
        >>> as_method("rdp"), as_method(Method.PLD)
        (<Method.RDP: 'rdp'>, <Method.PLD: 'pld'>)

    Raises:
        ValueError: anything else, naming ``name`` and the value.
    """
    if isinstance(method, Method):
        return method
    if isinstance(method, str):
        try:
            return Method(method.lower())
        except ValueError:
            pass
    raise ValueError(f"{name} must be a Method or one of {[m.value for m in Method]}; got {method!r}")
