"""Submitting a sweep (docs/sweeps.md): one registry row per task, sharing a sweep id.

    records = submit_sweep(store, plan)    # plan: manager.submit.plan_submission of a sweep spec

Batch backends ("array": slurm, pbs, sge) get ONE array job: its script and `sweep.json`
(task -> overrides) in `<home>/jobs/<sweep id>/`, one submit command, then each task row
records the scheduler's id of its task (`123_4`) and its own log paths. Launcher backends
("each": local, ssh) get one submission per task (JOBKIT_TASK_ID set through
SubmitRequest.task); the script itself waits for a free slot under `max_parallel`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.backends.registry import get_backend
from jobkit.core.errors import JobkitError, SchedulerError, UsageError
from jobkit.manager import submit as pipeline
from jobkit.manager.badnodes import leave_out_bad_nodes
from jobkit.registry.store import JobRecord, Store, TaskIntent, TaskSubmitted, new_token

if TYPE_CHECKING:
    from jobkit.backends.base import Backend, Submitted

SWEEP_FILE = "sweep.json"
"""In the sweep's folder: {"0": {overrides of task 0}, "1": {...}, ...}."""


@dataclass(frozen=True)
class SweepTaskPlan:
    """One task of a sweep as it will be submitted: its index and its overrides."""

    task: str
    overrides: dict[str, Any]


def planned_tasks(plan: pipeline.Plan) -> list[SweepTaskPlan]:
    """The sweep's tasks in order (none when the spec has no `sweep:`)."""
    from jobkit.spec.sweep import sweep_tasks

    return [SweepTaskPlan(str(t.index), dict(t.overrides)) for t in sweep_tasks(plan.spec)]


def sweep_mode(backend_name: str) -> str:
    """ "array", "each" or "none": how this backend runs a sweep's tasks."""
    return str(get_backend(backend_name).sweep_mode)


def max_parallel(plan: pipeline.Plan) -> int | None:
    """The sweep's `max_parallel` (None: no limit)."""
    sweep = plan.spec.sweep
    return sweep.max_parallel if sweep is not None else None


def submit_sweep(store: Store, plan: pipeline.Plan) -> list[JobRecord]:
    """Record and submit every task of the plan's sweep; returns the task rows, by task.

    A refusal leaves the rows not submitted FAILED with the scheduler's message and is
    raised again (as `manager.submit.submit` does for one job).
    """
    tasks = planned_tasks(plan)
    if not tasks:
        raise UsageError(f"spec {plan.spec.name!r} has no sweep: to submit")
    backend = get_backend(plan.backend)
    mode = backend.sweep_mode
    if mode == "array" and plan.spec.scheduler.array:
        tasks = chosen_tasks(tasks, plan.spec.scheduler.array)
    sweep_id = store.new_id()
    write_sweep_file(store.jobs_dir / sweep_id, tasks)
    if mode == "array":
        return _submit_array(store, backend, plan, sweep_id, tasks)
    if mode == "each":
        return _submit_each(store, backend, plan, sweep_id, tasks)
    raise UsageError(f"sweep: the {plan.backend} backend cannot run a sweep")


def chosen_tasks(tasks: Sequence[SweepTaskPlan], array: str) -> list[SweepTaskPlan]:
    """The tasks a given scheduler.array names (the validator checked they exist)."""
    from jobkit.spec.sweep import array_task_ids

    wanted = {str(index) for index in array_task_ids(array)}
    return [t for t in tasks if t.task in wanted]


def write_sweep_file(folder: Path, tasks: Sequence[SweepTaskPlan]) -> Path:
    """`<folder>/sweep.json`: the mapping task -> overrides."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SWEEP_FILE
    mapping = {t.task: t.overrides for t in tasks}
    path.write_text(json.dumps(mapping, indent=2) + "\n", encoding="utf-8")
    return path


def overrides_pairs(overrides: Mapping[str, Any]) -> list[list[Any]]:
    """The overrides as [key, value] pairs, in the sweep's order."""
    return [[key, value] for key, value in overrides.items()]


