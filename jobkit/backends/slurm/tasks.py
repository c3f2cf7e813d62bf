"""From parsed squeue/sacct rows to one Observation per job: task states, array aggregation,
the exit code Slurm recorded. Pure functions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from jobkit.backends.base import Observation
from jobkit.backends.slurm.parse import SacctRun, SqueueRow
from jobkit.backends.slurm.states import SLURM_STATES, normalize_slurm_state, slurm_state_word
from jobkit.core.arrays import array_includes, array_size
from jobkit.core.states import State

_FINAL_ORDER = (
    State.OUT_OF_MEMORY,
    State.NODE_FAIL,
    State.TIMEOUT,
    State.FAILED,
    State.CANCELLED,
)
"""Which task state an array reports when its tasks ended differently (worst first)."""


def _task_observation(
    raw_state: str,
    source: str,
    *,
    exit_code: int | None = None,
    signal: int | None = None,
    reason: str | None = None,
    nodes: str | None = None,
    elapsed_s: float | None = None,
    requeues: int | None = None,
    max_rss: str | None = None,
    cpu_time: str | None = None,
    earlier_runs_s: float | None = None,
) -> Observation:
    return Observation(
        state=normalize_slurm_state(raw_state, exit_code, reason),
        raw_state=raw_state,
        source=source,
        exit_code=exit_code,
        signal=signal,
        reason=reason,
        nodes=nodes,
        elapsed_s=elapsed_s,
        requeues=requeues,
        max_rss=max_rss,
        cpu_time=cpu_time,
        earlier_runs_s=earlier_runs_s,
    )


TaskMap = dict[str | None, Observation]
"""A job's tasks by task id (`"4"`, a pending range `"[5-9]"`; None for a plain job)."""


WAIT_REASONS = frozenset(
    {
        "BeginTime",
        "Priority",
        "Resources",
        "Dependency",
        "None",
        "JobArrayTaskLimit",
        "ReqNodeNotAvail",
        "Licenses",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
    }
)
"""Reasons a job waits in the queue: stale once it runs or ended."""
_LIMIT_FAMILIES = ("QOS", "Assoc", "MaxCpu", "MaxGRES", "MaxMem", "MaxNode")
"""Starts of the names of limits a job waits on (QOSMaxJobsPerUserLimit, AssocGrpCpuLimit...)."""


def _current_reason(word: str, reason: str | None) -> str | None:
    """The reason, unless it is a wait reason of a job no longer waiting (a requeued job
    keeps BeginTime in squeue and sacct after it ran again; an array task that waited on
    the array's limit keeps JobArrayTaskLimit)."""
    if word == "PENDING" or reason is None:
        return reason
    waited = reason in WAIT_REASONS or (
        reason.startswith(_LIMIT_FAMILIES) and reason.endswith("Limit")
    )
    return None if waited else reason


def squeue_tasks(rows: Sequence[SqueueRow]) -> dict[str, TaskMap]:
    """Per base job id, each task's observation from squeue (COMPLETED means exit 0)."""
    tasks: dict[str, TaskMap] = defaultdict(dict)
    for row in rows:
        word = slurm_state_word(row.raw_state)
        exit_code = 0 if word == "COMPLETED" else None
        tasks[row.base_id][row.task_id] = _task_observation(
            row.raw_state,
            "squeue",
            exit_code=exit_code,
            reason=_current_reason(word, row.reason),
            nodes=row.nodes,
            elapsed_s=row.elapsed_s,
            requeues=row.restarts,
        )
    return dict(tasks)


NO_CODE_STATES = frozenset({"FAILED", "NODE_FAIL", "BOOT_FAIL"})
"""Ends where sacct's ExitCode `0:0` means "no code", not success."""


def sacct_exit_code(run: SacctRun) -> int | None:
    """The run's exit code, or None where sacct's `0:0` is no exit code.

    A failed node (NODE_FAIL, BOOT_FAIL) ended the job, not the program. And when
    slurmdbd was down while a job ran, slurmctld may record it later as FAILED with
    ExitCode 0:0 (the job-start record carries the state, the lost completion record
    the code).
    """
    word = slurm_state_word(run.raw_state)
    if run.exit_code == 0 and not run.signal and word in NO_CODE_STATES:
        return None
    known = SLURM_STATES.get(word)
    if run.exit_code == 0 and not run.signal and known is not None and not known.is_final:
        return None  # PENDING (a held job too), RUNNING...: 0:0 of a job that has not ended
    return run.exit_code


def sacct_tasks(runs: Sequence[SacctRun]) -> dict[str, TaskMap]:
    """Per base job id, each task's observation from sacct (latest run of each)."""
    tasks: dict[str, TaskMap] = defaultdict(dict)
    for run in runs:
        tasks[run.base_id][run.task_id] = _task_observation(
            run.raw_state,
            "sacct",
            exit_code=sacct_exit_code(run),
            signal=run.signal,
            reason=_current_reason(slurm_state_word(run.raw_state), run.reason),
            nodes=run.nodes,
            elapsed_s=run.elapsed_s,
            requeues=max(run.runs - 1, 0),
            max_rss=run.max_rss,
            cpu_time=run.cpu_time,
            earlier_runs_s=run.earlier_elapsed_s if run.runs > 1 else None,
        )
    return dict(tasks)


def summary(tasks: TaskMap) -> Observation:
    """A plain job's observation, or an array's tasks aggregated."""
    if set(tasks) == {None}:
        return tasks[None]
    return aggregate([obs for key, obs in tasks.items() if key is not None])


def observe_squeue(rows: Sequence[SqueueRow]) -> dict[str, Observation]:
    """One observation per base job id (array tasks aggregated)."""
    return {base: summary(tasks) for base, tasks in squeue_tasks(rows).items()}


