"""One line on stdout or stderr exactly as `click.echo` writes it, without importing click
for plain text (importing click is ~30 ms of `jobkit render`'s start-up: docs/benchmarks.md).

click.echo strips ANSI codes when the stream is not a terminal and mends a stream with a
misconfigured (ASCII) encoding; neither changes printable ASCII text, which is written as is.
Any other text goes through click.echo itself, so what reaches the stream is click's always.
"""

from __future__ import annotations

import sys


def echo(message: str, *, err: bool = False) -> None:
    """Write `message` and a newline, then flush, as `click.echo(message, err=err)` does."""
    if not _plain(message):
        import click  # ANSI codes or non-ASCII text: click's own handling

        click.echo(message, err=err)
        return
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # no standard stream attached (click writes nothing either)
        return
    stream.write(message + "\n")
    stream.flush()


def _plain(message: str) -> bool:
    """ASCII without an escape character: nothing click could strip or encode otherwise."""
    return message.isascii() and "\x1b" not in message
