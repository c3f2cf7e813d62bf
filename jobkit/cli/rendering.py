"""What `jobkit render` does once its options are read, without click.

cli/render.py's click command parses the options and calls `render_job`. A command line of
`render SPEC` alone (the common case: a spec rendered again and again while it is written)
comes here straight from cli/__init__.py's `run` (`_fast_render_spec`), which skips importing
click (~30 ms of a ~0.2 s start-up); the output, errors and exit codes are the same, as the
same function makes them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.cli.echo import echo
from jobkit.cli.specargs import SpecArgs
from jobkit.core.errors import UsageError

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

SCRIPT_MODE = 0o700  # the script holds env.vars: its owner's only
SCRIPT_PLACEHOLDER = "SCRIPT"
"""Stands for the script's path in --show-command when it goes to stdout (no -o)."""


def render_job(
    spec_args: SpecArgs,
    output: str | None = None,
    show_command: bool = False,
    node_rank: int | None = None,
    master: str | None = None,
    port: int | None = None,
    as_json: bool = False,
) -> None:
    """Print the batch script for the spec (or write it to `output`): exactly what
    `jobkit submit` sends. Runs nothing."""
    if node_rank is None and (master is not None or port is not None):
        raise UsageError("--master and --port go with --node-rank N")
    if node_rank is not None and show_command:
        raise UsageError("--show-command does not go with --node-rank (nothing is submitted)")
    if master is not None and (not master or any(c.isspace() or ord(c) < 32 for c in master)):
        raise UsageError(f"--master {master!r}: give a host name or address")
    loaded = replace(spec_args, remembered=True).load()  # rendered before: no pydantic
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
        echo(f"jobkit: note: {note}", err=True)
    if loaded.spec.cluster:  # docs/remote.md
        echo(
            f"jobkit: note: cluster: {loaded.spec.cluster}: rendered here as written; `jobkit"
            " submit --dry-run` renders it with the cluster's facts",
            err=True,
        )
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
        echo(json.dumps(data, indent=2))
    elif output is None:
        sys.stdout.write(script)
        sys.stdout.flush()
    if show_command:
        echo(shlex.join(submit_command(loaded.spec, script_path)), err=True)


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
