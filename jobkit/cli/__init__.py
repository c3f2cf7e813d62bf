"""The `jobkit` command: a click group (cli/group.py) whose verbs are imported only when used.

Errors are handled here and nowhere else: a JobkitError is one line on stderr and its exit
code; Ctrl-C exits 130 quietly; click's usage errors exit 2; anything else is a bug, shown
as one line (JOBKIT_DEBUG=1 prints the traceback).

`jobkit render SPEC` and nothing else is run without importing click (cli/rendering.py):
importing click is ~30 ms of render's ~0.2 s start-up (docs/benchmarks.md, case 1).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from jobkit.cli.echo import echo
from jobkit.core.errors import JobkitError
from jobkit.core.private import use_private_umask

VERBS = {
    "render": "jobkit.cli.render",
    "check": "jobkit.cli.check",
    "submit": "jobkit.cli.submit",
    "status": "jobkit.cli.status",
    "logs": "jobkit.cli.logs",
    "why": "jobkit.cli.why",
    "doctor": "jobkit.cli.doctor",
    "report": "jobkit.cli.report",
    "plot": "jobkit.cli.plot",
    "cancel": "jobkit.cli.cancel",
    "retry": "jobkit.cli.retry",
    "watch": "jobkit.cli.watch",
    "nodes": "jobkit.cli.nodes",
    "shell": "jobkit.cli.shell",
    "run": "jobkit.cli.run",
    "show": "jobkit.cli.show",
    "diff": "jobkit.cli.diff",
    "rerun": "jobkit.cli.rerun",
    "clusters": "jobkit.cli.clusters",
}
"""Verb -> module; each module defines a click command named like the verb."""

READ_MOSTLY_VERBS = frozenset(
    {"status", "logs", "why", "doctor", "report", "plot", "cancel", "show", "diff"}
)
"""Verbs that go on from a registry that cannot be written (its disk is full): they show
what it last recorded, cancel still cancels, and one warning line says nothing was saved
(registry/db.py read_only_fallback, docs/reliability.md)."""

USER_UMASK_VERBS = frozenset({"shell"})
"""Verbs that keep the user's umask: `jobkit shell` is the user's own interactive session
(it writes no file of jobkit's; the job's environment travels in its environment)."""

QUICK_EXIT_VERBS = frozenset({"render"})
"""Verbs that read files and print, and hold nothing that needs the interpreter's teardown:
they skip it (about 20 ms with pydantic and jinja2 loaded) and the garbage collections
during their imports (about 10 ms); docs/benchmarks.md, case 1."""

COMPLETION_VARIABLE = "_JOBKIT_COMPLETE"
"""click's shell-completion switch for prog_name "jobkit": when set, click answers instead."""

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_INTERNAL = 70  # EX_SOFTWARE


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with `argv` (default: sys.argv[1:]) and return the exit code.

    Under umask 077 (core/private.py): what jobkit, its launchers and the scheduler's submit
    command create is its owner's only, whatever the user's umask."""
    args = list(argv) if argv is not None else sys.argv[1:]
    verb = _verb(args)
    if verb in USER_UMASK_VERBS:
        return _run(args, verb)
    user_umask = use_private_umask()
    try:
        return _run(args, verb)
    finally:
        os.umask(user_umask)


def _run(args: list[str], verb: str | None) -> int:
    """The verb; a read-mostly one goes on from a registry it cannot write, and says so."""
    if verb not in READ_MOSTLY_VERBS:
        return _run_verb(args)
    from jobkit.registry.db import read_only_fallback

    with read_only_fallback() as notes:
        code = _run_verb(args)
    for note in notes:
        echo(f"jobkit: {note}", err=True)
    return code


def _run_verb(args: list[str]) -> int:
    try:
        result: Any = _call_verb(args)
    except JobkitError as err:
        for line in err.lines():
            echo(f"jobkit: {line}", err=True)
        return err.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as err:
        return _click_error(err)
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def _call_verb(args: list[str]) -> Any:
    """`render SPEC` alone straight to cli/rendering.py; any other command line to click."""
    spec = _fast_render_spec(args)
    if spec is not None:
        from jobkit.cli.rendering import render_job
        from jobkit.cli.specargs import SpecArgs

        render_job(SpecArgs(spec))
        return None
    from jobkit.cli.group import Interrupted, ReaderGone, jobkit_group

    try:
        return jobkit_group(VERBS).main(args=args, prog_name="jobkit", standalone_mode=False)
    except Interrupted:  # out of click's reach, now handled as it is here
        raise KeyboardInterrupt from None
    except ReaderGone:
        raise BrokenPipeError from None


def _fast_render_spec(args: Sequence[str]) -> str | None:
    """The SPEC of a command line that is `render SPEC` and nothing else, or None: click reads
    every other one (options, --help, no SPEC, and shell completion: COMPLETION_VARIABLE)."""
    if len(args) != 2 or args[0] != "render" or os.environ.get(COMPLETION_VARIABLE):
        return None
    spec = args[1]
    return spec if spec and not spec.startswith("-") else None


def _click_error(err: Exception) -> int:
    """click's usage error (its own message, exit 2) or abort; anything else is a bug."""
    if "click" not in sys.modules:  # not imported: the error cannot be one of click's
        return _internal_error(err)
    import click

    if isinstance(err, click.ClickException):
        err.show()
        return err.exit_code
    if isinstance(err, click.Abort):
        if isinstance(err.__cause__ or err.__context__, KeyboardInterrupt | EOFError):
            return EXIT_INTERRUPTED
        echo("jobkit: aborted", err=True)
        return 1
    return _internal_error(err)


def main() -> NoReturn:
    """The console-script entry point.

    A verb of QUICK_EXIT_VERBS runs with the cyclic garbage collector off and leaves with
    os._exit once stdout and stderr are flushed.
    """
    quick = _verb(sys.argv[1:]) in QUICK_EXIT_VERBS
    if not quick:
        sys.exit(run())
    gc.disable()
    code = run()
    os._exit(_flush_for_exit(code))


def _verb(args: Sequence[str]) -> str | None:
    """The verb of a command line: its first word that is not an option."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def _flush_for_exit(code: int) -> int:
    """Flush stdout and stderr (os._exit would drop what they hold); a reader that went
    away makes the exit code EXIT_BROKEN_PIPE, as in run()."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = code or EXIT_BROKEN_PIPE
    except OSError as err:
        echo(f"jobkit: cannot write the output: {err.strerror or err}", err=True)
        code = code or 1
    with contextlib.suppress(OSError):
        sys.stderr.flush()
    return code


def _internal_error(err: BaseException) -> int:
    if os.environ.get("JOBKIT_DEBUG"):
        import traceback  # only for a bug

        traceback.print_exception(err)
    detail = " ".join(str(err).split()) or "(no message)"
    hint = (
        "" if os.environ.get("JOBKIT_DEBUG") else " (rerun with JOBKIT_DEBUG=1 for the traceback)"
    )
    echo(f"jobkit: internal error: {type(err).__name__}: {detail}{hint}", err=True)
    return EXIT_INTERNAL


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the exit flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
