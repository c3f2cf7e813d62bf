"""The Grid Engine part of the test cluster (tests/cluster/sge.sh, started by up.sh).

Marker `sge`: a test carrying it runs only when the qmaster and both exec hosts answer;
otherwise it is skipped with the reason, or failed when CI=true / JOBKIT_REQUIRE_CLUSTER=1
(the cluster plugin's PROBES and `require`, which this module's probe joins).
Fixture `sge_cluster` (SgeCluster) puts Grid Engine's commands first on PATH, with the
SGE_* variables, for the test (Slurm's Torque wrappers own /usr/bin/qsub and qstat).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.cluster import PROBES, START_HINT, Probe, require, state_dir

PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SgeCluster:
    """The running Grid Engine: its environment, hosts, queue and parallel environment."""

    env: dict[str, str]
    nodes: tuple[str, ...]
    queue: str
    pe: str
    accounting_file: Path


def sge_environment(info: dict[str, object]) -> dict[str, str]:
    """The variables a Grid Engine client needs (what env.sh exports)."""
    return {
        "SGE_ROOT": str(info["sge_root"]),
        "SGE_CELL": str(info["sge_cell"]),
        "SGE_QMASTER_PORT": str(info["qmaster_port"]),
        "SGE_EXECD_PORT": str(info["execd_port"]),
        "PATH": f"{info['bin_dir']}:{os.environ.get('PATH', '')}",
    }


def probe_sge() -> SgeCluster | str:
    """The cluster when `qstat -f` lists both exec hosts without a bad state; else why not."""
    path = state_dir() / "sge" / "sge.json"
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return f"no Grid Engine cluster ({path}: {err}); {START_HINT}"
    env = sge_environment(info)
    try:
        done = subprocess.run(
            ["qstat", "-f"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"qstat -f failed: {err}; {START_HINT}"
    if done.returncode != 0:
        return f"qstat -f: exit {done.returncode}: {done.stderr.strip()}; {START_HINT}"
    nodes = tuple(str(n) for n in info["nodes"])  # type: ignore[attr-defined]
    for node in nodes:
        line = next((x for x in done.stdout.splitlines() if f"@{node} " in x), "")
        fields = line.split()
        # queue qtype resv/used/tot load arch [states]: a sixth field is a bad state (u, E...).
        if not fields or len(fields) > 5:
            return f"exec host {node} is not taking jobs ({line.strip() or 'missing'})"
    return SgeCluster(
        env=env,
        nodes=nodes,
        queue=str(info["queue"]),
        pe=str(info["pe"]),
        accounting_file=Path(str(info["accounting_file"])),
    )


def probe() -> Probe:
    """probe_sge as the cluster plugin's Probe (registered in its PROBES below)."""
    found = probe_sge()
    if isinstance(found, str):
        return Probe(False, found)
    return Probe(True, "", other=found)


PROBES["sge"] = probe


@pytest.fixture
def sge_cluster(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SgeCluster]:
    """Grid Engine's commands first on PATH (and SGE_*) for this test and what it starts."""
    cluster = require(pytestconfig, "sge").other
    assert isinstance(cluster, SgeCluster)
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    yield cluster
