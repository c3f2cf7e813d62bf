"""`jobkit logs -f` of a job that waits (the user's words: "`logs -f` on a held or pending job
prints where the output will be and then nothing forever"): it says the state, the
scheduler's reason and the fix, keeps following, and says it again when the state changes. A
held job on the real Slurm of tests/cluster (held: it takes no node until released)."""

from __future__ import annotations

import json
import selectors
import subprocess
import time
from pathlib import Path

import pytest

from tests.backends.cli import Jobkit

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]


def read_until(proc: subprocess.Popen[str], wanted: str, timeout: float) -> list[str]:
    """stderr lines of `proc` up to the first holding `wanted`."""
    assert proc.stderr is not None
    lines: list[str] = []
    picker = selectors.DefaultSelector()
    picker.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while not any(wanted in line for line in lines):
        assert time.monotonic() < deadline, f"no {wanted!r} in {timeout} s: {lines}"
        if picker.select(timeout=1.0):
            line = proc.stderr.readline()
            assert line, f"stderr closed before {wanted!r}: {lines}"
            lines.append(line.rstrip("\n"))
    return lines


def test_logs_follow_of_a_held_job_says_held_why_and_the_fix(tmp_path: Path) -> None:
    jobkit = Jobkit(workdir=tmp_path, home=tmp_path / "home")
    spec = {
        "name": "held",
        "backend": "slurm",
        "launch": {"launcher": "srun"},
        "resources": {"partition": "debug", "time": 2},
        "scheduler": {"extra": ["--hold"]},
        "run": {"command": ["bash", "-c", "echo hello from the job"]},
    }
    (tmp_path / "held.yaml").write_text(json.dumps(spec))
    job = jobkit.submit("held.yaml", "--no-check")
    sched = job["scheduler_id"]
    follow = jobkit.start("logs", "-f", job["jobkit_id"])
    try:
        said = read_until(follow, " is HELD", timeout=60)
        assert said[-1] == (
            f"jobkit: job {job['jobkit_id']} is HELD (JobHeldUser): its owner held it (sbatch"
            f" --hold or `scontrol hold`) (fix: `scontrol release {sched}`)"
        ), said
        assert follow.poll() is None  # still following
        subprocess.run(["scontrol", "release", sched], check=True, capture_output=True)
        out, err = follow.communicate(timeout=180)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
        subprocess.run(["scancel", sched], capture_output=True, check=False)
    assert follow.returncode == 0, err
    assert "hello from the job" in out
    assert " is HELD" not in err  # said once, not at every poll
