"""Slurm output parsing: pure helpers, array aggregation, and squeue/sacct output captured
live from the real cluster with the exact commands the backend runs."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from jobkit.backends.base import Observation
from jobkit.backends.slurm.backend import SlurmBackend
from jobkit.backends.slurm.parse import (
    parse_elapsed,
    parse_exit_code,
    parse_sacct,
    parse_sbatch_output,
    parse_squeue,
)
from jobkit.backends.slurm.tasks import (
    aggregate,
    array_observation,
    array_size,
    observe_sacct,
    observe_squeue,
    sacct_exit_code,
    sacct_tasks,
    squeue_tasks,
)
from jobkit.core.errors import SchedulerError
from jobkit.core.states import State


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:00", 0.0),
        ("0:05", 5.0),
        ("1:02:03", 3723.0),
        ("00:00:03", 3.0),
        ("2-03:04:05", 183845.0),
        ("INVALID", None),
        ("", None),
    ],
)
def test_parse_elapsed(text: str, seconds: float | None) -> None:
    assert parse_elapsed(text) == seconds


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0:0", (0, None)), ("3:0", (3, None)), ("0:15", (0, 15)), ("", (None, None))],
)
def test_parse_exit_code(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_code(text) == expected


def test_parse_sbatch_output() -> None:
    assert parse_sbatch_output(["sbatch"], "123\n", "") == "123"
    assert parse_sbatch_output(["sbatch"], "124;east\n", "") == "124;east"
    with pytest.raises(SchedulerError, match="unexpected sbatch output"):
        parse_sbatch_output(["sbatch", "x"], "Submitted batch job 5\n", "")


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("7|7|FAILED|3:0|00:00:04|n1||||", 3),
        ("7|7|COMPLETED|0:0|00:00:04|n1||||", 0),
        ("7|7|CANCELLED by 0|0:15|00:00:04|n1||||", 0),
        # slurmdbd was down while the job ran: the record has its state, not its code.
        ("7|7|FAILED|0:0|00:00:04|n1||||", None),
        # The node failed, not the program.
        ("7|7|NODE_FAIL|0:0|00:00:04|n1||||", None),
        ("7|7|NODE_FAIL|1:0|00:00:04|n1||||", 1),
        ("7|7|TIMEOUT|0:0|00:10:00|n1||||", 0),
    ],
)
def test_sacct_exit_code_distrusts_0_for_a_failed_job(line: str, code: int | None) -> None:
    (run,) = parse_sacct(line + "\n")
    assert sacct_exit_code(run) == code


def test_a_job_no_longer_waiting_drops_the_wait_reason_it_was_requeued_with() -> None:
    fields = "|".join
    rows = parse_squeue(
        fields(["7", "7", "N/A", "RUNNING", "BeginTime", "n1", "0:05", "1"])
        + "\n"
        + fields(["8", "8", "N/A", "PENDING", "BeginTime", "", "0:00", "1"])
        + "\n"
    )
    tasks = squeue_tasks(rows)
    assert tasks["7"][None].reason is None
    assert tasks["8"][None].reason == "BeginTime"
    ended = sacct_tasks(parse_sacct("9|9|COMPLETED|0:0|00:01:00|n1|BeginTime|||\n"))
    assert ended["9"][None].reason is None
    held = sacct_tasks(parse_sacct("10|10|PENDING|0:0|00:00:00||JobHeldUser|||\n"))
    assert held["10"][None].reason == "JobHeldUser"


def _task(state: State, raw: str, code: int | None) -> Observation:
    return Observation(state, raw, "squeue", exit_code=code)


def test_array_exit_code_is_not_0_while_a_failed_task_has_no_code_yet() -> None:
    """squeue knows COMPLETED means 0, but not a FAILED task's code: wait for sacct."""
    obs = aggregate(
        [
            _task(State.SUCCEEDED, "COMPLETED", 0),
            _task(State.FAILED, "FAILED", None),
        ]
    )
    assert (obs.state, obs.exit_code, obs.raw_state) == (
        State.FAILED,
        None,
        "array[COMPLETED=1,FAILED=1]",
    )


@pytest.mark.parametrize(
    ("tasks", "state", "code"),
    [
        ([(State.SUCCEEDED, "COMPLETED", 0)] * 2, State.SUCCEEDED, 0),
        (
            [(State.SUCCEEDED, "COMPLETED", 0), (State.RUNNING, "RUNNING", None)],
            State.RUNNING,
            None,
        ),
        ([(State.QUEUED, "PENDING", None), (State.HELD, "PENDING", None)], State.QUEUED, None),
        ([(State.HELD, "PENDING", None)] * 2, State.HELD, None),
        ([(State.FAILED, "FAILED", 2), (State.CANCELLED, "CANCELLED", 0)], State.FAILED, 2),
        ([(State.CANCELLED, "CANCELLED", 0)] * 3, State.CANCELLED, 0),
        (
            [(State.TIMEOUT, "TIMEOUT", 0), (State.OUT_OF_MEMORY, "OUT_OF_MEMORY", 0)],
            State.OUT_OF_MEMORY,
            0,
        ),
    ],
)
def test_array_aggregation(
    tasks: list[tuple[State, str, int | None]], state: State, code: int | None
) -> None:
    obs = aggregate([_task(*t) for t in tasks])
    assert (obs.state, obs.exit_code) == (state, code)


# ---- captured live ---------------------------------------------------------------------


