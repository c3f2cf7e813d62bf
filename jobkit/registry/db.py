"""The registry's SQLite connection: opening, migrating, transactions and retries.

WAL mode, `synchronous=NORMAL`, a busy timeout, `BEGIN IMMEDIATE` for every read-then-write
and a retry with backoff on "database is locked", so many shells can use it at once.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

from jobkit.core.errors import JobkitError
from jobkit.registry.rows import MIGRATIONS, SCHEMA_VERSION

BUSY_TIMEOUT_MS = 30_000
LOCK_RETRIES = 8

_T = TypeVar("_T")


class RegistryError(JobkitError):
    """The registry file cannot be opened or is from a newer jobkit."""


def jobkit_home(environ: Mapping[str, str] | None = None) -> Path:
    """The folder for the registry and job folders: $JOBKIT_HOME, else the XDG state dir."""
    env = os.environ if environ is None else environ
    if env.get("JOBKIT_HOME"):
        return Path(env["JOBKIT_HOME"]).expanduser()
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]).expanduser() / "jobkit"
    return Path.home() / ".local" / "state" / "jobkit"


def _is_lock_error(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


class Database:
    """One connection to `<home>/jobkit.db`, migrated to SCHEMA_VERSION when opened."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = (home or jobkit_home()).resolve()
        self.path = self.home / "jobkit.db"
        self.jobs_dir = self.home / "jobs"
        try:
            self.jobs_dir.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
        except (OSError, sqlite3.Error) as err:
            raise RegistryError(f"cannot open the job registry {self.path}: {err}") from None
        self._conn.row_factory = sqlite3.Row
        self._retry(self._setup)

    def close(self) -> None:
        """Close the database connection."""
        self._conn.close()

    def _retry(self, fn: Callable[[], _T]) -> _T:
        """Run fn, retrying on 'database is locked' (beyond the busy timeout) with backoff."""
        delay = 0.05
        for attempt in range(LOCK_RETRIES + 1):
            try:
                return fn()
            except sqlite3.OperationalError as err:
                if not _is_lock_error(err) or attempt == LOCK_RETRIES:
                    raise RegistryError(f"job registry {self.path}: {err}") from None
                time.sleep(delay + secrets.randbelow(50) / 1000)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run fn inside BEGIN IMMEDIATE ... COMMIT, retried as a whole when locked."""

        def attempt() -> _T:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

        return self._retry(attempt)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        def attempt() -> list[sqlite3.Row]:
            with closing(self._conn.execute(sql, params)) as cur:
                return list(cur.fetchall())

        return self._retry(attempt)

    def _setup(self) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        if self._schema_version() != SCHEMA_VERSION:
            self._write(self._migrate)

    def _schema_version(self) -> int:
        row = self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'"
        ).fetchone()
        if row is None:
            return 0
        found = self._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        return int(found or 0)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        current = self._schema_version()
        if current > SCHEMA_VERSION:
            raise RegistryError(
                f"the job registry {self.path} has schema {current}, newer than this jobkit"
                f" understands ({SCHEMA_VERSION}); upgrade jobkit"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
