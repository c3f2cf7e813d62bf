"""The job registry: one SQLite file that every jobkit command reads and writes.

Lives at `$JOBKIT_HOME/jobkit.db` (default `$XDG_STATE_HOME/jobkit`, else
`~/.local/state/jobkit`). WAL mode, `BEGIN IMMEDIATE` for every read-then-write, a busy
timeout and a retry on "database is locked", so many shells can submit at once.
A job's intent is recorded (state SUBMITTING) before its scheduler is called.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from jobkit.backends.base import Observation, TrackedJob
from jobkit.core.errors import JobkitError
from jobkit.core.states import State

SUBMITTING = "SUBMITTING"
"""Registry-only state: intent recorded, the scheduler's answer not yet."""

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 30_000
LOCK_RETRIES = 8
ID_PREFIX = "jk"
ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
ID_LENGTH = 5
"""Characters after `jk`: 36**5 = 60 million ids; a collision is retried."""

CANCEL_GRACE_S = 60.0
"""After `jobkit cancel`, a non-final observation is ignored for this long."""
EXIT_CODE_GRACE_S = 600.0
"""A final job without an exit code is polled again for this long (accounting lag)."""
_IDS_PER_QUERY = 500
"""Ids bound in one `IN (...)` query (SQLite allows 32766 variables; this stays far below)."""

_T = TypeVar("_T")

