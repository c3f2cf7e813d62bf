"""`jobkit shell SPEC`: an interactive shell in the allocation SPEC describes, with the job's
environment (docs/interactive.md)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import click

from jobkit.cli.common import SpecArgs, spec_options
from jobkit.core.errors import JobkitError, UsageError

RC_VARIABLE = "JOBKIT_SHELL_RC"
"""The rc file's text travels in the environment (srun passes it to the node), so no file has
to be shared between this machine and the node."""
INNER = [
    "bash",
    "-c",
    f'exec bash --rcfile <(printf "%s\\n" "${RC_VARIABLE}") -i',
]
"""What runs with a terminal in the allocation: bash reading the job's environment as its rc
file (constant words: the spec's values are inside the rc text, quoted by the templates)."""


@click.command()
@spec_options
@click.option(
    "--dry-run", is_flag=True, help="Print the command and the shell's rc file; start nothing."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the command and rc as JSON; start nothing."
)
def shell(spec_args: SpecArgs, dry_run: bool, as_json: bool) -> int:
    """Open a shell in the allocation SPEC asks for, with the job's environment set.

    Slurm: salloc with the job script's own options, then a shell on the first node (srun
    --pty) where JOBKIT_*, MASTER_ADDR/MASTER_PORT, the NCCL variables, modules and the
    Python environment are set as in the job. local: a shell on this machine. `exit` leaves
    (and gives the allocation back); the exit code is the shell's.
    """
    from jobkit.backends.registry import get_backend
    from jobkit.manager.submit import render_script
    from jobkit.render.shellrc import shell_rc

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
    click.echo(f"jobkit: {_what(argv, len(INNER), spec.name)}", err=True)
    return _run_foreground(argv, {**os.environ, RC_VARIABLE: rc})


def _what(argv: list[str], inner_words: int, name: str) -> str:
    """The one line saying what is asked for and how to leave."""
    request = argv[: len(argv) - inner_words]
    if not request:
        return (
            f"a shell on this machine with the environment of the job {name}; `exit` or"
            " Ctrl-D leaves"
        )
    if "srun" in request:
        request = request[: request.index("srun")]
    return (
        f"asking for the allocation of the job {name}: {shlex.join(request)}; the shell opens"
        " on its first node with the job's environment; `exit` or Ctrl-D leaves and gives the"
        " allocation back"
    )


def _run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run argv on this terminal; Ctrl-C belongs to it (jobkit ignores SIGINT meanwhile)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        done = subprocess.run(argv, env=env, check=False)
    except OSError as err:
        raise JobkitError(f"cannot run {argv[0]}: {err.strerror or err}") from None
    finally:
        signal.signal(signal.SIGINT, previous)
    return done.returncode if done.returncode >= 0 else 128 - done.returncode
