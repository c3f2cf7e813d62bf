"""One task of a Grid Engine array as its own tracked job (a sweep's task rows, issue 16):
poll answers for `123.2` from its own qstat row (or the pending range holding it) and its
own qacct record; cancel (`qdel 123.3`) stops that task alone. A real array on the test
cluster's Grid Engine; qstat's <tasks> ranges also as a pure function."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from jobkit.backends.base import Observation, TrackedJob
from jobkit.backends.sge.backend import SgeBackend
from jobkit.backends.sge.parse import tasks_include
from jobkit.core.states import State

# Sweep task 0 (Grid Engine task 1) succeeds, task 1 exits 3, task 2 sleeps behind -tc 2
# until it is cancelled.
ARRAY_SCRIPT = """#!/bin/bash
#$ -S /bin/bash
#$ -t 1-3
#$ -tc 2
case "$SGE_TASK_ID" in
  1) sleep 5; exit 0 ;;
  2) sleep 5; exit 3 ;;
  *) sleep 300 ;;
esac
"""


@pytest.mark.sge
@pytest.mark.slow
def test_each_task_of_a_real_array_is_polled_and_cancelled_alone(
    sge_cluster: object, tmp_path: Path
) -> None:
    script = tmp_path / "array.sh"
    script.write_text(ARRAY_SCRIPT)
    done = subprocess.run(
        ["qsub", "-terse", "-cwd", "-o", "/dev/null", "-j", "y", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    array = done.stdout.strip().split(".")[0]
    backend = SgeBackend()
    now = str(int(time.time()))
    tasks = {
        task: TrackedJob(
            f"jk{task}", backend.task_job_id(array, task), tmp_path, tmp_path, {"submitted_at": now}
        )
        for task in ("0", "1", "2")
    }
    ids = [job.scheduler_id for job in tasks.values()]
    assert ids == [f"{array}.1", f"{array}.2", f"{array}.3"]
    deadline = time.monotonic() + 180
    try:
        seen: dict[str, Observation] = {}
        while not (seen.get(ids[0]) and seen[ids[0]].state is State.RUNNING):
            assert time.monotonic() < deadline, seen
            time.sleep(1)
            seen = backend.poll(list(tasks.values()))
        assert seen[ids[2]].state is State.QUEUED, seen  # waits behind -tc 2
        backend.cancel([tasks["2"]])
        assert (tmp_path / "cancelled.3").exists() and not (tmp_path / "cancelled").exists()
        while not all(
            s in seen and seen[s].state.is_final and seen[s].source != "qstat" for s in ids
        ):
            assert time.monotonic() < deadline, seen
            time.sleep(1)
            seen = backend.poll(list(tasks.values()))
    finally:
        subprocess.run(["qdel", array], capture_output=True, check=False, timeout=60)
    zero, one, two = (seen[s] for s in ids)
    assert (zero.state, zero.exit_code) == (State.SUCCEEDED, 0), zero
    assert (one.state, one.exit_code) == (State.FAILED, 3), one
    assert two.state is State.CANCELLED, two
    assert zero.elapsed_s is not None and zero.elapsed_s >= 5  # ran to its end


def test_sweep_task_i_is_grid_engine_task_i_plus_1() -> None:
    assert SgeBackend.task_job_id("123", "0") == "123.1"
    assert SgeBackend.task_job_id("123", "9") == "123.10"


@pytest.mark.parametrize(
    ("tasks", "task", "inside"),
    [
        ("4", "4", True),
        ("3,4", "4", True),
        ("5-10:1", "7", True),
        ("1-9:2", "4", False),
        ("1-9:2", "5", True),
        (None, "1", False),
        ("4", "14", False),
    ],
)
def test_a_task_is_found_in_qstat_task_ranges(tasks: str | None, task: str, inside: bool) -> None:
    assert tasks_include(tasks, task) is inside
