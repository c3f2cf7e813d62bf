"""Which tests share the real cluster, so that the rest can run beside them (issue 25).

A test needs the cluster when it carries a marker `slurm`, `pbs`, `ssh` or `sge`, or asks for
one of the cluster fixtures (directly or through another fixture). Such a test gets the marker
`cluster`. .ci/run runs `-m cluster` (one process, the tests one after the other as always:
they share two 1-CPU nodes, and some restart daemons or set a node down) and `-m "not
cluster"` (everything else) at the same time.
"""

from __future__ import annotations

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


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if needs_cluster(item):
            item.add_marker(pytest.mark.cluster)
