"""Which tests share the real cluster, and how .ci/run splits the suite into processes that
run at once (issue 25).

A test needs the cluster when it carries a marker `slurm`, `pbs`, `ssh` or `sge`, or asks for
one of the cluster fixtures (directly or through another fixture). Such a test gets the marker
`cluster`. Two more markers, set by the tests themselves, say what a cluster test may not
run beside:
- `cluster_alone`: it stops or restarts a daemon, takes a node down, reruns up.sh or waits for
  both nodes idle. .ci/run runs these first, one after the other, with no other cluster test
  running (`-m "cluster and cluster_alone"`).
- `preemption`: its jobs preempt, or are preempted by, jobs of another partition (norequeue,
  urgent). All such tests are kept in one shard, so they run one after the other.
Every other cluster test tolerates other jobs in the queue (the cluster is shared: the tests
wait for a place). .ci/run runs them in JOBKIT_CI_CLUSTER_LANES processes at once
(JOBKIT_TEST_LANE=I/N, lane_items): the test files that use the two Slurm nodes (marker `slurm`
or `pbs`, also given by their fixtures) balanced over the lanes, and every test that uses only
the ssh hosts and Grid Engine in the last lane, which starts beside the cluster-alone tests
(tests/plugins/gates.py) and so takes fewer Slurm files. With JOBKIT_TEST_CLAIMS=DIR (.ci/run)
the lanes do not split the Slurm files up front: each claims the next as it goes
(tests/plugins/claims.py, claimed_lane).

JOBKIT_TEST_SHARD=I/N keeps one of N shards of the selected tests: whole test files (so a
module's fixtures are built once), balanced by their recorded seconds (tests/plugins/
durations.json, written by .ci/durations.py from a run's reports; a test it does not list
counts DEFAULT_SECONDS, or a cluster test the median of the listed cluster tests beside it:
a new e2e test is minutes, not 0.2 s): the largest file first to the shard with the least so
far.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from tests.plugins import claims

CLUSTER_MARKERS = ("slurm", "pbs", "ssh", "sge")
FIXTURE_MARKERS = {
    "slurm_cluster": "slurm",
    "slurm_submit": "slurm",
    "wait_slurm_job": "slurm",
    "pbs_cluster": "pbs",
    "ssh_hosts": "ssh",
    "sge_cluster": "sge",
}
"""The part of the cluster each fixture uses: a test asking for one gets its marker, so
.ci/run's `-m "... (slurm or pbs)"` lanes hold every test that waits for the Slurm nodes."""
CLUSTER_FIXTURES = frozenset(FIXTURE_MARKERS)
DURATIONS = Path(__file__).with_name("durations.json")
DEFAULT_SECONDS = 0.2  # a test the table does not list (most tests take well under a second)
PREEMPTION_UNIT = "(the preemption tests)"


def needs_cluster(item: pytest.Item) -> bool:
    """True when ITEM uses the shared test cluster (a cluster marker or fixture)."""
    if any(item.get_closest_marker(name) is not None for name in CLUSTER_MARKERS):
        return True
    return not CLUSTER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "cluster: uses the shared test cluster (added by tests/plugins/groups.py)",
        "cluster_alone: needs the test cluster to itself (stops a daemon, downs a node, ...)",
        "preemption: its jobs preempt or are preempted: such tests run one after the other",
    ):
        config.addinivalue_line("markers", line)


def shard_of(value: str) -> tuple[int, int]:
    """`I/N` -> (I, N) with 0 <= I < N; ValueError otherwise."""
    index, _, count = value.partition("/")
    shard, shards = int(index), int(count)
    if not 0 <= shard < shards:
        raise ValueError(f"JOBKIT_TEST_SHARD={value!r}: want I/N with 0 <= I < N")
    return shard, shards


