"""`notify.from: job`, the job's side: the job script runs

    python -m jobkit.notify.jobside start ELAPSED_S [HOST...]
    python -m jobkit.notify.jobside end EXIT_CODE ELAPSED_S [HOST...]

as it starts and as it ends, on its own node. The section comes from the 0600 file named by
JOBKIT_NOTIFY_FILE (notify/jobfile.py); the message is the watcher's (notify/message.py):
the state from the exit code, the doctor's one line read from the job's own logs, the final
loss. Each event is claimed in the run folder (an O_EXCL file per attempt), so a requeued
job's second start sends nothing. It never fails the job: a fault is one line on stderr,
and it exits 0."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobkit.core.conventions import TIMED_OUT_FILE
from jobkit.notify.message import Message, final_loss
from jobkit.registry.record import JobRecord, new_record

CLAIM_FILE = "notified-{event}.{attempt}.json"
"""In the run folder (shared by a run's attempts, docs/runs.md): the attempt's event was sent
(or tried), with how each way went and no secret. A job Slurm requeued starts again as the
same attempt: its start is not sent twice."""


def _stdio_paths() -> dict[str, str]:
    """The job's own .out and .err: this process shares the script's stdout and stderr."""
    paths: dict[str, str] = {}
    for key, fd in (("out", 1), ("err", 2)):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and os.path.isfile(target):
            paths[key] = target
    return paths


def _state(run_dir: Path, exit_code: int) -> str:
    if exit_code == 0:
        return "SUCCEEDED"
    return "TIMEOUT" if (run_dir / TIMED_OUT_FILE).exists() else "FAILED"


def job_record(
    facts: dict[str, Any], run_dir: Path, hosts: Sequence[str], exit_code: int | None
) -> JobRecord:
    """The job as the message shows it, from the file's facts and what the job knows."""
    now = time.time()
    final = exit_code is not None
    return new_record(
        jobkit_id=str(facts["jobkit_id"]),
        scheduler_id=os.environ.get("JOBKIT_JOB_ID") or None,
        backend=str(facts["backend"]),
        name=str(facts["name"]),
        state=_state(run_dir, exit_code) if exit_code is not None else "RUNNING",
        created_at=now,
        exit_code=exit_code,
        nodes=",".join(hosts) or None,
        workdir=Path(os.environ.get("JOBKIT_SUBMIT_DIR") or os.getcwd()),
        job_dir=run_dir,
        log_paths={"run_dir": str(run_dir), **_stdio_paths()},
        token="",
        spec_json=json.dumps({**facts["spec"], "notify": facts["notify"]}),
        script="",
        final_at=now if final else None,
    )


def _diagnosis(record: JobRecord) -> str | None:
    """The doctor's one line, from the job's own files (never fails the job)."""
    from jobkit.doctor.classes import UNKNOWN
    from jobkit.doctor.classify import diagnose_record

    try:
        found = diagnose_record(record)
    except (OSError, ValueError, UnicodeError):
        return None
    return found.one_line() if found.cls not in (None, UNKNOWN.name) else None


def _claim(run_dir: Path, event: str) -> Path | None:
    """The claim file, created here (None: this run sent the event before)."""
    attempt = os.environ.get("JOBKIT_ATTEMPT") or "1"
    path = run_dir / CLAIM_FILE.format(event=event, attempt=attempt)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None
    os.close(fd)
    return path


def send_events(
    facts: dict[str, Any], run_dir: Path, events: Sequence[str], record: JobRecord
) -> list[str]:
    """Send each event not sent before by this run; the lines saying how it went."""
    from jobkit.notify.dispatch import deliver

    section: dict[str, Any] = facts["notify"]
    lines: list[str] = []
    for event in events:
        claim = _claim(run_dir, event)
        if claim is None:
            continue
        failed = record.is_final and record.state != "SUCCEEDED"
        diagnosis = (_diagnosis(record) or record.reason) if failed else None
        loss = final_loss(record) if record.state == "SUCCEEDED" else None
        outcomes, said = deliver(section, Message(event, record, diagnosis, loss))
        claim.write_text(json.dumps({"at": time.time(), **outcomes}) + "\n")
        lines += said
    return lines


def due(wanted: Sequence[str], exit_code: int | None) -> list[str]:
    """The wanted events at the start (exit_code None) or at the end."""
    if exit_code is None:
        return ["start"] if "start" in wanted else []
    return [e for e in ("end", "fail") if e in wanted and (e == "end" or exit_code != 0)]


def main(argv: Sequence[str]) -> int:
    """start ELAPSED_S [HOST...] | end EXIT_CODE ELAPSED_S [HOST...]; always 0."""
    try:
        where = os.environ["JOBKIT_NOTIFY_FILE"]
        run_dir = Path(os.environ["JOBKIT_RUN_DIR"])
        facts = json.loads(Path(where).read_text(encoding="utf-8"))
        if argv[0] == "start":
            exit_code, elapsed, hosts = None, float(argv[1]), argv[2:]
        else:
            exit_code, elapsed, hosts = int(argv[1]), float(argv[2]), argv[3:]
    except (KeyError, IndexError, OSError, ValueError) as err:
        print(f"jobkit: notify.from job: nothing sent: {err}", file=sys.stderr)
        return 0
    record = job_record(facts, run_dir, hosts, exit_code).with_columns({"elapsed_s": elapsed})
    for line in send_events(
        facts, run_dir, due(facts["notify"].get("on") or [], exit_code), record
    ):
        print(f"jobkit: {line}")
    if exit_code is not None:
        Path(where).unlink(missing_ok=True)  # the job's last event: the secret goes
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
