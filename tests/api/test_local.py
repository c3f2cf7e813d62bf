"""Functions as jobs and Job objects on the local backend, for real (torchrun, 2 ranks):
results, a rank's exception re-raised here with its traceback, a job read back by id in
another process as `jobkit status` shows it, map_array, cancel, logs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jobkit
from tests.plugins.invoke import Invoke

TIMEOUT_S = 240.0


def test_a_function_runs_and_its_result_is_read_by_id_in_another_process(
    workdir: Path, cli: Invoke
) -> None:
    def launch_facts(x: int) -> dict[str, Any]:
        print(f"computing {x} squared")
        return {"square": x * x, "rank": os.environ["RANK"], "world": os.environ["WORLD_SIZE"]}

    job = jobkit.submit_function(launch_facts, 7, spec={"name": "facts"})
    assert job.result(timeout=TIMEOUT_S) == {"square": 49, "rank": "0", "world": "1"}
    assert (job.state, job.exit_code) == ("SUCCEEDED", 0)
    assert "computing 7 squared" in job.logs(rank=0)
    run_dir = job.run_dir
    assert run_dir is not None and (run_dir / "function" / "call.pkl").is_file()
    assert oct((run_dir / "function" / "result.pkl").stat().st_mode & 0o777) == "0o600"
    code = (
        "import json, sys, jobkit\n"
        "job = jobkit.job(sys.argv[1])\n"
        "print(json.dumps([job.id, job.state, job.exit_code, job.result()]))\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, job.id[:5]],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    )
    status = json.loads(cli("status", job.id, "--json").out)[0]
    seen = json.loads(other.stdout)
    assert seen == [job.id, "SUCCEEDED", 0, {"square": 49, "rank": "0", "world": "1"}]
    assert (status["jobkit_id"], status["state"], status["exit_code"]) == tuple(seen[:3])
    (run_dir / "function" / "result.pkl").write_bytes(b"not a pickle")
    with pytest.raises(jobkit.NoResult, match=r"result .* cannot be read here: UnpicklingError"):
        job.result()


def test_an_exception_on_rank_1_of_2_is_raised_here_with_that_ranks_traceback(
    workdir: Path,
) -> None:
    def fails_on_rank_1(limit: int) -> str:
        rank = int(os.environ["RANK"])
        if rank == 1:
            raise ValueError(f"rank {rank} found {limit} too small")
        return "rank 0 is fine"

    spec = {"name": "ddp-fn", "launch": {"nproc_per_node": 2}}
    job = jobkit.submit_function(fails_on_rank_1, 3, spec=spec)
    with pytest.raises(jobkit.FunctionError) as caught:
        job.result(timeout=TIMEOUT_S)
    err = caught.value
    assert (err.rank, err.job_id) == (1, job.id)
    assert err.show() == (
        f"job {job.id}: the function raised on rank 1 ({err.host}): "
        "ValueError: rank 1 found 3 too small"
    )
    assert err.remote_traceback.splitlines()[-1] == "ValueError: rank 1 found 3 too small"
    assert re.search(r'File ".*", line \d+, in fails_on_rank_1\n', err.remote_traceback)
    assert f"Remote traceback (rank 1, {err.host}):" in str(err)
    assert isinstance(err.__cause__, ValueError)
    assert job.state == "FAILED"
    with pytest.raises(jobkit.FunctionError):  # again, from the files alone
        jobkit.job(job.id).result()


def test_map_array_is_a_sweep_of_the_items(workdir: Path) -> None:
    sweep = jobkit.map_array(lambda word: word.upper(), ["a", "b c"], spec={"name": "upper"})
    assert [t.task for t in sweep.tasks] == ["0", "1"]
    assert sweep.results(timeout=TIMEOUT_S) == ["A", "B C"]
    assert [t.state for t in jobkit.sweep(sweep.id).tasks] == ["SUCCEEDED", "SUCCEEDED"]
    assert {j.id for j in jobkit.jobs([sweep.id])} == {t.id for t in sweep.tasks}


def test_a_cancelled_function_job_has_no_result(workdir: Path) -> None:
    job = jobkit.submit_function(time.sleep, 120, spec={"name": "sleeper"})
    deadline = time.monotonic() + TIMEOUT_S
    while job.refresh().state != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert job.cancel() is True
    assert job.state == "CANCELLED"
    assert job.cancel() is False  # already ended: nothing to do
    with pytest.raises(jobkit.JobFailed, match=rf"job {job.id} ended CANCELLED"):
        job.result(timeout=TIMEOUT_S)
    with pytest.raises(jobkit.WaitTimeout):
        jobkit.submit_function(time.sleep, 120, spec={"name": "sleeper"}).wait(timeout=0.5)
