"""A problem found before queueing, placed at the file and line of the spec key at fault.

    problem.line_text()  ->  "job.yaml:7: resources.time: 00:05:00 is over ..."

The same `FILE:LINE: KEY: message` form as every spec error (core/errors.py SpecError).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobkit.core.errors import SpecError
from jobkit.core.yamlsrc import KeyPath, format_path
from jobkit.spec.load import LoadedSpec


@dataclass(frozen=True)
class Problem:
    """One thing that would stop the job: where (file, line), which key, what."""

    file: str | None
    line: int | None
    key: str | None
    message: str

    def line_text(self) -> str:
        """The one line printed: `FILE:LINE: KEY: message`."""
        error = SpecError(self.message, file=self.file, line=self.line, key=self.key)
        return error.show()

    def to_dict(self) -> dict[str, Any]:
        """For --json."""
        return {
            "file": self.file,
            "line": self.line,
            "key": self.key,
            "message": self.message,
            "text": self.line_text(),
        }

    @classmethod
    def from_error(cls, err: SpecError) -> Problem:
        """A SpecError the loader, the trainer check or a template raised."""
        return cls(err.file, err.line, err.key, err.message)


def key_path(key: str) -> KeyPath:
    """`scheduler.extra.0` -> ('scheduler', 'extra', 0)."""
    return tuple(int(part) if part.isdigit() else part for part in key.split("."))


def placed(loaded: LoadedSpec, key: str, message: str) -> Problem:
    """A problem about `key`, at the line that set it (or the nearest section written);
    a key left at its default points at the job file."""
    path = key_path(key)
    for end in range(len(path), 0, -1):
        where = loaded.origins.get(path[:end])
        if where is not None:
            return Problem(where.file, where.line, format_path(path), message)
    return Problem(str(loaded.path), None, format_path(path), message)