_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE jobs (
        jobkit_id     TEXT PRIMARY KEY,
        backend       TEXT NOT NULL,
        scheduler_id  TEXT,
        name          TEXT NOT NULL,
        spec_json     TEXT NOT NULL,
        script        TEXT NOT NULL,
        submit_argv   TEXT NOT NULL DEFAULT '[]',
        created_at    REAL NOT NULL,
        submitted_at  REAL,
        workdir       TEXT NOT NULL,
        job_dir       TEXT NOT NULL,
        log_paths     TEXT NOT NULL DEFAULT '{}',
        token         TEXT NOT NULL UNIQUE,
        state         TEXT NOT NULL,
        raw_state     TEXT,
        state_source  TEXT,
        reason        TEXT,
        observed_at   REAL,
        final_at      REAL,
        exit_code     INTEGER,
        signal        INTEGER,
        requeues      INTEGER NOT NULL DEFAULT 0,
        nodes         TEXT,
        elapsed_s     REAL,
        max_rss       TEXT,
        cpu_time      TEXT,
        extra         TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX jobs_scheduler_id ON jobs (scheduler_id);
    CREATE INDEX jobs_created_at ON jobs (created_at);
    CREATE INDEX jobs_state ON jobs (state);
    CREATE TABLE state_history (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        jobkit_id  TEXT NOT NULL REFERENCES jobs (jobkit_id) ON DELETE CASCADE,
        at         REAL NOT NULL,
        state      TEXT NOT NULL,
        raw_state  TEXT,
        source     TEXT,
        reason     TEXT
    );
    CREATE INDEX state_history_job ON state_history (jobkit_id, seq);
    """,
    # The spec and the script (7 kB a job) move out of `jobs`: every state update rewrote
    # them with the row (a status of 10,000 jobs spent 0.3 s of its 1.3 s there). jobs keeps
    # both columns, empty: SQLite before 3.35 cannot drop a column. Jobs are read through
    # the view job_rows, which joins them back.
    2: """
    CREATE TABLE job_texts (
        jobkit_id  TEXT PRIMARY KEY REFERENCES jobs (jobkit_id) ON DELETE CASCADE,
        spec_json  TEXT NOT NULL,
        script     TEXT NOT NULL
    );
    INSERT INTO job_texts (jobkit_id, spec_json, script)
        SELECT jobkit_id, spec_json, script FROM jobs;
    UPDATE jobs SET spec_json = '', script = '';
    CREATE VIEW job_rows AS
    SELECT j.jobkit_id,
           j.backend,
           j.scheduler_id,
           j.name,
           j.submit_argv,
           j.created_at,
           j.submitted_at,
           j.workdir,
           j.job_dir,
           j.log_paths,
           j.token,
           j.state,
           j.raw_state,
           j.state_source,
           j.reason,
           j.observed_at,
           j.final_at,
           j.exit_code,
           j.signal,
           j.requeues,
           j.nodes,
           j.elapsed_s,
           j.max_rss,
           j.cpu_time,
           j.extra,
           t.spec_json,
           t.script,
           j.rowid AS row_order
    FROM jobs AS j JOIN job_texts AS t ON t.jobkit_id = j.jobkit_id;
    """,
}


def jobkit_home(environ: Mapping[str, str] | None = None) -> Path:
    """The folder for the registry and job folders: $JOBKIT_HOME, else the XDG state dir."""
    env = os.environ if environ is None else environ
    if env.get("JOBKIT_HOME"):
        return Path(env["JOBKIT_HOME"]).expanduser()
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]).expanduser() / "jobkit"
    return Path.home() / ".local" / "state" / "jobkit"


class RegistryError(JobkitError):
    """The registry file cannot be opened or is from a newer jobkit."""


@dataclass(frozen=True)
class StateChange:
    """One line of a job's state history."""

    at: float
    state: str
    raw_state: str | None
    source: str | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "at": self.at,
            "state": self.state,
            "raw_state": self.raw_state,
            "source": self.source,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class JobRecord:
    """One tracked job, as stored in the registry."""

    jobkit_id: str
    backend: str
    scheduler_id: str | None
    name: str
    spec_json: str
    """The spec as stored (JSON); `spec` decodes it when first asked."""
    script: str
    submit_argv: list[str]
    created_at: float
    submitted_at: float | None
    workdir: Path
    job_dir: Path
    log_paths: dict[str, str]
    token: str
    state: str
    """A State value, or SUBMITTING."""
    raw_state: str | None
    state_source: str | None
    reason: str | None
    observed_at: float | None
    final_at: float | None
    exit_code: int | None
    signal: int | None
    requeues: int
    nodes: str | None
    elapsed_s: float | None
    max_rss: str | None
    cpu_time: str | None
    extra: dict[str, Any] = field(default_factory=dict)

    def with_columns(self, columns: Mapping[str, Any]) -> JobRecord:
        """A copy with some fields replaced, such as the columns record_observations returns:
        dataclasses.replace without its per-call work (a status may update 10,000 records)."""
        unknown = columns.keys() - _RECORD_FIELDS
        if unknown:
            raise TypeError(f"JobRecord has no field {sorted(unknown)[0]!r}")
        state = {**self.__dict__, **columns}
        if "spec_json" in columns:
            state.pop("spec", None)  # the decoded spec belongs to the old JSON
        fresh = object.__new__(JobRecord)
        fresh.__dict__.update(state)  # frozen: fill the instance dict, not through setattr
        return fresh

    @functools.cached_property
    def spec(self) -> dict[str, Any]:
        """The spec after layering (decoded on first use: listings of thousands of jobs
        never need it)."""
        decoded: dict[str, Any] = json.loads(self.spec_json)
        return decoded

    @property
    def is_final(self) -> bool:
        """True once the job will not run again."""
        return self.state != SUBMITTING and State(self.state).is_final

    @property
    def is_array(self) -> bool:
        """True for a job array (log paths then hold a `{task}` placeholder)."""
        return bool(self.extra.get("array"))

    def needs_poll(self, now: float | None = None) -> bool:
        """Whether `status` should ask the scheduler about this job again."""
        if self.state == SUBMITTING or self.scheduler_id is None:
            return False
        if not self.is_final:
            return True
        now = time.time() if now is None else now
        if self.state_source == "cancel":
            return True
        return self.exit_code is None and (now - (self.final_at or now)) < EXIT_CODE_GRACE_S

    def tracked(self) -> TrackedJob:
        """The view a backend gets when polling or cancelling."""
        return TrackedJob(
            jobkit_id=self.jobkit_id,
            scheduler_id=self.scheduler_id or "",
            job_dir=self.job_dir,
            workdir=self.workdir,
            extra={str(k): str(v) for k, v in self.extra.items()},
        )

    def log_paths_for(self, task: str | None = None) -> dict[str, str]:
        """Absolute log paths ('out', 'err', 'run_dir'); an array's `{task}` filled in."""
        if not self.is_array or task is None:
            return dict(self.log_paths)
        return {key: value.replace("{task}", task) for key, value in self.log_paths.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the spec and script left out: see `jobkit status ID --json`)."""
        return {
            "jobkit_id": self.jobkit_id,
            "scheduler_id": self.scheduler_id,
            "backend": self.backend,
            "name": self.name,
            "state": self.state,
            "raw_state": self.raw_state,
            "state_source": self.state_source,
            "reason": self.reason,
            "observed_at": self.observed_at,
            "created_at": self.created_at,
            "submitted_at": self.submitted_at,
            "final_at": self.final_at,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "requeues": self.requeues,
            "nodes": self.nodes,
            "elapsed_s": self.elapsed_s,
            "max_rss": self.max_rss,
            "cpu_time": self.cpu_time,
            "workdir": str(self.workdir),
            "job_dir": str(self.job_dir),
            "log_paths": dict(self.log_paths),
            "submit_argv": list(self.submit_argv),
            "extra": dict(self.extra),
        }


_RECORD_FIELDS = frozenset(f.name for f in fields(JobRecord))


def _is_lock_error(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


def new_jobkit_id() -> str:
    """A fresh id: `jk` and 5 base-36 characters; never all digits, so never a scheduler id."""
    return ID_PREFIX + "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


def new_token() -> str:
    """A unique submission token (goes into the job's comment for adoption)."""
    return secrets.token_hex(8)


class Store:
    """The registry. Cheap to open; one instance per command. Not shared across threads."""

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

    # -- connection and transactions -------------------------------------------------------

    def close(self) -> None:
        """Close the database connection."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
            for statement in _MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    # -- writing ---------------------------------------------------------------------------

    def create_intent(
        self,
        *,
        backend: str,
        name: str,
        spec: Mapping[str, Any],
        script: str,
        workdir: Path,
        token: str | None = None,
        extra: Mapping[str, Any] | None = None,
        now: float | None = None,
    ) -> JobRecord:
        """Record that a job is about to be submitted (state SUBMITTING); returns its row.

        The job folder `<home>/jobs/<jobkit_id>/` is created too.
        """
        at = time.time() if now is None else now
        tok = token or new_token()

        def insert(conn: sqlite3.Connection) -> str:
            while True:
                jobkit_id = new_jobkit_id()
                exists = conn.execute(
                    "SELECT 1 FROM jobs WHERE jobkit_id = ?", (jobkit_id,)
                ).fetchone()
                if exists is None:
                    break
            conn.execute(
                "INSERT INTO jobs (jobkit_id, backend, name, spec_json, script, created_at,"
                " workdir, job_dir, token, state, state_source, extra)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'jobkit', ?)",
                (
                    jobkit_id,
                    backend,
                    name,
                    "",
                    "",
                    at,
                    str(workdir),
                    str(self.jobs_dir / jobkit_id),
                    tok,
                    SUBMITTING,
                    json.dumps(dict(extra or {}), sort_keys=True),
                ),
            )
            conn.execute(
                "INSERT INTO job_texts (jobkit_id, spec_json, script) VALUES (?, ?, ?)",
                (jobkit_id, json.dumps(spec, sort_keys=True), script),
            )
            _add_history(conn, jobkit_id, at, SUBMITTING, None, "jobkit", "intent recorded")
            return jobkit_id

        jobkit_id = self._write(insert)
        (self.jobs_dir / jobkit_id).mkdir(parents=True, exist_ok=True)
        return self.get(jobkit_id)

    def mark_submitted(
        self,
        jobkit_id: str,
        *,
        scheduler_id: str,
        argv: Sequence[str],
        log_paths: Mapping[str, str],
        extra: Mapping[str, Any] | None = None,
        source: str = "submit",
        now: float | None = None,
    ) -> JobRecord:
        """The scheduler accepted the job: store its id and log paths; state QUEUED."""
        at = time.time() if now is None else now

        def update(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT state, extra FROM jobs WHERE jobkit_id = ?", (jobkit_id,)
            ).fetchone()
            if row is None:
                raise RegistryError(f"no tracked job {jobkit_id!r}")
            merged = json.loads(row["extra"])
            merged.update(extra or {})
            unsettled = (SUBMITTING, State.UNKNOWN.value)  # UNKNOWN: a lost reply, found
            new_state = State.QUEUED.value if row["state"] in unsettled else row["state"]
            conn.execute(
                "UPDATE jobs SET scheduler_id = ?, submit_argv = ?, submitted_at = ?,"
                " log_paths = ?, extra = ?, state = ?, state_source = ?, observed_at = ?"
                " WHERE jobkit_id = ?",
                (
                    scheduler_id,
                    json.dumps(list(argv)),
                    at,
                    json.dumps(dict(log_paths), sort_keys=True),
                    json.dumps(merged, sort_keys=True),
                    new_state,
                    source,
                    at,
                    jobkit_id,
                ),
            )
            if new_state != row["state"]:
                _add_history(conn, jobkit_id, at, new_state, None, source, None)

        self._write(update)
        return self.get(jobkit_id)

    def mark_failed(
        self,
        jobkit_id: str,
        reason: str,
        *,
        source: str = "jobkit",
        now: float | None = None,
    ) -> JobRecord:
        """The job never reached the scheduler (refused, lost): FAILED with a reason."""
        at = time.time() if now is None else now

        def update(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE jobs SET state = ?, raw_state = NULL, state_source = ?, reason = ?,"
                " observed_at = ?, final_at = ? WHERE jobkit_id = ?",
                (State.FAILED.value, source, reason, at, at, jobkit_id),
            )
            _add_history(conn, jobkit_id, at, State.FAILED.value, None, source, reason)

        self._write(update)
        return self.get(jobkit_id)

    def mark_fate_unknown(
        self, jobkit_id: str, reason: str, *, now: float | None = None
    ) -> JobRecord:
        """The scheduler may have taken the job, but it cannot be found: UNKNOWN, no id, a
        reason; `reconcile_submissions` keeps looking for it."""
        at = time.time() if now is None else now

        def update(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE jobs SET state = ?, raw_state = NULL, state_source = ?, reason = ?,"
                " observed_at = ? WHERE jobkit_id = ? AND state = ?",
                (State.UNKNOWN.value, "jobkit", reason, at, jobkit_id, SUBMITTING),
            )
            _add_history(conn, jobkit_id, at, State.UNKNOWN.value, None, "jobkit", reason)

        self._write(update)
        return self.get(jobkit_id)

    def mark_cancelled(self, jobkit_ids: Iterable[str], *, now: float | None = None) -> None:
        """Record that `jobkit cancel` stopped these jobs (confirmed by the next poll)."""
        at = time.time() if now is None else now
        ids = list(jobkit_ids)

        def update(conn: sqlite3.Connection) -> None:
            for jobkit_id in ids:
                conn.execute(
                    "UPDATE jobs SET state = ?, state_source = 'cancel', reason = ?,"
                    " observed_at = ?, final_at = ? WHERE jobkit_id = ?",
                    (State.CANCELLED.value, "cancelled by jobkit", at, at, jobkit_id),
                )
                _add_history(
                    conn, jobkit_id, at, State.CANCELLED.value, None, "cancel", "jobkit cancel"
                )

        self._write(update)

    def record_observations(
        self, observations: Mapping[str, Observation], *, now: float | None = None
    ) -> dict[str, dict[str, Any]]:
        """Store what the scheduler said, keyed by jobkit id, in one transaction.

        A state change adds a history line. After `jobkit cancel`, a non-final answer is
        ignored for CANCEL_GRACE_S (the scheduler may lag behind the cancel), and an end
        reported as FAILED or UNKNOWN confirms CANCELLED (the job died of the cancel).
        A job that goes from running back to queued counts one requeue, unless the
        observation carries the scheduler's own count. Returns, per job changed, the
        columns written (JobRecord field names), so a caller can update its records
        without reading them back.
        """
        at = time.time() if now is None else now
        changed: dict[str, dict[str, Any]] = {}

        def update(conn: sqlite3.Connection) -> None:
            changed.clear()  # a retried transaction starts again
            ids = list(observations)
            rows: dict[str, sqlite3.Row] = {}
            for start in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[start : start + _IDS_PER_QUERY]
                marks = ",".join("?" for _ in chunk)
                for row in conn.execute(
                    f"SELECT jobkit_id, {', '.join(_OBSERVED_COLUMNS)} FROM jobs"
                    f" WHERE jobkit_id IN ({marks})",
                    chunk,
                ):
                    rows[row["jobkit_id"]] = row
            history: list[tuple[Any, ...]] = []
            for jobkit_id, obs in observations.items():
                row = rows.get(jobkit_id)
                applied = None if row is None else _apply_observation(jobkit_id, row, obs, at)
                if applied is not None:
                    changed[jobkit_id], line = applied
                    if line is not None:
                        history.append(line)
            conn.executemany(
                f"UPDATE jobs SET {', '.join(f'{name} = ?' for name in _OBSERVED_COLUMNS)}"
                " WHERE jobkit_id = ?",
                [
                    (*(columns[name] for name in _OBSERVED_COLUMNS), jobkit_id)
                    for jobkit_id, columns in changed.items()
                ],
            )
            conn.executemany(
                "INSERT INTO state_history (jobkit_id, at, state, raw_state, source, reason)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                history,
            )

        self._write(update)
        return dict(changed)

    def update_extra(self, jobkit_id: str, values: Mapping[str, Any]) -> None:
        """Merge values into a job's `extra` JSON."""

        def update(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT extra FROM jobs WHERE jobkit_id = ?", (jobkit_id,)
            ).fetchone()
            if row is None:
                raise RegistryError(f"no tracked job {jobkit_id!r}")
            merged = json.loads(row["extra"])
            merged.update(values)
            conn.execute(
                "UPDATE jobs SET extra = ? WHERE jobkit_id = ?",
                (json.dumps(merged, sort_keys=True), jobkit_id),
            )

        self._write(update)

    # -- reading ---------------------------------------------------------------------------

    def get(self, jobkit_id: str) -> JobRecord:
        """The job with this exact jobkit id; RegistryError if none."""
        rows = self._read("SELECT * FROM job_rows WHERE jobkit_id = ?", (jobkit_id,))
        if not rows:
            raise RegistryError(f"no tracked job {jobkit_id!r}")
        return _record(rows[0])

    def find(self, text: str) -> list[JobRecord]:
        """Jobs whose jobkit id starts with text, or whose scheduler id matches it.

        A scheduler id matches exactly, or by its number alone (`123` finds `123;cluster`
        and `123.server`); an array task id `123_4` finds the array `123`.
        """
        rows = self._read(
            "SELECT * FROM job_rows WHERE jobkit_id = ? OR scheduler_id = ?", (text, text)
        )
        exact = [r for r in rows if r["jobkit_id"] == text]
        if exact:
            return [_record(exact[0])]
        if rows:
            return [_record(r) for r in rows]
        candidates: list[sqlite3.Row] = []
        if text.lower().startswith(ID_PREFIX) and len(text) > len(ID_PREFIX):
            escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            candidates = self._read(
                "SELECT * FROM job_rows WHERE jobkit_id LIKE ? ESCAPE '\\'"
                " ORDER BY created_at DESC",
                (escaped + "%",),
            )
        if not candidates:
            base = scheduler_base_id(text)
            candidates = self._read(
                "SELECT * FROM job_rows WHERE scheduler_id = ? OR scheduler_id LIKE ?"
                " OR scheduler_id LIKE ? ORDER BY created_at DESC",
                (base, base + ";%", base + ".%"),
            )
        return [_record(r) for r in candidates]

    def newest(self) -> JobRecord | None:
        """The most recently created job, or None when the registry is empty."""
        rows = self._read("SELECT * FROM job_rows ORDER BY created_at DESC, row_order DESC LIMIT 1")
        return _record(rows[0]) if rows else None

    def list_jobs(
        self,
        *,
        since: float | None = None,
        recent_final_s: float | None = 86_400.0,
        name_glob: str | None = None,
        states: Sequence[str] | None = None,
        backend: str | None = None,
        limit: int | None = None,
        now: float | None = None,
    ) -> list[JobRecord]:
        """Jobs newest first.

        since: created at or after this time. recent_final_s: keep unfinished jobs plus
        those that ended within this many seconds (None: every job).
        """
        at = time.time() if now is None else now
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("created_at >= ?")
            params.append(since)
        if recent_final_s is not None:
            finals = [s.value for s in State if s.is_final]
            marks = ",".join("?" for _ in finals)
            where.append(
                f"(state NOT IN ({marks}) OR COALESCE(final_at, observed_at, created_at) >= ?)"
            )
            params.extend(finals)
            params.append(at - recent_final_s)
        if states:
            where.append(f"state IN ({','.join('?' for _ in states)})")
            params.extend(states)
        if backend:
            where.append("backend = ?")
            params.append(backend)
        sql = "SELECT * FROM job_rows"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, row_order DESC"
        records = [_record(r) for r in self._read(sql, params)]
        if name_glob:
            records = [r for r in records if fnmatch.fnmatchcase(r.name, name_glob)]
        return records[:limit] if limit is not None else records

    def submitting(self) -> list[JobRecord]:
        """Jobs whose intent is recorded but whose scheduler id is not (yet) known: those
        SUBMITTING, and those whose submission's fate is unknown (UNKNOWN, no id)."""
        rows = self._read(
            "SELECT * FROM job_rows WHERE state = ? OR (state = ? AND scheduler_id IS NULL)"
            " ORDER BY created_at",
            (SUBMITTING, State.UNKNOWN.value),
        )
        return [_record(r) for r in rows]

    def history(self, jobkit_id: str) -> list[StateChange]:
        """A job's state changes, oldest first."""
        rows = self._read(
            "SELECT at, state, raw_state, source, reason FROM state_history"
            " WHERE jobkit_id = ? ORDER BY seq",
            (jobkit_id,),
        )
        return [
            StateChange(r["at"], r["state"], r["raw_state"], r["source"], r["reason"]) for r in rows
        ]

    def count(self) -> int:
        """How many jobs the registry holds."""
        return int(self._read("SELECT COUNT(*) FROM jobs")[0][0])


def scheduler_base_id(text: str) -> str:
    """The scheduler id without cluster (`;c`), server (`.s`) or array task (`_4`, `[4]`)."""
    base = text.split(";", 1)[0].split(".", 1)[0]
    if "[" in base:
        base = base.split("[", 1)[0]
    if "_" in base and base.split("_", 1)[0].isdigit():
        base = base.split("_", 1)[0]
    return base


def _add_history(
    conn: sqlite3.Connection,
    jobkit_id: str,
    at: float,
    state: str,
    raw_state: str | None,
    source: str | None,
    reason: str | None,
) -> None:
    conn.execute(
        "INSERT INTO state_history (jobkit_id, at, state, raw_state, source, reason)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (jobkit_id, at, state, raw_state, source, reason),
    )


_OBSERVED_COLUMNS = (
    "state",
    "raw_state",
    "state_source",
    "reason",
    "observed_at",
    "final_at",
    "exit_code",
    "signal",
    "requeues",
    "nodes",
    "elapsed_s",
    "max_rss",
    "cpu_time",
)
"""The columns an observation writes (the same names as JobRecord's fields)."""


def _known(new: Any, old: Any) -> Any:
    """The new value, or the old one where the scheduler said nothing."""
    return old if new is None else new


def _apply_observation(
    jobkit_id: str, row: sqlite3.Row, obs: Observation, at: float
) -> tuple[dict[str, Any], tuple[Any, ...] | None] | None:
    """The columns to write (by name, those of _OBSERVED_COLUMNS) and the history line, if
    any; None when the observation is to be ignored."""
    old_state = row["state"]
    new_state = obs.state.value
    if row["state_source"] == "cancel":
        if obs.state in (State.FAILED, State.UNKNOWN, State.CANCELLED):
            new_state = State.CANCELLED.value  # ended after our cancel: confirmed
        elif not obs.state.is_final and at - (row["observed_at"] or at) < CANCEL_GRACE_S:
            return None  # the scheduler has not caught up with the cancel yet
    requeues = row["requeues"]
    if obs.requeues is not None:
        requeues = max(requeues, obs.requeues)
    elif old_state == State.RUNNING.value and obs.state in (State.QUEUED, State.HELD):
        requeues += 1
    is_final = State(new_state).is_final
    final_at = row["final_at"] if is_final and row["final_at"] else None
    if is_final and final_at is None:
        final_at = at
    columns: dict[str, Any] = {
        "state": new_state,
        "raw_state": obs.raw_state,
        "state_source": obs.source,
        "reason": obs.reason,
        "observed_at": at,
        "final_at": final_at,
        "exit_code": _known(obs.exit_code, row["exit_code"]),
        "signal": _known(obs.signal, row["signal"]),
        "requeues": requeues,
        "nodes": _known(obs.nodes, row["nodes"]),
        "elapsed_s": _known(obs.elapsed_s, row["elapsed_s"]),
        "max_rss": _known(obs.max_rss, row["max_rss"]),
        "cpu_time": _known(obs.cpu_time, row["cpu_time"]),
    }
    line = None
    if new_state != old_state or obs.raw_state != row["raw_state"]:
        line = (jobkit_id, at, new_state, obs.raw_state, obs.source, obs.reason)
    return columns, line


@functools.lru_cache(maxsize=1024)
def _shared_path(text: str) -> Path:
    """Path(text), made once per distinct folder (jobs submitted from one folder share it)."""
    return Path(text)


def _record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        jobkit_id=row["jobkit_id"],
        backend=row["backend"],
        scheduler_id=row["scheduler_id"],
        name=row["name"],
        spec_json=row["spec_json"],
        script=row["script"],
        submit_argv=json.loads(row["submit_argv"]),
        created_at=row["created_at"],
        submitted_at=row["submitted_at"],
        workdir=_shared_path(row["workdir"]),
        job_dir=Path(row["job_dir"]),
        log_paths=json.loads(row["log_paths"]),
        token=row["token"],
        state=row["state"],
        raw_state=row["raw_state"],
        state_source=row["state_source"],
        reason=row["reason"],
        observed_at=row["observed_at"],
        final_at=row["final_at"],
        exit_code=row["exit_code"],
        signal=row["signal"],
        requeues=row["requeues"],
        nodes=row["nodes"],
        elapsed_s=row["elapsed_s"],
        max_rss=row["max_rss"],
        cpu_time=row["cpu_time"],
        extra=json.loads(row["extra"]),
    )
