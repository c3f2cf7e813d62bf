"""Errors a user can cause: each knows its exit code and its one-line message."""

from __future__ import annotations

import os


class JobkitError(Exception):
    """Base class: shown to the user as one line, never as a traceback."""

    exit_code = 1

    def show(self) -> str:
        """The one line printed on stderr (prefixed with 'jobkit: ' by the CLI)."""
        return str(self)

    def lines(self) -> list[str]:
        """Every line printed on stderr, each prefixed with 'jobkit: ' (one, but a spec with
        several schema errors reports them all at once: SpecError.more)."""
        return [self.show()]


class SpecError(JobkitError):
    """A bad job spec, profile or --set value: `file:line: key.path: message`, exit 2."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.key = key
        self.more: list[SpecError] = []
        """The spec's further problems, in file order (the schema's: all reported at once)."""
        super().__init__(self.show())

    def every(self) -> list[SpecError]:
        """This problem and the further ones."""
        return [self, *self.more]

    def lines(self) -> list[str]:
        """One `file:line: key: message` line per problem."""
        return [error.show() for error in self.every()]

    def show(self) -> str:
        where = ""
        if self.file:
            # A file name with a newline or an escape sequence is shown quoted: one line.
            name = self.file if self.file.isprintable() else repr(self.file)
            where = name + (f":{self.line}" if self.line else "") + ": "
        shown_key = self.key if self.key is None or self.key.isprintable() else repr(self.key)
        key = f"{shown_key}: " if shown_key else ""
        return f"{where}{key}{self.message}"


class UsageError(JobkitError):
    """A bad command-line use that is not about the spec (unknown job id, ...), exit 2."""

    exit_code = 2


class SchedulerError(JobkitError):
    """A scheduler command failed: carries argv, exit code and stderr verbatim, exit 1."""

    exit_code = 1

    def __init__(
        self,
        argv: list[str],
        returncode: int | None,
        stdout: str,
        stderr: str,
        reason: str | None = None,
    ) -> None:
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.reason = reason
        super().__init__(self.show())

    def show(self) -> str:
        import shlex

        from jobkit.core.display import LINE_MAX, first_line, printable, shorten

        cmd = shorten(printable(shlex.join(self.argv)), LINE_MAX)
        why = self.reason or f"exit {self.returncode}"
        detail, more = first_line(self.stderr or self.stdout)
        shown = f"{cmd}: {why}" + (f": {detail}" if detail else "")
        if not more:
            return shown
        if os.environ.get("JOBKIT_DEBUG"):
            return f"{shown}\n{(self.stderr or self.stdout).strip()}"
        lines = f"{more} more line{'s' if more > 1 else ''}"
        return f"{shown} ({lines}: rerun with JOBKIT_DEBUG=1 to see them)"


class CrossFieldError(ValueError):
    """A cross-field check failed; `key` names the field the message is about (`path`, when
    given, is its key path with list positions, e.g. ("sweep", "sets", 2))."""

    def __init__(
        self, key: str, message: str, *, path: tuple[str | int, ...] | None = None
    ) -> None:
        self.key = key
        self.message = message
        self.path = path
        super().__init__(f"{key}: {message}")
