"""`jobkit shell SPEC --on CLUSTER` (or `cluster:` in SPEC): a shell in an allocation on the
cluster, reached over ssh (docs/remote.md, docs/interactive.md)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import click

from jobkit.cli.common import SpecArgs
from jobkit.core.errors import JobkitError, UsageError


def shell_on(spec_args: SpecArgs, name: str, *, dry_run: bool, as_json: bool) -> int:
    """Render with the cluster's facts (as `submit --on`), then salloc + `srun --pty` there
    with a terminal; the exit code is the remote shell's."""
    from jobkit.backends.registry import get_backend
    from jobkit.cli.shellrun import INNER, RC_VARIABLE, run_foreground, what_line
    from jobkit.manager.submit import render_script
    from jobkit.remote.clusters import get_cluster
    from jobkit.remote.interactive import stage_rc, terminal_argv
    from jobkit.remote.submit import cluster_sets
    from jobkit.remote.transport import Transport
    from jobkit.render.shellrc import shell_rc

    cluster = get_cluster(name)
    sets = (*cluster_sets(cluster, spec_args.backend), *spec_args.sets)
    loaded = replace(spec_args, backend=None, sets=sets).load()
    spec = loaded.spec
    script = render_script(spec, loaded.template_dir, Path(cluster.workdir))
    rc = f"unset {RC_VARIABLE}\n" + shell_rc(spec, loaded.template_dir)
    argv = get_backend(spec.backend).interactive_argv(spec, script, INNER)
    if argv is None:
        raise JobkitError(f"shell: not available for the {spec.backend} backend")
    if as_json:
        data = {"backend": spec.backend, "cluster": cluster.name, "argv": argv, "rc": rc}
        click.echo(json.dumps(data, indent=2))
        return 0
    where = f"{cluster.host}:{cluster.workdir}"
    if dry_run:
        click.echo(f"# would run (on {cluster.name}, in {where}), with {RC_VARIABLE} set to:")
        sys.stdout.write(rc)
        click.echo(shlex.join(argv))
        return 0
    if not sys.stdin.isatty():
        raise UsageError("shell: needs a terminal (its standard input is not one)")
    transport = Transport(cluster)
    remote = terminal_argv(transport, stage_rc(transport, rc), argv)
    said = what_line(argv, len(INNER), spec.name)
    click.echo(f"jobkit: on {cluster.name} ({where}): {said}", err=True)
    return run_foreground(remote, dict(os.environ))
