"""Each test's CPU seconds, in the JUnit XML report (issue 25): the CPU of this pytest process
during the test (its setup, call and teardown) plus that of the processes it started and
waited for, with theirs (CLI calls, torchrun and its ranks, `python -m train`). What a
scheduler or a detached launcher ran (Slurm, ssh, Grid Engine, Podman jobs, local jobs) is
not in it: those are in .ci/run's table by process accounting (.ci/cpu.py).

The figure is the test's `cpu_s` property (record_property's place in the report);
.ci/slowest.py lists the tests that used the most.
"""

from __future__ import annotations

import resource
from collections.abc import Generator

import pytest

PROPERTY = "cpu_s"
_STARTED = pytest.StashKey[float]()


def cpu_seconds() -> float:
    """User + system seconds of this process and of its waited-for descendants so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The test begins: its CPU is counted from here."""
    item.stash[_STARTED] = cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """After teardown, before its report is made: the test's CPU joins its properties."""
    if call.when == "teardown" and _STARTED in item.stash:
        item.user_properties.append((PROPERTY, round(cpu_seconds() - item.stash[_STARTED], 1)))
    return (yield)
