"""The SQLite backend of the ledger's store: a file (standard library ``sqlite3``, WAL, synchronous FULL); a write
holds the database's single writer lock (``BEGIN IMMEDIATE``, waited for up to the store's timeout)."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from dplens.ledger.storage.base import Store

__all__ = ["SqliteStore"]

_SQLITE_HEADER = b"SQLite format 3\x00"


class SqliteStore(Store):
    """A ledger in a SQLite file: how it connects, begins, locks and names its errors (the SQL is the
    :class:`~dplens.ledger.storage.base.Store`'s)."""

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
