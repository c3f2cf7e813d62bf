"""`jobkit clusters add|list|check`: the clusters of $JOBKIT_HOME/clusters.yaml
(docs/remote.md)."""

from __future__ import annotations

import subprocess

import click

from jobkit.backends.registry import DEFAULT_REMOTE, remote_commands
from jobkit.core.errors import JobkitError


@click.group()
def clusters() -> None:
    """Clusters reached over ssh: `jobkit submit SPEC --on NAME` (docs/remote.md)."""


@clusters.command("list")
def list_clusters() -> None:
    """The clusters of clusters.yaml, one per line."""
    from jobkit.core.display import table_cell
    from jobkit.remote.clusters import clusters_file, load_clusters

    found = load_clusters()
    if not found:
        click.echo(f"jobkit: no clusters in {clusters_file()} (`jobkit clusters add`)", err=True)
        return
    rows = [["NAME", "HOST", "WORKDIR", "BACKEND", "PYTHON"]]
    rows += [[c.name, c.host, c.workdir, c.backend, c.python or "-"] for c in found.values()]
    cells = [[table_cell(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        padded = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        click.echo("  ".join(padded).rstrip())


@clusters.command("add")
@click.argument("name")
@click.option("--host", required=True, help="The login node: any name ~/.ssh/config knows.")
@click.option("--workdir", required=True, help="Absolute folder on the cluster for jobkit.")
@click.option(
    "--backend", default=DEFAULT_REMOTE, show_default=True, help="The cluster's scheduler."
)
@click.option("--python", help="The job's Python there (env.python).")
@click.option(
    "--default", "defaults", multiple=True, metavar="KEY=VALUE", help="A spec default there."
)
def add(
    name: str,
    host: str,
    workdir: str,
    backend: str,
    python: str | None,
    defaults: tuple[str, ...],
) -> None:
    """Add (or replace) a cluster in clusters.yaml."""
    from jobkit.core.yamlsrc import parse_value
    from jobkit.remote.clusters import Cluster, save_cluster

    values = {}
    for item in defaults:
        key, sep, text = item.partition("=")
        if not sep:
            raise click.UsageError(f"--default {item!r}: expected KEY=VALUE")
        values[key] = parse_value(text, f"--default {item}")
    path = save_cluster(Cluster(name, host, workdir, backend, python, values))
    click.echo(f"jobkit: cluster {name} saved in {path}")


@clusters.command("check")
@click.argument("name")
@click.option(
    "--login",
    is_flag=True,
    help="Log in interactively first (a password or second factor asked once); later"
    " commands reuse that connection.",
)
def check(name: str, login: bool) -> int:
    """One ssh round trip: the scheduler's commands, rsync/tar, the Python, the workdir."""
    from jobkit.remote.check import TRANSFER, probe
    from jobkit.remote.clusters import get_cluster
    from jobkit.remote.transport import Transport

    cluster = get_cluster(name)
    transport = Transport(cluster)
    if login:
        argv = [*transport.ssh_argv(interactive=True), cluster.host, "true"]
        if subprocess.run(argv, check=False).returncode != 0:
            raise JobkitError(f"cluster {name}: the ssh login to {cluster.host} failed")
    facts = probe(transport)
    for cmd in (*remote_commands(cluster.backend), *TRANSFER):
        click.echo(f"{cmd:8} {facts.commands.get(cmd) or 'MISSING'}")
    if cluster.python:
        click.echo(f"python   {cluster.python}: {facts.python_version or 'does not run'}")
    click.echo(
        f"workdir  {cluster.workdir}: {'writable' if facts.workdir_writable else 'NOT writable'}"
    )
    problems = facts.problems(cluster.backend, cluster.python)
    for problem in problems:
        click.echo(f"jobkit: {name}: {problem}", err=True)
    if problems:
        return 1
    click.echo(f"jobkit: cluster {name} is ready")
    return 0