def observe_sacct(runs: Sequence[SacctRun]) -> dict[str, Observation]:
    """One observation per base job id (array tasks aggregated)."""
    return {base: summary(tasks) for base, tasks in sacct_tasks(runs).items()}


def _task_order(key: str | None) -> tuple[int, int, str]:
    """Tasks by number, pending ranges last: the first failed task gives an array's code."""
    text = key or ""
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def task_count(key: str | None) -> int:
    """1 for a task; the size of a pending range `[5-9]`."""
    if key is not None and key.startswith("["):
        return array_size(key.strip("[]")) or 1
    return 1


def array_observation(
    live: TaskMap | None, done: TaskMap | None, expected: int | None
) -> Observation | None:
    """An array job from both sources, task by task (sacct for ended tasks, squeue else).

    Right after the end, sacct may know only the base record (without a task id) and
    squeue may have dropped early tasks: while fewer tasks than the array has are
    accounted for, an all-ended view is reported as still RUNNING, not as final.
    """
    keys = sorted((set(live or {}) | set(done or {})) - {None}, key=_task_order)
    merged = {
        key: obs
        for key in keys
        if (obs := choose((live or {}).get(key), (done or {}).get(key))) is not None
    }
    if not merged:
        return None
    obs = aggregate(list(merged.values()))
    seen = sum(task_count(key) for key in merged)
    if expected is not None and seen < expected and obs.state.is_final:
        return replace(
            obs,
            state=State.RUNNING,
            exit_code=None,
            reason=f"{seen} of {expected} tasks reported so far ({obs.reason})",
        )
    return obs


def aggregate(tasks: Sequence[Observation]) -> Observation:
    """One observation for a job array from its tasks' observations."""
    counts: dict[str, int] = defaultdict(int)
    for task in tasks:
        counts[slurm_state_word(task.raw_state)] += 1
    raw = ",".join(f"{word}={n}" for word, n in sorted(counts.items()))
    states = [t.state for t in tasks]
    live = [s for s in states if not s.is_final]
    state: State
    if live:
        for candidate in (State.RUNNING, State.SUSPENDED, State.QUEUED, State.PREEMPTED):
            if candidate in live:
                state = candidate
                break
        else:
            state = State.HELD if all(s is State.HELD for s in live) else live[0]
    elif all(s is State.SUCCEEDED for s in states):
        state = State.SUCCEEDED
    else:
        state = next((s for s in _FINAL_ORDER if s in states), State.UNKNOWN)
    failed_codes = [t.exit_code for t in tasks if t.exit_code]
    all_known = all(t.exit_code is not None for t in tasks)
    exit_code = failed_codes[0] if failed_codes else (0 if all_known and not live else None)
    nodes = sorted({t.nodes for t in tasks if t.nodes})
    elapsed = [t.elapsed_s for t in tasks if t.elapsed_s is not None]
    requeues = [t.requeues for t in tasks if t.requeues is not None]
    return Observation(
        state=state,
        raw_state=f"array[{raw}]",
        source=tasks[0].source,
        exit_code=exit_code,
        signal=next((t.signal for t in tasks if t.signal), None),
        reason=f"{len(tasks)} tasks: {raw}",
        nodes=",".join(nodes) or None,
        elapsed_s=max(elapsed) if elapsed else None,
        requeues=sum(requeues) if requeues else None,
        max_rss=None,
        cpu_time=None,
    )


def choose(live: Observation | None, done: Observation | None) -> Observation | None:
    """squeue's answer for a live job (with sacct's sum of its earlier runs, where asked);
    sacct's once it ended (squeue's if sacct lags)."""
    if live is not None and not live.state.is_final:
        if done is not None and _all_runs_ended(live, done):
            return replace(
                live,
                earlier_runs_s=(done.earlier_runs_s or 0.0) + (done.elapsed_s or 0.0),
                earlier_runs_from=done.source,
            )
        exact = done is not None and done.earlier_runs_s is not None
        # ...unless sacct lags one run behind squeue
        if done is not None and exact and live.requeues in (None, done.requeues):
            return replace(
                live,
                earlier_runs_s=done.earlier_runs_s,
                earlier_runs_from=done.source,
                requeues=done.requeues,
            )
        return live
    if done is not None and (done.state.is_final or live is None):
        return done
    return live


def _all_runs_ended(live: Observation, done: Observation) -> bool:
    """sacct's latest line is a run that ended in a requeue (REQUEUED) and squeue counts one
    requeue more: slurmdbd has not written the new run's line yet, and every line it has is
    an earlier run (their sum is exact, not a lower bound)."""
    return (
        slurm_state_word(done.raw_state) == "REQUEUED"
        and done.elapsed_s is not None
        and live.requeues is not None
        and live.requeues == (done.requeues or 0) + 1
    )


def task_in_range(task: str, key: str) -> bool:
    """True when `key`, a task id (`4`) or a range of pending tasks as squeue or sacct print
    it (`[2-5]`, `[2-5%2]`, `[1,3,7-9]`, `[0-10:2]`), names task `task`."""
    if not key.startswith("["):
        return task.isdigit() and key == task
    return array_includes(key.strip("[]"), task)


def task_observation(tasks: TaskMap | None, task: str) -> Observation | None:
    """One array task's observation: its own row, else the pending range that holds it
    (`123_[2-5]`: Slurm keeps tasks not yet started in one record); None when not shown."""
    if not tasks:
        return None
    if task in tasks:
        return tasks[task]
    for key, obs in tasks.items():
        if key is not None and key.startswith("[") and task_in_range(task, key):
            return obs
    return None
