"""Frozen code on the qsub backends (docs/provenance.md): PBS (Slurm's Torque wrappers here)
and Grid Engine pass no environment on, so `jobkit submit` writes the snapshot's folder into
the job script. The job is submitted held (`qsub -h`), its program is edited, it is released:
it runs the code submitted, as tests/e2e/test_provenance.py checks on Slurm and local.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.cli import VENV, Jobkit
from tests.provenance.repo import make_repo

FINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT"}


def _held_job_runs_what_was_submitted(
    jobkit: Jobkit, tmp_path: Path, backend: str, release: list[str]
) -> None:
    sub = make_repo(tmp_path)
    spec: dict[str, object] = {
        "name": "frozen",
        "backend": backend,
        "env": {"venv": str(VENV)},
        "launch": {"launcher": "none"},
        "scheduler": {"extra": ["-h"]},
        "run": {"command": ["python", "prog.py"]},
    }
    if backend == "pbs":  # Slurm's Torque wrappers speak Torque's qstat
        spec["pbs"] = {"flavor": "torque"}
    (sub / "job.yaml").write_text(yaml.safe_dump(spec))
    (sub / "prog.py").write_text('print("submitted version")\n')  # uncommitted: frozen too
    done = jobkit.run(
        "submit", "job.yaml", "--set", f"logs.dir={jobkit.logs_dir}", "--json", cwd=sub
    )
    assert done.returncode == 0, done.stderr
    assert "not frozen" not in done.stderr, done.stderr
    job = json.loads(done.stdout)["jobkit_id"]
    try:
        _runs_what_was_submitted(jobkit, sub, job, release)
    finally:  # a failure above must not leave a held job in the shared queue
        jobkit.run("cancel", job)


def _runs_what_was_submitted(jobkit: Jobkit, sub: Path, job: str, release: list[str]) -> None:
    (sub / "prog.py").write_text('print("edited after submit")\n')
    # Held (Slurm's Torque wrappers' qstat may show a held job as queued: Q).
    record = jobkit.wait_state(job, {"HELD", "QUEUED"}, timeout=60, poll_s=0.5)
    script = (Path(record["job_dir"]) / "job.sh").read_text()
    code_dir = record["extra"]["code"]["code_dir"]
    assert f"JOBKIT_CODE_DIR={code_dir} JOBKIT_PROVENANCE=" in script, script
    subprocess.run([*release, record["scheduler_id"]], check=True, timeout=30, env=os.environ)
    record = jobkit.wait_state(job, FINAL, timeout=600)  # a shared queue
    assert record["state"] == "SUCCEEDED", record
    out = (Path(record["log_paths"]["run_dir"]) / "node-0.out").read_text()
    assert "submitted version" in out and "edited after submit" not in out, out
    shown = json.loads(jobkit.run("show", job, "--json").stdout)
    assert shown["started"]["working_folder"] == code_dir, shown["started"]
    # JOBKIT_PROVENANCE reached the job too: the submit side copied into the run folder.
    (copied,) = (Path(record["log_paths"]["run_dir"]) / "provenance").glob("*.json")
    assert json.loads(copied.read_text())["submit"]["jobkit_id"] == job


@pytest.mark.pbs
@pytest.mark.timeout(900)
def test_a_held_pbs_job_runs_the_code_submitted(
    jobkit: Jobkit, pbs_cluster: object, tmp_path: Path
) -> None:
    _held_job_runs_what_was_submitted(jobkit, tmp_path, "pbs", ["scontrol", "release"])


@pytest.mark.sge
@pytest.mark.timeout(900)
def test_a_held_sge_job_runs_the_code_submitted(
    jobkit: Jobkit, sge_cluster: object, tmp_path: Path
) -> None:
    _held_job_runs_what_was_submitted(jobkit, tmp_path, "sge", ["qrls"])
