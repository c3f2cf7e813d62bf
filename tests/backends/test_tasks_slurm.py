"""One task of a Slurm array as its own tracked job (a sweep's task rows, issue 16): poll
answers for `123_4` in the same one squeue + one sacct as for every other job, and cancel
stops that task alone. A real array on the test cluster (tests/cluster/up.sh); the squeue /
sacct range mapping also as pure functions."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jobkit.backends.base import Observation, TrackedJob
from jobkit.backends.slurm.backend import SlurmBackend
from jobkit.backends.slurm.parse import SlurmId, parse_sacct, parse_squeue
from jobkit.backends.slurm.tasks import sacct_tasks, task_in_range, task_observation
from jobkit.core.states import State
from tests.manager.helpers import calls, scancel_quietly, wrapper_dir

# Task 0 exits 3 8 s after task 1 has started (so both are seen running at once even when
# the other lane's jobs let only one task start at first), task 1 runs until it is
# cancelled, task 2 waits behind %2, then succeeds.
ARRAY_SCRIPT = """#!/bin/bash
#SBATCH --array=0-2%2
#SBATCH --time=10
#SBATCH --output=out-%A_%a.txt
case "$SLURM_ARRAY_TASK_ID" in
  0) for _ in $(seq 450); do [ -e started-1 ] && break; sleep 1; done; sleep 8; exit 3 ;;
  1) touch started-1; sleep 500 ;;
  *) sleep 2; exit 0 ;;
esac
"""


def wait_for(
    what: Callable[[], dict[str, Observation]], done: Callable[[dict[str, Observation]], bool]
) -> dict[str, Observation]:
    """Poll until done(observations); fail after 420 s: the other cluster lane's 2-node jobs
    hold both nodes for minutes (CI saw 180 s run out with two tasks still QUEUED)."""
    deadline = time.monotonic() + 420
    while True:
        seen = what()
        if done(seen):
            return seen
        assert time.monotonic() < deadline, f"still {seen}"
        time.sleep(1)


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
@pytest.mark.timeout(1200)
def test_each_task_of_a_real_array_is_polled_and_cancelled_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "array.sh"
    script.write_text(ARRAY_SCRIPT)
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    array = done.stdout.strip()
    backend = SlurmBackend()
    tasks = {
        task: TrackedJob(f"jk{task}", backend.task_job_id(array, task), tmp_path, tmp_path)
        for task in ("0", "1", "2")
    }
    whole = TrackedJob("jkall", array, tmp_path, tmp_path, extra={"array": "0-2%2"})
    jobs = [*tasks.values(), whole]
    log = tmp_path / "calls.log"
    wrappers = wrapper_dir(tmp_path / "bin", ["squeue", "sacct"], log)
    monkeypatch.setenv("PATH", f"{wrappers}:{os.environ['PATH']}")
    try:
        assert tasks["2"].scheduler_id == f"{array}_2"
        seen = wait_for(
            lambda: backend.poll(jobs),
            lambda s: all(s[f"{array}_{t}"].state is State.RUNNING for t in "01"),
        )
        # %2: task 2 waits behind tasks 0 and 1, in the queue.
        assert seen[f"{array}_2"].state is State.QUEUED, seen
        assert seen[f"{array}_2"].reason == "JobArrayTaskLimit", seen
        assert seen[array].state is State.RUNNING  # the whole array, as before
        log.unlink()
        backend.poll(jobs)
        queries = [line.split()[0] for line in calls(log)]
        assert queries.count("squeue") == 1 and queries.count("sacct") <= 1, queries
        backend.cancel([tasks["1"]])
        final = wait_for(
            lambda: backend.poll(jobs),
            lambda s: all(s.get(t.scheduler_id) and s[t.scheduler_id].state.is_final for t in jobs),
        )
    finally:
        scancel_quietly([array])
    zero, one, two = (final[tasks[t].scheduler_id] for t in ("0", "1", "2"))
    assert (zero.state, zero.exit_code) == (State.FAILED, 3), zero
    assert one.state is State.CANCELLED, one
    # Cancelling task 1 left task 0 to run to its end and task 2 to start in its place.
    assert zero.elapsed_s is not None and zero.elapsed_s >= 8
    assert (two.state, two.exit_code) == (State.SUCCEEDED, 0), two
    assert final[array].state is State.FAILED and final[array].exit_code == 3


def test_task_ids_keep_the_cluster_suffix() -> None:
    assert SlurmBackend.task_job_id("123", "4") == "123_4"
    assert SlurmBackend.task_job_id("123;west", "4") == "123_4;west"
    slurm_id = SlurmId.parse("123_4;west")
    assert (slurm_id.base, slurm_id.task, slurm_id.cluster) == ("123", "4", "west")
    assert SlurmId.parse("123").task is None
    assert SlurmBackend.task_label("123;west", "4") == "123_4"


@pytest.mark.parametrize(
    ("task", "key", "inside"),
    [
        ("3", "[2-5]", True),
        ("6", "[2-5]", False),
        ("4", "[2-5%2]", True),
        ("7", "[1,3,7-9]", True),
        ("4", "[1,3,7-9]", False),
        ("4", "[0-10:2]", True),
        ("5", "[0-10:2]", False),
        ("4", "4", True),
        ("4", "14", False),
        ("x", "[0-9]", False),
    ],
)
def test_a_task_is_found_in_a_pending_range(task: str, key: str, inside: bool) -> None:
    assert task_in_range(task, key) is inside


# sacct -n -P -D of an array `--array=0-5%2` while tasks 0, 1 ran: the tasks not yet started
# are one record, `13205_[2-5%2]` (seen on the test cluster).
SACCT_PENDING_RANGE = """\
13205_0|13206|RUNNING|0:0|00:00:09|n1|None||00:00:00
13205_0.batch|13206.batch|RUNNING|0:0|00:00:09|n1|||00:00:00
13205_1|13207|RUNNING|0:0|00:00:09|n2|None||00:00:00
13205_[2-5%2]|13205|PENDING|0:0|00:00:00|None assigned|JobArrayTaskLimit||00:00:00
"""


def test_a_pending_task_is_answered_from_its_range_record() -> None:
    tasks = sacct_tasks(parse_sacct(SACCT_PENDING_RANGE))["13205"]
    pending = task_observation(tasks, "4")
    assert pending is not None and pending.state is State.QUEUED
    assert pending.reason == "JobArrayTaskLimit"
    running = task_observation(tasks, "1")
    assert running is not None and running.state is State.RUNNING and running.nodes == "n2"
    assert task_observation(tasks, "6") is None


def test_squeue_rows_of_one_task_are_its_own() -> None:
    from jobkit.backends.slurm.tasks import squeue_tasks

    rows = parse_squeue(
        "13205_3|13205|3|PENDING|JobArrayTaskLimit||0:00|0|\n13205_0|13205|0|RUNNING|None|n1|0:04|0|\n"
    )
    tasks = squeue_tasks(rows)["13205"]
    three = task_observation(tasks, "3")
    assert three is not None and three.state is State.QUEUED
    assert task_observation(tasks, "2") is None
