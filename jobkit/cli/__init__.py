"""The `jobkit` command: a click group whose verbs are imported only when used.

Errors are handled here and nowhere else: a JobkitError is one line on stderr and its exit
code; Ctrl-C exits 130 quietly; click's usage errors exit 2; anything else is a bug, shown
as one line (JOBKIT_DEBUG=1 prints the traceback).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from jobkit import __version__
from jobkit.errors import JobkitError

VERBS = {
    "render": "jobkit.cli.render",
    "submit": "jobkit.cli.submit",
    "status": "jobkit.cli.status",
    "logs": "jobkit.cli.logs",
    "cancel": "jobkit.cli.cancel",
}
"""Verb -> module; each module defines a click command named like the verb."""

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_INTERNAL = 70  # EX_SOFTWARE


class Interrupted(Exception):
    """Ctrl-C inside a verb (click would print a blank line for a KeyboardInterrupt)."""


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
        """Run the verb; Ctrl-C leaves as Interrupted so click prints nothing."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None

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

    Backends: local (this machine), slurm, pbs, ssh (a list of hosts), submitit.
    Start with `jobkit render examples/quickstart.yaml`.
    """


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with `argv` (default: sys.argv[1:]) and return the exit code."""
    try:
        result: Any = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="jobkit",
            standalone_mode=False,
        )
    except JobkitError as err:
        click.echo(f"jobkit: {err.show()}", err=True)
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
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as err:
        return _internal_error(err)
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def main() -> NoReturn:
    """The console-script entry point."""
    sys.exit(run())


def _internal_error(err: BaseException) -> int:
    if os.environ.get("JOBKIT_DEBUG"):
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