def _sbatch(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["sbatch", "--parsable", "--output=/dev/null", *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        timeout=60,
    ).stdout.strip()


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_squeue_and_sacct_output_captured_live(tmp_path: Path) -> None:
    backend = SlurmBackend()
    held = _sbatch("--hold", "--job-name=parse-held", "--wrap=true", cwd=tmp_path)
    array = _sbatch("--array=0-1", "--job-name=parse-arr", "--wrap=exit 3", cwd=tmp_path)
    try:
        rows = parse_squeue(backend._squeue([held, array], None))
        by_id = {row.job_id: row for row in rows}
        assert by_id[held].raw_state == "PENDING" and by_id[held].reason == "JobHeldUser"
        assert by_id[held].task_id is None and by_id[held].restarts == 0
        assert observe_squeue(rows)[held].state is State.HELD
        assert {row.base_id for row in rows if row.job_id != held} == {array}
        assert {row.task_id for row in rows if row.base_id == array} <= {"0", "1", "[0-1]"}

        deadline = time.monotonic() + 300
        while True:
            runs = parse_sacct(backend._sacct([array], None))
            if {r.raw_state for r in runs} == {"FAILED"} and len(runs) == 2:
                break
            assert time.monotonic() < deadline, runs
            time.sleep(1)
        assert sorted((r.job_id, r.exit_code, r.runs) for r in runs) == [
            (f"{array}_0", 3, 1),
            (f"{array}_1", 3, 1),
        ]
        assert all(r.nodes in ("n1", "n2") and r.elapsed_s is not None for r in runs)
        obs = observe_sacct(runs)[array]
        assert (obs.state, obs.exit_code, obs.raw_state) == (State.FAILED, 3, "array[FAILED=2]")

        subprocess.run(["scancel", held], check=True, timeout=60)
        deadline = time.monotonic() + 120
        while True:
            (cancelled,) = parse_sacct(backend._sacct([held], None))
            if cancelled.raw_state.startswith("CANCELLED"):
                break
            assert time.monotonic() < deadline, cancelled
            time.sleep(1)
        assert cancelled.raw_state == "CANCELLED by 0"
        assert observe_sacct([cancelled])[held].state is State.CANCELLED
    finally:
        subprocess.run(["scancel", held, array], capture_output=True, check=False)


@pytest.mark.parametrize(
    ("spec", "size"),
    [("0-2", 3), ("0-9", 10), ("1,3,5", 3), ("0-10:2", 6), ("0-99%10", 100), ("7", 1), ("x", None)],
)
def test_array_size(spec: str, size: int | None) -> None:
    assert array_size(spec) == size


def test_array_not_final_while_sacct_knows_only_the_base_record() -> None:
    """Seen on the test cluster right after an array 0-2 ended: squeue still listed the 3
    tasks, but sacct knew only the base record, without its task id. Reporting that record
    as the job would end the array as "FAILED 2" and lose tasks 0 and 1."""
    squeue = parse_squeue(
        "12858_0|12858|0|COMPLETED|None|n1|0:01|0|\n"
        "12858_2|12858|2|FAILED|NonZeroExitCode|n1|0:00|0|\n"
        "12858_1|12858|1|FAILED|NonZeroExitCode|n2|0:01|0|\n"
    )
    lagging = parse_sacct(
        "12858|12858|FAILED|2:0|00:00:00|n1|None||00:00.019\n"
        "12858.batch|12858.batch|FAILED|2:0|00:00:00|n1|||00:00.017\n"
    )
    obs = array_observation(squeue_tasks(squeue)["12858"], sacct_tasks(lagging)["12858"], 3)
    assert obs is not None
    assert (obs.state, obs.exit_code) == (State.FAILED, None)  # squeue's view: codes unknown
    assert obs.raw_state == "array[COMPLETED=1,FAILED=2]"
    # squeue dropped tasks 0 and 1 (MinJobAge) and sacct still lags: not final yet
    only_last = squeue_tasks([row for row in squeue if row.task_id == "2"])["12858"]
    partial = array_observation(only_last, sacct_tasks(lagging)["12858"], 3)
    assert partial is not None and partial.state is State.RUNNING
    assert partial.reason is not None and partial.reason.startswith("1 of 3 tasks reported")
    complete = parse_sacct(
        "12858_0|12859|COMPLETED|0:0|00:00:01|n1|None||00:00.010\n"
        "12858_1|12860|FAILED|1:0|00:00:01|n2|None||00:00.010\n"
        "12858_2|12858|FAILED|2:0|00:00:00|n1|None||00:00.019\n"
    )
    final = array_observation(only_last, sacct_tasks(complete)["12858"], 3)
    assert final is not None
    assert (final.state, final.exit_code, final.source) == (State.FAILED, 1, "sacct")


def test_an_ended_array_task_drops_the_array_limit_it_waited_on() -> None:
    """sacct keeps the last pending reason of a task that waited on `%N` (JobArrayTaskLimit)
    or a QOS/association limit: once it ran, that reason is no longer why anything happens;
    a reason that says why it ended stays."""
    ended = sacct_tasks(
        parse_sacct(
            "11_2|11|COMPLETED|0:0|00:00:05|n1|JobArrayTaskLimit|||\n"
            "12|12|COMPLETED|0:0|00:00:05|n1|QOSMaxJobsPerUserLimit|||\n"
            "13|13|FAILED|1:0|00:00:05|n1|NonZeroExitCode|||\n"
        )
    )
    assert ended["11"]["2"].reason is None
    assert ended["12"][None].reason is None
    assert ended["13"][None].reason == "NonZeroExitCode"
    waiting = sacct_tasks(parse_sacct("14_3|14|PENDING|0:0|00:00:00||JobArrayTaskLimit|||\n"))
    assert waiting["14"]["3"].reason == "JobArrayTaskLimit"
