"""Why Slurm jobs wait (`jobkit why`): ONE squeue (state, reason, start estimate) and ONE
sacct (every run, requeues included: `--duplicates`) for all the jobs asked about.

squeue's StartTime of a pending job is what `squeue --start` shows: the backfill
scheduler's plan, labelled as an estimate wherever it is shown.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from jobkit.backends.base import TrackedJob
from jobkit.backends.slurm.reasons import explain
from jobkit.backends.slurm.states import normalize_slurm_state
from jobkit.backends.waiting import Event, WaitInfo, WaitReason
from jobkit.core.errors import SchedulerError

WHY_SQUEUE_FIELDS = (
    "JobArrayID",
    "ArrayJobID",
    "State",
    "Reason",
    "StartTime",
    "SchedNodes",
    "SubmitTime",
    "EligibleTime",
    "Partition",
    "QOS",
    "Dependency",
)
WHY_SQUEUE_FORMAT = ",".join(f"{name}:|" for name in WHY_SQUEUE_FIELDS)
WHY_SACCT_FIELDS = "JobID,State,Submit,Eligible,Start,End,ExitCode,NodeList,Reason"
NO_TIME = frozenset({"", "N/A", "Unknown", "None", "(null)"})
FAR_ESTIMATE_S = 180 * 86400
"""An estimate further out than this usually means the jobs ahead have no time limit."""


@dataclass(frozen=True)
class QueueRow:
    """One line of the why-squeue: a job or array task Slurm still holds."""

    job_id: str
    base_id: str
    raw_state: str
    reason: str | None
    start: float | None
    sched_nodes: str | None
    submit: float | None
    eligible: float | None
    partition: str | None
    qos: str | None
    dependency: str | None


@dataclass(frozen=True)
class Run:
    """One allocation line of `sacct -D -X`: one run of a job or array task."""

    job_id: str
    raw_state: str
    submit: float | None
    eligible: float | None
    start: float | None
    end: float | None
    exit_code: str
    nodes: str | None


def parse_time(text: str) -> float | None:
    """Epoch seconds of Slurm's local `2024-05-01T12:00:00`; None for Unknown, N/A, None."""
    text = text.strip()
    if text in NO_TIME:
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def _value(text: str) -> str | None:
    text = text.strip()
    return None if text in NO_TIME else text


def parse_why_squeue(stdout: str) -> list[QueueRow]:
    """Rows of `squeue --noheader --array --Format=WHY_SQUEUE_FORMAT`."""
    rows = []
    for line in stdout.splitlines():
        fields = line.split("|")
        if line.startswith("CLUSTER:") or len(fields) < len(WHY_SQUEUE_FIELDS):
            continue
        job, base, state, reason, start, nodes, submit, eligible, part, qos, dep = (
            f.strip() for f in fields[: len(WHY_SQUEUE_FIELDS)]
        )
        rows.append(
            QueueRow(
                job_id=job,
                base_id=base or job.split("_")[0],
                raw_state=state,
                reason=_value(reason),
                start=parse_time(start),
                sched_nodes=_value(nodes),
                submit=parse_time(submit),
                eligible=parse_time(eligible),
                partition=_value(part),
                qos=_value(qos),
                dependency=_value(dep),
            )
        )
    return rows


def parse_why_sacct(stdout: str) -> list[Run]:
    """Allocation lines of `sacct -n -P -D -X --format=WHY_SACCT_FIELDS`, in sacct's order
    (a requeued job's earlier runs come first)."""
    runs = []
    for line in stdout.splitlines():
        fields = line.split("|")
        if line.startswith("CLUSTER:") or len(fields) < 8 or "." in fields[0]:
            continue
        job, state, submit, eligible, start, end, exit_code, nodes = (f.strip() for f in fields[:8])
        runs.append(
            Run(
                job_id=job,
                raw_state=state,
                submit=parse_time(submit),
                eligible=parse_time(eligible),
                start=parse_time(start),
                end=parse_time(end),
                exit_code=exit_code,
                nodes=_value(nodes) if nodes != "None assigned" else None,
            )
        )
    return runs


def timeline(runs: Sequence[Run], array: bool = False) -> tuple[Event, ...]:
    """submitted, eligible, started, ended for each run; a run after the first is a requeue
    (sacct --duplicates keeps one line per run). Array tasks are named in each event."""
    events: list[Event] = []
    seen: dict[str, int] = defaultdict(int)
    for run in runs:
        seen[run.job_id] += 1
        who = f"task {run.job_id.split('_', 1)[1]}: " if array and "_" in run.job_id else ""
        again = seen[run.job_id] > 1
        if run.submit is not None:
            what = "requeued" if again else "submitted"
            note = f"run {seen[run.job_id]} queued" if again else ""
            events.append(Event(run.submit, what, f"{who}{note}".rstrip(": ")))
        if run.eligible is not None:
            events.append(Event(run.eligible, "eligible", who.rstrip(": ")))
        if run.start is not None:
            where = f"on {run.nodes}" if run.nodes else ""
            events.append(Event(run.start, "started", f"{who}{where}".rstrip(": ")))
        if run.end is not None and run.start is not None:
            state = run.raw_state.split()[0] if run.raw_state else "?"
            events.append(Event(run.end, "ended", f"{who}{state}, exit {run.exit_code}"))
    events.sort(key=lambda event: event.at)
    return tuple(events)


