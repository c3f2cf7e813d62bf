"""Waiting for a Slurm job to leave a state by polling squeue: a few milliseconds of CPU a
call, where each `jobkit status` is a Python process of ~0.4 CPU-s. The preemption tests wait
this way while their jobs queue (behind other tests' jobs in CI, up to minutes), then ask
jobkit once."""

from __future__ import annotations

import subprocess
import time


def squeue_state(scheduler_id: str) -> str:
    """squeue's state of the job (PENDING, RUNNING, ...); "" once squeue no longer shows it."""
    shown = subprocess.run(
        ["squeue", "-h", "-j", scheduler_id, "-o", "%T"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    lines = shown.stdout.split()
    return lines[0] if lines else ""


def while_in(scheduler_id: str, states: set[str], timeout: float, poll_s: float) -> str:
    """Poll squeue until the job's state is none of `states`; that state ("" when gone)."""
    deadline = time.monotonic() + timeout
    state = squeue_state(scheduler_id)
    while state in states:
        assert time.monotonic() < deadline, f"job {scheduler_id} still {state} after {timeout} s"
        time.sleep(poll_s)
        state = squeue_state(scheduler_id)
    return state
