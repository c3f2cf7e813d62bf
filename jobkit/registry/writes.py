"""The rows a job's writes leave: a state change's history line, and what the scheduler
answered for a submission (one job or a sweep's tasks)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobkit.core.lifecycle import SUBMITTING, Source
from jobkit.core.states import State
from jobkit.registry.db import RegistryError
from jobkit.registry.rows import encode, update_sql

HISTORY_SQL = (
    "INSERT INTO state_history (jobkit_id, at, state, raw_state, source, reason)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)


def add_history(
    conn: sqlite3.Connection,
    jobkit_id: str,
    at: float,
    state: str,
    raw_state: str | None,
    source: Source | None,
    reason: str | None,
) -> None:
    conn.execute(
        HISTORY_SQL, (jobkit_id, at, state, raw_state, encode("state_source", source), reason)
    )


@dataclass(frozen=True)
class TaskIntent:
    """One task of a sweep about to be submitted (Store.create_sweep_intents)."""

    task: str
    token: str
    extra: Mapping[str, Any]


@dataclass(frozen=True)
class TaskSubmitted:
    """What the scheduler answered for one job (Store.mark_submitted, mark_tasks_submitted).

    A backend's `extra['run_dir']` is not kept when it is log_paths' run folder (stored
    once; JobRecord.tracked() hands it back to the backend)."""

    jobkit_id: str
    scheduler_id: str
    argv: Sequence[str]
    log_paths: Mapping[str, str]
    extra: Mapping[str, Any] | None = None


SUBMITTED_FIELDS = (
    "scheduler_id",
    "submit_argv",
    "submitted_at",
    "log_paths",
    "extra",
    "state",
    "state_source",
    "observed_at",
)


def submitted_values(
    task: TaskSubmitted, state: str, extra_json: str, source: Source, at: float
) -> dict[str, Any]:
    """The columns a job gets when the scheduler accepted it: its id, log paths, the facts
    merged into `extra`, state QUEUED (from SUBMITTING or UNKNOWN: a lost reply, found)."""
    facts = dict(task.extra or {})
    if "run_dir" in facts and facts["run_dir"] == task.log_paths.get("run_dir"):
        del facts["run_dir"]
    unsettled = (SUBMITTING, State.UNKNOWN.value)
    values = {
        "scheduler_id": task.scheduler_id,
        "submit_argv": list(task.argv),
        "submitted_at": at,
        "log_paths": dict(task.log_paths),
        "extra": {**json.loads(extra_json), **facts},
        "state": State.QUEUED.value if state in unsettled else state,
        "state_source": source,
        "observed_at": at,
    }
    assert tuple(values) == SUBMITTED_FIELDS
    return values


def record_submitted(
    conn: sqlite3.Connection, task: TaskSubmitted, source: Source, at: float
) -> None:
    """Store what the scheduler answered for one job (mark_submitted)."""
    row = conn.execute(
        "SELECT state, extra FROM jobs WHERE jobkit_id = ?", (task.jobkit_id,)
    ).fetchone()
    if row is None:
        raise RegistryError(f"no tracked job {task.jobkit_id!r}")
    values = submitted_values(task, row["state"], row["extra"], source, at)
    conn.execute(
        update_sql(list(values)),
        (*(encode(k, v) for k, v in values.items()), task.jobkit_id),
    )
    if values["state"] != row["state"]:
        add_history(conn, task.jobkit_id, at, values["state"], None, source, None)
