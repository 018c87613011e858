"""Fixtures of the ledger tests: a fresh SQLite ledger path, and a real PostgreSQL server started by the tests.

The server is Debian's ``postgresql`` package (``initdb`` and ``pg_ctl`` from ``/usr/lib/postgresql/*/bin`` or the
PATH): a cluster in a temporary directory, trust authentication, listening only on a unix socket in that directory
(no TCP port), stopped at the end of the session. As root (CI) the cluster is owned by and run as the ``postgres``
user (``runuser``), since PostgreSQL refuses to run as root. Without the server binaries or the driver (the
``[postgres]`` extra) the PostgreSQL tests skip with one line naming what is missing, and fail under ``CI=true``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest


def _require(condition: bool, message: str) -> None:
    if condition:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {message}")
    pytest.skip(message)


def postgres_binaries() -> tuple[str, str] | None:
    """(initdb, pg_ctl) from the PATH or Debian's /usr/lib/postgresql/<version>/bin, or None."""
    for directory in [*sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True), None]:
        initdb = shutil.which("initdb", path=directory) if directory else shutil.which("initdb")
        pg_ctl = shutil.which("pg_ctl", path=directory) if directory else shutil.which("pg_ctl")
        if initdb and pg_ctl:
            return initdb, pg_ctl
    return None


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@pytest.fixture(scope="session")
def postgres_server():
    """A running PostgreSQL server for the session: yields a function making a fresh database's URL."""
    _require(
        importlib.util.find_spec("psycopg") is not None,
        "the PostgreSQL driver is not installed (psycopg): pip install '.[postgres]'",
    )
    binaries = postgres_binaries()
    _require(binaries is not None, "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    initdb, pg_ctl = binaries
    root = Path(tempfile.mkdtemp(prefix="dplens-pg-"))
    data, socket_dir = root / "data", root / "socket"
    socket_dir.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(socket_dir, "postgres")
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(
        _as_postgres([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]),
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    options = f"-c listen_addresses='' -c unix_socket_directories={socket_dir} -c fsync=on -c max_connections=60"
    subprocess.run(
        _as_postgres([pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "-t", "60", "start"]),
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    import psycopg

    def make_database() -> str:
        name = f"ledger_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"postgresql://postgres@/postgres?host={socket_dir}", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = f"postgresql://postgres@/{name}?host={socket_dir}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")  # PostgreSQL's own index checks, for verify()
        return url

    try:
        yield make_database
    finally:
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            env=env,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.serial("a PostgreSQL server"))])
def location(request, tmp_path):
    """A fresh ledger location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    return request.getfixturevalue("postgres_server")()
