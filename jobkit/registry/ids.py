"""Turning what a user typed into tracked jobs: a jobkit id, a prefix of one, or a scheduler id.

record = resolve_job(store, "jk3f9a")          # or "12345", "12345_7", "123.server"
record, task = resolve_job_task(store, "12345_7")   # the array job and task "7"
"""

from __future__ import annotations

from collections.abc import Sequence

from jobkit.backends.registry import backend_names, known_class
from jobkit.core.errors import UsageError
from jobkit.registry.store import JobRecord, Store

MAX_LISTED = 10
"""Candidates shown in an ambiguous-id error."""


class UnknownJobError(UsageError):
    """No tracked job matches the text (exit 2)."""


class AmbiguousJobError(UsageError):
    """Several tracked jobs match the text (exit 2); the message lists them."""

    def __init__(self, text: str, candidates: Sequence[JobRecord]) -> None:
        self.text = text
        self.candidates = list(candidates)
        super().__init__(_ambiguous_message(text, self.candidates))


class SweepNamedError(UsageError):
    """A sweep's id where one job is needed (exit 2); the message lists its tasks."""

    def __init__(self, sweep_id: str, tasks: Sequence[JobRecord]) -> None:
        shown = ", ".join(
            f"task {r.task} {r.jobkit_id}" for r in tasks[:MAX_LISTED] if r.task is not None
        )
        more = len(tasks) - MAX_LISTED
        tail = f" and {more} more" if more > 0 else ""
        super().__init__(
            f"'{sweep_id}' is a sweep of {len(tasks)} jobs: name one task ({shown}{tail});"
            f" `jobkit status {sweep_id}` lists them"
        )


def _describe(record: JobRecord) -> str:
    sched = record.scheduler_id or "-"
    return f"{record.jobkit_id} ({record.name}, {record.backend} {sched})"


def _ambiguous_message(text: str, candidates: Sequence[JobRecord]) -> str:
    shown = ", ".join(_describe(r) for r in candidates[:MAX_LISTED])
    more = len(candidates) - MAX_LISTED
    tail = f" and {more} more" if more > 0 else ""
    return f"job id '{text}' is ambiguous: {shown}{tail}; give more of the jobkit id"


def resolve_job_task(store: Store, text: str) -> tuple[JobRecord, str | None]:
    """The one job `text` names, and the array task it names (`123_4` -> "4"), if any.

    Raises UnknownJobError (`no tracked job 'X'`) or AmbiguousJobError (lists candidates).
    """
    wanted = text.strip()
    if not wanted:
        raise UnknownJobError("no tracked job ''")
    matches = store.find(wanted) or _find_task(store, wanted)
    if not matches:
        raise UnknownJobError(f"no tracked job '{wanted}'")
    if len(matches) > 1:
        sweeps = {r.sweep_id for r in matches}
        if sweeps == {wanted}:
            raise SweepNamedError(wanted, matches)
        raise AmbiguousJobError(wanted, matches)
    record = matches[0]
    return record, _task_of(record, wanted)


def resolve_job(store: Store, text: str) -> JobRecord:
    """The one job `text` names (see resolve_job_task)."""
    return resolve_job_task(store, text)[0]


def resolve_jobs(store: Store, texts: Sequence[str], *, last: bool = False) -> list[JobRecord]:
    """Jobs named on a command line, in order, without duplicates; `--last` adds the newest."""
    records: list[JobRecord] = []
    if last:
        newest = store.newest()
        if newest is None:
            raise UnknownJobError("--last: no tracked jobs yet")
        records.append(newest)
    for text in texts:
        record = resolve_job(store, text)
        if all(r.jobkit_id != record.jobkit_id for r in records):
            records.append(record)
    return records


def _task_of(record: JobRecord, text: str) -> str | None:
    """The array task in `text` when it names a task of this array job, in the syntax of the
    job's backend (Backend.split_task_id: `123_4`, `123[4]`, `123.4`)."""
    if not record.is_array or text == record.jobkit_id or text == record.scheduler_id:
        return None
    found = known_class(record.backend)
    return found.split_task_id(text)[1] if found else None


def with_last(store: Store, texts: Sequence[str], last: bool) -> list[str]:
    """The ids typed, `--last` first as the last submission: the newest job's id, or its
    sweep's id when it is a task of one as the sweep submitted it (a 1,000-task sweep is one
    submission, so `cancel --last` cancels all of it and `report --last` compares its tasks);
    a later attempt of one task (`jobkit retry`, a resubmission) is that task alone."""
    if not last:
        return list(texts)
    newest = store.newest()
    if newest is None:
        raise UnknownJobError("--last: no tracked jobs yet")
    whole_sweep = newest.sweep_id is not None and newest.attempt == 1
    return [newest.sweep_id if whole_sweep and newest.sweep_id else newest.jobkit_id, *texts]


def _find_task(store: Store, text: str) -> list[JobRecord]:
    """Array jobs `text` names a task of in a backend's own task syntax that the registry's
    lookup does not read (an installed backend's: Backend.split_task_id)."""
    for name in backend_names():
        found = known_class(name)
        job, task = found.split_task_id(text) if found else (text, None)
        if task is not None and job != text:
            matches = [record for record in store.find(job) if record.backend == name]
            if matches:
                return matches
    return []
