"""Runs that outlive their jobs (docs/runs.md): the resubmission decision on registry rows,
the script of a later attempt, and on the real cluster: a job whose requeue Slurm refuses
(`--no-requeue`, as at a site without requeue) resubmitted by `submit --wait`, then
`jobkit retry`; a sweep task retried alone; a job preempted in partition `norequeue`
(PreemptMode=CANCEL) resubmitted by `jobkit watch`."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from jobkit.backends.base import Observation
from jobkit.core.conventions import FINISHED_FILE, REQUEUE_REFUSED_FILE
from jobkit.core.states import State
from jobkit.manager.attempts import (
    RunNotes,
    changed_rows,
    has_ended,
    resubmit_ended,
    why_resubmit,
)
from jobkit.registry.store import JobRecord, Store
from jobkit.render.attempt import Attempt
from jobkit.render.engine import render
from jobkit.spec.schema import JobSpec
from tests.manager.helpers import Invoke, wait_until

SPEC = {"name": "t", "backend": "slurm", "run": {"command": ["true"]}}


def _row(
    store: Store,
    run_dir: Path,
    state: State,
    source: str = "sacct",
    *,
    requeue: bool = True,
    max_attempts: int = 5,
    **obs: Any,
) -> JobRecord:
    """A submitted Slurm job whose last observation is `state` from `source`."""
    spec = {**SPEC, "scheduler": {"requeue": requeue, "max_attempts": max_attempts}}
    rec = store.create_intent(
        backend="slurm", name="t", spec=spec, script="", workdir=run_dir.parent
    )
    sched = str(5000 + store.count())
    store.mark_submitted(
        rec.jobkit_id, scheduler_id=sched, argv=[], log_paths={"run_dir": str(run_dir)}
    )
    observation = Observation(state, state.value, source, **obs)
    store.record_observations({rec.jobkit_id: observation})
    return store.get(rec.jobkit_id)


def _why(record: JobRecord, *, cancelled: bool = False) -> str | None:
    return why_resubmit(record, RunNotes.read(record.run_dir), cancelled_by_user=cancelled)


def test_preempted_and_node_fail_go_on_only_when_the_run_may(tmp_path: Path) -> None:
    with Store() as store:
        preempted = _row(store, tmp_path / "a", State.PREEMPTED)
        assert _why(preempted) == "was preempted"
        assert _why(_row(store, tmp_path / "b", State.NODE_FAIL)) == "ended with NODE_FAIL"
        # Still in the queue's view (squeue): the scheduler may requeue it; not ended.
        in_queue = _row(store, tmp_path / "c", State.PREEMPTED, "squeue")
        assert not has_ended(in_queue) and _why(in_queue) is None
        assert _why(_row(store, tmp_path / "d", State.PREEMPTED, requeue=False)) is None
        assert _why(_row(store, tmp_path / "e", State.PREEMPTED, max_attempts=1)) is None
        assert _why(preempted, cancelled=True) is None
        (tmp_path / "f").mkdir()
        (tmp_path / "f" / FINISHED_FILE).write_text("done\n")
        assert _why(_row(store, tmp_path / "f", State.PREEMPTED)) is None
        assert _why(_row(store, tmp_path / "g", State.FAILED, exit_code=1)) is None


def test_a_refused_requeue_counts_only_for_the_job_that_noted_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with Store() as store:
        failed = _row(store, run_dir, State.FAILED, exit_code=75)
        (run_dir / REQUEUE_REFUSED_FILE).write_text(
            f"{failed.scheduler_id} scontrol requeue failed\n"
        )
        assert _why(failed) == "could not be requeued (scontrol requeue failed)"
        (run_dir / REQUEUE_REFUSED_FILE).write_text("4999 scontrol requeue failed\n")
        assert _why(failed) is None  # an earlier attempt's note in the shared run folder


def test_only_rows_changed_by_this_refresh_are_looked_at(tmp_path: Path) -> None:
    with Store() as store:
        preempted = _row(store, tmp_path / "a", State.PREEMPTED)
        assert changed_rows([preempted], [preempted]) == []
        assert resubmit_ended(store, [preempted], [preempted]) == []
        running = preempted.with_columns({"state": State.RUNNING.value})
        assert changed_rows([running], [preempted]) == [preempted]


def test_cancelled_by_jobkit_cancel_is_not_resubmitted(tmp_path: Path) -> None:
    with Store() as store:
        record = _row(store, tmp_path / "a", State.RUNNING, "squeue")
        store.mark_cancelled([record.jobkit_id])
        store.record_observations(
            {record.jobkit_id: Observation(State.PREEMPTED, "PREEMPTED", "sacct")}
        )
        after = store.get(record.jobkit_id)
        assert has_ended(after)
        assert resubmit_ended(store, [record], [after]) == []  # would sbatch otherwise


def test_a_later_attempt_bakes_in_the_run_folder_and_id_quoted() -> None:
    spec = JobSpec.model_validate(SPEC)
    first = render(spec)
    assert 'export JOBKIT_RUN_ID="${JOBKIT_RUN_DIR##*/}" JOBKIT_ATTEMPT=1\n' in first
    hostile = "/runs/it's $(here)/t-12"
    later = render(spec, attempt=Attempt(run_id="t-12", run_dir=hostile, number=3))
    assert "JOBKIT_RUN_DIR='/runs/it'\"'\"'s $(here)/t-12'\n" in later
    assert "JOBKIT_RUN_ID=t-12\nJOBKIT_ATTEMPT=3\n" in later
    assert 'jobkit_link "$JOBKIT_RUN_ID" latest' in later
    assert "JOBKIT_ATTEMPT=1" not in later
    with pytest.raises(ValueError, match="unusable"):
        Attempt(run_id="x", run_dir="/a\nb", number=2)


def test_retry_refuses_a_succeeded_job_and_watch_has_nothing_to_do(
    jobkit: Invoke, tmp_path: Path
) -> None:
    with Store() as store:
        done = _row(store, tmp_path / "a", State.SUCCEEDED, exit_code=0)
    result = jobkit("retry", done.jobkit_id)
    assert (result.code, result.out) == (1, "")
    assert (
        result.err
        == f"jobkit: {done.jobkit_id} ({done.scheduler_id}) succeeded: nothing to retry\n"
    )
    assert jobkit("retry", "jknope").err == "jobkit: no tracked job 'jknope'\n"
    idle = jobkit("watch", "--interval", "1")
    assert (idle.code, idle.err) == (0, "jobkit: no unfinished run to watch\n")
    bad = jobkit("watch", "--interval", "0")
    assert bad.code == 2 and bad.err.startswith("jobkit: --interval 0: must be a positive")


def _spec(folder: Path, command: str) -> Path:
    """A Slurm job that asks to be requeued (exit 75) where Slurm refuses it: requeue on for
    jobkit, `--no-requeue` for the job (scontrol requeue: "presently disabled")."""
    lines = [
        "name: refused",
        "backend: slurm",
        "scheduler:",
        "  requeue: true",
        "  max_attempts: 2",
        '  extra: ["--no-requeue"]',
        "launch:",
        "  launcher: srun",
        "run:",
        f"  command: {json.dumps(['bash', '-c', command])}",
        f"logs:\n  dir: {json.dumps(str(folder / 'logs'))}",
    ]
    path = folder / "refused.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slurm
def test_refused_requeue_is_resubmitted_then_retried(
    jobkit: Invoke, slurm_cluster: object, tmp_path: Path
) -> None:
    """Attempt 1 exits 75, Slurm refuses `scontrol requeue`, the script notes it, and
    `submit --wait` resubmits attempt 2 into the same run folder with the same JOBKIT_RUN_ID;
    attempt 2 does the same but max_attempts (2) stops the run. `jobkit retry` then submits
    attempt 3 by hand, and refuses a second retry while it runs."""
    record_ids = 'echo "$JOBKIT_ATTEMPT $JOBKIT_RUN_ID $SLURM_JOB_ID" >>"$JOBKIT_RUN_DIR/ids"'
    spec = _spec(tmp_path, f"{record_ids}; sleep 1; exit 75")
    started = time.monotonic()
    result = jobkit("submit", str(spec), "--wait")
    assert result.code == 75, result.err
    lines = [line for line in result.err.splitlines() if "resubmitted as attempt" in line]
    assert len(lines) == 1 and "could not be requeued" in lines[0], result.err
    with Store() as store:
        first = store.find(result.out.split()[1])[0]
        attempts = store.attempts(first.run_key)
    assert [(r.attempt, r.state, r.exit_code) for r in attempts] == [
        (1, "FAILED", 75),
        (2, "FAILED", 75),
    ]
    run_dir = Path(attempts[0].run_dir or "")
    assert attempts[1].run_dir == str(run_dir)
    ids = [line.split() for line in (run_dir / "ids").read_text().splitlines()]
    assert [(a, run_id) for a, run_id, _ in ids] == [("1", run_dir.name), ("2", run_dir.name)]
    assert [sched for *_, sched in ids] == [r.scheduler_id for r in attempts]

    retried = jobkit("retry", attempts[0].jobkit_id, "--json")
    assert retried.code == 0, retried.err
    third = json.loads(retried.out)
    assert (third["attempt"], third["previous"]) == (3, attempts[1].jobkit_id)
    again = jobkit("retry", third["jobkit_id"])
    assert (
        again.code == 1
        and again.err.startswith("jobkit: ")
        and "retry takes a job that ended" in again.err
    )
    wait_until(jobkit, third["jobkit_id"], lambda r: r["state"] == "FAILED", timeout=240)
    assert (run_dir / "ids").read_text().splitlines()[-1].startswith(f"3 {run_dir.name} ")
    assert time.monotonic() - started < 240


@pytest.mark.slurm
def test_retry_of_a_sweep_task_runs_that_task_alone(
    jobkit: Invoke, slurm_cluster: object, tmp_path: Path
) -> None:
    """Task 1 of a 3-task array fails; `jobkit retry` submits task 1 alone (an array of that
    one task) as attempt 2, in the task's run folder with its JOBKIT_RUN_ID and overrides."""
    note = 'echo "$JOBKIT_ATTEMPT $JOBKIT_RUN_ID $JOBKIT_TASK_ID $*" >>"$JOBKIT_RUN_DIR/ids"'
    command = [f"{note}; [[ $1 != x=1 || $JOBKIT_ATTEMPT == 2 ]]", "sw"]
    spec = tmp_path / "sw.yaml"
    spec.write_text(
        "name: sw\nbackend: slurm\nlaunch:\n  launcher: srun\n"
        f"run:\n  command: {json.dumps(['bash', '-c', *command])}\n"
        f"logs:\n  dir: {json.dumps(str(tmp_path / 'logs'))}\n"
        "sweep:\n  grid:\n    x: [0, 1, 2]\n",
        encoding="utf-8",
    )
    submitted = jobkit("submit", str(spec), "--wait")
    assert submitted.code == 1, submitted.err  # task 1 failed
    with Store() as store:
        failed = next(r for r in store.list_jobs(recent_final_s=None) if r.task == "1")
    assert failed.state == "FAILED"
    retried = jobkit("retry", failed.jobkit_id)
    assert retried.code == 0, retried.err
    assert retried.out.startswith(f"jobkit: {failed.jobkit_id} ({failed.scheduler_id}) ended")
    with Store() as store:
        second = store.attempts(failed.run_key)[-1]
    assert (second.attempt, second.sweep_id, second.task) == (2, failed.sweep_id, "1")
    assert second.scheduler_id and second.scheduler_id.endswith("_1")
    wait_until(jobkit, second.jobkit_id, lambda r: r["state"] == "SUCCEEDED", timeout=240)
    run_dir = Path(failed.run_dir or "")
    assert second.run_dir == str(run_dir)
    lines = (run_dir / "ids").read_text().splitlines()
    assert lines == [f"1 {run_dir.name} 1 x=1", f"2 {run_dir.name} 1 x=1"]


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.preemption  # norequeue and urgent jobs (tests/plugins/groups.py)
@pytest.mark.timeout(400)
def test_preempted_job_is_resubmitted_by_watch(
    jobkit: Invoke, slurm_cluster: object, tmp_path: Path
) -> None:
    """A job in partition `norequeue` (PreemptMode=CANCEL) that ignores SIGTERM is preempted
    by an `urgent` job on its node and killed after the GraceTime (30 s): Slurm does not
    requeue it, sacct says PREEMPTED, and `jobkit watch` resubmits it as attempt 2."""
    note = 'echo "$JOBKIT_ATTEMPT $JOBKIT_RUN_ID" >>"$JOBKIT_RUN_DIR/ids"'
    spec = _spec(tmp_path, f"{note}; trap '' TERM; [[ $JOBKIT_ATTEMPT != 1 ]] || sleep 300")
    text = spec.read_text().replace('  extra: ["--no-requeue"]\n', "")
    spec.write_text(text + "resources:\n  partition: norequeue\n", encoding="utf-8")
    submitted = jobkit("submit", str(spec))
    assert submitted.code == 0, submitted.err
    first_id = submitted.out.split()[1]
    running = wait_until(jobkit, first_id, lambda r: r["state"] == "RUNNING", timeout=300)
    urgent = subprocess.run(
        ["sbatch", "--parsable", "-p", "urgent", "-w", running["nodes"], "-o", "/dev/null",
         "--wrap", "sleep 1"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        watched = jobkit("watch", first_id, "--interval", "2")
    finally:
        subprocess.run(["scancel", urgent], capture_output=True, timeout=60, check=False)
    assert watched.code == 0, watched.err
    with Store() as store:
        first, second = store.attempts(first_id)
    said = f"jobkit: {first_id} ({first.scheduler_id}) was preempted; resubmitted as attempt 2:"
    assert said in watched.err, watched.err
    assert (first.state, second.state, second.attempt) == ("PREEMPTED", "SUCCEEDED", 2)
    run_dir = Path(first.run_dir or "")
    assert (run_dir / "ids").read_text().splitlines() == [f"1 {run_dir.name}", f"2 {run_dir.name}"]
