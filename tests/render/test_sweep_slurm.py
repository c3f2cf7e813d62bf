"""A sweep's rendered Slurm script as one real array job (tests/cluster/up.sh): each array
task runs the program with its own overrides, named in its .out and written to its run folder.

The script goes to sbatch directly (what `jobkit submit` does for a sweep is tested with the
registry side); the program is a tiny python printing its argv (launcher srun, no torch).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from jobkit.render.engine import render
from jobkit.spec.schema import JobSpec
from tests.manager.helpers import scancel_quietly

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

PRINT_ARGV = ["python3", "-c", "import sys, json; print('ARGV ' + json.dumps(sys.argv[1:]))"]


def _spec() -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "sweeparr",
            "backend": "slurm",
            "launch": {"launcher": "srun"},
            "resources": {"time": "5"},
            "run": {"command": PRINT_ARGV},
            "sweep": {"grid": {"optim.lr": ["1e-3", "it's $(x)"]}},
        }
    )


def _wait_for_files(paths: list[Path], job: str, timeout: float = 240) -> None:
    """Until every path exists (the tasks wrote their exit codes), or fail naming the job's
    state: at the timeout, or soon after sacct says every task ended without writing them."""
    deadline = time.monotonic() + timeout
    ended_since: float | None = None
    while not all(path.exists() for path in paths):
        states = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", job, "-o", "JobID,State,ExitCode"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        rows = [line.split("|") for line in states.splitlines() if line]
        ended = len(rows) >= len(paths) and all(
            row[1] not in ("PENDING", "RUNNING") for row in rows
        )
        ended_since = (ended_since or time.monotonic()) if ended else None
        if time.monotonic() > deadline or (ended_since and time.monotonic() - ended_since > 10):
            pytest.fail(f"array job {job}: tasks ended or timed out without exit codes: {states}")
        time.sleep(0.5)


def test_each_array_task_runs_its_own_overrides(tmp_path: Path) -> None:
    spec = _spec()
    assert spec.scheduler.array == "0-1"
    (tmp_path / "job.sh").write_text(render(spec), encoding="utf-8")
    (tmp_path / "logs").mkdir()  # sbatch opens the .out there (jobkit submit makes it)
    submitted = subprocess.run(
        ["sbatch", "--parsable", "job.sh"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    logs = tmp_path / "logs"
    job = submitted.stdout.strip().split(";")[0]
    try:
        run_dirs = [logs / f"sweeparr-{job}_{task}" for task in (0, 1)]
        _wait_for_files([run_dir / "exit_code" for run_dir in run_dirs], job)
    finally:
        scancel_quietly([job])
    for task, value in enumerate(["1e-3", "it's $(x)"]):
        run_dir = run_dirs[task]
        assert (run_dir / "exit_code").read_text().splitlines()[0] == "0"
        printed = (run_dir / "rank-0.out").read_text(encoding="utf-8")
        assert f"ARGV {json.dumps([f'optim.lr={value}'])}\n" in printed
        written = json.loads((run_dir / "sweep-overrides.json").read_text(encoding="utf-8"))
        assert written == {"optim.lr": value}
        out = (logs / f"sweeparr-{job}_{task}.out").read_text(encoding="utf-8")
        assert f"jobkit: sweep task {task}: optim.lr={value}\n" in out
