"""The jobkit CLI run in the test's own process, and a submission directory: the fixtures
`jobkit` (jobkit("status", "--all") -> CliResult) and `workdir`, for every test folder.

A folder may define its own `jobkit` fixture (a subprocess runner, tests/backends and
tests/e2e do): the nearer definition wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobkit.cli import run as cli_run


@dataclass(frozen=True)
class CliResult:
    """What one CLI run left: exit code, stdout and stderr."""

    code: int
    out: str
    err: str


Invoke = Callable[..., CliResult]


def in_process(capsys: pytest.CaptureFixture[str]) -> Invoke:
    """A runner of `jobkit ARGS...` in this process, with the console script's error handling."""

    def invoke(*args: str) -> CliResult:
        capsys.readouterr()
        code = cli_run(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


@pytest.fixture
def jobkit(capsys: pytest.CaptureFixture[str]) -> Invoke:
    """Run the CLI in this process: jobkit("status", "--all") -> CliResult."""
    return in_process(capsys)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A submission directory, made the current directory."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder
