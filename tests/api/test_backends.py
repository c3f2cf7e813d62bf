"""A function as a job on the other backends that run a command, for real: ssh (two hosts,
rank 1 raising), Grid Engine and PBS (Slurm's Torque wrappers) returning a result."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import jobkit

pytestmark = [pytest.mark.slow]

TIMEOUT_S = 300.0


def _rank_or_fail() -> str:
    if os.environ["RANK"] == "1":
        raise KeyError(f"rank 1 on node {os.environ.get('JOBKIT_NODE_INDEX')}")
    return os.environ["RANK"]


def _launch_facts() -> tuple[str, str, str]:
    return (os.environ["RANK"], os.environ["WORLD_SIZE"], os.getcwd())


@pytest.mark.ssh
def test_ssh_two_hosts_rank_1_raises(workdir: Path, ssh_hosts: object) -> None:
    spec = {"name": "fn-ssh", "backend": "ssh", "ssh": {"hosts": ["n1", "n2"]}}
    job = jobkit.submit_function(_rank_or_fail, spec=spec)
    with pytest.raises(jobkit.FunctionError) as caught:
        job.result(timeout=TIMEOUT_S)
    # torchrun's c10d rendezvous gives group ranks in arrival order: rank 1 may be on either
    # host, and the error names the one it was on.
    assert caught.value.rank == 1
    assert re.fullmatch(r"KeyError: 'rank 1 on node [01]'", caught.value.summary)
    assert "in _rank_or_fail" in caught.value.remote_traceback


@pytest.mark.sge
def test_sge_result(workdir: Path, sge_cluster: object) -> None:
    job = jobkit.submit_function(_launch_facts, spec={"name": "fn-sge", "backend": "sge"})
    assert job.result(timeout=TIMEOUT_S) == ("0", "1", str(workdir))
    assert (job.backend, job.state) == ("sge", "SUCCEEDED")


@pytest.mark.pbs
def test_pbs_torque_result(workdir: Path, pbs_cluster: object) -> None:
    spec = {"name": "fn-pbs", "backend": "pbs", "pbs": {"flavor": "torque"}}
    job = jobkit.submit_function(_launch_facts, spec=spec)
    assert job.result(timeout=TIMEOUT_S) == ("0", "1", str(workdir))
    assert (job.backend, job.state) == ("pbs", "SUCCEEDED")
