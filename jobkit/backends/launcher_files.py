"""What the local and ssh backends share: starting the launcher detached, adopting it after
a lost `jobkit submit`, stopping it, and the LauncherJobs base class.

The launcher (templates/ssh, one script for both) runs on this machine in its own session.
It writes `$JOBKIT_RUN_DIR/exit_code` before it exits. `jobkit cancel` leaves a `cancelled`
file in jobkit's job folder. From the launcher's pid and start time (recorded at submit)
and these two files, launcher_state.observe() tells the job's state without asking anyone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from jobkit.backends import chain_wait, processes, slots
from jobkit.backends.base import (
    FROZEN_CODE,
    JOB_NOTIFY,
    Backend,
    Observation,
    SubmitRequest,
    TrackedJob,
)
from jobkit.backends.launcher_state import (
    CANCELLED_FILE,
    LAUNCHER_PID_FILE,
    launched_here,
    launcher_alive,
    observe,
)
from jobkit.core import private
from jobkit.core.conventions import log_stem, logs_folder
from jobkit.core.errors import SchedulerError
from jobkit.core.run_files import read_exit_file

if TYPE_CHECKING:
    from jobkit.backends.honours import How
    from jobkit.backends.waiting import Explanation, WaitInfo
    from jobkit.spec.schema import JobSpec


# Run in a new session (start_new_session): starts the launcher, prints its pid and exits
# at once, so the launcher is nobody's child here and outlives `jobkit submit`. A Python
# helper rather than `bash -c 'cmd &'`: bash makes background commands ignore SIGINT. An
# ignored SIGINT/SIGQUIT inherited from whoever ran jobkit (a script's `jobkit submit ... &`)
# is reset too, so that the launcher and the program can be stopped.
_DETACH = """
import os, signal, subprocess, sys
for number in (signal.SIGINT, signal.SIGQUIT):
    signal.signal(number, signal.SIG_DFL)
out, err, *argv = sys.argv[1:]
flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT  # 0600: the job's output is its owner's
try:
    with open(os.open(out, flags, 0o600), "ab") as out_file, \
            open(os.open(err, flags, 0o600), "ab") as err_file:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_file, stderr=err_file)
except OSError as error:
    print(error, file=sys.stderr, flush=True)
    os._exit(1)
print(child.pid, flush=True)
os._exit(0)
"""


@dataclass(frozen=True)
class JobFiles:
    """Where a local or ssh job's output goes (docs/design.md, "Log and run folders")."""

    out: Path
    err: Path
    run_dir: Path

    def as_log_paths(self) -> dict[str, str]:
        """The Submitted.log_paths form."""
        return {"out": str(self.out), "err": str(self.err), "run_dir": str(self.run_dir)}


def job_files(spec: JobSpec, job_id: str, workdir: Path) -> JobFiles:
    """`{logs.dir}/{name}-{JOBID}.out|.err` and the run folder, logs.dir relative to workdir."""
    logs_dir = logs_folder(workdir, spec.logs.dir)
    base = log_stem(spec.name, job_id)
    return JobFiles(logs_dir / f"{base}.out", logs_dir / f"{base}.err", logs_dir / base)


@dataclass(frozen=True)
class Launched:
    """The detached launcher: where it runs, its pid, process group and start time."""

    host: str
    pid: int
    pgid: int
    start_time: str

    def as_extra(self) -> dict[str, str]:
        """The Submitted.extra form."""
        return {
            "host": self.host,
            "pid": str(self.pid),
            "pgid": str(self.pgid),
            "start_time": self.start_time,
        }


