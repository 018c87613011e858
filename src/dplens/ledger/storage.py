"""Where a ledger lives: an SQLite file (standard library, WAL) or a PostgreSQL database (the ``[postgres]`` extra).

One schema, versioned (:data:`SCHEMA_VERSION`, in the table ``dplens_ledger_meta``): a store written by another
schema version is refused with one line, never read as if it were this one. Every write is one transaction that
first locks the budgets it changes — SQLite ``BEGIN IMMEDIATE`` (the database's single writer lock, waited for up to
``timeout`` seconds), PostgreSQL ``SELECT … FOR UPDATE`` on the budget rows — so a check and the charge it allows
happen atomically however many processes or machines charge at once. Every failure to open or use a store (missing,
corrupt, truncated, foreign, read-only, locked, unreachable) is a one-line ``ValueError``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_VERSION", "STORE_FORMAT", "Store", "open_store", "redact"]

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

_SQLITE_HEADER = b"SQLite format 3\x00"
DEFAULT_TIMEOUT = 60.0


def redact(location: str) -> str:
    """A store location safe to print: a URL's password replaced by ``***``.

    Example:
        >>> redact("postgresql://ann:secret@db.example/ledger")
        'postgresql://ann:***@db.example/ledger'
    """
    return re.sub(r"^(postgres(?:ql)?://[^:/@]+):[^@]*@", r"\1:***@", location)


def is_url(location: str) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


class Store:
    """A connection to one ledger store. Use :func:`open_store`; SQL is written with ``?`` placeholders.

    Example:
        >>> import pathlib, tempfile
        >>> store = open_store(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True)
        >>> with store.read() as db:
        ...     db.execute("SELECT value FROM dplens_ledger_meta WHERE key = 'schema_version'")
        [('1',)]
        >>> store.close()
    """

    kind: str = ""
    location: str = ""

    def __init__(self) -> None:
        self._conn: Any = None

    # ---- to be provided by each backend ---------------------------------------------------

    def _begin_write(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def lock_budgets(self, names: Sequence[str]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _translate(self, err: Exception) -> ValueError:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sql(self, sql: str) -> str:
        return sql

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
        try:
            self._begin_write()
        except ValueError:
            raise
        except Exception as err:
            raise self._translate(err) from None
        try:
            yield self
        except BaseException:
            with contextlib.suppress(Exception):
                self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except Exception as err:
            with contextlib.suppress(Exception):
                self._conn.execute("ROLLBACK")
            raise self._translate(err) from None

    @contextlib.contextmanager
    def read(self) -> Iterator[Store]:
        """One consistent snapshot for reading (a read transaction)."""
        try:
            if self.kind == "postgresql":
                self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            else:
                self._conn.execute("BEGIN")
        except Exception as err:
            raise self._translate(err) from None
        try:
            yield self
        finally:
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


# --------------------------------------------------------------------------------------------
# SQLite
# --------------------------------------------------------------------------------------------


class SqliteStore(Store):
    kind = "sqlite"

    def __init__(self, path: Path, *, create: bool, read_only: bool, timeout: float) -> None:
        super().__init__()
        self.location = str(path)
        self.path = path
        self.timeout = timeout
        self.read_only = read_only
        self._check_file(create=create)
        self.created = not path.exists()
        mode = "ro" if read_only else ("rwc" if create else "rw")
        uri = f"file:{_uri_path(path)}?mode={mode}"
        try:
            self._conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA foreign_keys = ON")
        except ValueError:
            self.close()
            raise
        except Exception as err:
            self.close()
            raise self._translate(err) from None

    def _check_file(self, *, create: bool) -> None:
        path = self.path
        name = repr(str(path))
        if path.is_dir():
            raise ValueError(f"ledger {name} is a directory, not a file")
        if not path.exists():
            if not create:
                raise ValueError(f"ledger not found: {name} (create it with: dplens budget create {path} ...)")
            parent = path.parent
            if not parent.is_dir():
                raise ValueError(f"ledger {name}: directory {str(parent)!r} does not exist")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ValueError(f"ledger {name}: directory {str(parent)!r} is not writable")
            return
        if not path.is_file():
            raise ValueError(f"ledger {name} is not a regular file")
        try:
            info = path.stat()
            with open(path, "rb") as handle:
                header = handle.read(100)
        except OSError as err:
            raise ValueError(f"cannot read ledger {name}: {err.strerror or err}") from None
        if len(header) < 100 or not header.startswith(_SQLITE_HEADER):
            what = "an empty file" if info.st_size == 0 else "not an SQLite database"
            raise ValueError(f"ledger {name} is not a dplens budget ledger ({what})")
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        valid = header[24:28] == header[92:96] and pages > 0
        if page_size < 512 or info.st_size % page_size or (valid and info.st_size < pages * page_size):
            raise ValueError(
                f"ledger {name} is truncated or corrupt ({info.st_size} bytes; its header describes "
                f"{pages} pages of {page_size} bytes)"
            )
        if not self.read_only and not (info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)):
            raise ValueError(f"ledger {name} is read-only (mode {stat.filemode(info.st_mode)}); nothing was written")
        if not self.read_only and not os.access(path, os.W_OK):
            raise ValueError(f"ledger {name} is not writable by this user; nothing was written")

    def enable_wal(self) -> None:
        """WAL (readers never block the writer) and synchronous FULL (a reported charge survives a crash of the
        machine too); done only once the file is known to be a ledger (or a new one), so a foreign file is never
        touched."""
        if self.read_only:
            return
        try:
            row = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if row is None or str(row[0]).lower() != "wal":
                raise ValueError(f"{self.describe()}: could not switch to WAL journaling (got {row!r})")
            self._conn.execute("PRAGMA synchronous = FULL")
        except ValueError:
            raise
        except Exception as err:
            raise self._translate(err) from None

    def _begin_write(self) -> None:
        if self.read_only:
            raise ValueError(f"{self.describe()} was opened read-only")
        start = time.monotonic()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            if "locked" in str(err) or "busy" in str(err):
                waited = time.monotonic() - start
                raise ValueError(
                    f"{self.describe()} is locked by another writer; gave up after {waited:.1f} s "
                    "(nothing was written; try again, or raise the lock timeout)"
                ) from None
            raise

    def lock_budgets(self, names: Sequence[str]) -> None:
        """Nothing more to do: BEGIN IMMEDIATE already holds the database's single writer lock."""

    def has_schema(self) -> bool:
        rows = self.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'dplens_ledger_meta'")
        return bool(rows)

    def table_count(self) -> int:
        return self.execute("SELECT COUNT(*) FROM sqlite_master")[0][0]

    def integrity_check(self) -> str:
        rows = self.execute("PRAGMA integrity_check")
        return "ok" if rows == [("ok",)] else str(rows[0][0])

    def _translate(self, err: Exception) -> ValueError:
        text = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
        lowered = text.lower()
        if "locked" in lowered or "busy" in lowered:
            return ValueError(f"{self.describe()} is locked by another process ({text}); nothing was written")
        if "readonly" in lowered or "read-only" in lowered:
            return ValueError(f"{self.describe()} is read-only ({text}); nothing was written")
        if "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
            return ValueError(f"{self.describe()} is corrupt ({text}); nothing was written")
        if "unable to open" in lowered:
            return ValueError(f"cannot open {self.describe()} ({text})")
        return ValueError(f"{self.describe()}: {text}")


