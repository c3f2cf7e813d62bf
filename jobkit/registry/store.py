"""The job registry: one SQLite file that every jobkit command reads and writes.

Lives at `$JOBKIT_HOME/jobkit.db` (default `$XDG_STATE_HOME/jobkit`, else
`~/.local/state/jobkit`). A job's intent is recorded (state SUBMITTING) before its
scheduler is called. This module stores; what an observation means for a job is decided
by jobkit/core/lifecycle.py. Also here: db.py (connection, migrations, retries),
reader.py (queries), record.py (JobRecord), rows.py (tables, row <-> record).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

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
from jobkit.core.records import Observation
from jobkit.registry.badnode_writes import BadNodeWrites
from jobkit.registry.db import (
    BUSY_TIMEOUT_MS,
    LOCK_RETRIES,
    RegistryError,
    RegistryReadOnly,
    jobkit_home,
)
from jobkit.registry.newids import IDS_PER_QUERY, new_jobkit_id, new_token, unused_id
from jobkit.registry.reader import ID_PREFIX, BadNode, scheduler_base_id
from jobkit.registry.record import JobRecord, StateChange, new_record
from jobkit.registry.rows import SCHEMA_VERSION, encode, insert_job, update_sql
from jobkit.registry.sweep_writes import SweepWrites
from jobkit.registry.writes import (
    HISTORY_SQL,
    TaskIntent,
    TaskSubmitted,
    add_history,
    record_submitted,
)

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
    "TaskIntent",
    "TaskSubmitted",
    "jobkit_home",
    "new_jobkit_id",
    "new_token",
    "scheduler_base_id",
]

_UPDATE_OBSERVED = update_sql(OBSERVED_FIELDS)


def _with_earlier_runs(
    conn: sqlite3.Connection, requeued: Sequence[tuple[str, Progress, Progress, Observation]]
) -> dict[str, dict[str, Any]]:
    """Keep the earlier runs' elapsed of the jobs whose requeue count went up (or whose
    scheduler summed them) in their `extra` (core/earlier_runs.py); returns the new extras.
    Requeues are rare: the extras are read only for these jobs."""
    from jobkit.core.earlier_runs import earlier_runs, earlier_runs_after

    written: dict[str, dict[str, Any]] = {}
    for jobkit_id, old, new, obs in requeued:
        row = conn.execute("SELECT extra FROM jobs WHERE jobkit_id = ?", (jobkit_id,)).fetchone()
        extra = json.loads(row["extra"]) if row is not None else {}
        found = earlier_runs_after(old, new, obs, earlier_runs(extra))
        if found is None:
            continue
        merged = {**extra, **found.values()}
        conn.execute(update_sql(["extra"]), (encode("extra", merged), jobkit_id))
        written[jobkit_id] = merged
    return written


class Store(SweepWrites, BadNodeWrites):
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
        spec_json = json.dumps(spec, sort_keys=True)

        def insert(conn: sqlite3.Connection) -> str:
            record = self._new_row(
                conn,
                at=at,
                backend=backend,
                name=name,
                workdir=workdir,
                job_dir=job_dir,
                token=token or new_token(),
                spec_json=spec_json,
                script=script,
                extra=dict(extra or {}),
                run_id=run_id,
                attempt=attempt,
                sweep_id=sweep_id,
                task=task,
            )
            return record.jobkit_id

        jobkit_id = self._write(insert)
        private.make_dir(job_dir or self.jobs_dir / jobkit_id)
        return self.get(jobkit_id)

    def _new_row(
        self,
        conn: sqlite3.Connection,
        *,
        at: float,
        job_dir: Path | None,
        run_id: str | None,
        **values: Any,
    ) -> JobRecord:
        """Insert a new SUBMITTING row (and its history line) under a fresh id."""
        jobkit_id = unused_id(conn)
        source = StateSource.JOBKIT
        record = new_record(
            jobkit_id=jobkit_id,
            state=SUBMITTING,
            state_source=source,
            created_at=at,
            job_dir=job_dir or self.jobs_dir / jobkit_id,
            run_id=run_id or jobkit_id,
            **values,
        )
        for sql, params in insert_job(record):
            conn.execute(sql, params)
        add_history(conn, jobkit_id, at, SUBMITTING, None, source, "intent recorded")
        return record

    def new_id(self) -> str:
        """A fresh id from the jobkit id space that no job has (a sweep's id)."""
        return self._write(unused_id)

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
        submitted = TaskSubmitted(jobkit_id, scheduler_id, list(argv), dict(log_paths), extra)
        self._write(lambda conn: record_submitted(conn, submitted, source, at))
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
                add_history(
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

    def mark_all_failed(
        self,
        jobkit_ids: Sequence[str],
        reason: str,
        *,
        source: Source = StateSource.JOBKIT,
        now: float | None = None,
    ) -> None:
        """mark_failed for many jobs (a sweep's tasks) in one transaction."""
        at = time.time() if now is None else now
        failed = Progress(State.FAILED.value, None, source, reason, at, final_at=at)
        self._set_state(jobkit_ids, failed, reason)

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
            for start in range(0, len(ids), IDS_PER_QUERY):
                chunk = ids[start : start + IDS_PER_QUERY]
                marks = ",".join("?" for _ in chunk)
                for row in conn.execute(
                    f"SELECT jobkit_id, {', '.join(OBSERVED_FIELDS)} FROM jobs"
                    f" WHERE jobkit_id IN ({marks})",
                    chunk,
                ):
                    current[row[0]] = Progress(*tuple(row)[1:])
            history: list[tuple[Any, ...]] = []
            requeued: list[tuple[str, Progress, Progress, Observation]] = []
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
                if obs.earlier_runs_s is not None or new.requeues > old.requeues:
                    requeued.append((jobkit_id, old, new, obs))
            conn.executemany(
                _UPDATE_OBSERVED,
                # plain values (a StateSource is stored as its text): nothing to encode
                [
                    (*(columns[name] for name in OBSERVED_FIELDS), jobkit_id)
                    for jobkit_id, columns in changed.items()
                ],
            )
            conn.executemany(HISTORY_SQL, history)
            for jobkit_id, extra in _with_earlier_runs(conn, requeued).items():
                changed[jobkit_id]["extra"] = extra

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
            add_history(
                conn,
                record.jobkit_id,
                at,
                record.state,
                record.raw_state,
                StateSource.JOBKIT,
                reason,
            )

        self._write(add)
