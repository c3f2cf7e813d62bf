"""Job.wait() follows a run into its next attempt (issue 30's limit): on the real Slurm, a
job whose program asks to be requeued (exit 75) where Slurm refuses the requeue
(`--no-requeue`) is resubmitted by the API's own refresh (the manager function `jobkit
status` uses; no jobkit process runs beside), and wait returns when attempt 2 ended, not
when attempt 1 did."""

from __future__ import annotations

from pathlib import Path

import pytest

import jobkit

pytestmark = [pytest.mark.slurm]


def test_wait_follows_the_run_into_its_next_attempt(workdir: Path, slurm_cluster: object) -> None:
    command = '[ "$JOBKIT_ATTEMPT" != 1 ] || exit 75; echo attempt "$JOBKIT_ATTEMPT" done'
    spec = jobkit.Spec.from_dict(
        {
            "name": "twice",
            "backend": "slurm",
            "resources": {"partition": "debug", "time": "00:05:00"},
            "scheduler": {"requeue": True, "max_attempts": 2, "extra": ["--no-requeue"]},
            "launch": {"launcher": "none"},
            "run": {"command": ["bash", "-c", command]},
            "logs": {"dir": str(workdir / "logs")},
        }
    )
    first = jobkit.submit(spec)
    final = first.wait(timeout=560)
    assert (final.attempt, final.state, final.exit_code) == (2, "SUCCEEDED", 0)
    assert final.id != first.id and final.record.run_key == first.id
    assert [(j.attempt, j.state) for j in first.attempts] == [(1, "FAILED"), (2, "SUCCEEDED")]
    assert first.state == "FAILED" and first.exit_code == 75  # the handle stays attempt 1
    assert jobkit.job(final.id).state == "SUCCEEDED"  # what `jobkit status` sees
