"""A registry of each test's own (JOBKIT_HOME), its cluster jobs cancelled afterwards: an
autouse fixture for tests/registry, tests/manager and tests/backends, whose conftest.py
imports it (it is not a global plugin: other folders keep their own homes).

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

from jobkit.registry.store import RegistryError, Store


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
