"""A FAILED Slurm job whose script noted that Slurm was preempting it is PREEMPTED (issue 22
item 6; the real preemption: tests/e2e/test_preemption.py)."""

from __future__ import annotations

from pathlib import Path

from jobkit.backends.base import Observation, TrackedJob
from jobkit.backends.slurm.observe import preempted
from jobkit.backends.slurm.parse import SlurmId
from jobkit.core.states import State

FAILED = Observation(State.FAILED, "FAILED", "sacct", exit_code=1, requeues=0)


def _job(tmp_path: Path, scheduler_id: str, note: str | None) -> TrackedJob:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    if note is not None:
        (run_dir / "preempted").write_text(note)
    return TrackedJob("jk1", scheduler_id, tmp_path, tmp_path, {"run_dir": str(run_dir)})


def test_a_noted_preemption_is_preempted_whatever_the_exit_code(tmp_path: Path) -> None:
    job = _job(tmp_path, "41", "40 0 PreemptTime=2026-11-26T07:00:00\n41 0 PreemptTime=T1\n")
    obs = preempted(FAILED, job, SlurmId.parse("41"))
    assert (obs.state, obs.exit_code, obs.raw_state, obs.source) == (
        State.PREEMPTED, 1, "FAILED", "sacct",
    )  # fmt: skip
    assert obs.reason == (
        "preempted by Slurm (PreemptTime=T1); the job step was stopped and the script ended"
        " with exit code 1"
    )


def test_another_jobs_or_another_runs_note_does_not_count(tmp_path: Path) -> None:
    earlier_attempt = _job(tmp_path, "41", "40 0 PreemptTime=T0\n")
    assert preempted(FAILED, earlier_attempt, SlurmId.parse("41")) is FAILED
    before_a_requeue = _job(tmp_path, "41", "41 0 PreemptTime=T0\n")
    requeued_once = Observation(State.FAILED, "FAILED", "sacct", exit_code=1, requeues=1)
    assert preempted(requeued_once, before_a_requeue, SlurmId.parse("41")) is requeued_once
    assert preempted(FAILED, _job(tmp_path / "x", "41", None), SlurmId.parse("41")) is FAILED


def test_an_array_tasks_note_is_in_its_own_run_folder(tmp_path: Path) -> None:
    (tmp_path / "run-3").mkdir()
    (tmp_path / "run-3" / "preempted").write_text("50_3 0 PreemptTime=T2\n")
    job = TrackedJob("jk2", "50_3", tmp_path, tmp_path, {"run_dir": str(tmp_path / "run-{task}")})
    assert preempted(FAILED, job, SlurmId.parse("50_3")).state is State.PREEMPTED


def test_accounting_that_says_preempted_gets_a_reason_too(tmp_path: Path) -> None:
    """The grace time ran out before the script ended: sacct says PREEMPTED with no reason.

    Seen in CI (first seconds of a job): the row said PREEMPTED and its reason was empty.
    """
    said = Observation(State.PREEMPTED, "PREEMPTED", "sacct", exit_code=0, requeues=0)
    noted = preempted(said, _job(tmp_path, "41", "41 0 PreemptTime=T3\n"), SlurmId.parse("41"))
    assert (noted.state, noted.reason) == (
        State.PREEMPTED,
        "preempted by Slurm (PreemptTime=T3); the job was stopped with exit code 0",
    )
    unnoted = preempted(said, _job(tmp_path / "x", "41", None), SlurmId.parse("41"))
    assert unnoted.reason == (
        "preempted by Slurm (accounting says PREEMPTED); the job was stopped with exit code 0"
    )
    explained = Observation(State.PREEMPTED, "PREEMPTED", "sacct", reason="by the admin")
    assert preempted(explained, _job(tmp_path / "y", "41", None), SlurmId.parse("41")) is explained
