"""The one-line diagnosis `jobkit status` shows, computed once per failed job and kept in the
job's `extra['diagnosis']` in the registry, so that status reads it with the record and never
scans logs again (status is benchmarked on 10,000 jobs)."""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Sequence
from typing import Any

from jobkit.core.lifecycle import State
from jobkit.doctor.classes import UNKNOWN
from jobkit.doctor.diagnosis import Diagnosis
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store

CACHE_KEY = "diagnosis"
CACHE_VERSION = 1
STATUS_STATES = frozenset(
    {
        State.FAILED.value,
        State.TIMEOUT.value,
        State.NODE_FAIL.value,
        State.OUT_OF_MEMORY.value,
    }
)
"""The failed states whose diagnosis status shows (a cancelled job was meant to stop)."""
MAX_NEW_PER_STATUS = 20
"""At most this many jobs with logs to read are diagnosed by one `jobkit status` (the newest
first); the others on later calls. Each costs a scan of its logs, once. A job with no log
file at all costs no scan: it is diagnosed (from its state) in the same call, whatever the
number, so that a thousand failed jobs without logs are not tried again on 50 calls."""


def cached(record: JobRecord) -> dict[str, Any] | None:
    """The cached diagnosis, if it was made for the record's present state and exit code."""
    entry = record.extra.get(CACHE_KEY)
    if not isinstance(entry, dict) or entry.get("v") != CACHE_VERSION:
        return None
    if entry.get("state") != record.state or entry.get("exit_code") != record.exit_code:
        return None
    return entry


def one_line(record: JobRecord) -> str | None:
    """The cached one-line diagnosis of a failed job, or None."""
    entry = cached(record)
    line = entry.get("line") if entry else None
    return str(line) if line else None


def entry_for(diagnosis: Diagnosis) -> dict[str, Any]:
    """What the cache keeps of a diagnosis."""
    return {
        "v": CACHE_VERSION,
        "state": diagnosis.state,
        "exit_code": diagnosis.exit_code,
        "class": diagnosis.cls,
        "rank": diagnosis.rank,
        "host": diagnosis.host,
        # "no known failure pattern" tells nothing in a table: doctor shows the last lines
        "line": diagnosis.one_line() if diagnosis.cls not in (None, UNKNOWN.name) else None,
    }


def remember(store: Store, record: JobRecord, diagnosis: Diagnosis) -> JobRecord:
    """Keep a final job's diagnosis in the registry; the record with it."""
    entry = entry_for(diagnosis)
    store.update_extra(record.jobkit_id, {CACHE_KEY: entry})
    return record.with_columns({"extra": {**record.extra, CACHE_KEY: entry}})


def with_diagnoses(
    store: Store, records: Sequence[JobRecord], *, limit: int = MAX_NEW_PER_STATUS
) -> list[JobRecord]:
    """The records, each failed final one with its cached diagnosis (computed for at most
    `limit` jobs that have none yet: their logs are scanned once)."""
    shown: list[JobRecord] = []
    budget = limit
    for record in records:
        if record.state in STATUS_STATES and cached(record) is None:
            reads_logs = has_log_files(record)
            if reads_logs and budget <= 0:
                shown.append(record)
                continue
            from jobkit.doctor.classify import diagnose_record  # only when one is needed

            budget -= reads_logs
            # unreadable logs: status shows no diagnosis; `jobkit doctor` says why
            with contextlib.suppress(OSError, ValueError, UnicodeError):
                record = remember(store, record, diagnose_record(record))
        shown.append(record)
    return shown


def has_log_files(record: JobRecord) -> bool:
    """Whether any of the job's log files or its run folder exists (an array's `{task}`
    path: any task's), i.e. whether diagnosing it means reading logs."""
    rank_file = record.extra.get("rank_file")
    patterns = [record.log_paths.get(key) for key in ("out", "err", "run_dir")]
    if isinstance(rank_file, str):
        patterns.append(rank_file.replace("{rank}", "{task}"))
    for pattern in patterns:
        if not pattern:
            continue
        if "{task}" not in pattern:
            if os.path.exists(pattern):
                return True
        elif glob.glob(glob.escape(pattern).replace("{task}", "*")):
            return True
    return False


def with_diagnosis(data: dict[str, Any], record: JobRecord) -> dict[str, Any]:
    """A record's JSON with its `diagnosis` (the cached one line, or None)."""
    data["diagnosis"] = one_line(record)
    return data


def table_notes(records: Sequence[JobRecord]) -> list[str]:
    """The lines under the status table: `ID  DIAGNOSIS` for each failed job that has one."""
    notes = [(r.jobkit_id, one_line(r)) for r in records if r.state in STATUS_STATES]
    shown = [f"{job}  {line}" for job, line in notes if line]
    if not shown:
        return []
    return ["", "diagnosis (jobkit doctor ID for the lines and the fix):", *shown]
