"""The store every backend shares: the schema, transactions, and the named operations the ledger calls.

Each operation is one small SQL statement (written with ``?`` placeholders; a backend translates them) and speaks in
the ledger's values: a :class:`~dplens.ledger.model.Budget`, a period's :class:`PeriodState`, the stored releases.
How a value is written (JSON of a budget's target and rule, a period's exact sums as strings, ∞ stored as 1e308, the
tightest-route cache with the digest it covers) is decided here once, so the format on disk has one author.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from dplens.ledger.model import Budget, Mode, Period, ReleaseRow, Target

__all__ = [
    "DEFAULT_TIMEOUT",
    "SCHEMA_VERSION",
    "STORE_FORMAT",
    "PeriodState",
    "Store",
    "decode_sums",
    "encode_sums",
    "is_url",
    "redact",
]

STORE_FORMAT = "dplens-budget-ledger"
#: Bump on any change of the tables or of what a stored value means; other versions are refused, not reinterpreted.
SCHEMA_VERSION = 1

_TABLES = (
    """CREATE TABLE dplens_ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE dplens_budgets (
        name TEXT PRIMARY KEY,
        unit TEXT NOT NULL,
        neighbouring TEXT NOT NULL,
        mode TEXT NOT NULL,
        target TEXT NOT NULL,
        period TEXT NOT NULL,
        rule TEXT NOT NULL,
        created_utc TEXT NOT NULL,
        releases_total BIGINT NOT NULL
    )""",
    """CREATE TABLE dplens_releases (
        budget TEXT NOT NULL REFERENCES dplens_budgets(name),
        name TEXT NOT NULL,
        seq BIGINT NOT NULL,
        period TEXT NOT NULL,
        time_utc TEXT NOT NULL,
        charged_by TEXT NOT NULL,
        source TEXT NOT NULL,
        entries TEXT NOT NULL,
        entries_sha256 TEXT NOT NULL,
        quantity TEXT NOT NULL,
        epsilon_alone DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (budget, name)
    )""",
    # covering the grouping of a period's releases by their events (status, the tightest route): no table lookups
    """CREATE INDEX dplens_releases_by_period ON dplens_releases (budget, period, entries_sha256, seq)""",
    """CREATE UNIQUE INDEX dplens_releases_by_seq ON dplens_releases (budget, seq)""",
    """CREATE TABLE dplens_periods (
        budget TEXT NOT NULL REFERENCES dplens_budgets(name),
        period TEXT NOT NULL,
        releases BIGINT NOT NULL,
        sums TEXT NOT NULL,
        spent_cache TEXT,
        PRIMARY KEY (budget, period)
    )""",
)

DEFAULT_TIMEOUT = 60.0


def redact(location: str) -> str:
    """A store location safe to print: a URL's password replaced by ``***``.

    Example:
        >>> redact("postgresql://ann:secret@db.example/ledger")
        'postgresql://ann:***@db.example/ledger'
    """
    return re.sub(r"^(postgres(?:ql)?://[^:/@]+):[^@]*@", r"\1:***@", location)


def is_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL server (a ``postgresql://`` URL) rather than a SQLite file."""
    return str(location).startswith(("postgresql://", "postgres://"))


