"""`jobkit cancel ID... [--last]`: one cancel command per backend for all the jobs."""

from __future__ import annotations

import json
from collections import defaultdict

import click

from jobkit.core.errors import JobkitError, SchedulerError, UsageError
from jobkit.core.lifecycle import SUBMITTING, StateSource
from jobkit.registry.store import JobRecord, Store


@click.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--last", is_flag=True, help="Cancel the newest job.")
@click.option("--json", "as_json", is_flag=True, help="Print what was cancelled as JSON.")
def cancel(ids: tuple[str, ...], last: bool, as_json: bool) -> int:
    """Cancel jobs: scancel, qdel, or the backend's own stop (all of a backend's at once).

    An ID may be a sweep's: its unfinished tasks are cancelled (one scheduler call), and a
    task's jobkit id cancels that task alone. Jobs that already ended are left alone (exit 0).
    The registry records CANCELLED at once;
    the next `jobkit status` confirms it with the scheduler. Exit 1 when a cancel command
    failed or a job is still being submitted.
    """
    if not ids and not last:
        raise UsageError("give one or more job ids, or --last")
    from jobkit.backends.registry import BackendUnavailable, get_backend
    from jobkit.cli.sweepview import named_sweeps, newest_attempts
    from jobkit.manager.refresh import refresh
    from jobkit.manager.submit import reconcile_submissions
    from jobkit.registry.ids import resolve_jobs, with_last

    with Store() as store:
        reconcile_submissions(store)
        # A sweep (--last: the last submission, a whole sweep too): its tasks' newest attempts.
        sweeps, job_ids = named_sweeps(store, with_last(store, ids, last))
        records = resolve_jobs(store, job_ids)
        named = {r.jobkit_id for r in records}
        tasks = [r for rows in sweeps.values() for r in newest_attempts(rows)]
        records += [r for r in tasks if r.jobkit_id not in named]
        records = refresh(store, records).records
        in_sweeps = {r.jobkit_id for r in tasks} - named
        groups: dict[str, list[JobRecord]] = defaultdict(list)
        skipped: list[tuple[JobRecord, str]] = []
        pending = False
        for record in records:
            if record.state == SUBMITTING or record.scheduler_id is None:
                pending = True
                skipped.append((record, "is still being submitted; try again in a moment"))
            elif record.is_final and record.jobkit_id in in_sweeps:
                continue  # a sweep's ended task: nothing to say
            elif record.is_final and record.state_source != StateSource.CANCEL:
                skipped.append((record, f"already ended ({record.state}); nothing to cancel"))
            else:
                groups[record.backend].append(record)
        cancelled: list[JobRecord] = []
        errors: list[JobkitError] = []
        for backend_name, group in groups.items():
            try:
                get_backend(backend_name).cancel([r.tracked() for r in group])
            except (SchedulerError, BackendUnavailable) as err:
                errors.append(err)
                continue
            store.mark_cancelled([r.jobkit_id for r in group])
            cancelled.extend(store.get(r.jobkit_id) for r in group)
        for record, why in skipped:
            click.echo(f"jobkit: {record.jobkit_id} {why}", err=True)
        for sweep_id in sweeps:
            mine = [r for r in cancelled if r.sweep_id == sweep_id]
            if not mine and not as_json:
                click.echo(f"jobkit: sweep {sweep_id}: every task already ended", err=True)
        if as_json:
            click.echo(json.dumps([r.to_dict() for r in cancelled], indent=2))
        else:
            for record in cancelled:
                task = f", sweep {record.sweep_id} task {record.task}" if record.sweep_id else ""
                click.echo(
                    f"cancelled {record.jobkit_id}"
                    f" ({record.backend} job {record.scheduler_id}{task})"
                )
        for failure in errors:
            click.echo(f"jobkit: {failure.show()}", err=True)
        return 1 if errors or pending else 0
