"""One Observation per Slurm job from what squeue and sacct said about its tasks (pure):
a live answer that settles it, the accounting record, the run folder's exit_code file when
accounting is off, and what a FAILED job's run folder adds (a lost exit code, preemption)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from jobkit.core.records import Observation, TrackedJob
from jobkit.core.run_files import read_exit_file, read_preempted_note
from jobkit.core.states import State

if TYPE_CHECKING:
    from jobkit.backends.slurm.parse import SlurmId
    from jobkit.backends.slurm.tasks import TaskMap


def _plain(tasks: TaskMap | None) -> Observation | None:
    """A plain job's one observation (None when the source does not know it)."""
    from jobkit.backends.slurm.tasks import summary

    if not tasks:
        return None
    return tasks.get(None) or summary(tasks)


def observe(
    slurm_id: SlurmId, job: TrackedJob, live: Mapping[str, TaskMap], done: Mapping[str, TaskMap]
) -> Observation | None:
    """One job's observation from both sources: one task of an array (`123_4`), a whole
    array (its tasks aggregated) or a plain job."""
    from jobkit.backends.slurm.tasks import array_observation, choose, task_observation
    from jobkit.core.arrays import array_size

    number, task = slurm_id.base, slurm_id.task
    if task is not None:
        return choose(
            task_observation(live.get(number), task), task_observation(done.get(number), task)
        )
    if job.extra.get("array"):
        return array_observation(live.get(number), done.get(number), array_size(job.extra["array"]))
    return choose(_plain(live.get(number)), _plain(done.get(number)))


def settled_live(live: Mapping[str, TaskMap], slurm_id: SlurmId, job: TrackedJob) -> bool:
    """squeue alone answers: the job (or task) is there, not ended, (arrays) every task is
    seen, and (a requeued job) the registry already holds sacct's sum of its earlier runs."""
    from jobkit.backends.slurm.tasks import summary, task_count, task_observation
    from jobkit.core.arrays import array_size
    from jobkit.core.earlier_runs import needs_exact

    tasks = live.get(slurm_id.base)
    if not tasks:
        return False
    if slurm_id.task is not None:
        obs = task_observation(tasks, slurm_id.task)
        if obs is not None and needs_exact(obs.requeues, job.extra):
            return False
        return obs is not None and not obs.state.is_final
    if job.extra.get("array"):
        expected = array_size(job.extra["array"])
        seen = sum(task_count(key) for key in tasks if key is not None)
        if expected is not None and seen < expected:
            return False
        return not summary(tasks).state.is_final
    found = summary(tasks)
    return not found.state.is_final and not needs_exact(found.requeues, job.extra)


def lost_exit_code(obs: Observation, job: TrackedJob) -> Observation:
    """A FAILED job whose exit code accounting lost: the run folder's exit_code file."""
    code = read_exit_file(job.extra.get("run_dir"), job.scheduler_id)
    if not code:
        return obs
    note = "exit code from the run folder (accounting recorded none)"
    return replace(obs, exit_code=code, reason=f"{obs.reason}; {note}" if obs.reason else note)


def preempted(obs: Observation, job: TrackedJob, slurm_id: SlurmId) -> Observation:
    """A job Slurm preempted: PREEMPTED with a reason that says so, whatever accounting said.

    Under PreemptMode=CANCEL with a GraceTime, Slurm signals the job step only; the program
    stops (torchrun exits 1, a plain command dies of SIGTERM) and the script ends with that
    failure before the grace time is over, so accounting says FAILED. The script asked Slurm
    (`scontrol show job`: PreemptTime) and noted it in the run folder's `preempted` file.
    When the grace time ran out first, accounting says PREEMPTED itself; the reason then
    comes from the same note, or from accounting alone when the script had no time to write it.
    """
    run_dir = job.extra.get("run_dir")
    if run_dir and slurm_id.task is not None:
        run_dir = run_dir.replace("{task}", slurm_id.task)
    noted = read_preempted_note(run_dir, slurm_id.job, obs.requeues)
    code = "" if obs.exit_code is None else f" with exit code {obs.exit_code}"
    if obs.state is State.PREEMPTED:
        if obs.reason:
            return obs
        said = noted or "accounting says PREEMPTED"
        return replace(obs, reason=f"preempted by Slurm ({said}); the job was stopped{code}")
    if noted is None:
        return obs
    reason = f"preempted by Slurm ({noted}); the job step was stopped and the script ended{code}"
    return replace(obs, state=State.PREEMPTED, reason=reason)


def exit_file_fallback(obs: Observation | None, job: TrackedJob) -> Observation | None:
    """Without accounting: the run folder's exit_code file, else UNKNOWN once it left squeue."""
    code = read_exit_file(job.extra.get("run_dir"), job.scheduler_id)
    if obs is not None and obs.state.is_final:
        if code is None:
            return obs
        state = State.SUCCEEDED if code == 0 else State.FAILED
        if obs.state is State.SUCCEEDED or obs.state is State.FAILED:
            return replace(obs, state=state, exit_code=code, source="exit-file")
        return replace(obs, exit_code=code)
    if obs is not None:
        return obs
    if code is not None:
        return Observation(
            state=State.SUCCEEDED if code == 0 else State.FAILED,
            raw_state="",
            source="exit-file",
            exit_code=code,
            reason="left the queue; exit code from the run folder (accounting is disabled)",
        )
    return Observation(
        state=State.UNKNOWN,
        raw_state="",
        source="squeue",
        reason="left the queue; Slurm accounting is disabled, so how it ended is unknown",
    )
