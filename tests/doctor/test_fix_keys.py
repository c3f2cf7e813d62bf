"""Doctor's fixes name keys the job's backend honours, and what a launcher did to the other
nodes after a failure is never the cause (issue 24). Log text recorded from real runs here
(torchrun 2.x on the test cluster), written into a run folder (tests/doctor/recorded.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from jobkit.doctor.classify import diagnose_record
from tests.doctor.recorded import job_with_logs

OOM = "jobkit: host 0 (h1) of 1: torchrun with 1 process(es)\n[rank0]: MemoryError\n"
AGENT_STOPPED = (
    "jobkit: host 0 (n1) of 2: torchrun with 1 process(es)\n"
    "Traceback (most recent call last):\n"
    '  File "/v/bin/torchrun", line 6, in <module>\n'
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 15\n"
)
RENDEZVOUS_TIMEOUT = (
    "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError: The node did not join"
    " in time\n"
)


def test_memory_fix_on_grid_engine_names_scheduler_extra(tmp_path: Path) -> None:
    record = dataclasses.replace(job_with_logs(tmp_path, {"node-0.out": OOM}), backend="sge")
    found = diagnose_record(record)
    assert found.cls == "host_oom"
    assert (found.fix or "").startswith("scheduler.extra (e.g. -l h_vmem=8G"), found.fix


def test_memory_fix_on_slurm_names_resources_mem(tmp_path: Path) -> None:
    found = diagnose_record(job_with_logs(tmp_path, {"node-0.out": OOM}))
    assert (found.fix or "").startswith("resources.mem (more memory per node)"), found.fix


def test_a_stopped_agent_is_not_the_cause(tmp_path: Path) -> None:
    """Node 1's program exited 3; srun then stopped node 0's torchrun (SignalException)."""
    node1 = (
        "jobkit: host 1 (n2) of 2: torchrun with 1 process(es)\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-26_08:00:01\n"
        "  host      : n2\n  rank      : 1 (local_rank: 0)\n  exitcode  : 3 (pid: 77)\n"
        "============================================================\n"
    )
    record = job_with_logs(
        tmp_path,
        {"node-0.out": AGENT_STOPPED, "node-1.out": node1},
        nodes=2,
        ranks={0: 0, 1: 1},
    )
    found = diagnose_record(record)
    assert (found.cls, found.rank) == ("program_exit", 1), found
    assert found.summary == "rank 1 exited with code 3 (torchrun's root cause)"
    assert "a rank raised a Python exception" not in found.also


def test_rendezvous_timeout_fix_is_launch_rdzv_timeout(tmp_path: Path) -> None:
    found = diagnose_record(job_with_logs(tmp_path, {"node-0.out": RENDEZVOUS_TIMEOUT}))
    assert found.cls == "rendezvous_timeout"
    assert "a longer launch.rdzv_timeout (torchrun's rendezvous" in (found.fix or "")
