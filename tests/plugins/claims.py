"""Lanes that share out the Slurm nodes' test files as they go (issue 25).

With static lanes (tests/plugins/groups.py lane_items) a lane's files are fixed before it
starts, weighed by recorded seconds; but a cluster test's time moves by minutes between runs
(a Podman retry took 72 s in one run and 204 s in the next, with what the other lanes held
in the queue), and lanes planned equal ended 300 s apart. With JOBKIT_TEST_CLAIMS=DIR (and
JOBKIT_TEST_LANE=I/N; .ci/run sets both) every lane collects every Slurm file and:
- runs its own tests first: the last lane those of the ssh hosts and Grid Engine (they never
  wait for the Slurm nodes, and run one lane at a time), lane 0 the files of OWN_FILES;
- then claims the shared files one at a time, heaviest first by recorded seconds, by creating
  DIR/<file's hash>.claim (O_EXCL: exactly one lane wins each file) and runs it whole, so a
  module's fixtures are built once. A lane claims its next file just before the last test of
  the current one starts: pytest then knows the next test, and ends the module's fixtures
  with their file but keeps the session's.
The tests a lane did not run are reported deselected at its end; the claim files name the
lane that ran each file. DIR is one run's (.ci/run: `$logs/claims`): a lane started again
on the same DIR finds every file claimed and runs only its own tests.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

OWN_FILES = ("tests/e2e/test_installed.py",)
"""Files lane 0 runs itself, first: test_installed's venv is built beside the lanes from the
collection of the one lane that runs it (tests/e2e/installed_venv.py)."""


@dataclass
class Plan:
    """What one lane runs: its own tests, then the shared units it wins."""

    lane: int
    folder: Path
    own: list[pytest.Item]
    shared: list[tuple[str, list[pytest.Item]]]
    ran: set[int] = field(default_factory=set)

    def claims(self) -> Iterator[list[pytest.Item]]:
        """The shared units this lane wins, in order (each claimed when asked for)."""
        for unit, items in self.shared:
            if claim(self.folder, unit, self.lane):
                yield items

    def not_run(self) -> list[pytest.Item]:
        """The shared tests this lane did not run (another lane won their file)."""
        return [item for _, items in self.shared for item in items if id(item) not in self.ran]


_PLAN = pytest.StashKey[Plan]()


def claim(folder: Path, unit: str, lane: int) -> bool:
    """Whether this lane wins UNIT: True for exactly one of the lanes that ask."""
    name = hashlib.sha256(unit.encode()).hexdigest()[:20] + ".claim"
    try:
        fd = os.open(folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as note:
        note.write(f"lane {lane}: {unit}\n")
    return True


def own_file(item: pytest.Item) -> bool:
    """Whether ITEM is in one of OWN_FILES."""
    return item.nodeid.split("::", 1)[0] in OWN_FILES


def plan_lane(
    config: pytest.Config,
    own: Sequence[pytest.Item],
    units: Mapping[str, Sequence[pytest.Item]],
    weights: Mapping[str, float],
    lane: int,
    folder: Path,
) -> None:
    """Keep this lane's plan: OWN first, then UNITS heaviest first (ties by name, the same
    order in every lane)."""
    folder.mkdir(parents=True, exist_ok=True)
    ordered = sorted(units, key=lambda unit: (-weights.get(unit, 0.0), unit))
    config.stash[_PLAN] = Plan(lane, folder, list(own), [(u, list(units[u])) for u in ordered])


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """Run this lane's plan in place of pytest's loop over session.items."""
    plan = session.config.stash.get(_PLAN, None)
    if plan is None or session.config.option.collectonly:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        return None  # pytest's own loop stops on collection errors
    won = plan.claims()
    current = plan.own or next(won, [])
    while current:
        following: list[pytest.Item] = []
        for index, item in enumerate(current):
            if index + 1 < len(current):
                nextitem: pytest.Item | None = current[index + 1]
            else:
                following = next(won, [])  # claimed before this file's last test starts
                nextitem = following[0] if following else None
            plan.ran.add(id(item))
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        current = following
    if left := plan.not_run():
        session.config.hook.pytest_deselected(items=left)
    return True
