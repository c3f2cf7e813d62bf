"""One Observation per Grid Engine job, no command run here: qstat -xml's rows while
Grid Engine knows the job, its qacct records once it ended, the run folder's exit_code file
between the two, and jobkit's own `cancelled` note."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from jobkit.backends.batch import exit_file_observation
from jobkit.backends.sge.parse import FinishedRun, LiveJob, job_number, job_task, parse_qstat_xml
from jobkit.backends.sge.states import (
    KILLED_BY_SIGNAL_BASE,
    normalize_qacct,
    normalize_qstat_state,
)
from jobkit.core.errors import SchedulerError
from jobkit.core.records import Observation, TrackedJob
from jobkit.core.run_files import read_exit_file
from jobkit.core.states import State

CANCELLED_FILE = "cancelled"
"""Left in jobkit's job folder by `cancel`: qacct then reads as CANCELLED, not FAILED."""


def parse_live(argv: list[str], stdout: str) -> list[LiveJob]:
    """qstat -xml's rows; a malformed reply is a SchedulerError (no job changes state)."""
    try:
        return parse_qstat_xml(stdout)
    except Exception as err:  # a malformed reply: no job changes state
        raise SchedulerError(
            argv, 0, stdout[:2000], "", reason=f"unreadable qstat -xml: {err}"
        ) from None


def live_observation(rows: Sequence[LiveJob]) -> Observation:
    """A job qstat shows (an array's rows: running wins over held over queued)."""
    states = [normalize_qstat_state(row.letters) for row in rows]
    order = [State.RUNNING, State.SUSPENDED, State.HELD, State.QUEUED, State.UNKNOWN]
    state = min(states, key=order.index)
    hosts = sorted({row.queue.split("@", 1)[-1] for row in rows if row.queue and "@" in row.queue})
    raw = ",".join(sorted({row.letters for row in rows}))
    reason = None
    if any("E" in row.letters for row in rows):
        reason = "in Grid Engine's error state (Eqw): `qstat -j ID` says why; qmod -cj clears it"
    starts = [row.started_at for row in rows if row.started_at is not None]
    elapsed = max(time.time() - min(starts), 0.0) if state == State.RUNNING and starts else None
    return Observation(
        state, raw, "qstat", reason=reason, nodes=",".join(hosts) or None, elapsed_s=elapsed
    )


def cancelled_file(job: TrackedJob) -> Path:
    """jobkit's note that it cancelled the job: `cancelled`, or `cancelled.TASK` for a task."""
    task = job_task(job.scheduler_id)
    return job.job_dir / (f"{CANCELLED_FILE}.{task}" if task else CANCELLED_FILE)


def runs_of(job: TrackedJob, runs: Mapping[str, list[FinishedRun]]) -> list[FinishedRun]:
    """The qacct records of a job (every task of an array), or of one task."""
    found = runs.get(job_number(job.scheduler_id), [])
    task = job_task(job.scheduler_id)
    return found if task is None else [run for run in found if run.task == task]


def finished_observation(job: TrackedJob, runs: Sequence[FinishedRun]) -> Observation | None:
    """A job qstat no longer shows: from qacct (every array task), else the exit file."""
    cancelled = cancelled_file(job).exists()
    task = job_task(job.scheduler_id)
    if not runs:  # accounting not written yet: the run folder, else the vanished grace
        found = exit_file_observation(job, "qacct has no record yet; exit code from the run folder")
        if found is not None and cancelled:
            return replace(found, state=State.CANCELLED)
        if found is None and cancelled and task is not None:
            # A task deleted before it started leaves no accounting record at all.
            return Observation(
                State.CANCELLED, "deleted", "qacct", reason="cancelled by jobkit (no record)"
            )
        return found
    states = [normalize_qacct(r.failed, r.exit_status, r.deleted or cancelled) for r in runs]
    order = (State.CANCELLED, State.TIMEOUT, State.FAILED)
    worst = next((s for s in order if s in states), State.SUCCEEDED)
    failing = [r for r in runs if r.failed or r.exit_status]
    first = failing[0] if failing else runs[0]
    exit_code = first.exit_status
    whole_array = job.extra.get("array") and task is None
    script_code = (
        None if whole_array else read_exit_file(job.extra.get("run_dir"), job.scheduler_id)
    )
    if script_code is not None and worst in (State.SUCCEEDED, State.FAILED):
        # Each host of a parallel job has its record (qrsh -inherit's too): the script's own
        # exit code says how the job ended.
        exit_code = script_code
        worst = State.SUCCEEDED if script_code == 0 else State.FAILED
    reason = f"qacct failed {first.failed_text}" if first.failed else None
    elapsed = [r.wallclock_s for r in runs if r.wallclock_s is not None]
    hosts = sorted({r.host for r in runs if r.host})
    signal = None
    if exit_code is not None and exit_code > KILLED_BY_SIGNAL_BASE:
        signal = exit_code - KILLED_BY_SIGNAL_BASE
    return Observation(
        worst,
        f"failed={first.failed_text or 0} exit_status={first.exit_status}",
        "qacct",
        exit_code=exit_code,
        signal=signal,
        reason=reason,
        nodes=",".join(hosts) or None,
        elapsed_s=max(elapsed) if elapsed else None,
        max_rss=_largest_rss(runs),
        cpu_time=first.cpu,
    )


def _largest_rss(runs: Sequence[FinishedRun]) -> str | None:
    """The largest ru_maxrss of the job's hosts, in Slurm's form (`4504K`): qacct prints
    getrusage's kilobytes as if they were bytes (`4.504KB` is 4504 KB; sge/usage.py)."""
    from jobkit.backends.sge.usage import maxrss_mb

    sizes = [mb for mb in (maxrss_mb(r.max_rss) for r in runs) if mb is not None]
    return f"{round(max(sizes) * 1024)}K" if sizes else None
