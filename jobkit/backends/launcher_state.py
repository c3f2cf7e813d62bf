"""A launcher job's state read from its files (local and ssh, `jobkit run --here`): the
launcher's pid and start time, `exit_code` in the run folder, `cancelled` in jobkit's job
folder; no scheduler is asked (launcher_files.py starts and stops the launcher)."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import replace
from pathlib import Path

from jobkit.backends import chain_wait, processes, slots
from jobkit.core.conventions import EXIT_CODE_FILE as EXIT_FILE
from jobkit.core.conventions import REQUEUE_EXIT_CODE, TIMED_OUT_FILE
from jobkit.core.records import Observation, TrackedJob
from jobkit.core.run_files import read_exit_file
from jobkit.core.states import State

CANCELLED_FILE = "cancelled"
"""In jobkit's job folder: written by `jobkit cancel` before it signals the launcher."""
LAUNCHER_PID_FILE = "launcher.pid"
"""The launcher writes its pid into the run folder as it starts (templates/ssh)."""
_STOP_SIGNALS = {129: "SIGHUP", 130: "SIGINT", 143: "SIGTERM"}


def launched_here(job: TrackedJob) -> bool:
    """True when the job's launcher was started on this machine (its pid means something
    here). A registry shared between machines (a home folder on NFS) holds jobs of others."""
    host = job.extra.get("host")
    return not host or host == socket.gethostname()


def launcher_alive(job: TrackedJob) -> bool:
    """True while the job's launcher process (the one started at submit) is still running."""
    pid = job.extra.get("pid", "")
    if not pid.isdigit():
        return False
    return processes.is_same_process(int(pid), job.extra.get("start_time") or None)


def job_hosts(job: TrackedJob) -> str | None:
    """The hosts the job runs on, comma-separated: ssh's `hosts`, or the launcher's host."""
    hosts = job.extra.get("hosts")
    if hosts:
        try:
            names = json.loads(hosts)
        except ValueError:
            names = None
        if isinstance(names, list) and names:
            return ",".join(str(name) for name in names)
    return job.extra.get("host") or None


def elapsed_s(job: TrackedJob, *, running: bool, now: float | None = None) -> float | None:
    """Seconds from the launcher's start (its pid file, written as it starts) to its end (its
    exit-code file), or to now while it runs; None when the run folder does not tell."""
    run_dir = job.extra.get("run_dir")
    if not run_dir:
        return None
    try:
        start = os.stat(Path(run_dir) / LAUNCHER_PID_FILE).st_mtime
    except OSError:
        return None
    if running:
        end = time.time() if now is None else now
    else:
        try:
            end = os.stat(Path(run_dir) / EXIT_FILE).st_mtime
        except OSError:
            return None
    return max(0.0, end - start)


def observe(job: TrackedJob) -> Observation:
    """The state of a local or ssh job from its launcher process and files."""
    observed = _observe_state(job)
    if observed.source == "pidfile" and observed.state != State.RUNNING:
        return observed  # not run here, or ended without an exit code: nothing to time
    running = observed.state == State.RUNNING
    return replace(observed, nodes=job_hosts(job), elapsed_s=elapsed_s(job, running=running))


def _observe_state(job: TrackedJob) -> Observation:
    if not launched_here(job):
        return Observation(
            State.UNKNOWN,
            "elsewhere",
            "pidfile",
            reason=f"its launcher runs on {job.extra['host']}: ask there",
        )
    if launcher_alive(job):
        waits = slots.waiting(job) or chain_wait.waiting(job)
        return waits or Observation(State.RUNNING, "running", "pidfile")
    if (never := chain_wait.never_started(job)) is not None:
        return never  # its own note: the run folder may hold another attempt's exit code
    # the run folder is the run's: a code another attempt wrote is not this job's
    code = read_exit_file(job.extra.get("run_dir"), job.scheduler_id)
    cancelled = (job.job_dir / CANCELLED_FILE).exists()
    if code is None:
        if cancelled:
            return Observation(
                State.CANCELLED, "killed", "pidfile", reason="cancelled by jobkit (no exit code)"
            )
        return Observation(State.FAILED, "vanished", "pidfile", reason=_vanished_why(job))
    raw = f"exit {code}"
    if code == 0:
        return Observation(State.SUCCEEDED, raw, "exit-file", exit_code=0)
    run_dir = job.extra.get("run_dir")
    if run_dir and (Path(run_dir) / TIMED_OUT_FILE).exists() and not cancelled:
        return Observation(
            State.TIMEOUT,
            raw,
            "exit-file",
            exit_code=code,
            reason="stopped by the launcher at its time limit (resources.time)",
        )
    if cancelled:
        return Observation(
            State.CANCELLED, raw, "exit-file", exit_code=code, reason="cancelled by jobkit"
        )
    if code in _STOP_SIGNALS:
        return Observation(
            State.CANCELLED,
            raw,
            "exit-file",
            exit_code=code,
            signal=code - 128,
            reason=f"stopped by {_STOP_SIGNALS[code]}",
        )
    reason = None
    if code == REQUEUE_EXIT_CODE:
        reason = (
            f"the program asked to be requeued (exit {REQUEUE_EXIT_CODE}); this backend does"
            " not requeue"
        )
    return Observation(State.FAILED, raw, "exit-file", exit_code=code, reason=reason)


def _vanished_why(job: TrackedJob) -> str:
    """Why a launcher left no exit code: its run folder is gone, the folder's file system is
    full (the launcher could not write), or nothing here tells (it was killed)."""
    run_dir = job.extra.get("run_dir")
    if not run_dir:
        return "launcher vanished"
    folder = Path(run_dir)
    place = next((p for p in (folder, *folder.parents) if p.is_dir()), None)
    try:
        full = place is not None and os.statvfs(place).f_bavail == 0
    except OSError:
        full = False
    if full:
        return (
            f"launcher ended without an exit code: No space left on device in {place}"
            " (its file system is full)"
        )
    if place != folder and _was_made(folder):
        return (
            f"run folder {folder} is gone (deleted, or its file system is not mounted here):"
            " the job's exit code and logs went with it"
        )
    return "launcher vanished"


def _was_made(run_dir: Path) -> bool:
    """True when the launcher said it made `run_dir`: its first lines in the job's .out
    (`jobkit: master ..., run folder DIR`). A folder never made is no folder gone."""
    try:
        with open(f"{run_dir}.out", "rb") as out:
            head = out.read(1 << 16)
    except OSError:
        return False
    return f", run folder {run_dir}\n".encode() in head
