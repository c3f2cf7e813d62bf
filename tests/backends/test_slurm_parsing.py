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
    choose,
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


def test_a_requeued_job_s_earlier_runs_are_summed_from_sacct_duplicates() -> None:
    """sacct -D of a job requeued twice (recorded on this cluster, `scontrol requeue`):
    the latest run is the job's; the two before it add up to its earlier runs."""
    out = (
        "5067|5067|REQUEUED|0:0|00:00:07|n2|None|||\n"
        "5067.batch|5067.batch|CANCELLED|0:15|00:00:07|n2||||\n"
        "5067|5067|REQUEUED|0:0|00:01:02|n2|BeginTime|||\n"
        "5067|5067|RUNNING|0:0|00:00:03|n2|BeginTime|||\n"
        "5067.batch|5067.batch|RUNNING|0:0|00:00:03|n2||||\n"
    )
    (run,) = parse_sacct(out)
    assert (run.raw_state, run.elapsed_s, run.runs, run.earlier_elapsed_s) == (
        "RUNNING",
        3.0,
        3,
        69.0,
    )
    obs = sacct_tasks([run])["5067"][None]
    assert (obs.requeues, obs.earlier_runs_s) == (2, 69.0)
    # Never requeued: no sum to give (the registry keeps no earlier runs).
    (plain,) = parse_sacct("9|9|COMPLETED|0:0|00:01:00|n1||||\n")
    assert sacct_tasks([plain])["9"][None].earlier_runs_s is None


def test_a_pending_requeued_job_gets_sacct_s_sum_with_squeue_s_state() -> None:
    live = squeue_tasks(parse_squeue("5067|5067|N/A|PENDING|BeginTime||0:00|1\n"))
    done = sacct_tasks(
        parse_sacct(
            "5067|5067|REQUEUED|0:0|00:00:07|n2|None|||\n"
            "5067|5067|PENDING|0:0|00:00:00|None assigned|BeginTime|||\n"
        )
    )
    obs = choose(live["5067"][None], done["5067"][None])
    assert obs is not None
    assert (obs.state, obs.source, obs.elapsed_s) == (State.QUEUED, "squeue", 0.0)
    assert (obs.requeues, obs.earlier_runs_s, obs.earlier_runs_from) == (1, 7.0, "sacct")
    # sacct one run behind squeue (its second requeue not written yet): squeue's answer.
    behind = done
    live2 = squeue_tasks(parse_squeue("5067|5067|N/A|PENDING|BeginTime||0:00|2\n"))
    late = choose(live2["5067"][None], behind["5067"][None])
    assert late is not None and late.earlier_runs_s is None and late.requeues == 2


def test_a_requeued_job_whose_new_run_sacct_has_not_written_gets_the_ended_runs_sum() -> None:
    """slurmdbd writes the requeued job's new (PENDING) line a moment after squeue shows it
    back in the queue (CI: `status JOB` said "at least: as last seen" there). sacct's lines
    all being ended runs, their sum is the exact time already run."""
    live = squeue_tasks(parse_squeue("6725|6725|N/A|PENDING|BeginTime||0:00|1\n"))
    done = sacct_tasks(parse_sacct("6725|6725|REQUEUED|0:0|00:00:05|n1|None|||\n"))
    obs = choose(live["6725"][None], done["6725"][None])
    assert obs is not None
    assert (obs.state, obs.source, obs.requeues) == (State.QUEUED, "squeue", 1)
    assert (obs.earlier_runs_s, obs.earlier_runs_from) == (5.0, "sacct")
    # Twice requeued, the second run's line written but not the third's: 7 + 62 s.
    live2 = squeue_tasks(parse_squeue("6725|6725|N/A|PENDING|BeginTime||0:00|2\n"))
    done2 = sacct_tasks(
        parse_sacct(
            "6725|6725|REQUEUED|0:0|00:00:07|n2|None|||\n"
            "6725|6725|REQUEUED|0:0|00:01:02|n2|BeginTime|||\n"
        )
    )
    both = choose(live2["6725"][None], done2["6725"][None])
    assert both is not None and (both.requeues, both.earlier_runs_s) == (2, 69.0)
    # The same REQUEUED line with squeue counting two requeues: a run is missing, no sum.
    missing = choose(live2["6725"][None], done["6725"][None])
    assert missing is not None and missing.earlier_runs_s is None


def test_a_completing_row_does_not_shrink_the_jobs_nodes() -> None:
    """A 2-node job that ended in a second was recorded as `nodes n1`: squeue lists only the
    nodes still completing. The row says nothing of the nodes, so the record keeps n[1-2]."""
    from jobkit.core.lifecycle import Progress, apply_observation

    fields = "|".join
    running = squeue_tasks(
        parse_squeue(fields(["7", "7", "N/A", "RUNNING", "None", "n[1-2]", "0:01", "0"]) + "\n")
    )["7"][None]
    completing = squeue_tasks(
        parse_squeue(fields(["7", "7", "N/A", "COMPLETING", "None", "n1", "0:01", "0"]) + "\n")
    )["7"][None]
    assert (running.nodes, completing.nodes, completing.state) == ("n[1-2]", None, State.RUNNING)
    seen = apply_observation(Progress("QUEUED"), running, at=1.0)
    assert seen is not None
    after = apply_observation(seen, completing, at=2.0)
    assert after is not None and after.nodes == "n[1-2]"


def test_a_held_job_in_sacct_has_no_exit_code() -> None:
    """sacct shows a held job PENDING, reason JobHeldUser, ExitCode 0:0 (seen in CI with an
    empty squeue answer): HELD with no exit code, not exit 0."""
    held = sacct_tasks(parse_sacct("10|10|PENDING|0:0|00:00:00||JobHeldUser|||\n"))["10"][None]
    assert (held.state, held.exit_code) == (State.HELD, None)
    done = sacct_tasks(parse_sacct("11|11|COMPLETED|0:0|00:00:05|n1|None|||\n"))["11"][None]
    assert (done.state, done.exit_code) == (State.SUCCEEDED, 0)
