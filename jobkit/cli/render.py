"""`jobkit render SPEC`: print (or write) the script `jobkit submit` would send. Runs nothing."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobkit.cli.common import SpecArgs, spec_options
from jobkit.core.errors import UsageError

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

SCRIPT_MODE = 0o700  # the script holds env.vars: its owner's only
SCRIPT_PLACEHOLDER = "SCRIPT"
"""Stands for the script's path in --show-command when it goes to stdout (no -o)."""


def submit_command(spec: JobSpec, script_path: Path) -> list[str]:
    """The command `jobkit submit` would run for a script at `script_path` (--show-command).

    It comes from the backend itself (Backend.submit_argv); per-submission values that only
    exist at submit time show as placeholders (`<token>`, `<jobkit-id>`).
    """
    from jobkit.backends.base import SubmitRequest
    from jobkit.backends.registry import get_backend

    request = SubmitRequest(
        jobkit_id="<jobkit-id>",
        spec=spec,
        script="",
        script_path=script_path,
        job_dir=Path("<job-dir>"),
        workdir=Path.cwd(),
        token="<token>",
    )
    return get_backend(spec.backend).submit_argv(request)


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
    if node_rank is None and (master is not None or port is not None):
        raise UsageError("--master and --port go with --node-rank N")
    if node_rank is not None and show_command:
        raise UsageError("--show-command does not go with --node-rank (nothing is submitted)")
    if master is not None and (not master or any(c.isspace() or ord(c) < 32 for c in master)):
        raise UsageError(f"--master {master!r}: give a host name or address")
    loaded = spec_args.load()
    from jobkit.spec.trainer_check import check_trainer_config

    check_trainer_config(loaded, Path.cwd())
    if node_rank is not None:
        from jobkit.render.by_hand import node_script

        script = node_script(loaded.spec, node_rank, master, port, loaded.template_dir)
    else:
        from jobkit.backends.registry import get_backend

        backend = get_backend(loaded.spec.backend)
        script = backend.script(loaded.spec, loaded.template_dir, Path.cwd())
    from jobkit.render.notes import spec_notes

    for note in spec_notes(loaded.spec):  # what a seed-style spec may not expect: said
        click.echo(f"jobkit: note: {note}", err=True)
    script_path = Path(output) if output is not None else Path(SCRIPT_PLACEHOLDER)
    if output is not None:
        write_script(Path(output), script, spec_path=loaded.path)
    if as_json:
        import json

        argv = None if node_rank is not None else submit_command(loaded.spec, script_path)
        data = {
            "backend": loaded.spec.backend,
            "name": loaded.spec.name,
            "spec_file": str(loaded.path),
            "workdir": str(Path.cwd()),
            "node_rank": node_rank,
            "argv": argv,
            "script_file": str(Path(output).absolute()) if output is not None else None,
            "script": script,
            "spec": loaded.spec.model_dump(mode="json"),
        }
        click.echo(json.dumps(data, indent=2))
    elif output is None:
        sys.stdout.write(script)
        sys.stdout.flush()
    if show_command:
        click.echo(shlex.join(submit_command(loaded.spec, script_path)), err=True)


def write_script(target: Path, script: str, *, spec_path: Path | None = None) -> None:
    """Write `script` to `target` atomically (a temp file, then rename), mode 0700.

    A symlink is followed (the file it points to is replaced); a device or pipe that
    already exists (/dev/stdout, /dev/null, a FIFO) is written to directly, never replaced.
    """
    if target.is_dir():
        raise UsageError(f"-o {target}: is a directory")
    if spec_path is not None and target.exists() and _same_file(target, spec_path):
        raise UsageError(f"-o {target}: is the job spec itself; choose another file")
    if target.exists() and not target.is_file():
        _write_in_place(target, script)
        return
    real = Path(os.path.realpath(target))
    import tempfile  # only with -o

    try:
        handle, temp_name = tempfile.mkstemp(
            prefix=f".{real.name}.", suffix=".tmp", dir=real.parent
        )
    except OSError as err:
        raise UsageError(f"-o {target}: cannot write: {err.strerror or err}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(script)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp_name, SCRIPT_MODE)
        os.replace(temp_name, real)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        if isinstance(err, OSError):
            raise UsageError(f"-o {target}: cannot write: {err.strerror or err}") from None
        raise


def _write_in_place(target: Path, script: str) -> None:
    try:
        with open(target, "w", encoding="utf-8") as stream:
            stream.write(script)
    except OSError as err:
        raise UsageError(f"-o {target}: cannot write: {err.strerror or err}") from None


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False