def _queue_timeline(rows: Sequence[QueueRow]) -> tuple[Event, ...]:
    """What squeue alone tells (accounting off): submitted, eligible, started."""
    events: list[Event] = []
    for row in rows:
        if row.submit is not None:
            events.append(Event(row.submit, "submitted"))
        if row.eligible is not None:
            events.append(Event(row.eligible, "eligible"))
        if row.start is not None and row.raw_state != "PENDING":
            events.append(Event(row.start, "started"))
    return tuple(sorted(set(events), key=lambda event: event.at))


def _reason(row: QueueRow, job: str, array: bool) -> WaitReason:
    facts = {"job": job, "partition": row.partition, "qos": row.qos}
    found = explain(row.reason or "None", facts)
    if row.dependency and found.code.startswith("Dependency"):
        found = replace(found, meaning=f"{found.meaning}: {row.dependency}")
    task = row.job_id.split("_", 1)[1] if array and "_" in row.job_id else None
    return WaitReason(found, task, row.start, row.sched_nodes)


def wait_info(
    job: TrackedJob,
    rows: Sequence[QueueRow],
    runs: Sequence[Run],
    accounting: bool,
) -> WaitInfo:
    """One job's answer from its squeue rows and sacct runs (pure)."""
    array = bool(job.extra.get("array"))
    pending = [r for r in rows if r.raw_state == "PENDING"]
    reasons = tuple(_reason(r, r.base_id, array) for r in pending)
    notes: list[str] = []
    if any(r.start_estimate and r.start_estimate - time.time() > FAR_ESTIMATE_S for r in reasons):
        notes.append(
            "an estimate this far out usually means jobs ahead of it have no time limit, so the"
            " scheduler cannot plan"
        )
    if not accounting:
        notes.append("Slurm accounting is off: the timeline is squeue's only")
    events = timeline(runs, array) if runs else _queue_timeline(rows)
    if pending:
        raw = pending[0].raw_state
        reason = pending[0].reason
    elif rows:
        raw, reason = rows[0].raw_state, rows[0].reason
    elif runs:
        raw, reason = runs[-1].raw_state, None
    else:
        return WaitInfo(notes=("Slurm knows no such job (any more)", *notes))
    return WaitInfo(
        state=normalize_slurm_state(raw, reason=reason),
        raw_state=raw,
        reasons=reasons,
        timeline=events,
        notes=tuple(notes),
    )


def explain_waiting(
    jobs: Sequence[TrackedJob], cluster_args: Sequence[str], timeout: float
) -> dict[str, WaitInfo]:
    """WaitInfo of each job (of one cluster) by scheduler_id: one squeue, one sacct."""
    from jobkit.backends.slurm.parse import ACCOUNTING_DISABLED, SlurmId

    ids = {job.scheduler_id: SlurmId.parse(job.scheduler_id) for job in jobs}
    numbers = {key: slurm_id.base for key, slurm_id in ids.items()}  # a task: its array's
    rows: dict[str, list[QueueRow]] = defaultdict(list)
    asked = list(dict.fromkeys(numbers.values()))
    for row in parse_why_squeue(_squeue(asked, cluster_args, timeout)):
        rows[row.base_id].append(row)
    runs: dict[str, list[Run]] = defaultdict(list)
    accounting = True
    try:
        for run in parse_why_sacct(_sacct(asked, cluster_args, timeout)):
            runs[run.job_id.split("_")[0]].append(run)
    except SchedulerError as err:
        if ACCOUNTING_DISABLED not in (err.stderr + err.stdout).lower():
            raise
        accounting = False
    result = {}
    for job in jobs:
        number, task = numbers[job.scheduler_id], ids[job.scheduler_id].task
        job_rows, job_runs = rows[number], runs[number]
        if task is not None:  # one task (`123_4`): its lines, or the pending range holding it
            job_rows = [r for r in job_rows if _names_task(r.job_id, task)]
            job_runs = [r for r in job_runs if _names_task(r.job_id, task)]
        result[job.scheduler_id] = wait_info(job, job_rows, job_runs, accounting)
    return result


def _names_task(job_id: str, task: str) -> bool:
    """True when squeue's or sacct's `123_4` / `123_[2-5%2]` is (or holds) task `task`."""
    from jobkit.backends.slurm.tasks import task_in_range

    _, sep, tail = job_id.partition("_")
    return bool(sep) and task_in_range(task, tail)


def _squeue(numbers: Sequence[str], cluster_args: Sequence[str], timeout: float) -> str:
    from jobkit.core import proc

    argv = ["squeue", "--noheader", "--array", "--states=all", *cluster_args]
    argv += [f"--jobs={','.join(numbers)}", f"--Format={WHY_SQUEUE_FORMAT}"]
    done = proc.run(argv, timeout=timeout, check=False)
    if done.returncode != 0:
        if "invalid job id" in done.stderr.lower():
            return ""  # every id asked about has left slurmctld's memory
        raise SchedulerError(argv, done.returncode, done.stdout, done.stderr)
    return done.stdout


def _sacct(numbers: Sequence[str], cluster_args: Sequence[str], timeout: float) -> str:
    from jobkit.core import proc

    argv = ["sacct", "--noheader", "--parsable2", "--duplicates", "--allocations"]
    argv += [*cluster_args, f"--jobs={','.join(numbers)}", f"--format={WHY_SACCT_FIELDS}"]
    return proc.run(argv, timeout=timeout).stdout
