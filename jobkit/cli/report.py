"""`jobkit report ID... [--last] [--json]`: what a job used (time, memory, CPU per node and
step, trainer throughput, GPU) and the `--set` words that size the next run (docs/report.md).

One state refresh and one accounting query per backend for all the jobs named. Exit codes:
0; 2 for an unknown or ambiguous id; 3 when a scheduler query failed (the report then shows
what it could, and says what failed).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from jobkit.core.display import printable_lines
from jobkit.core.errors import SchedulerError, UsageError
from jobkit.registry.store import JobRecord, Store

if TYPE_CHECKING:
    from jobkit.core.usage import Usage
    from jobkit.report.sweep import SweepReport

EXIT_PARTIAL = 3


@click.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--last", is_flag=True, help="The newest job.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def report(ids: tuple[str, ...], last: bool, as_json: bool) -> int:
    """What each job used and how to size its next run: elapsed vs requested time, peak
    memory vs requested, CPU efficiency per node and step, trainer throughput and GPU.

    ID is a jobkit id (or a unique prefix of one) or the scheduler's id; an array task is
    named like 123_4. A running job is reported as far as it got. A sweep's id compares its
    tasks: overrides, state, final loss, best evaluation loss, steps/s, elapsed; best first.
    """
    from jobkit.manager.refresh import refresh
    from jobkit.report.build import build_report
    from jobkit.report.text import render_text

    if not ids and not last:
        raise UsageError("give one or more job IDs, or --last")
    from jobkit.registry.ids import with_last
    from jobkit.registry.selection import named_sweeps

    with Store() as store:
        sweeps, job_ids = named_sweeps(store, with_last(store, ids, last))
        targets = _resolve(store, job_ids)
        rows = [r for found in sweeps.values() for r in found]
        result = refresh(store, [record for record, _ in targets] + rows)
        for failure in result.failures:
            click.echo(f"jobkit: {failure.warning()}", err=True)
        fresh = result.records[: len(targets)]
        compared = _sweep_reports(sweeps, result.records[len(targets) :])
        targets = [(new, task) for new, (_, task) in zip(fresh, targets, strict=True)]
    usages, notes, failed = _usages(targets)
    if any("@" in record.backend for record, _ in targets):  # docs/remote.md: copies
        from jobkit.remote.mirror import local_view

        targets = [(local_view(record), task) for record, task in targets]
    reports = [
        build_report(
            record,
            usages.get(record.jobkit_id),
            notes.get(record.jobkit_id),
            record.log_paths_for(task).get("run_dir") or record.run_dir,
        )
        for record, task in targets
    ]
    if as_json:
        data = [r.to_dict() for r in reports] + [c.to_dict() for c, _ in compared]
        click.echo(json.dumps(data, indent=2))
    else:
        from jobkit.report.sweep import render_text as render_sweep

        texts = [render_text(r) for r in reports]
        texts += [render_sweep(c, short) for c, short in compared]
        click.echo(printable_lines("\n\n".join(texts)))
    return EXIT_PARTIAL if failed or result.failures else 0


def _sweep_reports(
    sweeps: dict[str, list[JobRecord]], refreshed: Sequence[JobRecord]
) -> list[tuple[SweepReport, dict[str, str]]]:
    """Each named sweep's comparison (its tasks' newest attempts), with each task's
    overrides as shown."""
    from pathlib import Path
    from typing import Any

    from jobkit.cli.taskfacts import short_overrides, task_overrides
    from jobkit.plot.runs import NoMetricsError, find_sources
    from jobkit.registry.selection import newest_attempts
    from jobkit.report.sweep import compare, task_row

    fresh = {r.jobkit_id: r for r in refreshed}
    files: dict[Path, dict[str, Any]] = {}
    found: list[tuple[SweepReport, dict[str, str]]] = []
    for sweep_id, rows in sweeps.items():
        tasks = newest_attempts([fresh.get(r.jobkit_id, r) for r in rows])
        table = []
        short: dict[str, str] = {}
        for record in tasks:
            overrides = task_overrides(record, files)
            short[record.jobkit_id] = short_overrides(overrides)
            try:
                metrics: Path | None = find_sources(record, None)[0].metrics_path
            except NoMetricsError:
                metrics = None
            table.append(task_row(record, overrides, metrics))
        found.append((compare(sweep_id, tasks[0].name, table), short))
    return found


def _resolve(store: Store, ids: Sequence[str]) -> list[tuple[JobRecord, str | None]]:
    """The jobs named (and the array task each names), in order, once each."""
    from jobkit.registry.ids import resolve_job_task

    found: list[tuple[JobRecord, str | None]] = []
    for text in ids:
        record, task = resolve_job_task(store, text)
        if record.is_array and task is None:
            raise UsageError(
                f"job {record.jobkit_id} is an array: name one task, e.g."
                f" {record.scheduler_id}_0 (Grid Engine: {record.scheduler_id}.0)"
            )
        if all((r.jobkit_id, t) != (record.jobkit_id, task) for r, t in found):
            found.append((record, task))
    return found


def _usages(
    targets: Sequence[tuple[JobRecord, str | None]],
) -> tuple[dict[str, Usage], dict[str, str], bool]:
    """jobkit id -> Usage, jobkit id -> why there is none; True when a query failed. One
    `Backend.usage` call per backend for all its jobs."""
    from jobkit.backends.registry import BackendUnavailable, get_backend

    groups: dict[str, list[tuple[JobRecord, str | None]]] = defaultdict(list)
    for record, task in targets:
        if record.scheduler_id:
            groups[record.backend].append((record, task))
    usages: dict[str, Usage] = {}
    notes: dict[str, str] = {}
    failed = False
    for name, group in groups.items():
        try:
            backend = get_backend(name)
            tracked = {}
            for record, task in group:
                job = record.tracked()
                if task is not None:
                    sid = backend.task_label(job.scheduler_id, task)
                    job = replace(job, scheduler_id=sid)
                tracked[record.jobkit_id] = job
            answer = backend.usage(list(tracked.values()))
        except (SchedulerError, BackendUnavailable) as err:
            failed = True
            for record, _ in group:
                notes[record.jobkit_id] = f"usage query failed: {' '.join(err.show().split())}"
            continue
        for jobkit_id, job in tracked.items():
            if job.scheduler_id in answer:
                usages[jobkit_id] = answer[job.scheduler_id]
            else:
                notes[jobkit_id] = backend.usage_note
    for record, _ in targets:
        if not record.scheduler_id:
            notes[record.jobkit_id] = "the job was never submitted"
    return usages, notes, failed
