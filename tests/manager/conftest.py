"""Fixtures for the registry, submit, status and cancel tests.

Every test gets its own JOBKIT_HOME. Cluster tests carry the `slurm` / `pbs` markers and
use the fixtures of tests/plugins/cluster.py (`slurm_cluster`, `pbs_cluster`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.cli import run as cli_run
from tests.manager.helpers import CliResult


@pytest.fixture(autouse=True)
def jobkit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh registry folder for each test (JOBKIT_HOME)."""
    home = tmp_path / "jobkit-home"
    monkeypatch.setenv("JOBKIT_HOME", str(home))
    return home


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A submission directory, made the current directory."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def jobkit(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run the CLI in this process: jobkit("status", "--all") -> CliResult."""

    def invoke(*args: str) -> CliResult:
        capsys.readouterr()
        code = cli_run(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke
