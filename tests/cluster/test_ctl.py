"""tests/cluster/ctl.sh: the fault-injection switches other tests use, each undone at once."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.plugins.cluster import SlurmCluster, sacct_answers, wait_slurm_job

# Each test stops, restarts or reconfigures a daemon: none runs beside another cluster test.
pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]


def _sacct_stderr() -> str:
    done = subprocess.run(
        ["sacct", "-n", "-X", "-o", "JobID", "-S", "now"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stderr


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster, brought back to its normal state after the test whatever happened."""
    yield slurm_cluster
    slurm_cluster.ctl("accounting", "on")
    for daemon in ("mariadb", "slurmdbd", "slurmctld", "slurmd-n1", "slurmd-n2", "sshd"):
        slurm_cluster.ctl("start", daemon)


def test_stopping_slurmdbd_breaks_sacct_until_it_starts_again(cluster: SlurmCluster) -> None:
    cluster.ctl("stop", "slurmdbd")
    assert cluster.pid("slurmdbd") is None
    assert not sacct_answers()
    assert "Connection refused" in _sacct_stderr()
    cluster.ctl("start", "slurmdbd")
    assert sacct_answers()


def test_restarting_slurmctld_keeps_a_running_job(
    cluster: SlurmCluster, slurm_submit: Callable[..., str], tmp_path: Path
) -> None:
    (tmp_path / "sleep.sh").write_text("#!/bin/bash\nsleep 8\necho survived\n")
    job_id = slurm_submit("--time=2", "--output=sleep-%j.out", "sleep.sh", cwd=tmp_path)
    old = cluster.pid("slurmctld")
    cluster.ctl("stop", "slurmctld")
    ping = subprocess.run(
        ["scontrol", "ping"], capture_output=True, text=True, timeout=60, check=False
    )
    assert "DOWN" in ping.stdout, ping.stdout
    cluster.ctl("start", "slurmctld")
    assert cluster.pid("slurmctld") not in (None, old)
    end = wait_slurm_job(job_id, timeout=300)
    assert end.state == "COMPLETED"
    assert (tmp_path / f"sleep-{job_id}.out").read_text() == "survived\n"


def test_restarting_a_slurmd_brings_its_node_back(cluster: SlurmCluster) -> None:
    old = cluster.pid("slurmd-n2")
    cluster.ctl("restart", "slurmd-n2")
    assert cluster.pid("slurmd-n2") not in (None, old)
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-n", "n2", "-o", "%T"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # One line per partition n2 is in (debug, norequeue, urgent), each with the node's state.
    states = set(done.stdout.split())
    assert len(states) == 1, done.stdout
    assert states <= {"idle", "mixed", "allocated", "completing"}, done.stdout


def test_accounting_off_disables_sacct_and_on_restores_it(cluster: SlurmCluster) -> None:
    cluster.ctl("accounting", "off")
    assert "accounting_storage/none" in cluster.slurm_conf.read_text()
    assert "Slurm accounting storage is disabled" in _sacct_stderr()
    cluster.ctl("accounting", "on")
    assert "accounting_storage/slurmdbd" in cluster.slurm_conf.read_text()
    assert sacct_answers()


def test_unknown_daemon_is_refused_with_the_list(cluster: SlurmCluster) -> None:
    done = subprocess.run(
        ["bash", str(cluster.ctl_script), "stop", "nosuchd"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "unknown daemon 'nosuchd'" in done.stderr and "slurmctld" in done.stderr


@pytest.mark.hosts_alone  # the ssh hosts' tests use this sshd (tests/plugins/gates.py)
def test_status_says_which_daemon_is_down(cluster: SlurmCluster) -> None:
    cluster.ctl("stop", "sshd")

    def status() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(cluster.status_script)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    down = status()
    assert down.returncode == 1
    assert re.search(r"^  sshd +DOWN", down.stdout, re.MULTILINE), down.stdout
    assert "ssh n1                 FAILED" in down.stdout
    cluster.ctl("start", "sshd")
    assert status().returncode == 0
