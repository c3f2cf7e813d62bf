"""`jobkit render SPEC`: print (or write) the script `jobkit submit` would send. Runs nothing.

The options are read here; the work is cli/rendering.py's (which `render SPEC` alone reaches
without click: cli/__init__.py).
"""

from __future__ import annotations

import click

from jobkit.cli.common import SpecArgs, spec_options
from jobkit.cli.rendering import render_job


@click.command()
@spec_options
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Write the script to FILE (mode 0700: it holds env.vars; replaced atomically)"
    " instead of stdout.",
)
@click.option(
    "--show-command",
    is_flag=True,
    help="Also print the command that would submit the script, on stderr.",
)
@click.option(
    "--node-rank",
    type=int,
    metavar="N",
    help="Instead, print what to run by hand on node N (static rendezvous; docs/train.md).",
)
@click.option(
    "--master",
    metavar="ADDR",
    help="With --node-rank: node 0's address (default: ssh.hosts[0], else $MASTER_ADDR).",
)
@click.option(
    "--port",
    type=click.IntRange(1024, 65535),
    metavar="PORT",
    help="With --node-rank: the rendezvous port (default: launch.master_port, else 29500).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON instead: backend, name, spec file, workdir, the submit command, the"
    " script and the spec as resolved (every default and layer applied).",
)
def render(
    spec_args: SpecArgs,
    output: str | None,
    show_command: bool,
    node_rank: int | None,
    master: str | None,
    port: int | None,
    as_json: bool,
) -> None:
    """Print the batch script for SPEC: exactly what `jobkit submit` sends. Runs nothing."""
    render_job(spec_args, output, show_command, node_rank, master, port, as_json)
