"""`jobkit show ID`: what ran, where, from which code and software (docs/provenance.md)."""

from __future__ import annotations

import json

import click

from jobkit.registry.store import Store


@click.command()
@click.argument("job_id", metavar="ID", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print everything recorded, as JSON.")
@click.option("--last", is_flag=True, help="The most recent job (run or attempt).")
def show(job_id: str | None, as_json: bool, last: bool) -> int:
    """Show one job's provenance: its command, spec, code (commit, uncommitted changes,
    snapshot) and the software and hosts it ran on. ID as other verbs take it: a jobkit id
    or a unique prefix, the scheduler's id, an array task (123_4); or --last."""
    from jobkit.core.errors import UsageError
    from jobkit.provenance.read import provenance_of
    from jobkit.provenance.view import page
    from jobkit.registry.ids import resolve_jobs

    if (job_id is None) == (not last):
        raise UsageError("give one job ID or --last (not both)")
    with Store() as store:
        (record,) = resolve_jobs(store, [job_id] if job_id else [], last=last)
        found = provenance_of(record)
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2, sort_keys=True))
    else:
        click.echo("\n".join(page(found)))
    return 0
