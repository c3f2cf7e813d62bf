"""A run outlives its jobs: the next attempt of a run whose job the scheduler did not requeue.

    reason = why_resubmit(record, notes)          # pure: should this ended job go on?
    done = resubmit_ended(store, before, after)   # after a refresh: the decision, then submit
    new = resubmit(store, record, why="was preempted")   # attempt N+1 (`jobkit retry` too)

An attempt is a job row with the run's `run_id` and its number; a later attempt reuses the
first attempt's run folder (so the trainer resumes from its checkpoints) and JOBKIT_RUN_ID
(render/attempt.py). docs/runs.md says when jobkit resubmits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.backends.registry import known_class
from jobkit.core.conventions import FINISHED_FILE, REQUEUE_REFUSED_FILE
from jobkit.core.errors import JobkitError
from jobkit.core.lifecycle import StateSource
from jobkit.core.states import State
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store
from jobkit.render.attempt import Attempt

if TYPE_CHECKING:
    from jobkit.backends.base import After

__all__ = ["Attempt", "Resubmission", "RunNotes", "resubmit", "resubmit_ended", "why_resubmit"]

DEFAULT_MAX_ATTEMPTS = 5
"""scheduler.max_attempts when a stored spec predates the key."""


def accounting_sources(backend: str) -> frozenset[str]:
    """Sources that speak of a job that left the queue (the backend's accounting_sources and
    the exit-code file): a PREEMPTED job they report is over (a preempted job the scheduler
    requeued is QUEUED in its queue instead)."""
    found = known_class(backend)
    own = found.accounting_sources if found else frozenset()
    return own | {StateSource.EXIT_FILE.value}


_NOTE_MAX_CHARS = 300
CLAIMED = "(being submitted)"
"""extra['resubmitted_as'] while the next attempt is being submitted."""
RETRY_WAIT_S = 30.0
"""How long a `jobkit retry` that lost the claim waits to name the attempt the winner started."""


@dataclass(frozen=True)
class RunNotes:
    """What a job's run folder says about its end."""

    finished: bool
    """The program noted that its work is complete (`finished`)."""
    requeue_refused: str | None
    """The script's `requeue-refused` note (`JOB_ID why`), or None."""

    @classmethod
    def read(cls, run_dir: str | None) -> RunNotes:
        """The notes in `run_dir` (none when there is no such folder)."""
        if not run_dir:
            return cls(False, None)
        folder = Path(run_dir)
        try:
            with open(folder / REQUEUE_REFUSED_FILE, encoding="utf-8", errors="replace") as f:
                refused: str | None = f.readline(_NOTE_MAX_CHARS).strip() or None
        except OSError:
            refused = None
        return cls((folder / FINISHED_FILE).exists(), refused)


@dataclass(frozen=True)
class Resubmission:
    """An ended attempt and the next one jobkit submitted for its run."""

    previous: JobRecord
    record: JobRecord
    why: str

    def line(self) -> str:
        """`jobkit: jkABC (123) was preempted; resubmitted as attempt 2: jkDEF (130)`."""
        old, new = self.previous, self.record
        return (
            f"jobkit: {old.jobkit_id} ({old.scheduler_id or '-'}) {self.why}; resubmitted as"
            f" attempt {new.attempt}: {new.jobkit_id} ({new.scheduler_id or '-'})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "previous": self.previous.jobkit_id,
            "jobkit_id": self.record.jobkit_id,
            "scheduler_id": self.record.scheduler_id,
            "run_id": self.record.run_key,
            "attempt": self.record.attempt,
            "why": self.why,
        }


def run_folder(record: JobRecord) -> str | None:
    """The job's run folder (a sweep task's: its own, the array's `{task}` filled in)."""
    found = record.run_dir
    if found and record.task is not None:
        return found.replace("{task}", record.task)
    return found


def max_attempts(record: JobRecord) -> int:
    """The run's scheduler.max_attempts (1: never resubmitted)."""
    value = record.spec.get("scheduler", {}).get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    return int(value) if isinstance(value, int) else DEFAULT_MAX_ATTEMPTS


