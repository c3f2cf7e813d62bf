"""`jobkit rerun ID [--set KEY=VALUE]`: the job's code snapshot and spec as a new run."""

from __future__ import annotations

import json

import click

from jobkit.registry.store import Store


@click.command()
@click.argument("job_id", metavar="ID")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change a key of the recorded spec (repeatable), as submit's --set.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the new job as JSON.")
def rerun(job_id: str, sets: tuple[str, ...], as_json: bool) -> int:
    """Submit a job again as a new run: the same code snapshot and resolved spec (with any
    --set on top). Refused when its snapshot is gone."""
    from jobkit.cli.jobview import submitted_line
    from jobkit.provenance.rerun import rerun as submit_rerun
    from jobkit.registry.ids import resolve_job

    with Store() as store:
        original = resolve_job(store, job_id)
        record = submit_rerun(store, original, sets)
    if as_json:
        click.echo(json.dumps(record.to_dict(), indent=2))
    else:
        click.echo(f"{submitted_line(record)} (rerun of {original.jobkit_id})")
    return 0
