"""Submissions whose submitter died, settled (`jobkit status`, `submit`, `cancel` run it
first): a row still SUBMITTING is adopted when the scheduler has its token, failed when its
submit command never ran, and its fate left unknown after LOST_AFTER_S otherwise
(docs/manager.md)."""

from __future__ import annotations

import socket
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from jobkit.backends.base import Backend, SubmitRequest, Submitted
from jobkit.backends.registry import BackendUnavailable, get_backend
from jobkit.core.errors import JobkitError, SchedulerError
from jobkit.core.lifecycle import StateSource
from jobkit.manager.submit import (
    ARRAY_TOKEN,
    SUBMIT_STARTED,
    as_array_task,
    process_start_time,
    request_for,
)
from jobkit.registry.store import SUBMITTING, JobRecord, Store

ORPHAN_AGE_S = 150.0
"""A SUBMITTING row from another host (or without a submitter) is looked for after this."""


LOST_AFTER_S = 300.0
"""A SUBMITTING row that no scheduler knows after this long becomes FAILED."""


def submitter_alive(record: JobRecord) -> bool | None:
    """Whether the process that recorded this intent still runs; None if not knowable here."""
    who = record.extra.get("submitter")
    if not isinstance(who, dict) or who.get("host") != socket.gethostname():
        return None
    pid = who.get("pid")
    if not isinstance(pid, int):
        return None
    started = process_start_time(pid)
    return started is not None and started == who.get("start")


@dataclass(frozen=True)
class Reconciled:
    """What `reconcile_submissions` did."""

    adopted: list[JobRecord]
    lost: list[JobRecord]
    errors: list[JobkitError]


def reconcile_submissions(store: Store, *, now: float | None = None) -> Reconciled:
    """Settle SUBMITTING rows whose submitter is gone: adopt the job or mark it lost.

    A row is looked at once its submitting process has exited (same host), or after
    ORPHAN_AGE_S otherwise. Backends with `find_submissions(tokens, since)` (Slurm: the
    token is in the job's comment) are asked once for all such rows; a found job is
    adopted (state QUEUED, then refreshed as usual). A row nobody knows after
    LOST_AFTER_S becomes FAILED "submission lost". A scheduler error leaves rows as they
    are and is returned, not raised.
    """
    at = time.time() if now is None else now
    orphans: dict[str, list[JobRecord]] = defaultdict(list)
    for record in store.submitting():
        alive = submitter_alive(record) if record.state == SUBMITTING else False
        age = at - record.created_at
        if alive or (alive is None and age < ORPHAN_AGE_S):
            continue
        orphans[record.backend].append(record)
    adopted: list[JobRecord] = []
    lost: list[JobRecord] = []
    errors: list[JobkitError] = []
    for backend_name, records in orphans.items():
        found: dict[str, str] = {}
        try:
            backend = get_backend(backend_name)
            found = _find_submissions(backend, records)
        except (SchedulerError, BackendUnavailable) as err:
            errors.append(err)
            continue
        for record in records:
            scheduler_id = found.get(submission_token(record))
            if scheduler_id is not None:
                adopted.append(_adopt(store, backend, record, scheduler_id))
            elif at - record.created_at >= LOST_AFTER_S and record.state == SUBMITTING:
                lost.append(_give_up(store, backend, record))
    return Reconciled(adopted, lost, errors)


def _give_up(store: Store, backend: Backend, record: JobRecord) -> JobRecord:
    """A submission nobody found: FAILED where a lost reply means a lost job, or where the
    submit command never ran; of unknown fate where the scheduler may have taken it unseen
    (PBS, Grid Engine: `lost_reply_fate_unknown`)."""
    started = (record.job_dir / SUBMIT_STARTED).exists()
    if backend.lost_reply_fate_unknown and started:
        return store.mark_fate_unknown(
            record.jobkit_id,
            "submission reply lost: the scheduler may have accepted it, but no job of its"
            " was found (check qstat; jobkit keeps looking)",
        )
    return store.mark_failed(
        record.jobkit_id,
        "submission lost: jobkit stopped before the scheduler answered, and no job with its"
        " token was found",
    )


def submission_token(record: JobRecord) -> str:
    """The token the row's job was submitted with: its own, or (a sweep task on an "array"
    backend) its sweep's array job's."""
    shared = record.extra.get(ARRAY_TOKEN)
    return shared if isinstance(shared, str) and shared else record.token


def _array_task_row(record: JobRecord) -> bool:
    """A sweep task submitted as one task of its sweep's array job (manager/sweep.py)."""
    return record.task is not None and bool(record.extra.get(ARRAY_TOKEN))


def _submission_request(record: JobRecord) -> SubmitRequest:
    """The request the row's submission sent (a sweep task's: its array job's)."""
    request = request_for(record)
    if _array_task_row(record) and record.sweep_id:
        return replace(request, jobkit_id=record.sweep_id, token=submission_token(record))
    return request


def _find_submissions(backend: Backend, records: Sequence[JobRecord]) -> dict[str, str]:
    """submission token -> scheduler id of the orphaned rows' jobs the backend can find
    (Backend.find_lost: schedulers by token or script path, local and ssh launchers in their
    run folders). The tasks of one array job share one token: it is looked for once."""
    requests: dict[str, SubmitRequest | None] = {}
    for record in records:
        try:
            requests[submission_token(record)] = _submission_request(record)
        except ValueError:
            requests[submission_token(record)] = None  # a spec this jobkit cannot read back
    return backend.find_lost(requests, min(r.created_at for r in records))


def _adopt(store: Store, backend: Backend, record: JobRecord, scheduler_id: str) -> JobRecord:
    """Record the found job as the row's (a sweep task: its own task of the array job
    `scheduler_id`, with that task's id, files and state), source ADOPTED."""
    submitted = Submitted(scheduler_id=scheduler_id, argv=[], log_paths={}, extra={})
    try:
        request = _submission_request(record)
        submitted = replace(
            submitted,
            log_paths=backend.log_paths(request, scheduler_id),
            extra=backend.submit_extra(request, scheduler_id),
        )
    except ValueError:
        pass  # a spec this jobkit cannot read back: adopt without log paths
    if _array_task_row(record):
        submitted = as_array_task(backend, submitted, record.task or "0")
    current = store.get(record.jobkit_id)
    if current.state != SUBMITTING and current.scheduler_id is not None:
        return current
    return store.mark_submitted(
        record.jobkit_id,
        scheduler_id=submitted.scheduler_id,
        argv=[],
        log_paths=submitted.log_paths,
        extra={**submitted.extra, "adopted": True},
        source=StateSource.ADOPTED,
    )
