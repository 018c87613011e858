"""Where a ledger lives: an SQLite file (standard library, WAL) or a PostgreSQL database (the ``[postgres]`` extra).

All the ledger's SQL is here: :class:`~dplens.ledger.storage.base.Store` holds the schema and the named operations
the ledger calls (read a budget, a period's state, the releases, insert a release, ...), each backend
(:mod:`~dplens.ledger.storage.sqlite`, :mod:`~dplens.ledger.storage.postgres`) only how to connect, begin, lock and
translate its errors.

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
from pathlib import Path

from dplens.ledger.storage.base import (
    DEFAULT_TIMEOUT,
    SCHEMA_VERSION,
    STORE_FORMAT,
    PeriodState,
    Store,
    is_url,
    redact,
)
from dplens.ledger.storage.postgres import PostgresStore
from dplens.ledger.storage.sqlite import SqliteStore

__all__ = [
    "DEFAULT_TIMEOUT",
    "SCHEMA_VERSION",
    "STORE_FORMAT",
    "PeriodState",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "is_url",
    "open_store",
    "redact",
]


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