def recorded_seconds(path: Path = DURATIONS) -> dict[str, float]:
    """Test id -> seconds from the table; {} when it is missing or unreadable (then every
    file weighs by its number of tests)."""
    try:
        table = json.loads(path.read_text())
        return {str(test): float(seconds) for test, seconds in table["tests"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def balance(
    weights: Mapping[str, float], shards: int, head: Sequence[float] = ()
) -> dict[str, int]:
    """Unit -> shard: the heaviest unit first, each to the lightest shard so far (ties to the
    lowest shard; units of equal weight in name order, so every process agrees). HEAD: the
    seconds some shards carry before any unit (the hosts lane's own tests)."""
    load = [float(x) for x in head] + [0.0] * (shards - len(head))
    placed: dict[str, int] = {}
    for unit in sorted(weights, key=lambda u: (-weights[u], u)):
        shard = min(range(shards), key=lambda s: (load[s], s))
        placed[unit] = shard
        load[shard] += weights[unit]
    return placed


def shard_items(
    items: Sequence[pytest.Item], shard: int, shards: int, seconds: Mapping[str, float]
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, left out) of ITEMS for shard SHARD of SHARDS.

    A unit is a test file; every file with a `preemption` test belongs to one unit.
    """
    units = _units(items)
    placed = _placed_units(items, shards, seconds)
    kept = [item for item in items if placed[units[str(item.path)]] == shard]
    left = [item for item in items if placed[units[str(item.path)]] != shard]
    return kept, left


def uses_slurm_nodes(item: pytest.Item) -> bool:
    """True when ITEM's jobs wait for the two Slurm nodes (Slurm itself, or PBS through
    Slurm's Torque wrappers); False for the tests of the ssh hosts and Grid Engine only."""
    return any(item.get_closest_marker(name) is not None for name in ("slurm", "pbs"))


def lane_items(
    items: Sequence[pytest.Item],
    lane: int,
    lanes: int,
    seconds: Mapping[str, float],
    head_start: float = 0.0,
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, left out) of the cluster's tests ITEMS for lane LANE of LANES.

    The last lane holds every test of the ssh hosts and Grid Engine only (they never queue
    for the Slurm nodes) and, after their seconds, its share of the Slurm nodes' test files;
    the other lanes share the rest of those files. Files balanced as in shard_items. That lane
    starts HEAD_START seconds before the others (.ci/run: beside the cluster-alone tests,
    tests/plugins/gates.py).
    """
    slurm = [item for item in items if uses_slurm_nodes(item)]
    hosts = [item for item in items if not uses_slurm_nodes(item)]
    cluster_default = _median_cluster_seconds(items, seconds)
    head = [0.0] * lanes
    hosts_seconds = sum(seconds.get(item.nodeid, cluster_default) for item in hosts)
    head[-1] = max(0.0, hosts_seconds - head_start)
    placed = _placed_units(slurm, lanes, seconds, head)
    units = _units(slurm)
    mine = {id(item) for item in slurm if placed[units[str(item.path)]] == lane}
    if lane == lanes - 1:
        mine.update(id(item) for item in hosts)
    kept = [item for item in items if id(item) in mine]
    left = [item for item in items if id(item) not in mine]
    return kept, left


def _units(items: Sequence[pytest.Item]) -> dict[str, str]:
    """File -> unit: every file with a `preemption` test belongs to one unit."""
    preempting = {str(item.path) for item in items if item.get_closest_marker("preemption")}
    return {
        str(item.path): PREEMPTION_UNIT if str(item.path) in preempting else str(item.path)
        for item in items
    }


def _placed_units(
    items: Sequence[pytest.Item],
    shards: int,
    seconds: Mapping[str, float],
    head: Sequence[float] = (),
) -> dict[str, int]:
    """Unit -> shard for ITEMS, weighed by their recorded seconds."""
    return balance(_unit_weights(items, seconds), shards, head)


def _unit_weights(items: Sequence[pytest.Item], seconds: Mapping[str, float]) -> dict[str, float]:
    """Unit -> the recorded seconds of its ITEMS."""
    units = _units(items)
    weights: dict[str, float] = {}
    cluster_default = _median_cluster_seconds(items, seconds)
    for item in items:
        unit = units[str(item.path)]
        unlisted = cluster_default if item.get_closest_marker("cluster") else DEFAULT_SECONDS
        weights[unit] = weights.get(unit, 0.0) + seconds.get(item.nodeid, unlisted)
    return weights


def claimed_lane(
    items: Sequence[pytest.Item], lane: int, lanes: int, seconds: Mapping[str, float]
) -> tuple[list[pytest.Item], dict[str, list[pytest.Item]], dict[str, float], list[pytest.Item]]:
    """Lane LANE of LANES that claims its Slurm files as it goes (tests/plugins/claims.py):
    (its own tests, the shared units' tests, their weights, the tests left out).

    Its own: in the last lane every test of the ssh hosts and Grid Engine only, in lane 0
    the files of claims.OWN_FILES. Shared: the other Slurm nodes' files, units as in
    shard_items. Left out: the other lanes' own tests.
    """
    slurm = [item for item in items if uses_slurm_nodes(item)]
    hosts = [item for item in items if not uses_slurm_nodes(item)]
    first = [item for item in slurm if claims.own_file(item)]
    shared = [item for item in slurm if not claims.own_file(item)]
    own = (first if lane == 0 else []) + (hosts if lane == lanes - 1 else [])
    units = _units(shared)
    grouped: dict[str, list[pytest.Item]] = {}
    for item in shared:
        grouped.setdefault(units[str(item.path)], []).append(item)
    mine = {id(item) for item in own + shared}
    left = [item for item in items if id(item) not in mine]
    return own, grouped, _unit_weights(shared, seconds), left


def _median_cluster_seconds(items: Sequence[pytest.Item], seconds: Mapping[str, float]) -> float:
    """What an unlisted cluster test weighs: the median of the listed cluster tests among
    ITEMS (DEFAULT_SECONDS when none is listed)."""
    known = sorted(
        seconds[item.nodeid]
        for item in items
        if item.get_closest_marker("cluster") and item.nodeid in seconds
    )
    return known[len(known) // 2] if known else DEFAULT_SECONDS


_head_start_s = 0.0
"""Recorded seconds of the cluster-alone tests that run while the hosts' lane runs (all but
the `hosts_alone` ones): how much earlier that lane starts (lane_items)."""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    global _head_start_s
    seconds = recorded_seconds()
    _head_start_s = sum(
        seconds.get(item.nodeid, 0.0)
        for item in items
        if item.get_closest_marker("cluster_alone") and not item.get_closest_marker("hosts_alone")
    )
    for item in items:
        if needs_cluster(item):
            item.add_marker(pytest.mark.cluster)
        for fixture in CLUSTER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            if item.get_closest_marker(FIXTURE_MARKERS[fixture]) is None:
                item.add_marker(FIXTURE_MARKERS[fixture])


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After `-m` and `-k` chose: keep this process's shard (JOBKIT_TEST_SHARD=I/N) or, of
    the cluster's tests, its lane (JOBKIT_TEST_LANE=I/N: lane_items; with
    JOBKIT_TEST_CLAIMS=DIR its own tests and every shared one: claimed_lane)."""
    shard = os.environ.get("JOBKIT_TEST_SHARD")
    lane = os.environ.get("JOBKIT_TEST_LANE")
    if not shard and not lane:
        return
    claims_dir = os.environ.get("JOBKIT_TEST_CLAIMS")
    if lane and claims_dir:
        index, lanes = shard_of(lane)
        own, units, weights, left = claimed_lane(items, index, lanes, recorded_seconds())
        claims.plan_lane(config, own, units, weights, index, Path(claims_dir))
        kept = own + [item for unit in units.values() for item in unit]
    elif lane:
        kept, left = lane_items(items, *shard_of(lane), recorded_seconds(), _head_start_s)
    else:
        kept, left = shard_items(items, *shard_of(str(shard)), recorded_seconds())
    if left:
        config.hook.pytest_deselected(items=left)
    items[:] = kept