def _uri_path(path: Path) -> str:
    from urllib.parse import quote

    return quote(str(path.absolute()))


# --------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------

_PG_SCHEMA_LOCK = 0x64706C656E73  # pg_advisory_xact_lock key: "dplens" in hex, serialises schema creation


class PostgresStore(Store):
    kind = "postgresql"

    def __init__(self, url: str, *, timeout: float) -> None:
        super().__init__()
        self.location = url
        self.timeout = timeout
        self.created = False
        try:
            import psycopg
        except ImportError:
            raise ValueError(
                "a postgresql:// ledger needs the PostgreSQL driver: pip install 'dplens[postgres]'"
            ) from None
        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)))
        except Exception as err:
            raise ValueError(f"cannot connect to {self.describe()}: {_first_line(err)}") from None
        # Waits for a budget's row lock end after the timeout with a clear error (PostgreSQL's lock_timeout).
        self.execute(f"SET lock_timeout = {int(timeout * 1000)}")

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def _begin_write(self) -> None:
        self._conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")

    def lock_budgets(self, names: Sequence[str]) -> None:
        """Row locks on the budgets, in name order (two chargers of the same budgets never deadlock)."""
        for name in sorted(set(names)):
            self.execute("SELECT name FROM dplens_budgets WHERE name = ? FOR UPDATE", (name,))

    def lock_schema(self) -> None:
        self.execute(f"SELECT pg_advisory_xact_lock({_PG_SCHEMA_LOCK})")

    def has_schema(self) -> bool:
        rows = self.execute("SELECT to_regclass('dplens_ledger_meta') IS NOT NULL")
        return bool(rows and rows[0][0])

    def integrity_check(self) -> str:
        """``bt_index_check`` (with ``heapallindexed``) of every index of the ledger's tables when the ``amcheck``
        extension is installed in the database (``CREATE EXTENSION amcheck``); otherwise says that only the ledger's
        own invariants were checked."""
        if not self.execute("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'"):
            return "ok (amcheck is not installed in this database: PostgreSQL's own checks were not run)"
        indexes = self.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE left(t.relname, 7) = 'dplens_' AND a.amname = 'btree'"
        )
        for (index,) in indexes:
            self.execute("SELECT bt_index_check(?::regclass, true)", (index,))
        return f"ok (amcheck: {len(indexes)} indexes checked)"

    def _translate(self, err: Exception) -> ValueError:
        text = _first_line(err)
        errors = self._psycopg.errors
        if isinstance(err, errors.LockNotAvailable):
            return ValueError(f"{self.describe()} is locked by another writer ({text}); nothing was written")
        if isinstance(err, errors.ReadOnlySqlTransaction | errors.InsufficientPrivilege):
            return ValueError(f"{self.describe()} is read-only for this user ({text}); nothing was written")
        if isinstance(err, self._psycopg.OperationalError):
            return ValueError(f"lost the connection to {self.describe()} ({text}); retry the same release name")
        return ValueError(f"{self.describe()}: {text}")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def open_store(
    location: str | os.PathLike, *, create: bool = False, read_only: bool = False, timeout: float = DEFAULT_TIMEOUT
) -> Store:
    """Open a ledger store: a file path (SQLite) or a ``postgresql://`` URL.

    ``create``: make the store (and its tables) if it does not exist yet; otherwise a store without the dplens
    tables is refused. ``read_only``: open for reading only (status of a file on read-only media).

    Example:
        >>> import pathlib, tempfile
        >>> store = open_store(pathlib.Path(tempfile.mkdtemp()) / "ledger.db", create=True)
        >>> store.kind, store.has_schema()
        ('sqlite', True)
        >>> store.close()
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (timeout >= 0):
        raise ValueError(f"timeout must be a number of seconds >= 0; got {timeout!r}")
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise ValueError(f"ledger must be a file path or a postgresql:// URL; got {location!r}")
    if "://" in text and not is_url(text):
        raise ValueError(f"ledger URL {redact(text)!r} is not supported: use a file path or a postgresql:// URL")
    store: Store
    if is_url(text):
        store = PostgresStore(text, timeout=timeout)
        try:
            if not store.has_schema():
                if not create:
                    store.check_schema()
                with store.write():
                    store.lock_schema()
                    if not store.has_schema():
                        store.create_schema()
                        store.created = True
            store.check_schema()
        except BaseException:
            store.close()
            raise
        return store
    path = Path(text)
    store = SqliteStore(path, create=create, read_only=read_only, timeout=timeout)
    try:
        if not store.has_schema():
            if not create or store.table_count() > 0:
                store.check_schema()  # a foreign database: refused, untouched
            store.enable_wal()
            with store.write():
                if not store.has_schema():
                    store.create_schema()
        store.check_schema()
        store.enable_wal()
    except BaseException:
        store.close()
        if create and store.created and path.exists() and path.stat().st_size == 0:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    Path(str(path) + suffix).unlink()
        raise
    return store
