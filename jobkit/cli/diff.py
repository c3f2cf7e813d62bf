"""`jobkit diff A B`: what differs between two jobs (docs/provenance.md)."""

from __future__ import annotations

import json

import click

from jobkit.registry.store import Store


@click.command()
@click.argument("first", metavar="A")
@click.argument("second", metavar="B")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
def diff(first: str, second: str, as_json: bool) -> int:
    """Compare two jobs: spec, code (commit and files), packages (conda's and modules too),
    container image, hosts and scheduler settings, in that order. Exit 0 either way (a
    difference is not an error)."""
    from jobkit.provenance.compare import as_json as diff_json
    from jobkit.provenance.compare import as_text, compare
    from jobkit.provenance.read import provenance_of
    from jobkit.registry.ids import resolve_job

    with Store() as store:
        a = provenance_of(resolve_job(store, first))
        b = provenance_of(resolve_job(store, second))
    found = compare(a, b)
    if as_json:
        click.echo(json.dumps(diff_json(found), indent=2))
    else:
        click.echo("\n".join(as_text(a, b, found)))
    return 0
