"""A requeued job's time already run, in the user's words (issue 24): "a requeued job's row
shows `QUEUED 0:00` and its report `elapsed 00:00:00 (?)` after 100 s of running".

On the real Slurm: a job runs a few seconds, `scontrol requeue` sends it back to the queue
(PENDING, BeginTime), its begin time is moved to now (Slurm would hold it 120 s) and its second
run ends. The row and the report add the runs up, to sacct's own figures of each run.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobkit.core.units import parse_clock
from tests.e2e.cli import Jobkit

pytestmark = [pytest.mark.slurm]

PROGRAM = 'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 2; exit 0; fi; sleep 300'
"""The first run lasts until it is requeued; the second ends after 2 s."""
FIRST_RUN_S = 5.0


def _spec(folder: Path, logs: Path) -> Path:
    spec = folder / "requeued.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "requeued",
                "backend": "slurm",
                "resources": {"partition": "debug", "time": "00:10:00"},
                "scheduler": {"requeue": True},
                "launch": {"launcher": "none"},
                "logs": {"dir": str(logs)},
                "run": {"command": ["bash", "-c", PROGRAM]},
            }
        )
    )
    return spec


def _sacct_runs(slurm_id: str) -> list[float]:
    """Each run's elapsed seconds, as sacct --duplicates lists them (oldest first)."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-D", "-X", "-j", slurm_id, "--format=ElapsedRaw"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return [float(line) for line in out.split()]


def _row(jobkit: Jobkit, job: str) -> str:
    """The job's line of the `jobkit status` table."""
    done = jobkit.run("status")  # the table (one job's id gives its detail view)
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith(job))


def _report(jobkit: Jobkit, job: str) -> tuple[str, dict[str, Any]]:
    text = jobkit.run("report", job)
    as_json = jobkit.run("report", job, "--json")
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    data = json.loads(as_json.stdout)
    return text.stdout, data[0] if isinstance(data, list) else data


def _shown_seconds(row: str) -> float:
    """The ELAPSED cell of a status row (`0:07 (1 run)`) in seconds."""
    match = re.search(r"\s(\d+(?::\d+)+) \((\d+) runs?\)", row)
    assert match, row
    seconds = parse_clock(match[1])
    assert seconds is not None, row
    return seconds


@pytest.mark.timeout(300)
def test_requeued_job_keeps_the_time_it_already_ran(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    done = jobkit.run("submit", str(_spec(tmp_path, jobkit.logs_dir)), "--json")
    assert done.returncode == 0, done.stderr
    submitted = json.loads(done.stdout)
    job, slurm_id = submitted["jobkit_id"], submitted["scheduler_id"]
    try:
        jobkit.wait_state(job, {"RUNNING"}, timeout=180, poll_s=0.5)
        jobkit.wait_status(
            job, lambda record: (record["elapsed_s"] or 0) >= FIRST_RUN_S, 60, "5 s of running"
        )
        requeued = subprocess.run(
            ["scontrol", "requeue", slurm_id], capture_output=True, text=True, timeout=60
        )
        assert requeued.returncode == 0, requeued.stderr
        record = jobkit.wait_state(job, {"QUEUED"}, timeout=60, poll_s=0.5)
        assert record["requeues"] == 1, record
        first = _sacct_runs(slurm_id)[0]
        assert first >= FIRST_RUN_S

        # Back in the queue: the row and the report show the time already run, not 0:00.
        row = _row(jobkit, job)
        assert "QUEUED" in row and "(1 run)" in row, row
        assert _shown_seconds(row) == first, (row, first)
        detail = jobkit.run("status", job).stdout
        assert "before requeue, from sacct" in detail, detail
        text, report = _report(jobkit, job)
        assert report["elapsed_s"] == first, report
        assert (report["earlier_runs"], report["earlier_runs_from"]) == (1, "sacct"), report
        assert "00:00:00 elapsed" not in text, text

        # Its second run, without Slurm's 120 s wait after a requeue.
        subprocess.run(
            ["scontrol", "update", f"JobId={slurm_id}", "StartTime=now"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        record = jobkit.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=180, poll_s=0.5)
        assert record["state"] == "SUCCEEDED", record
        deadline = time.monotonic() + 30
        while len(each := _sacct_runs(slurm_id)) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(each) == 2, each
        row = _row(jobkit, job)
        assert "(2 runs)" in row, row
        assert _shown_seconds(row) == sum(each), (row, each)
        text, report = _report(jobkit, job)
        assert report["elapsed_s"] == sum(each), (report, each)
        assert f"in 2 runs ({_hms(each[0])} before the requeue, from sacct)" in text, text
    finally:
        subprocess.run(["scancel", slurm_id], capture_output=True, timeout=60, check=False)


def _hms(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
