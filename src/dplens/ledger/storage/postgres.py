"""The PostgreSQL backend of the ledger's store (the ``[postgres]`` extra, psycopg): a write locks the budgets' rows
(``SELECT … FOR UPDATE``, in name order) and waits for another writer's lock up to the store's timeout
(``lock_timeout``)."""

from __future__ import annotations

from collections.abc import Sequence

from dplens.ledger.storage.base import Store

__all__ = ["PostgresStore"]

_PG_SCHEMA_LOCK = 0x64706C656E73  # pg_advisory_xact_lock key: "dplens" in hex, serialises schema creation


class PostgresStore(Store):
    """A ledger on a PostgreSQL server: how it connects, begins, locks and names its errors (the SQL is the
    :class:`~dplens.ledger.storage.base.Store`'s)."""

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

    def _begin_read(self) -> None:
        self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

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
