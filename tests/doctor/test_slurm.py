"""`jobkit doctor` on real Slurm jobs of the test cluster: a rank of a 2-node job raises, the
job's environment is missing, a job is cancelled, a job runs past its time limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.manager.helpers import Invoke, is_settled, slurm_spec, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]


def _submit(jobkit: Invoke, spec: Path) -> str:
    result = jobkit("submit", str(spec), "--json")
    assert result.code == 0, result.err
    return str(json.loads(result.out)["jobkit_id"])


def _doctor(jobkit: Invoke, job: str) -> dict[str, Any]:
    result = jobkit("doctor", job, "--json")
    assert result.code == 0, result.err
    data: dict[str, Any] = json.loads(result.out)
    return data


def test_rank_that_raises_on_the_second_node(workdir: Path, jobkit: Invoke) -> None:
    """srun starts one task per node: rank 1 (on n2) raises, rank 0 sleeps."""
    command = (
        'if [ "$SLURM_PROCID" = 1 ]; then exec python3 -c "raise KeyError(\'shard-7\')"; fi;'
        " sleep 2"
    )
    spec = slurm_spec(workdir, "raises", command, "resources:", "  nodes: 2")
    job = _submit(jobkit, spec)
    final = wait_until(jobkit, job, is_settled)
    assert final["state"] == "FAILED", final
    found = _doctor(jobkit, job)
    assert (found["class"], found["rank"], found["host"]) == ("python_exception", 1, "n2")
    assert found["summary"] == "KeyError: 'shard-7'"
    assert "/rank-1.out:" in found["evidence"][0]["where"], found
    assert f"jobkit logs {job} --rank 1" in found["fix"]
    shown = jobkit("status", job)
    assert "diagnosis   a rank raised a Python exception on rank 1 (n2): KeyError" in shown.out


def test_missing_environment(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "noenv", "true", "env:", "  venv: /nonexistent/venv")
    job = _submit(jobkit, spec)
    wait_until(jobkit, job, is_settled)
    found = _doctor(jobkit, job)
    assert found["class"] == "environment_missing", found
    assert "env.venv: /nonexistent/venv/bin/activate not found on n" in found["summary"]


def test_cancelled_job(workdir: Path, jobkit: Invoke) -> None:
    job = _submit(jobkit, slurm_spec(workdir, "sleeper", "sleep 120"))
    running = wait_until(jobkit, job, lambda r: r["state"] == "RUNNING")
    assert jobkit("cancel", job).code == 0
    wait_until(jobkit, job, is_settled)
    found = _doctor(jobkit, job)
    assert (found["state"], found["class"]) == ("CANCELLED", "cancelled"), found
    assert found["host"] == running["nodes"], found


@pytest.mark.slow
def test_time_limit(workdir: Path, jobkit: Invoke) -> None:
    """resources.time 1 minute, a job that sleeps 5: Slurm ends it as TIMEOUT (60-90 s)."""
    spec = slurm_spec(workdir, "toolong", "sleep 300", "resources:", "  time: 1")
    job = _submit(jobkit, spec)
    final = wait_until(jobkit, job, is_settled, timeout=400)
    assert final["state"] == "TIMEOUT", final
    found = _doctor(jobkit, job)
    assert found["class"] == "time_limit" and "resources.time" in found["fix"], found
    assert any("DUE TO TIME LIMIT" in e["text"] for e in found["evidence"]), found
    assert found["host"] == final["nodes"], found
