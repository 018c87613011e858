"""The tightest route of a planned budget's period: its releases grouped by their events, the digest that keys the
cached result, the composition the accountant evaluates, and a release's certified lower bound.

A :class:`PeriodRoute` is a value of one query (one charge's decision, one status line): built by the ledger for a
budget's period inside a transaction, handed to the budget's rule (:meth:`dplens.ledger.rules.Rule.decide`), and
dropped. It reads the store only through its named operations and holds nothing between calls.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dplens.accountant import events as ev
from dplens.ledger.model import Budget
from dplens.ledger.sources import decode_entries

if TYPE_CHECKING:
    from dplens.ledger.storage import Store

__all__ = ["PeriodRoute", "accountant_of", "decode", "merge_into"]

Entries = Sequence[tuple[ev.Event, int]]

decode = decode_entries


def accountant_of(budget: Budget, entries: Entries):
    """The :class:`~dplens.accountant.compose.Accountant` of ``entries`` under the budget's relation and tolerance."""
    from dplens.accountant.compose import Accountant

    acc = Accountant(
        neighboring=ev.NeighboringRelation(budget.neighbouring),
        tolerance=budget.rule.get("tolerance", 1e-3),
    )
    for event, count in entries:
        acc.compose(event, count)
    return acc


def merge_into(merged: dict[str, list], entries: Entries, times: int = 1) -> None:
    """Add ``entries`` (each count × ``times``) to ``merged`` (event JSON → [event, count]): identical events become
    one entry, in order of first appearance (composition is commutative)."""
    for event, count in entries:
        key = json.dumps(ev.event_to_dict(event), sort_keys=True)
        if key in merged:
            merged[key][1] += count * times
        else:
            merged[key] = [event, count * times]


class PeriodRoute:
    """The tightest route of one period of a planned budget, optionally with one more release (the one being
    charged: ``release`` = (its events' SHA-256, its entries)); ``known``: results computed before the writer lock,
    by digest (used only if the period still holds exactly those events)."""

    __slots__ = ("_groups", "budget", "db", "known", "period", "release")

    def __init__(
        self,
        db: Store | None,
        budget: Budget,
        period: str,
        *,
        release: tuple[str, Entries] | None = None,
        known: Mapping[str, Any] | None = None,
    ) -> None:
        self.db = db
        self.budget = budget
        self.period = period
        self.release = release
        self.known = known or {}
        self._groups: dict[bool, list[tuple[str, int]]] = {}

    def groups(self, *, with_release: bool = False) -> list[tuple[str, int]]:
        """(events SHA-256, number of releases) of the period in order of first appearance (+ the release)."""
        if with_release not in self._groups:
            groups = self.db.event_groups(self.budget.name, self.period)
            if with_release:
                extra = self.release[0]
                for i, (sha, n) in enumerate(groups):
                    if sha == extra:
                        groups[i] = (sha, n + 1)
                        break
                else:
                    groups.append((extra, 1))
            self._groups[with_release] = groups
        return self._groups[with_release]

    def digest(self, *, with_release: bool = False) -> str:
        """The key of a cached result: dplens's version, the rule, the target and the period's event groups."""
        from dplens._version import __version__

        groups = self.groups(with_release=with_release)
        payload = json.dumps([__version__, self.budget.rule, self.budget.target.to_dict(), groups], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def entries(self, *, with_release: bool = False) -> list[tuple[ev.Event, int]]:
        """The period's events with identical events merged (counts added), in order of first appearance: the
        composition the tightest route evaluates (repeated releases become one entry)."""
        texts = self.db.group_texts(self.budget.name, self.period)
        merged: dict[str, list] = {}
        for sha, n in self.groups(with_release=with_release):
            if with_release and sha == self.release[0] and sha not in texts:
                entries = list(self.release[1])
            else:
                entries = list(decode_entries(texts[sha]))
            merge_into(merged, entries, n)
        return [(e, c) for e, c in merged.values()]

    def accountant(self, entries: Entries):
        return accountant_of(self.budget, entries)

    def epsilon_of(self, entries: Entries) -> float:
        """The tightest ε of ``entries`` at the budget's δ."""
        return accountant_of(self.budget, entries).epsilon(self.budget.target.delta)

    def result(self):
        """The tightest result (``EpsilonResult``) of the period's stored events."""
        return accountant_of(self.budget, self.entries()).epsilon_result(self.budget.target.delta)

    def with_release(self) -> tuple[str, Any]:
        """(digest, tightest result) of the period with the release: the one computed before the lock if the period
        is unchanged since, else computed now."""
        digest = self.digest(with_release=True)
        result = self.known.get(digest)
        if result is None:
            entries = self.entries(with_release=True)
            result = accountant_of(self.budget, entries).epsilon_result(self.budget.target.delta)
        return digest, result

    def release_lower_bound(self, entries: Entries) -> float:
        """A certified lower bound on the true ε of the release alone at the budget's δ: its exact privacy profile
        (closed forms, accurate far beyond the 1e-6 margin taken off), or 0 when it has none — or when an event says
        its accounted pair is not attained (:func:`_attained`): its profile is then an upper bound only (an
        unamplified or Rényi bound of a sampler), no lower bound."""
        from dplens.accountant.compose import Method
        from dplens.accountant.rdp import UnsupportedEventError

        if not all(_attained(event) for event, _ in entries):
            return 0.0
        try:
            exact = accountant_of(self.budget, entries).epsilon(self.budget.target.delta, method=Method.EXACT)
        except UnsupportedEventError:
            return 0.0
        return exact * (1 - 1e-6) if math.isfinite(exact) else math.inf


_attained = ev.attained  # the accountant's test of an attained pair
