"""The ledger: budgets, atomic check-and-charge, status, verification.

A charge is one transaction: lock the budgets (SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT … FOR UPDATE``), read
each budget's period state, decide by the budget's rule (:mod:`dplens.ledger.rules`), and only if every budget
holds write the release and the new period state, then commit. A planned budget's tightest route, which may take
seconds, is computed before the lock and used under it only if the period still holds exactly the events it was
computed for. A refused charge rolls back: nothing is written. A
release name is unique per budget; charging the same name with the same events again (a client retrying after a
lost connection) is reported as a duplicate and writes nothing, with other events it is an error.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dplens.accountant import events as ev
from dplens.ledger import rules as rules_module
from dplens.ledger import sources, storage
from dplens.ledger.model import (
    Budget,
    BudgetCharge,
    BudgetStatus,
    ChargeResult,
    LedgerStatus,
    Mode,
    Period,
    PeriodStatus,
    ReleaseRow,
    Target,
    period_key,
)
from dplens.ledger.rules import Rule

__all__ = ["Ledger", "VerifyResult"]

_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")
_LARGEST = 5


class _RefusedError(Exception):
    """Raised inside a charge's transaction to roll it back."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyResult:
    """:meth:`Ledger.verify`: the store's integrity check and the ledger's invariants, recomputed from the stored
    releases (``problems`` is empty when everything holds).

    Example:
        >>> import dplens, pathlib, tempfile
        >>> with Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ...     _ = book.charge(dplens.Gaussian(noise_multiplier=8.0), release="q1")
        ...     result = book.verify()
        >>> result.ok, result.integrity, result.releases
        (True, 'ok', 1)
    """

    integrity: str
    budgets: int
    releases: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.integrity.startswith("ok") and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "integrity": self.integrity,
            "budgets": self.budgets,
            "releases": self.releases,
            "problems": list(self.problems),
        }


def _check_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value) or value != value.strip():
        raise ValueError(f"{what} must be 1-200 printable characters without surrounding spaces; got {value!r}")
    return value


def _utc(when: dt.datetime | None) -> dt.datetime:
    if when is None:
        return dt.datetime.now(dt.UTC)
    if not isinstance(when, dt.datetime) or when.tzinfo is None:
        raise ValueError(f"time must be a timezone-aware datetime; got {when!r}")
    return when.astimezone(dt.UTC)


def _iso(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _enum(value: Any, kind: type, name: str):
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name} must be one of {[m.value for m in kind]}; got {value!r}") from None


def _budget_target(epsilon: float | None, rho: float | None, mu: float | None, delta: float) -> Target:
    """The budget's target from the one of ``epsilon``, ``rho``, ``mu`` given: ε directly, or ρ-zCDP / μ-GDP with the ε
    at ``delta`` of their filters (zCDP: Feldman & Zrnic 2021; GDP: Smith & Thakurta 2022; see
    :mod:`dplens.accountant.filters`)."""
    from dplens.accountant import conversions

    if epsilon is not None:
        epsilon = conversions.check_epsilon(epsilon)
        if epsilon == 0:
            raise ValueError(f"epsilon must be > 0; got {epsilon!r}")
        return Target(epsilon=epsilon, delta=delta)
    if rho is not None:
        rho = conversions.check_epsilon(rho, name="rho")
        from dplens.accountant.filters import ZcdpFilter

        return Target(epsilon=ZcdpFilter.epsilon(rho, delta), delta=delta, rho=rho)
    mu = conversions.check_epsilon(mu, name="mu")
    from dplens.accountant.filters import GdpFilter

    return Target(epsilon=GdpFilter.epsilon(mu**2, delta), delta=delta, mu=mu)


