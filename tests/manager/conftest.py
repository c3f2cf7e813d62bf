"""Fixtures for the registry, submit, status and cancel tests.

Every test gets its own JOBKIT_HOME. Cluster tests use the real Slurm from
tests/cluster/up.sh through `slurm_up` / `torque_up`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
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


def _cluster_answers(command: list[str]) -> bool:
    if shutil.which(command[0]) is None:
        return False
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _need(ok: bool, what: str) -> None:
    if ok:
        return
    message = f"{what} is not running (start it with tests/cluster/up.sh)"
    if os.environ.get("JOBKIT_REQUIRE_CLUSTER"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def slurm_up() -> Iterator[None]:
    """The real Slurm cluster answers (`sinfo`); fail under JOBKIT_REQUIRE_CLUSTER, else skip."""
    _need(_cluster_answers(["sinfo", "--noheader"]), "the test Slurm cluster")
    yield


@pytest.fixture
def torque_up(slurm_up: None) -> Iterator[None]:
    """Slurm's Torque wrappers (qsub/qstat) are installed on top of the cluster."""
    _need(shutil.which("qsub") is not None and shutil.which("qstat") is not None, "qsub/qstat")
    yield
