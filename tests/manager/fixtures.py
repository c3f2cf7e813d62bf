"""Fixtures shared by the registry tests (tests/registry) and the submit, status and cancel
tests (tests/manager); each folder's conftest.py imports them.

Every test gets its own JOBKIT_HOME. Cluster tests carry the `slurm` / `pbs` markers and
use the fixtures of tests/plugins/cluster.py (`slurm_cluster`, `pbs_cluster`).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit.cli import run as cli_run
from jobkit.registry.store import RegistryError, Store
from tests.manager.helpers import CliResult


@pytest.fixture(autouse=True)
def jobkit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh registry folder for each test (JOBKIT_HOME); its Slurm/PBS jobs are
    cancelled afterwards, whatever the test left behind."""
    home = tmp_path / "jobkit-home"
    monkeypatch.setenv("JOBKIT_HOME", str(home))
    yield home
    if (home / "jobkit.db").exists():
        _cancel_leftovers(home)


def _cancel_leftovers(home: Path) -> None:
    """scancel / qdel every job of this registry (ignoring errors), retried a few times in
    case the controller was briefly unreachable."""
    try:
        with Store(home) as store:
            rows = [r for r in store.list_jobs(recent_final_s=None) if not r.is_final]
    except RegistryError:
        return  # a test that broke its registry on purpose
    commands = {"slurm": "scancel", "submitit": "scancel", "pbs": "qdel"}
    groups: dict[str, list[str]] = {}
    for row in rows:
        if row.scheduler_id and row.backend in commands:
            groups.setdefault(commands[row.backend], []).append(row.scheduler_id.split(";")[0])
    for command, ids in groups.items():
        if shutil.which(command) is None:
            continue
        for _ in range(3):
            done = subprocess.run(
                [command, *ids], capture_output=True, text=True, check=False, timeout=60
            )
            if "Unable to contact" not in done.stderr:
                break
            time.sleep(5)


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