def launch_detached(
    argv: list[str], *, cwd: Path, files: JobFiles, env: Mapping[str, str]
) -> Launched:
    """Start argv in a new session, stdin from /dev/null, output appended to the job files."""
    private.make_dir(files.out.parent)
    private.make_dir(files.err.parent)
    helper = [sys.executable, "-c", _DETACH, str(files.out), str(files.err), *argv]
    try:
        done = subprocess.run(
            helper,
            cwd=cwd,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SchedulerError(argv, None, "", "", reason=f"cannot start: {err}") from None
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise SchedulerError(argv, done.returncode, done.stdout, done.stderr)
    pid = int(done.stdout.strip())
    info = processes.proc_info(pid)
    # The helper was the session leader: its pid is the group id the launcher still has.
    pgid = info.pgid if info else pid
    return Launched(
        host=socket.gethostname(),
        pid=pid,
        pgid=pgid,
        start_time=info.start_time if info else "",
    )


def find_launched(requests: Mapping[str, SubmitRequest | None]) -> dict[str, str]:
    """Of these submissions (by token), the ones whose launcher started although `jobkit
    submit` stopped before recording it: token -> scheduler id (the jobkit id). The run
    folder tells: the launcher's pid file, or already its exit code."""
    found: dict[str, str] = {}
    for token, request in requests.items():
        if request is None:
            continue
        run_dir = job_files(request.spec, request.jobkit_id, request.workdir).run_dir
        if (run_dir / LAUNCHER_PID_FILE).is_file() or read_exit_file(run_dir) is not None:
            found[token] = request.jobkit_id
    return found


def adopted_extra(request: SubmitRequest) -> dict[str, str]:
    """`extra` for a launcher found by `find_launched`: its run folder and, while it still
    runs, its pid, process group and start time (as `Launched.as_extra`)."""
    run_dir = job_files(request.spec, request.jobkit_id, request.workdir).run_dir
    extra = {"run_dir": str(run_dir)}
    try:
        text = (run_dir / LAUNCHER_PID_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return extra
    info = processes.proc_info(int(text)) if text.isdigit() else None
    if info is not None and info.alive:
        extra.update(
            Launched(socket.gethostname(), info.pid, info.pgid, info.start_time).as_extra()
        )
    return extra


def mark_cancelled(job_dir: Path) -> None:
    """Leave the `cancelled` file in jobkit's job folder (before any signal is sent). A
    file that cannot be written (JOBKIT_HOME's disk is full) does not stop the cancel: the
    launcher, stopped by SIGTERM, still reads as CANCELLED from its exit code."""
    try:
        private.make_dir(job_dir)
        private.write_file(job_dir / CANCELLED_FILE, "cancelled by jobkit\n")
    except OSError:
        pass


def stop_launchers(jobs: Sequence[TrackedJob], grace_s: float) -> list[TrackedJob]:
    """Stop the launchers of `jobs` and everything they started on this machine.

    SIGTERM to each launcher (its trap stops what it started, remote hosts included), then
    SIGKILL after `grace_s` to whatever is left: the launcher's group, its descendants
    (found before the signal, those in groups of their own included) and any process whose
    environment carries the job's JOBKIT_JOB_ID. Returns the jobs whose launcher was still
    running (now marked cancelled). Jobs launched on another machine are left alone and
    named in a SchedulerError raised at the end.
    """
    running: list[TrackedJob] = []
    pgids: list[int] = []
    known: list[processes.ProcInfo] = []
    elsewhere = [job for job in jobs if not launched_here(job)]
    for job in jobs:
        if not launched_here(job):
            continue
        pgid = job.extra.get("pgid", "")
        alive = launcher_alive(job)
        members = processes.group_members(int(pgid)) if pgid.isdigit() else []
        strays = processes.with_environment("JOBKIT_JOB_ID", job.jobkit_id)
        if not alive and not members and not strays:
            continue
        if alive:
            mark_cancelled(job.job_dir)
            running.append(job)
            known.extend(processes.descendants(int(job.extra["pid"])))
        else:
            # No launcher left to stop them in order: ask them directly.
            processes.signal_processes(strays, signal.SIGTERM)
        if pgid.isdigit():
            pgids.append(int(pgid))
        known.extend(members + strays)
    if pgids or known:
        processes.stop_groups(pgids, known, grace_s)
    if elsewhere:
        where = ", ".join(f"{job.jobkit_id} on {job.extra['host']}" for job in elsewhere)
        raise SchedulerError(
            ["kill"], None, "", "", reason=f"launched on another machine: {where}; cancel there"
        )
    return running


class LauncherJobs(Backend):
    """What the local and ssh backends share: both run a launcher on this machine, so a
    job's files, its adoption after a lost `jobkit submit` and its state come from here."""

    template = "ssh/launch.sh.j2"
    sweep_mode = "each"  # one launcher per task; sweep.max_parallel: backends/slots.py
    counts_gpus_at_start = True
    honours: ClassVar[Mapping[str, How]] = {
        "resources.time": "launcher",
        **FROZEN_CODE,
        **JOB_NOTIFY,
    }
    container_runtimes = frozenset(("apptainer", "singularity", "charliecloud", "podman"))

    @classmethod
    def template_context(cls, spec: JobSpec) -> dict[str, Any]:
        """The launcher's hosts (`hosts`, host 0 first) and `local` (false: over ssh)."""
        return {"local": False, "hosts": list(cls.spec_hosts(spec))}

    """The launcher stops the job at resources.time and it ends TIMEOUT (templates/ssh)."""
    unhonoured_hints: ClassVar[Mapping[str, str]] = {
        "scheduler.array": "use sweep: for several runs, or remove the key",
    }
    poll_interval_s = 1.0  # a look at /proc and a file: cheap
    usage_note = (
        "CPU and memory use: not recorded by the launcher (no accounting; the elapsed time is"
        " the registry's)"
    )

    def explain_waiting(self, jobs: Sequence[TrackedJob]) -> dict[str, WaitInfo]:
        """No queue: the launcher starts a job at once (`jobkit why` says so), except a task
        of a sweep waiting for one of its sweep.max_parallel slots."""
        from jobkit.backends.waiting import WaitInfo, WaitReason

        note = f"the {self.name} backend starts a job at once: it never waits in a queue"
        result: dict[str, WaitInfo] = {}
        for job in jobs:
            waits = slots.waiting(job) if launcher_alive(job) else None
            explained = self.describe_reason(waits.reason or "") if waits else None
            if waits is not None and explained is not None:
                result[job.scheduler_id] = WaitInfo(
                    state=waits.state,
                    raw_state=waits.raw_state,
                    reasons=(WaitReason(explained),),
                    no_estimate="tasks start as earlier tasks of the sweep end",
                )
            else:
                result[job.scheduler_id] = WaitInfo(notes=(note,), never_queues=True)
        return result

    @classmethod
    def describe_reason(cls, reason: str, scheduler_id: str = "ID") -> Explanation | None:
        """A task waiting for a free slot of its sweep (backends/slots.py)."""
        from jobkit.backends.waiting import Explanation

        if not reason.startswith("waiting for a free slot"):
            return None
        return Explanation(
            reason,
            "it waits until fewer than sweep.max_parallel tasks of its sweep run",
            "wait, or submit the sweep with a higher sweep.max_parallel",
        )

    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """`bash <script>`, run detached with output appended to the job's .out/.err; behind
        the chain waiter when the job waits for another (backends/chain_wait.py)."""
        return chain_wait.wrap_argv(request, ["bash", str(request.script_path)])

    def dependency_args(self, request: SubmitRequest) -> list[str]:
        """None: the launcher itself waits for the previous stage (chain_wait.py)."""
        return []

    def checked_hosts(self, spec: JobSpec) -> list[tuple[str, list[str] | None]] | None:
        """This machine: the launcher runs here."""
        return [(socket.gethostname(), None)]

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """token -> job id of the launchers that started (see find_launched)."""
        return find_launched(requests)

    def log_paths(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """The job's .out/.err and run folder (the scheduler id is the jobkit id)."""
        return job_files(request.spec, scheduler_id, request.workdir).as_log_paths()

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """Each job's state from its launcher process and exit-code file (no command run)."""
        return {job.scheduler_id: observe(job) for job in jobs}
