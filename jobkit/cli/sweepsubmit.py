"""`jobkit submit` of a spec with `sweep:` (docs/sweeps.md): the dry run's task list, the
lines printed after submitting, and `--wait` for every task."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from jobkit.cli.sweepview import backend_word
from jobkit.cli.taskfacts import short_overrides, task_overrides
from jobkit.core.display import printable_lines
from jobkit.registry.store import JobRecord, Store

if TYPE_CHECKING:
    from jobkit.manager.submit import Plan

POLL_MIN_S = 1.0
POLL_MAX_S = 10.0


def dry_run_data(plan: Plan) -> dict[str, Any]:
    """The plan as JSON with its tasks: `{..., "sweep": [{"task", "overrides"}]}`."""
    from jobkit.manager.sweep import planned_tasks

    data = plan.to_dict()
    data["sweep"] = [{"task": t.task, "overrides": t.overrides} for t in planned_tasks(plan)]
    return data


def dry_run_lines(plan: Plan) -> list[str]:
    """`# sweep: 4 tasks as one Slurm array (max 2 at once)` and `# task 0: lr=0.001 ...`."""
    from jobkit.manager.sweep import max_parallel, planned_tasks, sweep_mode

    tasks = planned_tasks(plan)
    lines = [f"# sweep: {_how(len(tasks), plan.backend, sweep_mode(plan.backend), None, plan)}"]
    lines += [f"#   task {t.task}: {short_overrides(t.overrides)}" for t in tasks]
    if max_parallel(plan) and sweep_mode(plan.backend) == "array":
        lines.append(f"#   scheduler.array: {plan.spec.scheduler.array}")
    return lines


def _how(count: int, backend: str, mode: str, array_job: str | None, plan: Plan) -> str:
    from jobkit.manager.sweep import max_parallel

    tasks = f"{count} task{'s' if count != 1 else ''}"
    limit = max_parallel(plan)
    at_once = f" (max {limit} at once)" if limit else ""
    if mode == "array":
        array = f" {array_job}" if array_job else ""
        return f"{tasks} as {backend_word(backend)} array{array}{at_once}"
    return f"{tasks} as {backend_word(backend)} jobs{at_once}"


def submitted_lines(plan: Plan, records: Sequence[JobRecord]) -> list[str]:
    """`submitted sweep jkS: 4 tasks as Slurm array 123 (max 2 at once)`, then each task."""
    from jobkit.manager.sweep import sweep_mode

    first = records[0]
    array_job = first.extra.get("array_job")
    how = _how(
        len(records),
        plan.backend,
        sweep_mode(plan.backend),
        str(array_job) if array_job else None,
        plan,
    )
    lines = [f"submitted sweep {first.sweep_id}: {how}: {plan.spec.name}"]
    width = max(len(r.scheduler_id or "-") for r in records)
    for record in records:
        overrides = short_overrides(task_overrides(record, {}))
        sched = (record.scheduler_id or "-").ljust(width)
        lines.append(f"  task {record.task}  {record.jobkit_id}  {sched}  {overrides}")
    return lines


def sweep_json(records: Sequence[JobRecord]) -> dict[str, Any]:
    """`submit --json` of a sweep: its id and its task rows."""
    return {
        "sweep_id": records[0].sweep_id if records else None,
        "tasks": [r.to_dict() for r in records],
    }


def submit_and_report(store: Store, plan: Plan, *, wait: bool, as_json: bool) -> int:
    """Submit the sweep, print what was submitted, and (wait) follow every task to its end;
    the exit status is 0 when every task succeeded, else the first failed task's."""
    from jobkit.manager.sweep import submit_sweep

    records = submit_sweep(store, plan)
    if as_json and not wait:
        click.echo(json.dumps(sweep_json(records), indent=2))
    elif not as_json:
        click.echo(printable_lines("\n".join(submitted_lines(plan, records))))
    if not wait:
        return 0
    finals = wait_all(store, records, quiet=as_json)
    if as_json:
        click.echo(json.dumps(sweep_json(finals), indent=2))
    from jobkit.manager.refresh import exit_status_for

    codes = [exit_status_for(r) for r in finals]
    return next((code for code in codes if code), 0)


def wait_all(store: Store, records: Sequence[JobRecord], *, quiet: bool) -> list[JobRecord]:
    """Poll every task (one refresh for all) until each has settled; each state change is
    one line on stderr (`jobkit: task 2 jkabc RUNNING on n1`)."""
    from jobkit.manager.refresh import refresh, wait_settled

    ids = [r.jobkit_id for r in records]
    last: dict[str, tuple[str, str | None]] = {}
    interval = POLL_MIN_S
    while True:
        result = refresh(store, [store.get(i) for i in ids])
        for failure in result.failures:
            click.echo(f"jobkit: {failure.warning()}", err=True)
        changed = False
        for record in result.records:
            key = (record.state, record.raw_state)
            if last.get(record.jobkit_id) != key:
                last[record.jobkit_id] = key
                changed = True
                if not quiet:
                    click.echo(f"jobkit: {_change_line(record)}", err=True)
        now = time.time()
        if all(wait_settled(r, now) for r in result.records):
            return result.records
        interval = POLL_MIN_S if changed else min(interval * 1.5, POLL_MAX_S)
        time.sleep(interval)


def _change_line(record: JobRecord) -> str:
    words = [f"task {record.task} {record.jobkit_id} {record.state}"]
    if record.nodes:
        words.append(f"on {record.nodes}")
    if record.reason and record.state != "RUNNING":
        words.append(f"- {record.reason}")
    if record.exit_code is not None and record.is_final:
        words.append(f"exit code {record.exit_code}")
    return " ".join(words)