class Store:
    """A connection to one ledger store (open one with :func:`dplens.ledger.storage.open_store`): transactions
    (:meth:`read`, :meth:`write`) and, inside them, the named operations the ledger calls. SQL is written with ``?``
    placeholders; one transaction at a time runs on the connection (threads sharing a store take turns).

    Example:
        >>> import pathlib, tempfile
        >>> from dplens.ledger.storage import open_store
        >>> store = open_store(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True)
        >>> with store.read() as db:
        ...     db.budget_names(), db.execute("SELECT value FROM dplens_ledger_meta WHERE key = 'schema_version'")
        ([], [('1',)])
        >>> store.close()
    """

    kind: str = ""
    location: str = ""

    def __init__(self) -> None:
        self._conn: Any = None
        # One transaction at a time on the connection: threads sharing a ledger take turns (a thread's nested
        # transaction is the backend's error, not a deadlock).
        self._lock = threading.RLock()

    # ---- to be provided by each backend ---------------------------------------------------

    def _begin_write(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def lock_budgets(self, names: Sequence[str]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _translate(self, err: Exception) -> ValueError:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sql(self, sql: str) -> str:
        return sql

    def _begin_read(self) -> None:
        self._conn.execute("BEGIN")

    # ---- shared -----------------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        try:
            cursor = self._conn.execute(self._sql(sql), tuple(params))
            return cursor.fetchall() if cursor.description is not None else []
        except ValueError:
            raise
        except Exception as err:
            raise self._translate(err) from None

    @contextlib.contextmanager
    def write(self) -> Iterator[Store]:
        """One write transaction: committed if the block finishes, rolled back (nothing written) otherwise."""
        with self._lock:
            self._begin(self._begin_write)
            try:
                yield self
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except Exception as err:
                self._rollback()
                raise self._translate(err) from None

    @contextlib.contextmanager
    def read(self) -> Iterator[Store]:
        """One consistent snapshot for reading (a read transaction)."""
        with self._lock:
            self._begin(self._begin_read)
            try:
                yield self
            finally:
                self._rollback()

    def _begin(self, begin: Any) -> None:
        try:
            begin()
        except ValueError:
            raise
        except Exception as err:
            raise self._translate(err) from None

    def _rollback(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.execute("ROLLBACK")

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    # ---- schema ------------------------------------------------------------------------------

    def has_schema(self) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_schema(self) -> None:
        """Refuse (one line) a store that is not a dplens ledger of this schema version."""
        if not self.has_schema():
            raise ValueError(
                f"{self.describe()} is not a dplens budget ledger (no dplens_ledger_meta table); "
                "create one with: dplens budget create"
            )
        meta = dict(self.execute("SELECT key, value FROM dplens_ledger_meta"))
        if meta.get("format") != STORE_FORMAT:
            raise ValueError(f"{self.describe()} is not a dplens budget ledger (format {meta.get('format')!r})")
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise ValueError(
                f"{self.describe()} has ledger schema version {meta.get('schema_version')!r} (written by dplens "
                f"{meta.get('created_by', '?')}); this dplens reads schema version {SCHEMA_VERSION} only"
            )

    def create_schema(self) -> None:
        """Create the tables in the current write transaction (the store must have none)."""
        from dplens._version import __version__

        for ddl in _TABLES:
            self.execute(ddl)
        for key, value in (
            ("format", STORE_FORMAT),
            ("schema_version", str(SCHEMA_VERSION)),
            ("created_by", __version__),
        ):
            self.execute("INSERT INTO dplens_ledger_meta (key, value) VALUES (?, ?)", (key, value))

    def describe(self) -> str:
        return f"ledger {redact(self.location)!r}"

    def integrity_check(self) -> str:
        """The backend's own integrity check: 'ok' or its first complaint."""
        return "ok"

    # ---- budgets -------------------------------------------------------------------------------

    def budget_names(self) -> list[str]:
        """Every budget's name, in name order."""
        return [row[0] for row in self.execute("SELECT name FROM dplens_budgets ORDER BY name")]

    def has_budget(self, name: str) -> bool:
        return bool(self.execute("SELECT name FROM dplens_budgets WHERE name = ?", (name,)))

    def read_budget(self, name: str) -> Budget:
        """The stored budget ``name``; ValueError if there is none or it is stored in a form this dplens cannot read."""
        rows = self.execute(
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

    def insert_budget(self, budget: Budget) -> None:
        self.execute(
            "INSERT INTO dplens_budgets (name, unit, neighbouring, mode, target, period, rule, created_utc, "
            "releases_total) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
            (
                budget.name,
                budget.unit,
                budget.neighbouring,
                budget.mode.value,
                json.dumps(budget.target.to_dict(), sort_keys=True),
                budget.period.value,
                json.dumps(budget.rule, sort_keys=True),
                budget.created_utc,
            ),
        )

    # ---- releases ------------------------------------------------------------------------------

    def release_sha(self, budget: str, release: str) -> str | None:
        """The events' SHA-256 of release ``release`` of ``budget``, None if it was not charged to it."""
        rows = self.execute(
            "SELECT entries_sha256 FROM dplens_releases WHERE budget = ? AND name = ?", (budget, release)
        )
        return rows[0][0] if rows else None

    def append_release(
        self,
        *,
        budget: str,
        release: str,
        period: str,
        time_utc: str,
        charged_by: str,
        source: str,
        entries: str,
        sha: str,
        quantity: Sequence[int | None],
        epsilon_alone: float,
    ) -> None:
        """Store a release as the budget's next (``seq``: one more than its releases so far); ∞ alone is 1e308."""
        total = self.execute("SELECT releases_total FROM dplens_budgets WHERE name = ?", (budget,))[0][0]
        self.execute(
            "INSERT INTO dplens_releases (budget, name, seq, period, time_utc, charged_by, source, entries, "
            "entries_sha256, quantity, epsilon_alone) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                budget,
                release,
                int(total) + 1,
                period,
                time_utc,
                charged_by,
                source[:500],
                entries,
                sha,
                json.dumps(encode_sums(quantity)),
                epsilon_alone if math.isfinite(epsilon_alone) else _STORED_INFINITY,
            ),
        )
        self.execute("UPDATE dplens_budgets SET releases_total = ? WHERE name = ?", (int(total) + 1, budget))

    def release_rows(self, budget: str) -> tuple[ReleaseRow, ...]:
        """The budget's releases as status shows them, in charge order."""
        rows = self.execute(
            "SELECT name, seq, period, time_utc, charged_by, epsilon_alone FROM dplens_releases "
            "WHERE budget = ? ORDER BY seq",
            (budget,),
        )
        make = ReleaseRow._make
        return tuple(make(r) if r[5] < _STORED_INFINITY else make((*r[:5], math.inf)) for r in rows)

    def release_quantities(self, budget: str, period: str) -> list[tuple[str, str, str, list[int | None]]]:
        """(name, time, events JSON, quantity) of a period's releases, in charge order."""
        rows = self.execute(
            "SELECT name, time_utc, entries, quantity FROM dplens_releases WHERE budget = ? AND period = ? "
            "ORDER BY seq",
            (budget, period),
        )
        return [(name, time_utc, text, decode_sums(json.loads(quantity))) for name, time_utc, text, quantity in rows]

    def release_records(self, budget: str) -> list[tuple[str, str, str, str, list[int | None]]]:
        """(name, period, events JSON, events SHA-256, quantity) of the budget's releases, in charge order."""
        rows = self.execute(
            "SELECT name, period, entries, entries_sha256, quantity FROM dplens_releases WHERE budget = ? ORDER BY seq",
            (budget,),
        )
        return [(name, period, text, sha, decode_sums(json.loads(q))) for name, period, text, sha, q in rows]

    def release_texts(self, budget: str) -> list[tuple[str, str]]:
        """(name, events JSON) of the budget's releases, in charge order."""
        return self.execute("SELECT name, entries FROM dplens_releases WHERE budget = ? ORDER BY seq", (budget,))

    def event_groups(self, budget: str, period: str) -> list[tuple[str, int]]:
        """(events SHA-256, number of releases) of a period's releases grouped by their events, in order of first
        appearance."""
        rows = self.execute(
            "SELECT entries_sha256, COUNT(*), MIN(seq) FROM dplens_releases WHERE budget = ? AND period = ? "
            "GROUP BY entries_sha256 ORDER BY MIN(seq)",
            (budget, period),
        )
        return [(sha, int(n)) for sha, n, _ in rows]

    def group_texts(self, budget: str, period: str) -> dict[str, str]:
        """The events JSON of each group of a period (of its first release; found through the covering index)."""
        rows = self.execute(
            "SELECT entries_sha256, entries FROM dplens_releases WHERE budget = ? AND seq IN ("
            "SELECT MIN(seq) FROM dplens_releases WHERE budget = ? AND period = ? GROUP BY entries_sha256)",
            (budget, budget, period),
        )
        return dict(rows)

    def release_names_of(self, budget: str, shas: Sequence[str]) -> list[tuple[str, str]]:
        """(name, events SHA-256) of the budget's releases whose events are one of ``shas``, in charge order (asked
        500 digests at a time: a statement's parameters are limited)."""
        rows: list[tuple[int, str, str]] = []
        shas = list(shas)
        for start in range(0, len(shas), 500):
            chunk = shas[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows += self.execute(
                "SELECT seq, name, entries_sha256 FROM dplens_releases WHERE budget = ? AND entries_sha256 IN "
                f"({marks})",
                (budget, *chunk),
            )
        return [(name, sha) for _, name, sha in sorted(rows)]

    # ---- periods -------------------------------------------------------------------------------

    def period_state(self, budget: str, period: str) -> PeriodState | None:
        """The stored state of one period of a budget (None: no release in it yet)."""
        rows = self.execute(
            "SELECT releases, sums, spent_cache FROM dplens_periods WHERE budget = ? AND period = ?",
            (budget, period),
        )
        if not rows:
            return None
        count, sums, cache = rows[0]
        return PeriodState(period, int(count), decode_sums(json.loads(sums)), cache)

    def period_states(self, budget: str) -> list[PeriodState]:
        """The stored state of every period of a budget, in period order."""
        rows = self.execute(
            "SELECT period, releases, sums, spent_cache FROM dplens_periods WHERE budget = ? ORDER BY period",
            (budget,),
        )
        return [PeriodState(period, int(n), decode_sums(json.loads(sums)), cache) for period, n, sums, cache in rows]

    def save_period(
        self,
        budget: str,
        period: str,
        *,
        new: bool,
        releases: int,
        sums: Sequence[int | None],
        cache: tuple[str, dict[str, Any]] | None,
    ) -> None:
        """Write a period's count, sums and tightest-route cache ((digest, result) or None) after a release."""
        text = json.dumps(encode_sums(sums))
        cached = None if cache is None else _encode_cache(*cache)
        if new:
            self.execute(
                "INSERT INTO dplens_periods (budget, period, releases, sums, spent_cache) VALUES (?, ?, ?, ?, ?)",
                (budget, period, releases, text, cached),
            )
        else:
            self.execute(
                "UPDATE dplens_periods SET releases = ?, sums = ?, spent_cache = ? WHERE budget = ? AND period = ?",
                (releases, text, cached, budget, period),
            )

    def save_period_cache(self, budget: str, period: str, digest: str, result: dict[str, Any]) -> None:
        """Store a period's tightest-route result with the digest of the events it covers."""
        self.execute(
            "UPDATE dplens_periods SET spent_cache = ? WHERE budget = ? AND period = ?",
            (_encode_cache(digest, result), budget, period),
        )


#: How an infinite ε alone is stored (a DOUBLE PRECISION column both backends read back exactly).
_STORED_INFINITY = 1e308


class PeriodState(NamedTuple):
    """A period of a budget as stored: its releases, the exact sums of their quantities, and the cached tightest
    route (JSON, or None)."""

    period: str
    releases: int
    sums: list[int | None]
    cache: str | None

    def cached_result(self, digest: str) -> dict[str, Any] | None:
        """The cached tightest result if it was computed on exactly the events of ``digest``."""
        if not self.cache:
            return None
        stored = json.loads(self.cache)
        return stored["result"] if stored.get("digest") == digest else None


def _encode_cache(digest: str, result: dict[str, Any]) -> str:
    return json.dumps({"digest": digest, "result": result}, sort_keys=True)


def encode_sums(values: Sequence[int | None]) -> list[str]:
    """Exact sums as stored: decimal strings, ∞ (None) as ``"inf"``."""
    return ["inf" if v is None else str(v) for v in values]


def decode_sums(values: Sequence[str]) -> list[int | None]:
    """Inverse of :func:`encode_sums`."""
    return [None if v == "inf" else int(v) for v in values]
