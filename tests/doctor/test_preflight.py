"""`jobkit doctor` on launch.preflight's lines (class `preflight_failed`).

The unreachable master runs for real in tests/preflight/test_jobs.py. A GPU that another
process holds cannot happen on this machine (no GPU): its line is made by the check's own
code (train/preflight.py, from (free, total) numbers as a GPU node reports them) and written
into a run folder laid out as the Slurm template lays it out (tests/doctor/recorded.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.doctor.classes import BY_NAME
from jobkit.doctor.classify import diagnose_record, line_class
from tests.doctor.recorded import job_with_logs
from train.preflight import Node, PreflightFailure, check_gpus

MIB = 1024 * 1024
HEADER = "jobkit preflight: checking 2 node(s): GPUs, TCP to gpu01:15042, all-reduce\n"


def _busy_gpu_line() -> str:
    node = Node(1, "gpu02", 2)
    with pytest.raises(PreflightFailure) as failure:
        check_gpus(2, [(79_000 * MIB, 80_000 * MIB), (2_000 * MIB, 80_000 * MIB)])
    return node.line(str(failure.value))


def test_a_busy_gpu_names_its_node(tmp_path: Path) -> None:
    line = _busy_gpu_line()
    out = (
        HEADER
        + "jobkit preflight: node 0 (gpu01) ok: 2 GPU(s) visible, at least 79000 MiB free on each\n"
        + line
        + "\njobkit preflight: failed after 3 s: the program is not started\n"
    )
    record = job_with_logs(tmp_path, {"OUT": out, "failure": line + "\n"}, nodes=2)
    found = diagnose_record(record)
    assert (found.cls, found.summary) == ("preflight_failed", line)
    assert "GPU 1 has 2000 MiB free of 80000 MiB" in line
    assert found.fix == BY_NAME["preflight_failed"].fix


def test_only_failures_are_preflight_lines() -> None:
    """The lines of a preflight that passed never classify; every failure line does."""
    ok = Node(0, "n1", 2).line_ok("n1:15042 reached from all 2 node(s)")
    assert line_class(ok) is None
    assert line_class("jobkit preflight: passed in 12 s") is None
    assert line_class(HEADER.strip()) is None
    failed = Node(1, "n2", 2).line("cannot reach n1:15042: connection refused")
    cls = line_class(failed)
    assert cls is not None and cls.name == "preflight_failed"
    assert line_class(_busy_gpu_line()) is cls


def test_a_preflight_failure_comes_before_what_it_brings_about(tmp_path: Path) -> None:
    """A check rank that lost its peer raises too: the preflight line is still the cause."""
    line = Node(1, "n2", 2).line("all-reduce check failed (exit code 1): see the lines above")
    out = (
        HEADER + "[rank0]: RuntimeError: Connection closed by peer [127.0.0.1]:4242\n" + line + "\n"
    )
    found = diagnose_record(job_with_logs(tmp_path, {"OUT": out}, nodes=2))
    assert (found.cls, found.summary) == ("preflight_failed", line)
