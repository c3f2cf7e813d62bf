"""Fixtures for the backend tests: is the real cluster (tests/cluster/up.sh) there?

A cluster test skips when the cluster is not running, and fails instead under
JOBKIT_REQUIRE_CLUSTER=1 (CI), so a missing cluster never passes silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

SSH_HOSTS = ("n1", "n2")


def _answers(argv: list[str]) -> bool:
    if shutil.which(argv[0]) is None:
        return False
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
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
def ssh_hosts() -> tuple[str, ...]:
    """The loopback sshd's hosts, each reachable with `ssh HOST` (BatchMode)."""
    for host in SSH_HOSTS:
        _need(_answers(["ssh", "-o", "BatchMode=yes", host, "true"]), f"sshd for host {host}")
    return SSH_HOSTS


@pytest.fixture
def slurm_cluster() -> None:
    """The real Slurm cluster answers `sinfo`."""
    _need(_answers(["sinfo", "--noheader"]), "the test Slurm cluster")
