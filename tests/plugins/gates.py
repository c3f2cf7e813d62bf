"""Gates between .ci/run's processes (issue 25): the lane with the ssh hosts and Grid Engine
starts beside the tests that need the cluster alone, not after them.

Those tests stop Slurm's daemons; two of them also disturb the ssh hosts and Grid Engine
(marker `hosts_alone`: one stops the test sshd, one runs up.sh again, which under CI=true
clears Grid Engine's queue). So:
- JOBKIT_TEST_OPENS_HOSTS_GATE=PATH (the process of the tests that need the cluster alone)
  runs its `hosts_alone` tests first and creates PATH once they have ended;
- JOBKIT_TEST_HOSTS_GATE=PATH and JOBKIT_TEST_SLURM_GATE=PATH (the last lane) hold each test
  until the gate of what it uses is there: PATH of the hosts for a test of the ssh hosts or
  Grid Engine only, PATH of Slurm (.ci/run creates it when the cluster-alone tests have
  ended) for a test that uses the Slurm nodes. That lane runs its hosts' tests first.
A gate is waited for before the test's own timeout starts, at most GATE_WAIT_S.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.plugins.groups import uses_slurm_nodes

GATE_WAIT_S = 3600.0
_hosts_alone_left: set[str] = set()
"""The opener's `hosts_alone` tests that have not ended yet."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hosts_alone: needs the ssh hosts and Grid Engine to itself too (with cluster_alone)",
    )


def _open(path: str) -> None:
    """Create the gate file PATH (and its folder)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).touch()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The opener runs its `hosts_alone` tests first; the gated lane its hosts' tests."""
    if os.environ.get("JOBKIT_TEST_OPENS_HOSTS_GATE"):
        items.sort(key=lambda item: item.get_closest_marker("hosts_alone") is None)
        _hosts_alone_left.update(
            item.nodeid for item in items if item.get_closest_marker("hosts_alone")
        )
    if os.environ.get("JOBKIT_TEST_HOSTS_GATE"):
        items.sort(key=uses_slurm_nodes)


def pytest_collection_finish() -> None:
    opener = os.environ.get("JOBKIT_TEST_OPENS_HOSTS_GATE")
    if opener and not _hosts_alone_left:
        _open(opener)


def pytest_runtest_logfinish(nodeid: str) -> None:
    opener = os.environ.get("JOBKIT_TEST_OPENS_HOSTS_GATE")
    if opener and nodeid in _hosts_alone_left:
        _hosts_alone_left.discard(nodeid)
        if not _hosts_alone_left:
            _open(opener)


def pytest_sessionfinish() -> None:
    opener = os.environ.get("JOBKIT_TEST_OPENS_HOSTS_GATE")
    if opener:
        _open(opener)  # whatever happened: the hosts' lane must not wait for nothing


def wait_for_gate(path: Path, what: str, timeout: float = GATE_WAIT_S) -> None:
    """Sleep until PATH exists, at most TIMEOUT seconds (then say so and go on: the test
    itself fails if what it uses is still disturbed)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            sys.stderr.write(f"{what}: gate {path} still closed after {timeout:.0f} s\n")
            return
        time.sleep(1.0)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """Before the test's timeout starts: wait for the gate of what ITEM uses."""
    slurm = uses_slurm_nodes(item)
    named = os.environ.get("JOBKIT_TEST_SLURM_GATE" if slurm else "JOBKIT_TEST_HOSTS_GATE")
    if named and item.get_closest_marker("cluster") is not None:
        what = "the Slurm nodes" if slurm else "the ssh hosts and Grid Engine"
        wait_for_gate(Path(named), f"{item.nodeid} waits for {what}")
    yield
