"""`jobkit shell SPEC`: an interactive shell in the allocation SPEC describes, with the job's
environment (docs/interactive.md)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import click

from jobkit.cli.common import SpecArgs, spec_options
from jobkit.cli.shellrun import INNER, RC_VARIABLE, run_foreground, what_line
from jobkit.core.errors import JobkitError, UsageError


@click.command()
@spec_options
@click.option(
    "--dry-run", is_flag=True, help="Print the command and the shell's rc file; start nothing."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the command and rc as JSON; start nothing."
)
@click.option(
    "--on",
    "cluster",
    metavar="CLUSTER",
    help="Open it on this cluster of clusters.yaml, over ssh (docs/remote.md).",
)
def shell(spec_args: SpecArgs, dry_run: bool, as_json: bool, cluster: str | None) -> int:
    """Open a shell in the allocation SPEC asks for, with the job's environment set.

    Slurm: salloc with the job script's own options, then a shell on the first node (srun
    --pty) where JOBKIT_*, MASTER_ADDR/MASTER_PORT, the NCCL variables, modules and the
    Python environment are set as in the job. local: a shell on this machine. `exit` leaves
    (and gives the allocation back); the exit code is the shell's.
    """
    from jobkit.backends.registry import get_backend
    from jobkit.manager.submit import render_script
    from jobkit.remote.speckey import chosen_cluster
    from jobkit.render.shellrc import shell_rc

    if (remote := chosen_cluster(spec_args.spec, spec_args.sets, cluster)) is not None:
        from jobkit.cli.onshell import shell_on  # over ssh: docs/remote.md

        return shell_on(spec_args, remote, dry_run=dry_run, as_json=as_json)
    loaded = spec_args.load()
    spec = loaded.spec
    workdir = Path.cwd()
    script = render_script(spec, loaded.template_dir, workdir)
    rc = f"unset {RC_VARIABLE}\n" + shell_rc(spec, loaded.template_dir)
    argv = get_backend(spec.backend).interactive_argv(spec, script, INNER)
    if argv is None:
        raise JobkitError(
            f"shell: not available for the {spec.backend} backend (docs/interactive.md)"
        )
    if as_json:
        click.echo(json.dumps({"backend": spec.backend, "argv": argv, "rc": rc}, indent=2))
        return 0
    if dry_run:
        click.echo(f"# would run (in {workdir}), with {RC_VARIABLE} set to:")
        sys.stdout.write(rc)
        click.echo(shlex.join(argv))
        return 0
    if not sys.stdin.isatty():
        raise UsageError("shell: needs a terminal (its standard input is not one)")
    click.echo(f"jobkit: {what_line(argv, len(INNER), spec.name)}", err=True)
    return run_foreground(argv, {**os.environ, RC_VARIABLE: rc})
