"""Which tests share the real cluster, so that the rest can run beside them (issue 25).

A test needs the cluster when it carries a marker `slurm`, `pbs`, `ssh` or `sge`, or asks for
one of the cluster fixtures (directly or through another fixture). Such a test gets the marker
`cluster`. .ci/run runs `-m cluster` (one process, the tests one after the other as always:
they share two 1-CPU nodes, and some restart daemons or set a node down) and `-m "not
cluster"` (everything else) at the same time, the latter split into shards:
JOBKIT_TEST_SHARD=I/N keeps the test files whose place in the sorted list of collected files
is I modulo N (whole files, so a module's fixtures are built once).
"""

from __future__ import annotations

import os

import pytest

CLUSTER_MARKERS = ("slurm", "pbs", "ssh", "sge")
CLUSTER_FIXTURES = frozenset(
    {"slurm_cluster", "pbs_cluster", "ssh_hosts", "sge_cluster", "slurm_submit", "wait_slurm_job"}
)


def needs_cluster(item: pytest.Item) -> bool:
    """True when ITEM uses the shared test cluster (a cluster marker or fixture)."""
    if any(item.get_closest_marker(name) is not None for name in CLUSTER_MARKERS):
        return True
    return not CLUSTER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster: uses the shared test cluster (added by tests/plugins/groups.py)"
    )


def shard_of(value: str) -> tuple[int, int]:
    """`I/N` -> (I, N) with 0 <= I < N; ValueError otherwise."""
    index, _, count = value.partition("/")
    shard, shards = int(index), int(count)
    if not 0 <= shard < shards:
        raise ValueError(f"JOBKIT_TEST_SHARD={value!r}: want I/N with 0 <= I < N")
    return shard, shards


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if needs_cluster(item):
            item.add_marker(pytest.mark.cluster)
    wanted = os.environ.get("JOBKIT_TEST_SHARD")
    if not wanted:
        return
    shard, shards = shard_of(wanted)
    files = sorted({item.path for item in items})
    place = {path: index % shards for index, path in enumerate(files)}
    kept = [item for item in items if place[item.path] == shard]
    config.hook.pytest_deselected(items=[item for item in items if place[item.path] != shard])
    items[:] = kept