class Ledger:
    """A budget ledger across releases, stored in SQLite (a file path) or PostgreSQL (a ``postgresql://`` URL).

    Example:
        >>> import dplens, pathlib, tempfile
        >>> from dplens.ledger import Ledger, Mode
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "budget.db"
        >>> with Ledger.open(path, create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=2.0, delta=1e-6, mode=Mode.ADAPTIVE)
        ...     result = book.charge(dplens.Gaussian(noise_multiplier=5.0), release="table-1", charged_by="ci")
        ...     status = book.status()
        >>> result.accepted, status.budgets[0].releases[0].name
        (True, 'table-1')

    Args (of :meth:`open`):
        location: a file path or a ``postgresql://`` URL.
        create: create the store if missing (``dplens budget create``); otherwise a missing store is an error.
        read_only: open for reading only.
        timeout: seconds to wait for another writer's lock before giving up with a one-line error.
    """

    def __init__(self, store: storage.Store) -> None:
        self._store = store
        self._pending_cache: dict[tuple[str, str], tuple] = {}  # tightest-route results of a charge, stored with it
        self._precomputed: dict[tuple[str, str, str], Any] = {}  # tightest routes computed before taking the lock
        self._cache_later: list[tuple] = []  # results status computed, stored after it

    @classmethod
    def open(
        cls,
        location: str | os.PathLike,
        *,
        create: bool = False,
        read_only: bool = False,
        timeout: float = storage.DEFAULT_TIMEOUT,
    ) -> Ledger:
        return cls(storage.open_store(location, create=create, read_only=read_only, timeout=timeout))

    @property
    def location(self) -> str:
        return storage.redact(self._store.location)

    @property
    def backend(self) -> str:
        return self._store.kind

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- budgets ------------------------------------------------------------------------------

    def create_budget(
        self,
        *,
        unit: str,
        delta: float,
        epsilon: float | None = None,
        rho: float | None = None,
        mu: float | None = None,
        name: str = "default",
        mode: Mode = Mode.PLANNED,
        period: Period = Period.NONE,
        neighbouring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
        orders: Sequence[float] | None = None,
        tolerance: float | None = None,
    ) -> Budget:
        """Create a budget (target: exactly one of ``epsilon``, ``rho``, ``mu``; ``delta``: the δ of its ε).

        Creating a budget that exists with the same settings returns it unchanged (scripts may create
        idempotently); with other settings it is an error.

        ``orders``: the Rényi orders of an adaptive (ε, δ) budget's filter (or of a planned budget's cached
        shortcut), fixed from now on. ``tolerance``: the PLD route's relative bracket width (planned budgets).
        """
        from dplens.accountant import conversions, pld

        name = _check_name(name, "name")
        if not isinstance(unit, str) or not unit.strip():
            raise ValueError(f"unit must be a non-empty description of the privacy unit; got {unit!r}")
        mode = _enum(mode, Mode, "mode")
        period = _enum(period, Period, "period")
        neighbouring = _enum(neighbouring, ev.NeighboringRelation, "neighbouring")
        delta = conversions.check_delta(delta)
        given = [k for k, v in (("epsilon", epsilon), ("rho", rho), ("mu", mu)) if v is not None]
        if len(given) != 1:
            raise ValueError(f"a budget needs exactly one target of epsilon, rho, mu; got {given or 'none'}")
        tolerance = pld.check_tolerance(pld.DEFAULT_TOLERANCE if tolerance is None else tolerance)
        if orders is not None:
            orders = [float(a) for a in orders]
            if not orders or any(not (a > 1 and math.isfinite(a)) for a in orders):
                raise ValueError(f"orders must be finite numbers > 1; got {orders!r}")
        target = _budget_target(epsilon, rho, mu, delta)
        rule = rules_module.make_rule(mode=mode, target=target, orders=orders, tolerance=tolerance)
        budget = Budget(
            name=name,
            unit=unit.strip(),
            neighbouring=neighbouring.value,
            mode=mode,
            target=target,
            period=period,
            rule=rule,
            created_utc=_iso(_utc(None)),
        )
        with self._store.write() as db:
            db.lock_budgets([name])
            rows = db.execute("SELECT name FROM dplens_budgets WHERE name = ?", (name,))
            if rows:
                existing = self._budget(db, name)
                same = {k: v for k, v in existing.to_dict().items() if k != "created_utc"} == {
                    k: v for k, v in budget.to_dict().items() if k != "created_utc"
                }
                if not same:
                    raise ValueError(f"budget {name!r} already exists with other settings; choose another --name")
                return existing
            db.execute(
                "INSERT INTO dplens_budgets (name, unit, neighbouring, mode, target, period, rule, created_utc, "
                "releases_total) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (
                    name,
                    budget.unit,
                    budget.neighbouring,
                    mode.value,
                    json.dumps(target.to_dict(), sort_keys=True),
                    period.value,
                    json.dumps(rule, sort_keys=True),
                    budget.created_utc,
                ),
            )
        return budget

    def budgets(self) -> tuple[Budget, ...]:
        with self._store.read() as db:
            names = [r[0] for r in db.execute("SELECT name FROM dplens_budgets ORDER BY name")]
            return tuple(self._budget(db, n) for n in names)

    @staticmethod
    def _budget(db: storage.Store, name: str) -> Budget:
        rows = db.execute(
            "SELECT name, unit, neighbouring, mode, target, period, rule, created_utc FROM dplens_budgets "
            "WHERE name = ?",
            (name,),
        )
        if not rows:
            raise ValueError(f"no budget named {name!r} in this ledger")
        name, unit, neighbouring, mode, target, period, rule, created = rows[0]
        try:
            return Budget(
                name=name,
                unit=unit,
                neighbouring=neighbouring,
                mode=Mode(mode),
                target=Target.from_dict(json.loads(target)),
                period=Period(period),
                rule=json.loads(rule),
                created_utc=created,
            )
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"budget {name!r} is stored in a form this dplens does not read ({err})") from None

    @staticmethod
    def _rule(budget: Budget) -> Rule:
        return rules_module.rule_of(budget.mode, budget.target, budget.rule)

    # ---- charge -------------------------------------------------------------------------------

    def charge(
        self,
        source: Any,
        *,
        release: str,
        budgets: Sequence[str] | None = None,
        charged_by: str | None = None,
        time: dt.datetime | None = None,
    ) -> ChargeResult:
        """Check and charge ``source`` (what the release spent: see :func:`dplens.ledger.sources.release_entries`)
        against ``budgets`` (default: every budget of the ledger), atomically.

        Returns a :class:`ChargeResult`: accepted (stored once) or refused (nothing stored, ``reason`` says what it
        would have spent and what is left). Raises ``ValueError`` for bad input (unknown event, a neighbouring
        relation other than the budget's, a release name already used with other events, a broken store).
        """
        release = _check_name(release, "release")
        charged_by = _check_name(charged_by or _default_charger(), "charged_by")
        when = _utc(time)
        entries, where = sources.release_entries(source)
        relation = _relation(entries)
        text, sha = sources.encode_entries(entries)
        with self._store.read() as db:
            names = list(budgets) if budgets else [r[0] for r in db.execute("SELECT name FROM dplens_budgets")]
        if not names:
            raise ValueError("the ledger has no budget; create one first (dplens budget create)")
        for name in names:
            _check_name(name, "budget")
        # Per-budget quantities depend only on the release and the (fixed) rule: computed before taking the lock.
        prepared: dict[str, tuple[Budget, Rule, list[int | None], float]] = {}
        with self._store.read() as db:
            for name in sorted(set(names)):
                budget = self._budget(db, name)
                if relation is not None and relation.value != budget.neighbouring:
                    raise ValueError(
                        f"release {release!r} is stated under neighbouring relation {relation.value!r} but budget "
                        f"{name!r} under {budget.neighbouring!r}; a budget composes releases under one relation"
                    )
                rule = self._rule(budget)
                quantity = rule.quantity(entries)
                alone = rule.alone_epsilon(quantity)
                if alone is None:
                    alone = self._accountant(budget, list(entries)).epsilon(budget.target.delta)
                prepared[name] = (budget, rule, quantity, alone)
        period_of = {name: period_key(b.period, when) for name, (b, _, _, _) in prepared.items()}
        decisions: list[BudgetCharge] = []
        refused: list[str] = []
        self._pending_cache = {}
        self._precomputed = self._precompute(prepared, period_of, entries, sha)
        try:
            with self._store.write() as db:
                db.lock_budgets(list(prepared))
                for name, (budget, rule, quantity, _) in sorted(prepared.items()):
                    stored = db.execute(
                        "SELECT entries_sha256 FROM dplens_releases WHERE budget = ? AND name = ?", (name, release)
                    )
                    if stored:
                        if stored[0][0] != sha:
                            raise ValueError(
                                f"release {release!r} is already charged to budget {name!r} with other events; "
                                "a release name is charged once per budget"
                            )
                        decisions.append(self._duplicate(db, budget, rule, period_of[name]))
                        continue
                    decision = self._decide(db, budget, rule, period_of[name], quantity, entries, sha)
                    decisions.append(decision)
                    if not decision.accepted:
                        refused.append(name)
                if refused:
                    raise _RefusedError
                for name, (budget, rule, quantity, alone) in sorted(prepared.items()):
                    if any(d.budget == name and d.duplicate for d in decisions):
                        continue
                    self._store_release(
                        db, budget, rule, period_of[name], release, when, charged_by, where, text, sha, quantity, alone
                    )
        except _RefusedError:
            pass
        duplicate = all(d.duplicate for d in decisions)
        accepted = not refused
        if accepted:
            reason = (
                f"release {release!r} was already charged (same events); nothing new was written"
                if duplicate
                else f"charged release {release!r}"
            )
        else:
            first = next(d for d in decisions if d.budget == refused[0])
            reason = (
                f"refused release {release!r}: budget {first.budget!r} (period {first.period}, {first.mode.value}) "
                f"would reach epsilon {_fmt(first.spent_epsilon)} > {_fmt(first.target_epsilon)} at delta "
                f"{first.delta:g} ({first.spent_method}); spent so far {_fmt(first.spent_epsilon_before)}, "
                f"remaining {_fmt(first.remaining_epsilon)} (a lower bound); nothing was written"
            )
        return ChargeResult(
            release=release,
            accepted=accepted,
            duplicate=duplicate and accepted,
            budgets=tuple(decisions),
            reason=reason,
            time_utc=_iso(when),
        )

    def _period_row(self, db: storage.Store, budget: Budget, rule: Rule, period: str):
        rows = db.execute(
            "SELECT releases, sums, spent_cache FROM dplens_periods WHERE budget = ? AND period = ?",
            (budget.name, period),
        )
        if not rows:
            return 0, rule.zero(), None
        count, sums, cache = rows[0]
        return int(count), rules_module.decode_sums(json.loads(sums)), cache

    def _duplicate(self, db: storage.Store, budget: Budget, rule: Rule, period: str) -> BudgetCharge:
        count, sums, cache = self._period_row(db, budget, rule, period)
        spent, _, method = self._spent(db, budget, rule, period, sums, count, cache)
        return BudgetCharge(
            budget=budget.name,
            period=period,
            mode=budget.mode,
            rule=rule.kind,
            target_epsilon=budget.target.epsilon,
            delta=budget.target.delta,
            spent_epsilon=spent,
            spent_epsilon_before=spent,
            spent_method=method,
            remaining_epsilon=max(budget.target.epsilon - spent, 0.0),
            accepted=True,
            duplicate=True,
            filter=rule.filter_state(sums) if rule.kind != "planned_tightest" else None,
        )

    def _decide(
        self,
        db: storage.Store,
        budget: Budget,
        rule: Rule,
        period: str,
        quantity: list[int | None],
        entries: Sequence[tuple[ev.Event, int]],
        sha: str,
    ) -> BudgetCharge:
        count, sums, cache = self._period_row(db, budget, rule, period)
        after = rule.add(sums, quantity)
        target = budget.target.epsilon
        common = dict(
            budget=budget.name,
            period=period,
            mode=budget.mode,
            rule=rule.kind,
            target_epsilon=target,
            delta=budget.target.delta,
        )
        if rule.kind != "planned_tightest":
            accepted = rule.filter_admits(after)
            spent_after = rule.filter_epsilon(after)
            spent_before = rule.filter_epsilon(sums)
            return BudgetCharge(
                **common,
                spent_epsilon=spent_after,
                spent_epsilon_before=spent_before,
                spent_method=rule.describe_decision(after, accepted),
                remaining_epsilon=max(target - (spent_after if accepted else spent_before), 0.0),
                accepted=accepted,
                filter=rule.filter_state(after if accepted else sums),
            )
        shortcut = rule.shortcut_epsilon(after)
        if shortcut <= target * (1 - rules_module.FAST_PATH_MARGIN):
            before = rule.shortcut_epsilon(sums) if count else 0.0
            return BudgetCharge(
                **common,
                spent_epsilon=shortcut,
                spent_epsilon_before=before,
                spent_method="rdp at cached orders (a valid upper bound; it already fits, so the tightest route was "
                "not needed)",
                remaining_epsilon=max(target - shortcut, 0.0),
                accepted=True,
            )
        before = self._spent_before_cheaply(db, budget, rule, period, sums, count, cache)
        lower = self._release_lower_bound(budget, entries)
        if lower > target:
            # The true ε of a composition is at least that of any part of it (its output is a function of the
            # composition's), so every valid upper bound — the tightest route's too — exceeds the budget: refuse
            # without running it.
            return BudgetCharge(
                **common,
                spent_epsilon=lower,
                spent_epsilon_before=before,
                spent_method="a certified lower bound (the release alone, exact route): every route would refuse",
                remaining_epsilon=max(target - before, 0.0),
                accepted=False,
            )
        groups = self._groups(db, budget.name, period, extra=sha)
        digest = self._digest(budget, groups)
        result = self._precomputed.get((budget.name, period, digest))
        if result is None:  # the period changed since the precomputation (another charge committed): compute it here
            new_entries = self._grouped_entries(db, budget.name, period, groups, extra=(sha, entries))
            result = self._accountant(budget, new_entries).epsilon_result(budget.target.delta)
        accepted = result.epsilon <= target
        charge = BudgetCharge(
            **common,
            spent_epsilon=result.epsilon,
            spent_epsilon_before=before,
            spent_method=f"tightest route: {result.method.value}",
            remaining_epsilon=max(target - (result.epsilon if accepted else before), 0.0),
            accepted=accepted,
        )
        if accepted:
            self._pending_cache[(budget.name, period)] = (digest, result.to_dict())
        return charge

    def _precompute(
        self,
        prepared: dict[str, tuple[Budget, Rule, list[int | None], float]],
        period_of: dict[str, str],
        entries: Sequence[tuple[ev.Event, int]],
        sha: str,
    ) -> dict[tuple[str, str, str], Any]:
        """The tightest route of each planned period this charge will need, computed *before* taking the writer
        lock (it may take seconds), keyed by the digest of the period's events with this release. Inside the lock
        the result is used only if the period still holds exactly those events; otherwise it is recomputed there."""
        out: dict[tuple[str, str, str], Any] = {}
        with self._store.read() as db:
            for name, (budget, rule, quantity, _) in prepared.items():
                if rule.kind != "planned_tightest":
                    continue
                period = period_of[name]
                _, sums, _ = self._period_row(db, budget, rule, period)
                after = rule.add(sums, quantity)
                if rule.shortcut_epsilon(after) <= budget.target.epsilon * (1 - rules_module.FAST_PATH_MARGIN):
                    continue  # the cheap bound will accept it
                if self._release_lower_bound(budget, entries) > budget.target.epsilon:
                    continue  # refused by its lower bound, no route needed
                groups = self._groups(db, name, period, extra=sha)
                new_entries = self._grouped_entries(db, name, period, groups, extra=(sha, entries))
                result = self._accountant(budget, new_entries).epsilon_result(budget.target.delta)
                out[(name, period, self._digest(budget, groups))] = result
        return out

    def _spent_before_cheaply(
        self,
        db: storage.Store,
        budget: Budget,
        rule: Rule,
        period: str,
        sums: list[int | None],
        count: int,
        cache: str | None,
    ) -> float:
        """The period's spent ε before this charge without running the tightest route: the cached tightest result
        when it covers exactly the stored events, else the cached RDP bound (an upper bound either way)."""
        if count == 0:
            return 0.0
        if cache:
            cached = self._cached_result(cache, self._digest(budget, self._groups(db, budget.name, period)))
            if cached is not None:
                return float(cached["epsilon"])
        return rule.shortcut_epsilon(sums)

    @staticmethod
    def _cached_result(cache: str | None, digest: str) -> dict[str, Any] | None:
        """A period's cached tightest result if it was computed on exactly the stored events (same digest)."""
        if not cache:
            return None
        stored = json.loads(cache)
        return stored["result"] if stored.get("digest") == digest else None

    def _release_lower_bound(self, budget: Budget, entries: Sequence[tuple[ev.Event, int]]) -> float:
        """A certified lower bound on the true ε of the release alone at the budget's δ: its exact privacy profile
        (closed forms, accurate far beyond the 1e-6 margin taken off), or 0 when it has none."""
        from dplens.accountant.compose import Method
        from dplens.accountant.rdp import UnsupportedEventError

        try:
            exact = self._accountant(budget, entries).epsilon(budget.target.delta, method=Method.EXACT)
        except UnsupportedEventError:
            return 0.0
        return exact * (1 - 1e-6) if math.isfinite(exact) else math.inf

    def _store_release(
        self,
        db: storage.Store,
        budget: Budget,
        rule: Rule,
        period: str,
        release: str,
        when: dt.datetime,
        charged_by: str,
        where: str,
        text: str,
        sha: str,
        quantity: list[int | None],
        alone: float,
    ) -> None:
        total = db.execute("SELECT releases_total FROM dplens_budgets WHERE name = ?", (budget.name,))[0][0]
        db.execute(
            "INSERT INTO dplens_releases (budget, name, seq, period, time_utc, charged_by, source, entries, "
            "entries_sha256, quantity, epsilon_alone) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                budget.name,
                release,
                int(total) + 1,
                period,
                _iso(when),
                charged_by,
                where[:500],
                text,
                sha,
                json.dumps(rules_module.encode_sums(quantity)),
                alone if math.isfinite(alone) else 1e308,
            ),
        )
        db.execute("UPDATE dplens_budgets SET releases_total = ? WHERE name = ?", (int(total) + 1, budget.name))
        count, sums, _ = self._period_row(db, budget, rule, period)
        after = json.dumps(rules_module.encode_sums(rule.add(sums, quantity)))
        cache = None  # the period changed: an older cached result no longer applies (its digest would not match)
        pending = self._pending_cache.pop((budget.name, period), None)
        if pending is not None:
            cache = json.dumps({"digest": pending[0], "result": pending[1]}, sort_keys=True)
        if count == 0:
            db.execute(
                "INSERT INTO dplens_periods (budget, period, releases, sums, spent_cache) VALUES (?, ?, 1, ?, ?)",
                (budget.name, period, after, cache),
            )
        else:
            db.execute(
                "UPDATE dplens_periods SET releases = ?, sums = ?, spent_cache = ? WHERE budget = ? AND period = ?",
                (count + 1, after, cache, budget.name, period),
            )

    # ---- the tightest route of a planned period ---------------------------------------------------

    @staticmethod
    def _accountant(budget: Budget, entries: Sequence[tuple[ev.Event, int]]):
        from dplens.accountant.compose import Accountant

        acc = Accountant(
            neighboring=ev.NeighboringRelation(budget.neighbouring),
            tolerance=budget.rule.get("tolerance", 1e-3),
        )
        for event, count in entries:
            acc.compose(event, count)
        return acc

    @staticmethod
    def _groups(db: storage.Store, budget: str, period: str, *, extra: str | None = None) -> list[tuple[str, int]]:
        """(events sha, number of releases) of the period in order of first appearance (+ one more release)."""
        rows = db.execute(
            "SELECT entries_sha256, COUNT(*), MIN(seq) FROM dplens_releases WHERE budget = ? AND period = ? "
            "GROUP BY entries_sha256 ORDER BY MIN(seq)",
            (budget, period),
        )
        groups = [(sha, int(n)) for sha, n, _ in rows]
        if extra is not None:
            for i, (sha, n) in enumerate(groups):
                if sha == extra:
                    groups[i] = (sha, n + 1)
                    break
            else:
                groups.append((extra, 1))
        return groups

    @staticmethod
    def _grouped_entries(
        db: storage.Store,
        budget: str,
        period: str,
        groups: list[tuple[str, int]],
        *,
        extra: tuple[str, Sequence[tuple[ev.Event, int]]] | None = None,
    ) -> list[tuple[ev.Event, int]]:
        """The period's events with identical events merged (counts added), in order of first appearance: the
        composition the tightest route evaluates (composition is commutative; repeated releases become one entry)."""
        texts: dict[str, str] = {}
        rows = db.execute(  # the events of the first release of each group (found through the covering index)
            "SELECT entries_sha256, entries FROM dplens_releases WHERE budget = ? AND seq IN ("
            "SELECT MIN(seq) FROM dplens_releases WHERE budget = ? AND period = ? GROUP BY entries_sha256)",
            (budget, budget, period),
        )
        texts.update({sha: text for sha, text in rows})
        merged: dict[str, list] = {}
        for sha, n in groups:
            if extra is not None and sha == extra[0] and sha not in texts:
                entries = list(extra[1])
            else:
                entries = list(sources.decode_entries(texts[sha]))
            for event, count in entries:
                key = json.dumps(ev.event_to_dict(event), sort_keys=True)
                if key in merged:
                    merged[key][1] += count * n
                else:
                    merged[key] = [event, count * n]
        return [(e, c) for e, c in merged.values()]

    @staticmethod
    def _digest(budget: Budget, groups: list[tuple[str, int]]) -> str:
        from dplens._version import __version__

        payload = json.dumps([__version__, budget.rule, budget.target.to_dict(), groups], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def _spent(
        self,
        db: storage.Store,
        budget: Budget,
        rule: Rule,
        period: str,
        sums: list[int | None],
        count: int,
        cache: str | None,
        *,
        store_cache: bool = False,
    ) -> tuple[float, float | None, str]:
        """(spent ε, certified lower end or None, how) of a period by the budget's rule."""
        if count == 0:
            return 0.0, None, "no release"
        if rule.kind != "planned_tightest":
            return rule.filter_epsilon(sums), None, f"{rule.kind} (filter state as epsilon)"
        groups = self._groups(db, budget.name, period)
        digest = self._digest(budget, groups)
        cached = self._cached_result(cache, digest)
        if cached is not None:
            return float(cached["epsilon"]), cached.get("epsilon_lower"), f"tightest route: {cached['method']}"
        entries = self._grouped_entries(db, budget.name, period, groups)
        result = self._accountant(budget, entries).epsilon_result(budget.target.delta)
        if store_cache:
            self._cache_later.append((budget.name, period, digest, result.to_dict()))
        return result.epsilon, result.epsilon_lower, f"tightest route: {result.method.value}"

    def accountant(self, budget: str, period: str = "all"):
        """The :class:`~dplens.accountant.compose.Accountant` of a planned budget's period: the composition the
        ledger evaluates (identical events merged, in order of first appearance).

        Example:
            >>> import dplens, pathlib, tempfile
            >>> from dplens.ledger import Ledger
            >>> with Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
            ...     _ = book.create_budget(unit="one person", epsilon=5.0, delta=1e-6)
            ...     for i in range(3):
            ...         _ = book.charge(dplens.Gaussian(noise_multiplier=4.0), release=f"r{i}")
            ...     book.accountant("default").ledger
            ((Gaussian(noise_multiplier=4.0, neighboring=<NeighboringRelation.ADD_OR_REMOVE_ONE: 'add_remove'>), 3),)
        """
        with self._store.read() as db:
            record = self._budget(db, budget)
            groups = self._groups(db, budget, period)
            return self._accountant(record, self._grouped_entries(db, budget, period, groups))

    # ---- status ---------------------------------------------------------------------------------

    def status(self, *, time: dt.datetime | None = None) -> LedgerStatus:
        """Every budget: per period spent ε (the mode's rule; an upper bound), the certified lower end where PLD
        applies, remaining (a lower bound), number of releases, largest spenders; the releases themselves."""
        when = _utc(time)
        self._cache_later: list[tuple] = []
        out = []
        with self._store.read() as db:
            names = [r[0] for r in db.execute("SELECT name FROM dplens_budgets ORDER BY name")]
            for name in names:
                out.append(self._budget_status(db, self._budget(db, name), when))
        self._store_caches()
        from dplens.ledger.storage import SCHEMA_VERSION

        return LedgerStatus(
            location=self.location, schema_version=SCHEMA_VERSION, time_utc=_iso(when), budgets=tuple(out)
        )

    def _budget_status(self, db: storage.Store, budget: Budget, when: dt.datetime) -> BudgetStatus:
        rule = self._rule(budget)
        rows = db.execute(
            "SELECT name, seq, period, time_utc, charged_by, epsilon_alone FROM dplens_releases "
            "WHERE budget = ? ORDER BY seq",
            (budget.name,),
        )
        make = ReleaseRow._make
        releases = tuple(make(r) if r[5] < 1e308 else make((*r[:5], math.inf)) for r in rows)
        by_period: dict[str, list[ReleaseRow]] = {}
        chargers: dict[str, int] = {}
        for row in releases:
            by_period.setdefault(row.period, []).append(row)
            chargers[row.charged_by] = chargers.get(row.charged_by, 0) + 1
        periods = []
        for period, count, sums, cache in db.execute(
            "SELECT period, releases, sums, spent_cache FROM dplens_periods WHERE budget = ? ORDER BY period",
            (budget.name,),
        ):
            decoded = rules_module.decode_sums(json.loads(sums))
            spent, lower, method = self._spent(db, budget, rule, period, decoded, int(count), cache, store_cache=True)
            largest = heapq.nsmallest(_LARGEST, by_period.get(period, []), key=lambda r: (-r.epsilon_alone, r.seq))
            periods.append(
                PeriodStatus(
                    period=period,
                    releases=int(count),
                    spent_epsilon=spent,
                    spent_epsilon_lower=lower,
                    spent_method=method,
                    remaining_epsilon=max(budget.target.epsilon - spent, 0.0),
                    largest=tuple(largest),
                    filter=rule.filter_state(decoded) if rule.kind != "planned_tightest" else None,
                )
            )
        current = period_key(budget.period, when)
        now = next((p for p in periods if p.period == current), None)
        spent = now.spent_epsilon if now is not None else 0.0
        return BudgetStatus(
            budget=budget,
            current_period=current,
            spent_epsilon=spent,
            remaining_epsilon=max(budget.target.epsilon - spent, 0.0),
            periods=tuple(periods),
            releases=releases,
            chargers=chargers,
        )

    def _store_caches(self) -> None:
        """Write the tightest-route results status computed, keyed by the digest of the events they cover (a cache
        that no longer matches is ignored, so concurrent charges never make it wrong). Best effort: a read-only or
        busy store is left as it is."""
        pending, self._cache_later = self._cache_later, []
        if not pending or getattr(self._store, "read_only", False):
            return
        try:
            with self._store.write() as db:
                for budget, period, digest, result in pending:
                    record = self._budget(db, budget)
                    if self._digest(record, self._groups(db, budget, period)) == digest:
                        db.execute(
                            "UPDATE dplens_periods SET spent_cache = ? WHERE budget = ? AND period = ?",
                            (json.dumps({"digest": digest, "result": result}, sort_keys=True), budget, period),
                        )
        except ValueError:
            pass

    # ---- history (the report's figure) --------------------------------------------------------------

    def spend_history(self, budget: str, period: str, *, points: int = 30) -> list[dict[str, Any]]:
        """Cumulative spent ε of a budget's period after its releases, at up to ``points`` evenly spaced releases
        (each by the budget's rule, an upper bound): ``{"releases", "time_utc", "release", "spent_epsilon"}``."""
        with self._store.read() as db:
            record = self._budget(db, budget)
            rule = self._rule(record)
            rows = db.execute(
                "SELECT name, time_utc, entries, quantity FROM dplens_releases WHERE budget = ? AND period = ? "
                "ORDER BY seq",
                (budget, period),
            )
        if not rows:
            return []
        marks = sorted({max(1, round(len(rows) * (i + 1) / points)) for i in range(points)})
        out = []
        sums = rule.zero()
        merged: dict[str, list] = {}
        for index, (name, time_utc, text, quantity) in enumerate(rows, start=1):
            sums = rule.add(sums, rules_module.decode_sums(json.loads(quantity)))
            if rule.kind == "planned_tightest":
                for event, count in sources.decode_entries(text):
                    key = json.dumps(ev.event_to_dict(event), sort_keys=True)
                    if key in merged:
                        merged[key][1] += count
                    else:
                        merged[key] = [event, count]
            if index not in marks:
                continue
            if rule.kind == "planned_tightest":
                entries = [(e, c) for e, c in merged.values()]
                spent = self._accountant(record, entries).epsilon(record.target.delta)
            else:
                spent = rule.filter_epsilon(sums)
            out.append({"releases": index, "time_utc": time_utc, "release": name, "spent_epsilon": spent})
        return out

    # ---- verification ------------------------------------------------------------------------------

    def verify(self) -> VerifyResult:
        """Recompute every invariant from the stored releases: the store's integrity check; each release's events
        decode and its quantity equals the rule's; each period's cached count and sums equal the releases'; and no
        period's spent ε, recomputed by its rule, exceeds its budget."""
        problems: list[str] = []
        total = 0
        with self._store.read() as db:
            integrity = self._store.integrity_check()
            names = [r[0] for r in db.execute("SELECT name FROM dplens_budgets ORDER BY name")]
            for name in names:
                budget = self._budget(db, name)
                rule = self._rule(budget)
                rows = db.execute(
                    "SELECT name, period, entries, entries_sha256, quantity FROM dplens_releases WHERE budget = ? "
                    "ORDER BY seq",
                    (name,),
                )
                total += len(rows)
                per_period: dict[str, tuple[int, list[int | None]]] = {}
                for release, period, text, sha, quantity in rows:
                    entries = sources.decode_entries(text)
                    if sources.encode_entries(entries) != (text, sha):
                        problems.append(f"{name}/{release}: stored events do not round-trip")
                    stored_q = rules_module.decode_sums(json.loads(quantity))
                    if rule.quantity(entries) != stored_q:
                        problems.append(f"{name}/{release}: stored quantity differs from the rule's")
                    count, sums = per_period.get(period, (0, rule.zero()))
                    per_period[period] = (count + 1, rule.add(sums, stored_q))
                stored = {
                    p: (int(c), rules_module.decode_sums(json.loads(s)), cache)
                    for p, c, s, cache in db.execute(
                        "SELECT period, releases, sums, spent_cache FROM dplens_periods WHERE budget = ?", (name,)
                    )
                }
                if set(stored) != set(per_period):
                    problems.append(f"{name}: periods {sorted(stored)} differ from the releases' {sorted(per_period)}")
                for period, (count, sums) in per_period.items():
                    if period not in stored:
                        continue
                    if stored[period][:2] != (count, sums):
                        problems.append(f"{name}/{period}: cached count or sums differ from the releases'")
                    if rule.kind == "planned_tightest":
                        entries = self._grouped_entries(db, name, period, self._groups(db, name, period))
                        spent = self._accountant(budget, entries).epsilon(budget.target.delta)
                        if spent > budget.target.epsilon:
                            problems.append(f"{name}/{period}: spent {spent!r} > budget {budget.target.epsilon!r}")
                    elif not rule.filter_admits(sums):
                        problems.append(f"{name}/{period}: filter quantity exceeds the budget")
        return VerifyResult(integrity=integrity, budgets=len(names), releases=total, problems=tuple(problems))

    def release_events(self, budget: str) -> Iterator[tuple[str, tuple[tuple[ev.Event, int], ...]]]:
        """(release name, its stored events), in charge order."""
        with self._store.read() as db:
            rows = db.execute("SELECT name, entries FROM dplens_releases WHERE budget = ? ORDER BY seq", (budget,))
        for name, text in rows:
            yield name, sources.decode_entries(text)


def _relation(entries: Sequence[tuple[ev.Event, int]]) -> ev.NeighboringRelation | None:
    """The neighbouring relation the release's events state (validated by the Accountant), None if none states one."""
    from dplens.accountant.compose import Accountant

    if not entries:
        raise ValueError("a release must spend something: it has no event")
    acc = Accountant()
    for event, count in entries:
        acc.compose(event, count)  # mixed relations and events no route supports are refused here
    return acc._neighboring


def _default_charger() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"[:200]


def _fmt(value: float) -> str:
    return "nan" if math.isnan(value) else "inf" if math.isinf(value) else f"{value:.6g}"