def has_ended(record: JobRecord) -> bool:
    """True once the job will not run again: a final state, or PREEMPTED as accounting
    reports it (the scheduler cancelled it rather than requeueing it)."""
    if record.is_final:
        return True
    if record.state != State.PREEMPTED.value:
        return False
    source = record.state_source
    return getattr(source, "value", source) in accounting_sources(record.backend)


def why_resubmit(record: JobRecord, notes: RunNotes, *, cancelled_by_user: bool) -> str | None:
    """Why this attempt's run should go on as a new job, or None (pure; docs/runs.md).

    Only with scheduler.requeue on, fewer than scheduler.max_attempts attempts so far, a job
    that has ended, the program not finished and no `jobkit cancel`: (a) it was preempted
    (and not requeued) or its node failed; (b) it asked to be requeued (exit 75 or the
    marker) and its script noted that `scontrol requeue` failed.
    """
    if not record.spec.get("scheduler", {}).get("requeue", False):
        return None
    if record.attempt >= max_attempts(record) or cancelled_by_user:
        return None
    if not has_ended(record) or notes.finished:
        return None
    if record.state == State.PREEMPTED.value:
        return "was preempted"
    if record.state == State.NODE_FAIL.value:
        return "ended with NODE_FAIL"
    if notes.requeue_refused and record.scheduler_id:
        job_id, _, why = notes.requeue_refused.partition(" ")
        if job_id == record.scheduler_id:
            return f"could not be requeued ({why or 'requeue refused'})"
    return None


def cancelled_by_user(store: Store, record: JobRecord) -> bool:
    """Whether `jobkit cancel` stopped this job (its history says so)."""
    if record.state_source == StateSource.CANCEL:
        return True
    return any(change.source == StateSource.CANCEL for change in store.history(record.jobkit_id))


def is_latest_attempt(store: Store, record: JobRecord) -> bool:
    """True when no later attempt of the record's run exists (nor was started from it)."""
    if record.extra.get("resubmitted_as"):
        return False
    return all(other.attempt <= record.attempt for other in store.attempts(record.run_key))


def claim(store: Store, record: JobRecord) -> bool:
    """Mark the ended row as being resubmitted, unless another jobkit process (a `status` and
    a `watch` at once) already did: True for the one process that goes on."""
    return store.claim_extra(record.jobkit_id, "resubmitted_as", CLAIMED)


def retry_once(
    store: Store,
    record: JobRecord,
    *,
    why: str,
    after: tuple[After, ...] = (),
    keep_broken: bool = False,
) -> JobRecord:
    """Attempt N+1 of an ended row's run (`jobkit retry`), started by exactly one of any
    number of concurrent callers: the one whose atomic claim on the row succeeds (as for
    `resubmit_ended`). The others raise JobkitError naming the attempt that one started. A
    failed submission releases the claim (its FAILED row stays, as the run's newest)."""
    if not claim(store, record):
        raise JobkitError(already_retried(store, record))
    try:
        return resubmit(store, record, why=why, after=after, keep_broken=keep_broken)
    except BaseException:
        store.update_extra(record.jobkit_id, {"resubmitted_as": None})
        raise


def already_retried(store: Store, record: JobRecord, *, wait_s: float = RETRY_WAIT_S) -> str:
    """`jkA (123) was already retried: attempt 2 is jkB (130), QUEUED`: the line for a retry
    that lost the claim. Waits (at most `wait_s`) for the winner's row to appear."""
    label = f"{record.jobkit_id} ({record.scheduler_id or '-'})"
    deadline = time.monotonic() + wait_s
    while True:
        later = [r for r in store.attempts(record.run_key) if r.attempt > record.attempt]
        if later:
            new = later[0]
            return (
                f"{label} was already retried: attempt {new.attempt} is {new.jobkit_id}"
                f" ({new.scheduler_id or '-'}), {new.state}"
            )
        if store.get(record.jobkit_id).extra.get("resubmitted_as") is None:
            return f"{label}: another jobkit retry of it failed just now (see `jobkit status`)"
        if time.monotonic() >= deadline:
            return f"{label} is being retried by another jobkit process"
        time.sleep(0.2)


