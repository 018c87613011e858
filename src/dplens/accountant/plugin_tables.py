"""Reading a plug-in's spec table: what every research spec type shares.

A plug-in's spec builder (:class:`~dplens.accountant.plugins.Plugin`, ``spec_types``) turns one ``[[mechanism]]``
table into an event; the optional ``count`` key (how many times the release runs) means the same for all of them.
"""

from __future__ import annotations

from dplens.accountant import events as ev

__all__ = ["spec_count"]


def spec_count(table: dict, event: ev.Event) -> ev.Event:
    """``event`` run ``table["count"]`` times (a :class:`~dplens.accountant.events.SelfComposed`), or once.

    Raises:
        ValueError: ``count`` is not an integer ≥ 1 (named and echoed).

    Example:
        >>> spec_count({"count": 3}, ev.Gaussian(noise_multiplier=1.0)).count
        3
    """
    if "count" not in table:
        return event
    count = table["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an integer >= 1; got {count!r}")
    return event if count == 1 else ev.SelfComposed(event=event, count=count)
