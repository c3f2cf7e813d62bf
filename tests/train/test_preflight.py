"""`python -m train.preflight` (launch.preflight's per-node checks) on this machine: real
processes and real sockets on loopback; the GPU check's arithmetic as a pure function, its
CUDA path only where CUDA exists."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from train.preflight import PreflightFailure, check_gpus, gpu_memory

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _step(tmp_path: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """Start `python -m train.preflight ARGS` in tmp_path with `train` importable."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JOBKIT_", "SLURM"))}
    clean |= {"PYTHONPATH": str(ROOT), "JOBKIT_RUN_DIR": str(tmp_path), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "train.preflight", *args],
        cwd=tmp_path,
        env=clean,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_two_nodes_reach_node_0s_listener(tmp_path: Path) -> None:
    port = str(_free_port())
    common = ("--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port)
    node0 = _step(tmp_path, "node", "--node-index", "0", "--host", "h0", *common)
    time.sleep(0.5)  # node 1 starts later: it retries until node 0 listens
    node1 = _step(tmp_path, "node", "--node-index", "1", "--host", "h1", *common)
    (rc0, out0), (rc1, out1) = _finish(node0), _finish(node1)
    assert (rc0, rc1) == (0, 0), out0 + out1
    assert f"jobkit preflight: node 0 (h0) ok: 127.0.0.1:{port} reached from all 2 node(s)" in out0
    assert "jobkit preflight: node 1 (h1) ok: no GPU requested" in out1
    assert not (tmp_path / "failure").exists()
    # The listener is gone: the rendezvous can take the port now.
    with socket.create_server(("", int(port))):
        pass


def test_unreachable_master_is_one_line_naming_node_and_reason(tmp_path: Path) -> None:
    port = str(_free_port())  # nothing listens there: node 0 is not part of this check
    started = time.monotonic()
    rc, out = _finish(
        _step(
            tmp_path,
            "node",
            "--node-index=1",
            "--host=n2",
            "--nnodes=2",
            f"--master-port={port}",
            JOBKIT_PREFLIGHT_TIMEOUT_S="2",
            MASTER_ADDR="127.0.0.1",
        )
    )
    line = f"jobkit preflight: node 1 (n2): cannot reach 127.0.0.1:{port}: connection refused"
    assert rc == 1 and out.splitlines()[-1] == line, out
    assert time.monotonic() - started < 20
    assert (tmp_path / "failure").read_text() == line + "\n"


def test_node_0_names_the_nodes_that_never_came(tmp_path: Path) -> None:
    port = str(_free_port())
    rc, out = _finish(
        _step(tmp_path, "node", "--nnodes=3", f"--master-port={port}", "--timeout=1", "--host=a")
    )
    assert rc == 1
    assert out.splitlines()[-1] == (
        f"jobkit preflight: node 0 (a): node(s) 1, 2 did not reach 127.0.0.1:{port} within 1 s"
    )


def test_port_taken_on_node_0(tmp_path: Path) -> None:
    with socket.create_server(("", 0)) as taken:
        port = taken.getsockname()[1]
        rc, out = _finish(_step(tmp_path, "node", f"--master-port={port}", "--host=a"))
    assert rc == 1
    assert out.splitlines()[-1].startswith(
        f"jobkit preflight: node 0 (a): cannot listen on port {port}: "
    )


def test_allreduce_past_its_deadline_is_stopped(tmp_path: Path) -> None:
    started = time.monotonic()
    rc, out = _finish(
        _step(tmp_path, "allreduce", "--timeout=0.5", "--host=a", "--", "sleep", "60")
    )
    assert rc == 1
    assert out.splitlines()[-1].startswith(
        "jobkit preflight: node 0 (a): all-reduce check did not finish within 1.5 s"
    )
    assert time.monotonic() - started < 20


def test_allreduce_that_fails_names_its_exit_code(tmp_path: Path) -> None:
    rc, out = _finish(_step(tmp_path, "allreduce", "--host=a", "--", "sh", "-c", "exit 3"))
    assert rc == 1
    assert out.splitlines()[-1] == (
        "jobkit preflight: node 0 (a): all-reduce check failed (exit code 3): see the lines above"
    )


def test_first_failure_line_wins_in_the_run_folder(tmp_path: Path) -> None:
    (tmp_path / "failure").write_text("jobkit preflight: node 1 (n2): first\n")
    rc, _ = _finish(_step(tmp_path, "allreduce", "--", "false"))
    assert rc == 1
    assert (tmp_path / "failure").read_text() == "jobkit preflight: node 1 (n2): first\n"


def test_gpu_check_without_a_gpu_request() -> None:
    assert check_gpus(0, []) == "no GPU requested"


def test_gpu_check_counts_and_free_memory() -> None:
    """Pure arithmetic on (free, total) pairs: what gpu_memory() returns on a GPU node."""
    assert check_gpus(2, [(70_000 * MIB, 80_000 * MIB)] * 2) == (
        "2 GPU(s) visible, at least 70000 MiB free on each"
    )
    with pytest.raises(PreflightFailure, match=r"^4 GPU\(s\) requested, 2 visible"):
        check_gpus(4, [(1, 1)] * 2)
    with pytest.raises(PreflightFailure, match="GPU 1 has 1000 MiB free of 80000 MiB"):
        check_gpus(2, [(80_000 * MIB, 80_000 * MIB), (1_000 * MIB, 80_000 * MIB)])


def test_gpu_request_on_a_node_without_gpus_fails(tmp_path: Path) -> None:
    """This machine's real answer when a job asks for GPUs it does not have."""
    if gpu_memory():
        pytest.skip("this machine has GPUs")
    rc, out = _finish(_step(tmp_path, "node", "--gpus=1", "--host=a"))
    assert rc == 1
    assert out.splitlines()[-1].startswith(
        "jobkit preflight: node 0 (a): 1 GPU(s) requested, 0 visible"
    )


def test_gpu_check_on_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA on this machine")
    memory = gpu_memory()
    assert len(memory) == torch.cuda.device_count()
    assert check_gpus(1, memory).startswith("1 GPU(s) visible")
