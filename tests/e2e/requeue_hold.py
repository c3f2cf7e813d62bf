"""Slurm holds a requeued job about two minutes (PENDING, reason BeginTime) before it may
start again. Tests that requeue a job on purpose wait through that hold for nothing: what they
prove (the job comes back, resumes, is tracked) is the same a moment later. `skipped` moves a
held job's begin time to now each time it is seen held, for as long as the block runs.

Without the hold a requeued job is PENDING for a second or two, which a poll of the job may
not see. `seen_held(job)`, when given, runs first each time (the tests ask `jobkit status`
then, as a poll during the hold would have: the registry records the job back in the queue)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

POLL_S = 2.0
HELD_AT_LEAST_S = 3.0
"""A held job is released only this long after it was first seen held. Slurm revokes the
credentials of a requeued job's run at the moment of the requeue, to the second; a new
launch in that same second is refused ("Killing non-startable batch JobId=N: Job credential
revoked", the job then FAILED with exit code 1: seen in CI when a job that requeued itself
was released 0.4 s later). The hold exists for that; a few seconds of it are enough."""


def _held(job_ids: list[str]) -> list[str]:
    """The jobs among `job_ids` that squeue shows PENDING for their begin time."""
    shown = subprocess.run(
        ["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T|%r"],
        capture_output=True, text=True, timeout=30, check=False,
    ).stdout  # fmt: skip
    rows = (line.split("|") for line in shown.splitlines() if line.count("|") == 2)
    return [job for job, state, reason in rows if state == "PENDING" and reason == "BeginTime"]


@contextmanager
def skipped(
    job_ids: Callable[[], list[str]], seen_held: Callable[[str], object] | None = None
) -> Iterator[list[str]]:
    """While the block runs, a job of `job_ids()` held after a requeue starts without the
    hold (after `seen_held(job)`, if given); yields the list of the job ids it released (one
    entry per release)."""
    released: list[str] = []
    done = threading.Event()
    first_seen: dict[str, float] = {}

    def release() -> None:
        while not done.wait(POLL_S):
            ids = job_ids()
            if not ids:
                continue
            held = _held(ids)
            for job in list(first_seen):
                if job not in held:
                    del first_seen[job]  # started (or gone): a later hold is a new one
            for job in held:
                seen = first_seen.setdefault(job, time.monotonic())
                if time.monotonic() - seen < HELD_AT_LEAST_S:
                    continue
                del first_seen[job]
                if seen_held is not None:
                    seen_held(job)
                moved = subprocess.run(
                    ["scontrol", "update", f"JobId={job}", "StartTime=now"],
                    capture_output=True, text=True, timeout=30, check=False,
                )  # fmt: skip
                if moved.returncode == 0:
                    released.append(job)

    thread = threading.Thread(target=release, name="requeue-hold", daemon=True)
    thread.start()
    try:
        yield released
    finally:
        done.set()
        thread.join(timeout=60)