def resubmit(
    store: Store,
    record: JobRecord,
    *,
    why: str,
    after: tuple[After, ...] = (),
    keep_broken: bool = False,
) -> JobRecord:
    """Submit attempt N+1 of the record's run and return its row.

    Same spec (a sweep task on an array backend: scheduler.array = that task only), same
    run folder and JOBKIT_RUN_ID, same sweep and task; the site templates it was rendered
    with. The ended row notes `resubmitted_as` and a history line saying why. `after`: the
    jobs it waits for (a chain's stage re-linked, chain/relink.py).
    """
    from jobkit.backends.registry import get_backend
    from jobkit.manager.submit import plan_submission, submit
    from jobkit.provenance.record import recorded_code
    from jobkit.spec.schema import JobSpec

    run_dir = run_folder(record)
    if not run_dir or "{task}" in run_dir:
        raise JobkitError(
            f"{record.jobkit_id}: its run folder is not known, so no later attempt can reuse it"
        )
    data = json.loads(record.spec_json)
    backend = get_backend(record.backend)
    if record.task is not None and backend.sweep_mode == "array":
        data.setdefault("scheduler", {})["array"] = record.task
    spec = JobSpec.model_validate(data)
    template_dir = record.extra.get("template_dir")
    number = record.attempt + 1
    plan = plan_submission(
        spec,
        workdir=record.workdir,
        template_dir=Path(template_dir) if template_dir else None,
        attempt=Attempt(run_id=Path(run_dir).name, run_dir=run_dir, number=number),
    )
    plan = replace(
        plan, code=recorded_code(record.job_dir), after=after, keep_broken=keep_broken
    )  # the run's snapshot: docs/provenance.md
    if "@" in record.backend:  # on a cluster over ssh (`slurm@cluster`): docs/remote.md
        plan = replace(plan, backend=record.backend)
    new = submit(
        store,
        plan,
        run_id=record.run_key,
        attempt=number,
        sweep_id=record.sweep_id,
        task=record.task,
    )
    store.update_extra(record.jobkit_id, {"resubmitted_as": new.jobkit_id})
    _note(store, record, f"{why}; resubmitted as attempt {number}: {new.jobkit_id}")
    return new


def _note(store: Store, record: JobRecord, reason: str) -> None:
    """A history line on the ended row (its state unchanged) saying what jobkit did."""
    store.add_note(record, reason)


def changed_rows(before: Sequence[JobRecord], after: Sequence[JobRecord]) -> list[JobRecord]:
    """The rows of `after` whose state or its source differ from `before` (same order)."""
    if len(before) == len(after):  # a refresh's result: the same jobs, unchanged ones as is
        changed: list[JobRecord] = []
        for was, now in zip(before, after, strict=True):
            if now is was:
                continue
            if now.jobkit_id != was.jobkit_id:
                break  # another order: compared by id below
            if (now.state, now.state_source) != (was.state, was.state_source):
                changed.append(now)
        else:
            return changed
    old = {r.jobkit_id: (r.state, r.state_source) for r in before}
    return [r for r in after if old.get(r.jobkit_id) != (r.state, r.state_source)]


def resubmit_ended(
    store: Store,
    before: Sequence[JobRecord],
    after: Sequence[JobRecord],
    *,
    on_error: Callable[[JobRecord, JobkitError], None] | None = None,
) -> list[Resubmission]:
    """After a refresh: resubmit each run whose latest attempt ended in this refresh and
    asked to go on (`why_resubmit`). Only rows that changed are looked at, so a status of
    thousands of jobs costs nothing more when none qualifies. A submission that fails is
    passed to `on_error` (default: raised)."""
    done: list[Resubmission] = []
    for record in changed_rows(before, after):
        if not has_ended(record) or not record.spec_json:
            continue
        if not record.spec.get("scheduler", {}).get("requeue", False):
            continue  # the cheap test first: most jobs never go on
        notes = RunNotes.read(run_folder(record))
        why = why_resubmit(record, notes, cancelled_by_user=cancelled_by_user(store, record))
        if why is None or not is_latest_attempt(store, record) or not claim(store, record):
            continue
        try:
            done.append(Resubmission(record, resubmit(store, record, why=why), why))
        except JobkitError as err:
            store.update_extra(record.jobkit_id, {"resubmitted_as": None})
            _note(store, record, f"{why}; its next attempt could not be submitted: {err.show()}")
            if on_error is None:
                raise
            on_error(record, err)
    return done
