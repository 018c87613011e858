"""The ledger: budgets, atomic check-and-charge, status, verification.

The rules of charging live here; what they decide with is elsewhere: each budget's composition rule
(:mod:`dplens.ledger.rules`, one class per rule), the tightest route of a planned period
(:mod:`dplens.ledger.tightest`), and the store with all the SQL (:mod:`dplens.ledger.storage`). A :class:`Ledger`
keeps no state of a call between its methods: what one charge computes travels in local values, so one instance may
be shared by threads (the store serialises their transactions).

A charge is one transaction: lock the budgets (SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT … FOR UPDATE``), read
each budget's period state, decide by the budget's rule, and only if every budget
holds write the release and the new period state, then commit. A planned budget's tightest route, which may take
seconds, is computed before the lock and used under it only if the period still holds exactly the events it was
computed for. A refused charge rolls back: nothing is written. A
release name is unique per budget; charging the same name with the same events again (a client retrying after a
lost connection) is reported as a duplicate and writes nothing, with other events it is an error.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from dplens.accountant import events as ev
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
from dplens.ledger.rules import Decision, Rule, Spent, budget_rule, make_rule
from dplens.ledger.storage import PeriodState
from dplens.ledger.tightest import PeriodRoute, accountant_of

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
        rule = make_rule(mode=mode, target=target, orders=orders, tolerance=tolerance)
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
            if db.has_budget(name):
                existing = db.read_budget(name)
                same = {k: v for k, v in existing.to_dict().items() if k != "created_utc"} == {
                    k: v for k, v in budget.to_dict().items() if k != "created_utc"
                }
                if not same:
                    raise ValueError(f"budget {name!r} already exists with other settings; choose another --name")
                return existing
            db.insert_budget(budget)
        return budget

    def budgets(self) -> tuple[Budget, ...]:
        with self._store.read() as db:
            return tuple(db.read_budget(n) for n in db.budget_names())

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

        The steps: the release checked and encoded (:func:`_new_release`); each budget's quantity, period and ε alone
        computed before taking the lock (:meth:`_prepare`), and the tightest routes it may need (:meth:`_precompute`);
        then, under the lock, decided and written (:meth:`_commit`).
        """
        item = _new_release(source, release=release, charged_by=charged_by, time=time)
        plans = self._prepare(item, budgets)
        plans = self._precompute(item, plans)
        decisions, refused = self._commit(item, plans)
        return _charge_result(item, decisions, refused)

    def _prepare(self, item: _Release, budgets: Sequence[str] | None) -> list[_Plan]:
        """Each budget's rule, the release's quantity, period and ε alone (they depend only on the release and the
        fixed rule: computed before taking the lock), in budget name order."""
        with self._store.read() as db:
            names = list(budgets) if budgets else db.budget_names()
        if not names:
            raise ValueError("the ledger has no budget; create one first (dplens budget create)")
        for name in names:
            _check_name(name, "budget")
        plans = []
        with self._store.read() as db:
            for name in sorted(set(names)):
                budget = db.read_budget(name)
                if item.relation is not None and item.relation.value != budget.neighbouring:
                    raise ValueError(
                        f"release {item.name!r} is stated under neighbouring relation {item.relation.value!r} but "
                        f"budget {name!r} under {budget.neighbouring!r}; a budget composes releases under one relation"
                    )
                rule = budget_rule(budget)
                quantity = rule.quantity(item.entries)
                alone = rule.alone_epsilon(quantity)
                if alone is None:
                    alone = accountant_of(budget, list(item.entries)).epsilon(budget.target.delta)
                period = period_key(budget.period, item.when)
                plans.append(_Plan(budget=budget, rule=rule, period=period, quantity=quantity, alone=alone))
        return plans

    def _precompute(self, item: _Release, plans: list[_Plan]) -> list[_Plan]:
        """The tightest route of each planned period this charge will need, computed *before* taking the writer
        lock (it may take seconds), keyed by the digest of the period's events with this release. Inside the lock
        the result is used only if the period still holds exactly those events; otherwise it is recomputed there."""
        out = []
        with self._store.read() as db:
            for plan in plans:
                state = db.period_state(plan.budget.name, plan.period)
                route = PeriodRoute(db, plan.budget, plan.period, release=(item.sha, item.entries))
                known = plan.rule.precompute(state, plan.quantity, item.entries, route)
                out.append(plan if known is None else plan.with_known(*known))
        return out

    def _commit(self, item: _Release, plans: list[_Plan]) -> tuple[list[BudgetCharge], list[str]]:
        """Under the writer lock: decide every budget, and only if all accept write the release (a duplicate of the
        same events is reported and skipped; a refusal rolls everything back)."""
        decisions: list[BudgetCharge] = []
        refused: list[str] = []
        try:
            with self._store.write() as db:
                db.lock_budgets([plan.budget.name for plan in plans])
                accepted = []
                for plan in plans:
                    name = plan.budget.name
                    stored = db.release_sha(name, item.name)
                    if stored is not None:
                        if stored != item.sha:
                            raise ValueError(
                                f"release {item.name!r} is already charged to budget {name!r} with other events; "
                                "a release name is charged once per budget"
                            )
                        decisions.append(self._duplicate(db, plan))
                        continue
                    decision = self._decide(db, item, plan)
                    decisions.append(_budget_charge(plan, decision))
                    if not decision.accepted:
                        refused.append(name)
                    accepted.append((plan, decision))
                if refused:
                    raise _RefusedError
                for plan, decision in accepted:
                    self._store_release(db, item, plan, decision)
        except _RefusedError:
            pass
        return decisions, refused

    @staticmethod
    def _duplicate(db: storage.Store, plan: _Plan) -> BudgetCharge:
        state = db.period_state(plan.budget.name, plan.period)
        spent = _spent(db, plan.budget, plan.rule, state)
        decision = Decision(
            accepted=True,
            spent_epsilon=spent.epsilon,
            spent_epsilon_before=spent.epsilon,
            spent_method=spent.method,
            remaining_epsilon=max(plan.budget.target.epsilon - spent.epsilon, 0.0),
            filter=plan.rule.filter_state(plan.rule.zero() if state is None else state.sums),
        )
        return _budget_charge(plan, decision, duplicate=True)

    @staticmethod
    def _decide(db: storage.Store, item: _Release, plan: _Plan) -> Decision:
        state = db.period_state(plan.budget.name, plan.period)
        route = PeriodRoute(db, plan.budget, plan.period, release=(item.sha, item.entries), known=plan.known)
        return plan.rule.decide(state, plan.quantity, item.entries, route)

    @staticmethod
    def _store_release(db: storage.Store, item: _Release, plan: _Plan, decision: Decision) -> None:
        name = plan.budget.name
        db.append_release(
            budget=name,
            release=item.name,
            period=plan.period,
            time_utc=_iso(item.when),
            charged_by=item.charged_by,
            source=item.where,
            entries=item.text,
            sha=item.sha,
            quantity=plan.quantity,
            epsilon_alone=plan.alone,
        )
        state = db.period_state(name, plan.period)
        sums = plan.rule.zero() if state is None else state.sums
        db.save_period(
            name,
            plan.period,
            new=state is None,
            releases=1 if state is None else state.releases + 1,
            sums=plan.rule.add(sums, plan.quantity),
            # the period changed: an older cached result no longer applies (its digest would not match)
            cache=decision.cache,
        )

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
            route = PeriodRoute(db, db.read_budget(budget), period)
            return route.accountant(route.entries())

    # ---- status ---------------------------------------------------------------------------------

    def status(self, *, time: dt.datetime | None = None) -> LedgerStatus:
        """Every budget: per period spent ε (the mode's rule; an upper bound), the certified lower end where PLD
        applies, remaining (a lower bound), number of releases, largest spenders; the releases themselves."""
        when = _utc(time)
        computed: list[tuple[str, str, str, dict[str, Any]]] = []  # tightest results computed here, cached after
        with self._store.read() as db:
            out = [self._budget_status(db, db.read_budget(name), when, computed) for name in db.budget_names()]
        self._store_caches(computed)
        return LedgerStatus(
            location=self.location, schema_version=storage.SCHEMA_VERSION, time_utc=_iso(when), budgets=tuple(out)
        )

    @staticmethod
    def _budget_status(
        db: storage.Store, budget: Budget, when: dt.datetime, computed: list[tuple[str, str, str, dict[str, Any]]]
    ) -> BudgetStatus:
        rule = budget_rule(budget)
        releases = db.release_rows(budget.name)
        by_period: dict[str, list[ReleaseRow]] = {}
        chargers: dict[str, int] = {}
        for row in releases:
            by_period.setdefault(row.period, []).append(row)
            chargers[row.charged_by] = chargers.get(row.charged_by, 0) + 1
        periods = []
        for state in db.period_states(budget.name):
            spent = _spent(db, budget, rule, state)
            if spent.cache is not None:
                computed.append((budget.name, state.period, *spent.cache))
            largest = heapq.nsmallest(
                _LARGEST, by_period.get(state.period, []), key=lambda r: (-r.epsilon_alone, r.seq)
            )
            periods.append(
                PeriodStatus(
                    period=state.period,
                    releases=state.releases,
                    spent_epsilon=spent.epsilon,
                    spent_epsilon_lower=spent.lower,
                    spent_method=spent.method,
                    remaining_epsilon=max(budget.target.epsilon - spent.epsilon, 0.0),
                    largest=tuple(largest),
                    filter=rule.filter_state(state.sums),
                )
            )
        studies = _studies(db, budget.name, [p.period for p in periods])
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
            studies=studies,
        )

    def _store_caches(self, computed: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        """Write the tightest-route results status computed, keyed by the digest of the events they cover (a cache
        that no longer matches is ignored, so concurrent charges never make it wrong). Best effort: a read-only or
        busy store is left as it is."""
        if not computed or getattr(self._store, "read_only", False):
            return
        try:
            with self._store.write() as db:
                for budget, period, digest, result in computed:
                    if PeriodRoute(db, db.read_budget(budget), period).digest() == digest:
                        db.save_period_cache(budget, period, digest, result)
        except ValueError:
            pass

    # ---- history (the report's figure) --------------------------------------------------------------

    def spend_history(self, budget: str, period: str, *, points: int = 30) -> list[dict[str, Any]]:
        """Cumulative spent ε of a budget's period after its releases, at up to ``points`` evenly spaced releases
        (each by the budget's rule, an upper bound): ``{"releases", "time_utc", "release", "spent_epsilon"}``."""
        with self._store.read() as db:
            record = db.read_budget(budget)
            rows = db.release_quantities(budget, period)
        if not rows:
            return []
        marks = sorted({max(1, round(len(rows) * (i + 1) / points)) for i in range(points)})
        route = PeriodRoute(None, record, period)
        spent = budget_rule(record).history([(text, q) for _, _, text, q in rows], set(marks), route)
        return [
            {"releases": index, "time_utc": rows[index - 1][1], "release": rows[index - 1][0], "spent_epsilon": value}
            for index, value in zip(marks, spent, strict=True)
        ]

    # ---- verification ------------------------------------------------------------------------------

    def verify(self) -> VerifyResult:
        """Recompute every invariant from the stored releases: the store's integrity check; each release's events
        decode and its quantity equals the rule's; each period's cached count and sums equal the releases'; and no
        period's spent ε, recomputed by its rule, exceeds its budget."""
        problems: list[str] = []
        total = 0
        with self._store.read() as db:
            integrity = self._store.integrity_check()
            names = db.budget_names()
            for name in names:
                total += _verify_budget(db, db.read_budget(name), problems)
        return VerifyResult(integrity=integrity, budgets=len(names), releases=total, problems=tuple(problems))

    def release_events(self, budget: str) -> Iterator[tuple[str, tuple[tuple[ev.Event, int], ...]]]:
        """(release name, its stored events), in charge order."""
        with self._store.read() as db:
            rows = db.release_texts(budget)
        for name, text in rows:
            yield name, sources.decode_entries(text)


# ---- one charge's values ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Release:
    """What one charge spends, checked and encoded once: its name, who and when, its events (canonical JSON and
    SHA-256), where they came from and the neighbouring relation they state."""

    name: str
    charged_by: str
    when: dt.datetime
    entries: tuple[tuple[ev.Event, int], ...]
    where: str
    text: str
    sha: str
    relation: ev.NeighboringRelation | None


def _new_release(source: Any, *, release: str, charged_by: str | None, time: dt.datetime | None) -> _Release:
    release = _check_name(release, "release")
    charged_by = _check_name(charged_by or _default_charger(), "charged_by")
    when = _utc(time)
    entries, where = sources.release_entries(source)
    relation = _relation(entries)
    text, sha = sources.encode_entries(entries)
    return _Release(
        name=release,
        charged_by=charged_by,
        when=when,
        entries=entries,
        where=where,
        text=text,
        sha=sha,
        relation=relation,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """One budget's part of a charge, prepared before the lock: its rule, the release's period and quantity, its ε
    alone, and the tightest route computed before the lock (by digest; empty if none was needed)."""

    budget: Budget
    rule: Rule
    period: str
    quantity: list[int | None]
    alone: float
    known: dict[str, Any] = field(default_factory=dict)

    def with_known(self, digest: str, result: Any) -> _Plan:
        return replace(self, known={digest: result})


def _studies(db: storage.Store, budget: str, periods: Sequence[str]) -> dict[str, tuple[dict[str, Any], ...]]:
    """The tuning studies among a budget's releases, by release name (:mod:`dplens.ledger.studies`): only the
    distinct event sets of each period are read (one per group, through the covering index), and only those that
    hold a repeat-and-select are decoded."""
    from dplens.ledger.studies import MARKER, tuning_studies

    found: dict[str, tuple[dict[str, Any], ...]] = {}
    for period in periods:
        for sha, text in db.group_texts(budget, period).items():
            if sha not in found and MARKER in text:
                found[sha] = tuple(tuning_studies(sources.decode_entries(text)))
    shas = [sha for sha, studies in found.items() if studies]
    return {name: found[sha] for name, sha in db.release_names_of(budget, shas)}


def _spent(db: storage.Store, budget: Budget, rule: Rule, state: PeriodState | None) -> Spent:
    """The spent ε of a period (0 before its first release) by the budget's rule."""
    if state is None or state.releases == 0:
        return Spent(epsilon=0.0, lower=None, method="no release")
    return rule.spent(state, PeriodRoute(db, budget, state.period))


def _budget_charge(plan: _Plan, decision: Decision, *, duplicate: bool = False) -> BudgetCharge:
    """The budget's line of a charge's result: the budget and period, and the rule's decision (all but its cache)."""
    decided = {f.name: getattr(decision, f.name) for f in fields(Decision) if f.name != "cache"}
    budget = plan.budget
    return BudgetCharge(
        budget=budget.name,
        period=plan.period,
        mode=budget.mode,
        rule=plan.rule.kind,
        target_epsilon=budget.target.epsilon,
        delta=budget.target.delta,
        duplicate=duplicate,
        **decided,
    )


def _charge_result(item: _Release, decisions: list[BudgetCharge], refused: list[str]) -> ChargeResult:
    from dplens.ledger.studies import MARKER, tuning_studies

    duplicate = all(d.duplicate for d in decisions)
    accepted = not refused
    if accepted:
        reason = (
            f"release {item.name!r} was already charged (same events); nothing new was written"
            if duplicate
            else f"charged release {item.name!r}"
        )
    else:
        first = next(d for d in decisions if d.budget == refused[0])
        reason = (
            f"refused release {item.name!r}: budget {first.budget!r} (period {first.period}, {first.mode.value}) "
            f"would reach epsilon {_fmt(first.spent_epsilon)} > {_fmt(first.target_epsilon)} at delta "
            f"{first.delta:g} ({first.spent_method}); spent so far {_fmt(first.spent_epsilon_before)}, "
            f"remaining {_fmt(first.remaining_epsilon)} (a lower bound); nothing was written"
        )
    return ChargeResult(
        release=item.name,
        accepted=accepted,
        duplicate=duplicate and accepted,
        budgets=tuple(decisions),
        reason=reason,
        time_utc=_iso(item.when),
        tuning=tuple(tuning_studies(item.entries)) if MARKER in item.text else (),
    )


def _verify_budget(db: storage.Store, budget: Budget, problems: list[str]) -> int:
    """Check one budget's releases and periods against its rule (problems appended); returns its release count."""
    name = budget.name
    rule = budget_rule(budget)
    rows = db.release_records(name)
    per_period: dict[str, tuple[int, list[int | None]]] = {}
    for release, period, text, sha, stored_q in rows:
        entries = sources.decode_entries(text)
        if sources.encode_entries(entries) != (text, sha):
            problems.append(f"{name}/{release}: stored events do not round-trip")
        if rule.quantity(entries) != stored_q:
            problems.append(f"{name}/{release}: stored quantity differs from the rule's")
        count, sums = per_period.get(period, (0, rule.zero()))
        per_period[period] = (count + 1, rule.add(sums, stored_q))
    stored = {state.period: state for state in db.period_states(name)}
    if set(stored) != set(per_period):
        problems.append(f"{name}: periods {sorted(stored)} differ from the releases' {sorted(per_period)}")
    for period, (count, sums) in per_period.items():
        if period not in stored:
            continue
        if (stored[period].releases, stored[period].sums) != (count, sums):
            problems.append(f"{name}/{period}: cached count or sums differ from the releases'")
        problem = rule.over_budget(sums, PeriodRoute(db, budget, period))
        if problem is not None:
            problems.append(f"{name}/{period}: {problem}")
    return len(rows)


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
