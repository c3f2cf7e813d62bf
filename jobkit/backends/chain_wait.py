"""Chains on the local and ssh backends: a stage's launcher waits for the previous stage.

There is no scheduler to hold the job, so the stage is started at submit as a small waiter
(`python -m jobkit.backends.chain_wait`), detached like any launcher. It polls the previous
stage's launcher (pid and start time) and run folder (`exit_code`) once a second; when that
stage ends it either becomes the launcher (exec: same pid, so jobkit tracks one process from
submit to end) or, when the condition can no longer be met, leaves the note `never-started`
in its job folder and exits. Nothing of `jobkit` needs to run meanwhile: a `jobkit submit`
killed with SIGKILL after starting it changes nothing (docs/chains.md).

While it waits, the file `chain-waiting` in the job folder (made before the launch, removed
just before the exec) makes `poll` show the stage QUEUED with the stage it waits for.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from jobkit.backends.base import After, Observation, SubmitRequest, TrackedJob
from jobkit.core.run_files import read_exit_file
from jobkit.core.states import State

WAITING_FILE = "chain-waiting"
"""In the stage's job folder while it waits: the previous stage's id and the condition."""
NEVER_STARTED_FILE = "never-started"
"""In the stage's job folder when it ended without running: one line saying why."""
POLL_S = 1.0


def wrap_argv(request: SubmitRequest, argv: list[str]) -> list[str]:
    """`argv` (the launcher) behind the waiter when the request waits for a stage."""
    if not request.after:
        return argv
    waits: list[str] = []
    for after in request.after:
        facts = after.facts
        waits += [
            "--after",
            ",".join(
                [
                    after.condition,
                    str(facts.get("pid", "")),
                    str(facts.get("start_time", "")),
                    after.scheduler_id,
                    str(facts.get("run_dir", "")),
                ]
            ),
        ]
    module = "jobkit.backends.chain_wait"
    return [sys.executable, "-m", module, "--job-dir", str(request.job_dir), *waits, "--", *argv]


def check_request(request: SubmitRequest, this_host: str) -> None:
    """Refuse a stage this machine cannot wait for: the previous one's launcher runs on
    another host (its pid means nothing here) or was never started by a launcher."""
    from jobkit.core.errors import JobkitError

    for after in request.after:
        host = str(after.facts.get("host", ""))
        if host and host != this_host:
            raise JobkitError(
                f"cannot chain after {after.scheduler_id}: its launcher runs on {host}, and"
                f" a chain's stages start from the machine that runs the previous one"
            )
        if not str(after.facts.get("pid", "")).isdigit() or not after.facts.get("run_dir"):
            raise JobkitError(
                f"cannot chain after {after.scheduler_id}: it has no launcher of this"
                " machine to wait for (chain local and ssh stages only after each other)"
            )


def prepare(request: SubmitRequest) -> None:
    """Refuse what this machine cannot wait for (`check_request`); make the `chain-waiting`
    file before the launch (so poll says QUEUED at once)."""
    if request.after:
        import socket

        check_request(request, socket.gethostname())
        request.job_dir.mkdir(parents=True, exist_ok=True)
        names = ", ".join(f"{a.scheduler_id} ({a.condition})" for a in request.after)
        (request.job_dir / WAITING_FILE).write_text(names + "\n")


def waiting(job: TrackedJob) -> Observation | None:
    """QUEUED while the stage's waiter runs (call only while its process is alive)."""
    try:
        names = (job.job_dir / WAITING_FILE).read_text().strip()
    except OSError:
        return None
    return Observation(State.QUEUED, "waiting", "pidfile", reason=f"waits for {names} to end")


def never_started(job: TrackedJob) -> Observation | None:
    """CANCELLED with the waiter's reason when the stage ended without running."""
    try:
        why = (job.job_dir / NEVER_STARTED_FILE).read_text().strip()
    except OSError:
        return None
    return Observation(State.CANCELLED, "never started", "pidfile", reason=why or None)


def _start_time(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 and fields[0] not in (b"Z", b"X") else None


def outcome(after: After) -> str | None:
    """ "ok" or "fail" once the previous stage ended; None while its launcher runs. The
    launcher is asked first: a later attempt shares its run's folder, where the exit code
    of the attempt before it stays until this one writes its own (chain/relink.py)."""
    pid = str(after.facts.get("pid", ""))
    started = _start_time(int(pid)) if pid.isdigit() else None
    recorded = str(after.facts.get("start_time", ""))
    if started is not None and started == (recorded or started):  # no start time kept: pid
        return None
    code = read_exit_file(str(after.facts.get("run_dir", "")))
    if code is not None:
        return "ok" if code == 0 else "fail"
    # gone without an exit code: killed, vanished, or itself never started. Its exit code
    # may land a moment after its pid is gone: look once more.
    time.sleep(POLL_S)
    code = read_exit_file(str(after.facts.get("run_dir", "")))
    return "ok" if code == 0 else "fail"


def met(condition: str, ended: str) -> bool:
    """Whether a stage waiting with `condition` runs after one that ended `ended`."""
    return condition == "any" or condition == ended


def _parse_after(text: str) -> After:
    condition, pid, start, scheduler_id, run_dir = text.split(",", 4)
    facts = {"pid": pid, "start_time": start, "run_dir": run_dir}
    return After(scheduler_id=scheduler_id, condition=condition, facts=facts)


def main(argv: list[str] | None = None) -> int:
    """Wait, then exec the launcher or leave `never-started`."""
    parser = argparse.ArgumentParser(prog="jobkit.backends.chain_wait")
    parser.add_argument("--job-dir", required=True, type=Path)
    parser.add_argument("--after", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    pending = [_parse_after(text) for text in args.after]
    while pending:
        for after in list(pending):
            ended = outcome(after)
            if ended is None:
                continue
            pending.remove(after)
            if not met(after.condition, ended):
                word = "succeeded" if ended == "ok" else "failed or never ran"
                note = (
                    f"never started: the previous stage {after.scheduler_id} {word}"
                    f" (this stage runs after {after.condition})"
                )
                (args.job_dir / NEVER_STARTED_FILE).write_text(note + "\n")
                (args.job_dir / WAITING_FILE).unlink(missing_ok=True)
                print(f"jobkit: {note}", file=sys.stderr, flush=True)
                return 0
        if pending:
            time.sleep(POLL_S)
    (args.job_dir / WAITING_FILE).unlink(missing_ok=True)
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
