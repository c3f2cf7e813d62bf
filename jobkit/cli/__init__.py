"""The `jobkit` command: a click group whose verbs are imported only when used.

Errors are handled here and nowhere else: a JobkitError is one line on stderr and its exit
code; Ctrl-C exits 130 quietly; click's usage errors exit 2; anything else is a bug, shown
as one line (JOBKIT_DEBUG=1 prints the traceback).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from jobkit import __version__
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
}
"""Verb -> module; each module defines a click command named like the verb."""

READ_MOSTLY_VERBS = frozenset({"status", "logs", "why", "doctor", "report", "plot", "cancel"})
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

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_INTERNAL = 70  # EX_SOFTWARE


class Interrupted(Exception):
    """Ctrl-C inside a verb (click would print a blank line for a KeyboardInterrupt)."""


class ReaderGone(Exception):
    """stdout's reader went away inside a verb (click would exit 1 for a BrokenPipeError)."""


class LazyGroup(click.Group):
    """A group that imports a verb's module only when that verb is run or listed in help."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [verb for verb in VERBS if _module_exists(VERBS[verb])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = VERBS.get(cmd_name)
        if module_name is None or not _module_exists(module_name):
            return None
        command = getattr(importlib.import_module(module_name), cmd_name, None)
        return command if isinstance(command, click.Command) else None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the verb; Ctrl-C leaves as Interrupted, a closed stdout as ReaderGone."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None
        except BrokenPipeError:
            raise ReaderGone() from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The verb list of --help; a verb whose module fails to import is shown as such."""
        rows = []
        for verb in self.list_commands(ctx):
            try:
                command = self.get_command(ctx, verb)
            except ImportError as err:
                rows.append((verb, f"(unavailable: {err})"))
                continue
            if command is not None and not command.hidden:
                rows.append((verb, command.get_short_help_str(formatter.width - 6 - len(verb))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "-V", "--version", prog_name="jobkit", message="%(prog)s %(version)s"
)
def cli() -> None:
    """One YAML job spec to a running, tracked distributed PyTorch job.

    Backends: local (this machine), slurm, pbs, sge, ssh (a list of hosts), submitit.
    Start with `jobkit render examples/quickstart.yaml`.
    """


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
        click.echo(f"jobkit: {note}", err=True)
    return code


def _run_verb(args: list[str]) -> int:
    try:
        result: Any = cli.main(
            args=args,
            prog_name="jobkit",
            standalone_mode=False,
        )
    except JobkitError as err:
        for line in err.lines():
            click.echo(f"jobkit: {line}", err=True)
        return err.exit_code
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except click.Abort as err:
        if isinstance(err.__cause__ or err.__context__, KeyboardInterrupt | EOFError):
            return EXIT_INTERRUPTED
        click.echo("jobkit: aborted", err=True)
        return 1
    except (KeyboardInterrupt, Interrupted):
        return EXIT_INTERRUPTED
    except (BrokenPipeError, ReaderGone):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as err:
        return _internal_error(err)
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


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
        click.echo(f"jobkit: cannot write the output: {err.strerror or err}", err=True)
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
    click.echo(f"jobkit: internal error: {type(err).__name__}: {detail}{hint}", err=True)
    return EXIT_INTERNAL


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the exit flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
