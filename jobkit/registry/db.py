"""The registry's SQLite connection: opening, migrating, transactions and retries.

WAL mode, `synchronous=NORMAL`, a busy timeout, `BEGIN IMMEDIATE` for every read-then-write
and a retry with backoff on "database is locked", so many shells can use it at once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from jobkit.core import private
from jobkit.registry.errors import RegistryCorrupt as RegistryCorrupt
from jobkit.registry.errors import RegistryError as RegistryError
from jobkit.registry.errors import RegistryReadOnly as RegistryReadOnly
from jobkit.registry.errors import corrupt as corrupt
from jobkit.registry.rows import MIGRATIONS, SCHEMA_VERSION

BUSY_TIMEOUT_MS = 30_000
LOCK_RETRIES = 8

_T = TypeVar("_T")


_CORRUPT_NAMES = {
    "SQLITE_NOTADB": "file is not a database",
    "SQLITE_CORRUPT": "database disk image is malformed",
}
_WRITE_NAMES = {
    "SQLITE_FULL": "no space left on its disk",
    "SQLITE_IOERR": "disk I/O error",
    "SQLITE_READONLY": "it is read-only",
    "SQLITE_CANTOPEN": "a file beside it cannot be created",
}


def registry_failure(path: Path, err: BaseException) -> RegistryError:
    """One line for an SQLite error on the registry `path`: what is wrong and what to do.

    Only SQLite's error name is used, never its message: a message can quote a damaged row
    ("Could not decode to UTF-8 column 'script' with text ..."), which may hold a secret.
    """
    name = getattr(err, "sqlite_errorname", "") or ""
    base = "_".join(name.split("_")[:2])  # SQLITE_IOERR_SHMSIZE: SQLITE_IOERR
    if isinstance(err, UnicodeDecodeError) or str(err).startswith("Could not decode"):
        return corrupt(path, "text that is not UTF-8")
    if base in _CORRUPT_NAMES:
        return corrupt(path, _CORRUPT_NAMES[base])
    if base in _WRITE_NAMES:
        why = "no space left on its disk" if _disk_full(path.parent) else _WRITE_NAMES[base]
        return RegistryReadOnly(f"the job registry {path} cannot be written: {why} ({name})")
    return RegistryError(f"the job registry {path}: SQLite error {name or type(err).__name__}")


def _disk_full(folder: Path) -> bool:
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def jobkit_home(environ: Mapping[str, str] | None = None) -> Path:
    """The folder for the registry and job folders: $JOBKIT_HOME, else the XDG state dir."""
    env = os.environ if environ is None else environ
    if env.get("JOBKIT_HOME"):
        return Path(env["JOBKIT_HOME"]).expanduser()
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]).expanduser() / "jobkit"
    return Path.home() / ".local" / "state" / "jobkit"


_FALLBACK: ContextVar[list[str] | None] = ContextVar("jobkit_registry_fallback", default=None)


@contextmanager
def read_only_fallback() -> Iterator[list[str]]:
    """Within: a registry that cannot be written (full disk, read-only or failing file
    system) is used as an in-memory copy instead of failing, so that status, logs, why,
    doctor, report and cancel still work. The yielded list gets one warning line per such
    registry. A new job is never recorded there (Store.create_intent refuses)."""
    notes: list[str] = []
    token = _FALLBACK.set(notes)
    try:
        yield notes
    finally:
        _FALLBACK.reset(token)


def _has_wal(path: Path) -> bool:
    try:
        return path.with_name(path.name + "-wal").stat().st_size > 0
    except OSError:
        return False


def _make_private(home: Path, path: Path) -> None:
    """The registry folder 0700 when jobkit creates it; the database 0600 before SQLite
    opens it (its -wal and -shm files take the database's mode); those of an older jobkit
    tightened."""
    if not home.exists():
        private.make_dir(home)
    _refuse_lost_records(path)
    private.create_empty(path)
    for suffix in ("-wal", "-shm"):
        private.tighten(path.with_name(path.name + suffix), private.FILE_MODE)


def _refuse_lost_records(path: Path) -> None:
    """A registry file that is missing or empty (0 bytes) while `jobs/` holds job folders
    lost its records (a crash on a full disk, a truncation): refused, not read as empty. A
    new registry is never empty once it holds a job (SQLite writes its header first)."""
    try:
        if path.stat().st_size > 0:
            return
        state = "empty (0 bytes)"
    except FileNotFoundError:
        state = "missing"
    except OSError:
        return  # opening it says what is wrong
    jobs = path.parent / "jobs"
    try:
        with os.scandir(jobs) as entries:
            if not any(entry.is_dir() for entry in entries):
                return
    except OSError:
        return
    raise RegistryCorrupt(
        f"the job registry {path} is {state} but {jobs} holds job folders: its records are"
        f" lost; restore it from a backup, or move {jobs} aside to start afresh (jobkit"
        " keeps no other copy of its records)"
    )


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
            _make_private(self.home, self.path)
            self.jobs_dir.mkdir(mode=private.DIR_MODE, exist_ok=True)
            private.tighten(self.jobs_dir, private.DIR_MODE)
            self._conn = sqlite3.connect(
                str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
        except OSError as err:
            raise RegistryError(
                f"cannot open the job registry {self.path}: {err.strerror or err}"
            ) from None
        except sqlite3.Error as err:
            raise registry_failure(self.path, err) from None
        self._conn.row_factory = sqlite3.Row
        self.degraded = False
        """True once the registry could not be written and this connection holds a copy in
        memory (see `read_only_fallback`): nothing written through it is saved."""
        try:
            self._retry(self._setup)
        except RegistryReadOnly as err:
            self._degrade(err, live=False)

    def _degrade(self, err: RegistryReadOnly, *, live: bool) -> None:
        """Go on with an in-memory copy of the registry, when the verb allows it; else raise.

        live: copy through the open connection (it can still read, the WAL included);
        otherwise from the file as it is (`immutable`: no -shm needed, a -wal ignored).
        """
        notes = _FALLBACK.get()
        if notes is None or self.degraded:
            raise err
        memory = sqlite3.connect(":memory:", isolation_level=None)
        try:
            if live:
                self._conn.backup(memory)
            else:
                with closing(
                    sqlite3.connect(f"{self.path.as_uri()}?immutable=1", uri=True)
                ) as source:
                    source.backup(memory)
        except (sqlite3.Error, OSError):
            memory.close()
            raise err from None
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._conn = memory
        self._conn.row_factory = sqlite3.Row
        self.degraded = True
        unsaved = "" if live or not _has_wal(self.path) else " (changes in its -wal not shown)"
        notes.append(
            f"warning: {err.show()}: showing what it last recorded{unsaved}; what this"
            " command learnt or did is not saved in it"
        )

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
                if not _is_lock_error(err):
                    raise registry_failure(self.path, err) from None
                if attempt == LOCK_RETRIES:
                    raise RegistryError(f"job registry {self.path}: {err}") from None
                time.sleep(delay + secrets.randbelow(50) / 1000)
                delay = min(delay * 2, 2.0)
            except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
                raise registry_failure(self.path, err) from None
        raise AssertionError("unreachable")

    def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run fn inside BEGIN IMMEDIATE ... COMMIT, retried as a whole when locked."""

        def attempt() -> _T:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._conn)
            except BaseException:
                # SQLite may have rolled back already (a full disk): the first error counts.
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

        try:
            return self._retry(attempt)
        except RegistryReadOnly as err:
            self._degrade(err, live=True)  # raises unless the verb reads mostly
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
