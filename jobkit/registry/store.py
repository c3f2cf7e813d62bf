"""The job registry: one SQLite file that every jobkit command reads and writes.

Lives at `$JOBKIT_HOME/jobkit.db` (default `$XDG_STATE_HOME/jobkit`, else
`~/.local/state/jobkit`). A job's intent is recorded (state SUBMITTING) before its
scheduler is called. This module stores; what an observation means for a job is decided
by jobkit/core/lifecycle.py. Also here: db.py (connection, migrations, retries),
reader.py (queries), record.py (JobRecord), rows.py (tables, row <-> record).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jobkit.backends.base import Observation
from jobkit.core import lifecycle, private
from jobkit.core.lifecycle import (
    CANCEL_GRACE_S,
    EXIT_CODE_GRACE_S,
    OBSERVED_FIELDS,
    SUBMITTING,
    Progress,
    Source,
    State,
    StateSource,
)
from jobkit.registry.db import (
    BUSY_TIMEOUT_MS,
    LOCK_RETRIES,
    RegistryError,
    RegistryReadOnly,
    jobkit_home,
)
from jobkit.registry.reader import ID_PREFIX, BadNode, RegistryReader, scheduler_base_id
from jobkit.registry.record import JobRecord, StateChange, new_record
from jobkit.registry.rows import SCHEMA_VERSION, encode, insert_job, update_sql

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CANCEL_GRACE_S",
    "EXIT_CODE_GRACE_S",
    "ID_PREFIX",
    "LOCK_RETRIES",
    "SCHEMA_VERSION",
    "SUBMITTING",
    "BadNode",
    "JobRecord",
    "RegistryError",
    "StateChange",
    "Store",
    "jobkit_home",
    "new_jobkit_id",
    "new_token",
    "scheduler_base_id",
]

ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
ID_LENGTH = 5
"""Characters after `jk`: 36**5 = 60 million ids; a collision is retried."""
_IDS_PER_QUERY = 500
"""Ids bound in one `IN (...)` query (SQLite allows 32766 variables; this stays far below)."""
_HISTORY = (
    "INSERT INTO state_history (jobkit_id, at, state, raw_state, source, reason)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
_UPDATE_OBSERVED = update_sql(OBSERVED_FIELDS)


def new_jobkit_id() -> str:
    """A fresh id: `jk` and 5 base-36 characters; never all digits, so never a scheduler id."""
    return ID_PREFIX + "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


def new_token() -> str:
    """A unique submission token (goes into the job's comment for adoption)."""
    return secrets.token_hex(8)


def _unused_id(conn: sqlite3.Connection) -> str:
    """A new jobkit id that is neither a job's id nor a sweep's."""
    while True:
        candidate = new_jobkit_id()
        taken = conn.execute(
            "SELECT 1 FROM jobs WHERE jobkit_id = ? OR sweep_id = ? LIMIT 1",
            (candidate, candidate),
        ).fetchone()
        if taken is None:
            return candidate


def _add_history(
    conn: sqlite3.Connection,
    jobkit_id: str,
    at: float,
    state: str,
    raw_state: str | None,
    source: Source | None,
    reason: str | None,
) -> None:
    conn.execute(
        _HISTORY, (jobkit_id, at, state, raw_state, encode("state_source", source), reason)
    )


class Store(RegistryReader):
    """The registry. Cheap to open; one instance per command. Not shared across threads."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        run_id: str | None = None,
        attempt: int = 1,
        sweep_id: str | None = None,
        task: str | None = None,
        job_dir: Path | None = None,
        now: float | None = None,
    ) -> JobRecord:
        """Record that a job is about to be submitted (state SUBMITTING); returns its row.

        run_id: the run this job is an attempt of (None: a new run, the job's own id);
        sweep_id/task: the sweep and task it belongs to. The job folder (default
        `<home>/jobs/<jobkit_id>/`; a sweep's tasks share `<home>/jobs/<sweep_id>/`) is
        created too.
        """
        if self.degraded:  # a job submitted now would be tracked nowhere
            raise RegistryReadOnly(
                f"the job registry {self.path} cannot be written: no new job is submitted"
            )
        at = time.time() if now is None else now
        source = StateSource.JOBKIT

        def insert(conn: sqlite3.Connection) -> str:
            jobkit_id = _unused_id(conn)
            record = new_record(
                jobkit_id=jobkit_id,
                backend=backend,
                name=name,
                state=SUBMITTING,
                state_source=source,
                created_at=at,
                workdir=workdir,
                job_dir=job_dir or self.jobs_dir / jobkit_id,
                token=token or new_token(),
                spec_json=json.dumps(spec, sort_keys=True),
                script=script,
                extra=dict(extra or {}),
                run_id=run_id or jobkit_id,
                attempt=attempt,
                sweep_id=sweep_id,
                task=task,
            )
            for sql, params in insert_job(record):
                conn.execute(sql, params)
            _add_history(conn, jobkit_id, at, SUBMITTING, None, source, "intent recorded")
            return jobkit_id

        jobkit_id = self._write(insert)
        private.make_dir(job_dir or self.jobs_dir / jobkit_id)
        return self.get(jobkit_id)

    def new_id(self) -> str:
        """A fresh id from the jobkit id space that no job has (a sweep's id)."""
        return self._write(_unused_id)

    def mark_submitted(
        self,
        jobkit_id: str,
        *,
        scheduler_id: str,
        argv: Sequence[str],
        log_paths: Mapping[str, str],
        extra: Mapping[str, Any] | None = None,
        source: Source = StateSource.SUBMIT,
        now: float | None = None,
    ) -> JobRecord:
        """The scheduler accepted the job: store its id and log paths; state QUEUED.

        A backend's `extra['run_dir']` is not kept when it is log_paths' run folder (stored
        once; JobRecord.tracked() hands it back to the backend)."""
        at = time.time() if now is None else now
        facts = dict(extra or {})
        if "run_dir" in facts and facts["run_dir"] == log_paths.get("run_dir"):
            del facts["run_dir"]

        def update(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT state, extra FROM jobs WHERE jobkit_id = ?", (jobkit_id,)
            ).fetchone()
            if row is None:
                raise RegistryError(f"no tracked job {jobkit_id!r}")
            merged = {**json.loads(row["extra"]), **facts}
            unsettled = (SUBMITTING, State.UNKNOWN.value)  # UNKNOWN: a lost reply, found
            new_state = State.QUEUED.value if row["state"] in unsettled else row["state"]
            values = {
                "scheduler_id": scheduler_id,
                "submit_argv": list(argv),
                "submitted_at": at,
                "log_paths": dict(log_paths),
                "extra": merged,
                "state": new_state,
                "state_source": source,
                "observed_at": at,
            }
            conn.execute(
                update_sql(list(values)),
                (*(encode(k, v) for k, v in values.items()), jobkit_id),
            )
            if new_state != row["state"]:
                _add_history(conn, jobkit_id, at, new_state, None, source, None)

        self._write(update)
        return self.get(jobkit_id)

    def _set_state(
        self,
        jobkit_ids: Iterable[str],
        progress: Progress,
        history_reason: str | None,
        *,
        only_from: str | None = None,
        keep_raw_state: bool = False,
    ) -> None:
        """Write a state jobkit decided itself (its source, reason, times) and its history
        line; with `only_from`, only jobs still in that state."""
        names = ["state", "state_source", "reason", "observed_at"]
        if not keep_raw_state:
            names.append("raw_state")
        if lifecycle.is_final(progress.state):
            names.append("final_at")
        values = progress.columns()
        sql = update_sql(names)
        params = [encode(name, values[name]) for name in names]
        if only_from is not None:
            sql += " AND state = ?"
        ids = list(jobkit_ids)

        def update(conn: sqlite3.Connection) -> None:
            for jobkit_id in ids:
                tail = (jobkit_id,) if only_from is None else (jobkit_id, only_from)
                conn.execute(sql, (*params, *tail))
                _add_history(
                    conn,
                    jobkit_id,
                    progress.observed_at or 0.0,
                    progress.state,
                    None,
                    progress.state_source,
                    history_reason,
                )

        self._write(update)

    def mark_failed(
        self,
        jobkit_id: str,
        reason: str,
        *,
        source: Source = StateSource.JOBKIT,
        now: float | None = None,
    ) -> JobRecord:
        """The job never reached the scheduler (refused, lost): FAILED with a reason."""
        at = time.time() if now is None else now
        failed = Progress(State.FAILED.value, None, source, reason, at, final_at=at)
        self._set_state([jobkit_id], failed, reason)
        return self.get(jobkit_id)

    def mark_fate_unknown(
        self, jobkit_id: str, reason: str, *, now: float | None = None
    ) -> JobRecord:
        """The scheduler may have taken the job, but it cannot be found: UNKNOWN, no id, a
        reason; `reconcile_submissions` keeps looking for it."""
        at = time.time() if now is None else now
        unknown = Progress(State.UNKNOWN.value, None, StateSource.JOBKIT, reason, at)
        self._set_state([jobkit_id], unknown, reason, only_from=SUBMITTING)
        return self.get(jobkit_id)

    def mark_cancelled(self, jobkit_ids: Iterable[str], *, now: float | None = None) -> None:
        """Record that `jobkit cancel` stopped these jobs (confirmed by the next poll)."""
        at = time.time() if now is None else now
        cancelled = lifecycle.cancelled(at)
        self._set_state(jobkit_ids, cancelled, "jobkit cancel", keep_raw_state=True)

    def record_observations(
        self, observations: Mapping[str, Observation], *, now: float | None = None
    ) -> dict[str, dict[str, Any]]:
        """Store what the scheduler said, keyed by jobkit id, in one transaction, as
        lifecycle.apply_observation decides (a change of state adds a history line).
        Returns, per job changed, the columns written (JobRecord field names), so a caller
        can update its records without reading them back.
        """
        at = time.time() if now is None else now
        changed: dict[str, dict[str, Any]] = {}

        def update(conn: sqlite3.Connection) -> None:
            changed.clear()  # a retried transaction starts again
            ids = list(observations)
            current: dict[str, Progress] = {}
            for start in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[start : start + _IDS_PER_QUERY]
                marks = ",".join("?" for _ in chunk)
                for row in conn.execute(
                    f"SELECT jobkit_id, {', '.join(OBSERVED_FIELDS)} FROM jobs"
                    f" WHERE jobkit_id IN ({marks})",
                    chunk,
                ):
                    current[row[0]] = Progress(*tuple(row)[1:])
            history: list[tuple[Any, ...]] = []
            for jobkit_id, obs in observations.items():
                old = current.get(jobkit_id)
                new = None if old is None else lifecycle.apply_observation(old, obs, at)
                if old is None or new is None:
                    continue
                changed[jobkit_id] = new.columns()
                if lifecycle.is_history_change(old, new):
                    history.append(
                        (jobkit_id, at, new.state, new.raw_state, obs.source, new.reason)
                    )
            conn.executemany(
                _UPDATE_OBSERVED,
                # plain values (a StateSource is stored as its text): nothing to encode
                [
                    (*(columns[name] for name in OBSERVED_FIELDS), jobkit_id)
                    for jobkit_id, columns in changed.items()
                ],
            )
            conn.executemany(_HISTORY, history)

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
            merged = {**json.loads(row["extra"]), **values}
            conn.execute(update_sql(["extra"]), (encode("extra", merged), jobkit_id))

        self._write(update)

    def claim_extra(self, jobkit_id: str, key: str, value: Any) -> bool:
        """Set `extra[key]` unless it is already set, atomically: True for the one caller
        (of all jobkit processes) that set it."""
        claimed = False

        def mark(conn: sqlite3.Connection) -> None:
            nonlocal claimed
            cursor = conn.execute(
                "UPDATE jobs SET extra = json_set(extra, ?, json(?))"
                " WHERE jobkit_id = ? AND json_extract(extra, ?) IS NULL",
                (f"$.{key}", json.dumps(value), jobkit_id, f"$.{key}"),
            )
            claimed = cursor.rowcount == 1

        self._write(mark)
        return claimed

    def add_note(self, record: JobRecord, reason: str, *, now: float | None = None) -> None:
        """A history line saying what jobkit did to a job, its state unchanged."""
        at = time.time() if now is None else now

        def add(conn: sqlite3.Connection) -> None:
            _add_history(
                conn,
                record.jobkit_id,
                at,
                record.state,
                record.raw_state,
                StateSource.JOBKIT,
                reason,
            )

        self._write(add)

    # -- the user's list of bad nodes (docs/nodes.md) ---------------------------------------

    def add_bad_nodes(
        self,
        backend: str,
        cluster: str | None,
        nodes: Iterable[str],
        *,
        reason: str,
        jobkit_id: str | None,
        until: float,
        now: float | None = None,
    ) -> None:
        """Put nodes on the exclude list until `until` (a node already there gets the later
        end, this reason and job)."""
        at = time.time() if now is None else now
        rows = [(backend, cluster or "", node, reason, jobkit_id, at, until) for node in nodes]

        def insert(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO bad_nodes (backend, cluster, node, reason, jobkit_id, added_at,"
                " until) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (backend, cluster, node) DO UPDATE SET reason = excluded.reason,"
                " jobkit_id = excluded.jobkit_id, added_at = excluded.added_at,"
                " until = MAX(until, excluded.until)",
                rows,
            )

        self._write(insert)

    def clear_bad_nodes(
        self, backend: str | None = None, nodes: Iterable[str] | None = None
    ) -> int:
        """Take nodes off the list (all of them when `nodes` is None); returns how many."""
        where: list[str] = []
        params: list[Any] = []
        if backend is not None:
            where.append("backend = ?")
            params.append(backend)
        if nodes is not None:
            names = list(nodes)
            where.append(f"node IN ({','.join('?' for _ in names)})")
            params.extend(names)
        sql = "DELETE FROM bad_nodes" + (f" WHERE {' AND '.join(where)}" if where else "")

        def delete(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, params).rowcount)

        return self._write(delete)