def overrides_of(value: Any) -> dict[str, Any] | None:
    """A row's extra['overrides'] ([key, value] pairs, or a mapping) as a dict; None if absent."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return {str(p[0]): p[1] for p in value if isinstance(p, list) and len(p) == 2}
    return None


def read_sweep_file(folder: Path) -> dict[str, dict[str, Any]]:
    """The mapping `write_sweep_file` left ({} when it is missing or unreadable)."""
    try:
        data = json.loads((folder / SWEEP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def _intents(
    store: Store,
    plan: pipeline.Plan,
    sweep_id: str,
    tasks: Sequence[SweepTaskPlan],
    *,
    job_dir: Path | None,
    array_token: str | None = None,
) -> list[JobRecord]:
    """One SUBMITTING row per task (the overrides kept in `extra` for status and report, as
    [key, value] pairs: the registry stores JSON objects with sorted keys). `array_token`:
    the token of the one array job, kept in every row (extra['array_token']) so that each
    task can be adopted under its own id when the submitter dies (manager/submit.py)."""
    spec = plan.spec.model_dump(mode="json")
    submitter = pipeline.submitter_identity()
    shared = {pipeline.ARRAY_TOKEN: array_token} if array_token else {}
    return store.create_sweep_intents(
        backend=plan.backend,
        name=plan.spec.name,
        spec=spec,
        script=plan.script,
        workdir=plan.workdir,
        sweep_id=sweep_id,
        tasks=[
            TaskIntent(
                task=task.task,
                token=new_token(),
                extra={
                    "submitter": submitter,
                    "overrides": overrides_pairs(task.overrides),
                    **shared,
                    **pipeline.code_fact(plan),
                },
            )
            for task in tasks
        ],
        job_dir=job_dir,
    )


def _submit_array(
    store: Store,
    backend: Backend,
    plan: pipeline.Plan,
    sweep_id: str,
    tasks: Sequence[SweepTaskPlan],
) -> list[JobRecord]:
    """One array job for all the tasks; each row gets its task's id and log paths."""
    job_dir = store.jobs_dir / sweep_id
    array_token = new_token()
    records = _intents(store, plan, sweep_id, tasks, job_dir=job_dir, array_token=array_token)
    ids = [r.jobkit_id for r in records]
    try:
        request = replace(
            pipeline._prepare(records[0], plan), jobkit_id=sweep_id, token=array_token
        )
        request, left_out = leave_out_bad_nodes(store, backend, request)  # docs/nodes.md
        pipeline.note_submit_started(request.job_dir)
    except BaseException as err:
        _fail(store, ids, f"submission failed: {pipeline._one_line(err)}")
        raise
    try:
        submitted = backend.submit(request)
    except SchedulerError as err:
        if not backend.submission_refused(err):
            raise pipeline.SubmissionUnknown(sweep_id, backend.name, err) from err
        _fail(store, ids, f"submission refused: {pipeline._one_line(err)}")
        raise
    except JobkitError as err:
        _fail(store, ids, f"submission failed: {pipeline._one_line(err)}")
        raise
    facts = left_out.facts()
    answers = [_task_submitted(backend, record, submitted, facts) for record in records]
    del records  # read back as marked: a 10,000-task sweep holds one set of rows, not two
    return store.mark_tasks_submitted(answers)


def _task_submitted(
    backend: Backend,
    record: JobRecord,
    submitted: Submitted,
    facts: Mapping[str, Any],
) -> TaskSubmitted:
    task = pipeline.as_array_task(backend, submitted, record.task or "0")
    return TaskSubmitted(
        record.jobkit_id,
        scheduler_id=task.scheduler_id,
        argv=task.argv,
        log_paths=task.log_paths,
        extra={**task.extra, **facts},
    )


def _submit_each(
    store: Store,
    backend: Backend,
    plan: pipeline.Plan,
    sweep_id: str,
    tasks: Sequence[SweepTaskPlan],
) -> list[JobRecord]:
    """One submission per task, in order; a failure fails the tasks not yet submitted."""
    records = _intents(store, plan, sweep_id, tasks, job_dir=None)
    done: list[JobRecord] = []
    for index, record in enumerate(records):
        rest = [r.jobkit_id for r in records[index + 1 :]]
        try:
            done.append(pipeline.submit_recorded(store, backend, plan, record))
        except BaseException as err:
            _fail(
                store, rest, f"not submitted: task {record.task} failed ({pipeline._one_line(err)})"
            )
            raise
    return done


def _fail(store: Store, jobkit_ids: Sequence[str], reason: str) -> None:
    store.mark_all_failed(jobkit_ids, reason)
