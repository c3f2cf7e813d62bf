"""The click group of the `jobkit` command: each verb's module imported only when used.

cli/__init__.py imports this (and click) only for a command line it does not take by itself
(every one but `render SPEC`: see its `run`), and hands it the verb table.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

import click

from jobkit.core.version import __version__


class Interrupted(Exception):
    """Ctrl-C inside a verb (click would print a blank line for a KeyboardInterrupt)."""


class ReaderGone(Exception):
    """stdout's reader went away inside a verb (click would exit 1 for a BrokenPipeError)."""


class LazyGroup(click.Group):
    """A group that imports a verb's module only when that verb is run or listed in help."""

    verbs: Mapping[str, str]
    """Verb -> module (cli/__init__.py's VERBS)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [verb for verb in self.verbs if _module_exists(self.verbs[verb])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = self.verbs.get(cmd_name)
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


def jobkit_group(verbs: Mapping[str, str]) -> LazyGroup:
    """The `jobkit` group over `verbs` (verb -> module defining a click command so named)."""

    @click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(
        __version__, "-V", "--version", prog_name="jobkit", message="%(prog)s %(version)s"
    )
    def cli() -> None:
        """One YAML job spec to a running, tracked distributed PyTorch job.

        Backends: local (this machine), slurm, pbs, sge, ssh (a list of hosts), submitit.
        Start with `jobkit render examples/quickstart.yaml`.
        """

    assert isinstance(cli, LazyGroup)
    cli.verbs = verbs
    return cli
