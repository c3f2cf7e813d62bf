"""Small questions to the local Slurm: is it there, which partition, where is a job."""

from __future__ import annotations

import shutil
import subprocess
import time

FINAL = (
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
)


def _out(argv: list[str], timeout: float = 30.0) -> str | None:
    """stdout of argv, or None when it fails or is missing."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def default_partition() -> str | None:
    """The default partition (the one sinfo marks with *), or the first; None without Slurm."""
    if shutil.which("sinfo") is None:
        return None
    out = _out(["sinfo", "--noheader", "--format=%P"])
    if not out:
        return None
    names = [line.strip() for line in out.splitlines() if line.strip()]
    for name in names:
        if name.endswith("*"):
            return name[:-1]
    return names[0] if names else None


def accounting_works(wait_s: float = 90.0) -> bool:
    """True when sacct answers (slurmdbd up), waiting up to `wait_s` for a restart."""
    deadline = time.monotonic() + wait_s
    while True:
        if _out(["sacct", "--noheader", "--parsable2", "--starttime=now-1minutes"]) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(5.0)


def version() -> str | None:
    """`slurm 22.05.8` -> `22.05.8`."""
    out = _out(["sinfo", "--version"])
    return out.split()[-1] if out else None


def job_state(job_id: str) -> str | None:
    """The job's state word from squeue (any state it still shows), else from sacct."""
    out = _out(["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%T"])
    if out and out.strip():
        return out.split()[0].strip()
    out = _out(
        [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--jobs={job_id}",
            "--format=State",
        ]
    )
    if out and out.strip():
        return out.splitlines()[-1].split()[0].strip()
    return None


def wait_final(job_id: str, timeout: float, interval: float = 0.1) -> tuple[str | None, float]:
    """Poll until the job is in a final state; (state, time.monotonic() when seen)."""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = job_state(job_id)
        if state is not None and state.split()[0] in FINAL:
            return state, time.monotonic()
        time.sleep(interval)
    return state, time.monotonic()


def cancel(job_ids: list[str]) -> None:
    """scancel these jobs (ignoring ones already gone)."""
    if job_ids:
        _out(["scancel", *job_ids])
