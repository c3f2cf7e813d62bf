"""`jobkit cancel ID... [--last]`: one cancel command per backend for all the jobs
(manager/cancel.py, which jobkit.api's Job.cancel() runs too); this prints what it did."""

from __future__ import annotations

import json

import click

from jobkit.core.errors import UsageError
from jobkit.registry.store import Store


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
    from jobkit.manager.cancel import cancel_jobs

    with Store() as store:
        outcome = cancel_jobs(store, ids, last=last)
        cancelled, errors = outcome.cancelled, outcome.errors
        for record, why in outcome.skipped:
            click.echo(f"jobkit: {record.jobkit_id} {why}", err=True)
        for sweep_id in outcome.sweeps_already_ended():
            if not as_json:
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
        return 1 if errors or outcome.pending else 0
