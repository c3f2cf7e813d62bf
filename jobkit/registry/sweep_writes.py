"""A sweep's rows written (docs/sweeps.md): every task's intent in one transaction, and what
the scheduler answered for each task. Store has these writes."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jobkit.core import private
from jobkit.core.lifecycle import SUBMITTING, Source, StateSource
from jobkit.registry.db import RegistryError, RegistryReadOnly
from jobkit.registry.newids import IDS_PER_QUERY, unused_ids
from jobkit.registry.reader import RegistryReader
from jobkit.registry.record import JobRecord, new_record
from jobkit.registry.rows import encode, insert_job, shared_texts, update_sql
from jobkit.registry.writes import (
    HISTORY_SQL,
    SUBMITTED_FIELDS,
    TaskIntent,
    TaskSubmitted,
    submitted_values,
)


class SweepWrites(RegistryReader):
    """The sweep writes of Store (its base: one connection, one `_write` path)."""

    def create_sweep_intents(
        self,
        *,
        backend: str,
        name: str,
        spec: Mapping[str, Any],
        script: str,
        workdir: Path,
        sweep_id: str,
        tasks: Sequence[TaskIntent],
        job_dir: Path | None = None,
        now: float | None = None,
    ) -> list[JobRecord]:
        """A SUBMITTING row for each task of a sweep, in one transaction; the rows in order.

        The tasks share the spec and the script (which holds every task's words: a sweep of N
        tasks has a script of size N): the first task's row stores them, the others name it
        (rows.shared_texts), so N tasks store and hold one copy, not N. `job_dir`: the
        sweep's shared folder (an array job); None: each task its own, as create_intent.
        """
        if self.degraded:
            raise RegistryReadOnly(
                f"the job registry {self.path} cannot be written: no new job is submitted"
            )
        at = time.time() if now is None else now
        spec_json = json.dumps(spec, sort_keys=True)

        source = StateSource.JOBKIT

        def insert(conn: sqlite3.Connection) -> list[JobRecord]:
            ids = unused_ids(conn, len(tasks), avoid={sweep_id})
            holder = ids[0]
            records = [
                new_record(
                    jobkit_id=jobkit_id,
                    backend=backend,
                    name=name,
                    state=SUBMITTING,
                    state_source=source,
                    created_at=at,
                    workdir=workdir,
                    job_dir=job_dir or self.jobs_dir / jobkit_id,
                    token=task.token,
                    spec_json=spec_json if jobkit_id == holder else shared_texts(holder),
                    script=script if jobkit_id == holder else "",
                    extra=dict(task.extra),
                    run_id=jobkit_id,
                    sweep_id=sweep_id,
                    task=task.task,
                )
                for jobkit_id, task in zip(ids, tasks, strict=True)
            ]
            (jobs_sql, _), (texts_sql, _) = insert_job(records[0])
            texts: list[tuple[Any, ...]] = []  # small: the shared texts are one string each

            def job_rows() -> Iterator[tuple[Any, ...]]:  # made as written, never all at once
                for record in records:
                    (_, job_row), (_, texts_row) = insert_job(record)
                    texts.append(texts_row)
                    yield job_row

            conn.executemany(jobs_sql, job_rows())
            conn.executemany(texts_sql, texts)
            reason, encoded = "intent recorded", encode("state_source", source)
            conn.executemany(HISTORY_SQL, [(i, at, SUBMITTING, None, encoded, reason) for i in ids])
            return records

        records = self._write(insert)
        for folder in {job_dir} if job_dir is not None else (r.job_dir for r in records):
            private.make_dir(folder)
        for record in records[1:]:  # as the reader gives them: the holder's texts, one copy
            record.__dict__.update(spec_json=spec_json, script=script)
        return records

    def mark_tasks_submitted(
        self,
        tasks: Sequence[TaskSubmitted],
        *,
        source: Source = StateSource.SUBMIT,
        now: float | None = None,
    ) -> list[JobRecord]:
        """mark_submitted for many jobs (a sweep's tasks) in one transaction; their rows, in
        the order given."""
        at = time.time() if now is None else now

        def update(conn: sqlite3.Connection) -> None:
            ids = [task.jobkit_id for task in tasks]
            found: dict[str, tuple[str, str]] = {}
            for start in range(0, len(ids), IDS_PER_QUERY):
                chunk = ids[start : start + IDS_PER_QUERY]
                marks = ", ".join("?" for _ in chunk)
                for row in conn.execute(
                    f"SELECT jobkit_id, state, extra FROM jobs WHERE jobkit_id IN ({marks})", chunk
                ):
                    found[row[0]] = (row[1], row[2])
            updates: list[tuple[Any, ...]] = []
            history: list[tuple[Any, ...]] = []
            encoded = encode("state_source", source)
            for task in tasks:
                if task.jobkit_id not in found:
                    raise RegistryError(f"no tracked job {task.jobkit_id!r}")
                state, extra = found[task.jobkit_id]
                values = submitted_values(task, state, extra, source, at)
                updates.append((*(encode(k, v) for k, v in values.items()), task.jobkit_id))
                if values["state"] != state:
                    history.append((task.jobkit_id, at, values["state"], None, encoded, None))
            conn.executemany(update_sql(list(SUBMITTED_FIELDS)), updates)
            conn.executemany(HISTORY_SQL, history)

        self._write(update)
        return self.records_of([task.jobkit_id for task in tasks])
