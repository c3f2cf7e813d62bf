"""launch.preflight for real: 2-node Slurm jobs (one that passes and runs its program, one
whose master address no node can reach), the local backend and the ssh launcher over the
loopback sshd.

The jobs that pass run PROGRAM under torchrun (the launcher the preflight runs under): a
line per rank, no torch (the preflight's own all-reduce check imports torch; the bundled
trainer under torchrun on each backend is tests/e2e's). The one that fails keeps the trainer
as its program, which it never starts.

The unreachable master is an address inside a network namespace this test creates (a veth
pair, nothing listening there): every connection to it is refused, as a firewalled or wrong
MASTER_ADDR is on a real cluster. env.vars overrides MASTER_ADDR for the whole job.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.manager.helpers import Invoke, is_settled, wait_until

pytestmark = pytest.mark.slow

TRAIN = "run:\n  train:\n    config: mlp\n    overrides: {train.steps: 3}\n"
PROGRAM_LINE = "import os; print(f'program: rank {os.environ[\"RANK\"]} ran', flush=True)"
PROGRAM = f"run:\n  command: {json.dumps(['python3', '-c', PROGRAM_LINE])}\n"
"""Each rank prints `program: rank R ran` (in its node's node-N.out): no torch."""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\n{text}", encoding="utf-8")
    return path


def _submit(jobkit: Invoke, spec: Path) -> str:
    result = jobkit("submit", str(spec), "--json")
    assert result.code == 0, result.err
    return str(json.loads(result.out)["jobkit_id"])


def _record(jobkit: Invoke, job: str) -> dict[str, Any]:
    return wait_until(jobkit, job, is_settled, timeout=400)


def _out(record: dict[str, Any]) -> str:
    return Path(record["log_paths"]["out"]).read_text(encoding="utf-8")


def _master(out: str) -> str:
    """HOST:PORT from the launcher's `jobkit: master HOST:PORT...` line."""
    found = re.search(r"^jobkit: master ([^\s,]+)", out, re.M)
    assert found, out
    return found[1]


def _program_ran(record: dict[str, Any], world: int) -> None:
    """Every rank of PROGRAM printed its line (the node outputs of the run folder)."""
    run_dir = Path(record["log_paths"]["run_dir"])
    nodes = "".join(p.read_text(encoding="utf-8") for p in sorted(run_dir.glob("node-*.out")))
    for rank in range(world):
        assert f"program: rank {rank} ran\n" in nodes, nodes


def _preflight_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("jobkit preflight:")]


@pytest.fixture
def closed_address() -> Iterator[str]:
    """An address in a network namespace of this test's own, where nothing listens."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to create a network namespace")
    tag = os.getpid() % 250 + 1
    ns, link = f"jk-pf-{os.getpid()}", f"jkpf{os.getpid()}"[:15]
    steps = [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns],
        ["ip", "addr", "add", f"10.79.{tag}.1/30", "dev", link],
        ["ip", "link", "set", link, "up"],
        ["ip", "-n", ns, "addr", "add", f"10.79.{tag}.2/30", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
    ]
    try:
        for argv in steps:
            subprocess.run(argv, check=True, capture_output=True, timeout=30)
        yield f"10.79.{tag}.2"
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=30)


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_slurm_two_nodes_pass_then_train(workdir: Path, jobkit: Invoke) -> None:
    spec = _write(
        workdir,
        "pf-ok",
        "backend: slurm\nresources: {nodes: 2}\nlaunch: {preflight: true}\n" + PROGRAM,
    )
    final = _record(jobkit, _submit(jobkit, spec))
    assert final["state"] == "SUCCEEDED", final
    out = _out(final)
    lines = _preflight_lines(out)
    for node, host in ((0, "n1"), (1, "n2")):
        assert f"jobkit preflight: node {node} ({host}) ok: no GPU requested" in lines, out
    assert f"jobkit preflight: node 0 (n1) ok: {_master(out)} reached from all 2 node(s)" in lines
    assert "check: all-reduce ok (sum 2 = world size)" in out
    assert re.search(r"^jobkit preflight: passed in \d+ s$", out, re.M), out
    # Then the program ran, on both ranks.
    _program_ran(final, 2)
    assert out.index("jobkit preflight: passed") < out.index("jobkit: job step ended")


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_slurm_unreachable_master_fails_fast_with_one_line(
    workdir: Path, jobkit: Invoke, closed_address: str
) -> None:
    spec = _write(
        workdir,
        "pf-bad",
        "backend: slurm\nresources: {nodes: 2}\nlaunch: {preflight: true}\n"
        f"env:\n  vars: {{MASTER_ADDR: {closed_address}, JOBKIT_PREFLIGHT_TIMEOUT_S: 3}}\n" + TRAIN,
    )
    job = _submit(jobkit, spec)
    final = _record(jobkit, job)
    assert (final["state"], final["exit_code"]) == ("FAILED", 1), final
    out = _out(final)
    failed = [line for line in _preflight_lines(out) if ": cannot reach " in line]
    assert failed, out
    reason = re.compile(
        rf"^jobkit preflight: node [01] \(n[12]\): cannot reach {re.escape(closed_address)}"
        r":\d+: connection refused$"
    )
    assert all(reason.match(line) for line in failed), failed
    assert re.search(
        r"^jobkit preflight: failed after \d+ s: the program is not started$", out, re.M
    )
    # No training started: no node output, no trainer line; well within the default deadlines.
    run_dir = Path(final["log_paths"]["run_dir"])
    assert not list(run_dir.glob("node-*.out")) and "train:" not in out
    assert final["elapsed_s"] < 40, final["elapsed_s"]
    found = jobkit("doctor", job, "--json")
    assert found.code == 0, found.err
    diagnosis = json.loads(found.out)
    assert diagnosis["class"] == "preflight_failed", diagnosis
    # Both nodes may fail: the run folder's `failure` file keeps the first writer's line, which
    # need not be the first one srun copied into the .out (two nodes, one file: a race).
    assert diagnosis["summary"] in failed, (diagnosis["summary"], failed)
    shown = jobkit("status", job)
    reasons = [line for line in shown.out.splitlines() if line.startswith("  reason ")]
    assert len(reasons) == 1 and reasons[0].split(None, 1)[1] in failed, (reasons, failed)


def test_local_backend_two_processes(workdir: Path, jobkit: Invoke) -> None:
    spec = _write(
        workdir,
        "pf-local",
        "backend: local\nlaunch: {preflight: true, nproc_per_node: 2}\n" + PROGRAM,
    )
    final = _record(jobkit, _submit(jobkit, spec))
    assert final["state"] == "SUCCEEDED", final
    out = _out(final)
    assert "jobkit preflight: checking 1 node(s)" in out
    assert re.search(
        r"^jobkit preflight: node 0 \(\S+\) ok: \S+ reached from all 1 node\(s\)$", out, re.M
    )
    assert "check: all-reduce ok (sum 2 = world size)" in out
    assert "jobkit preflight: passed in " in out
    _program_ran(final, 2)


@pytest.mark.ssh
@pytest.mark.usefixtures("ssh_hosts")
def test_ssh_two_hosts(workdir: Path, jobkit: Invoke) -> None:
    spec = _write(
        workdir,
        "pf-ssh",
        "backend: ssh\nresources: {nodes: 2}\nssh: {hosts: [n1, n2]}\n"
        "launch: {preflight: true}\n" + PROGRAM,
    )
    final = _record(jobkit, _submit(jobkit, spec))
    assert final["state"] == "SUCCEEDED", final
    out = _out(final)
    lines = _preflight_lines(out)
    assert f"jobkit preflight: node 1 (n2) ok: {_master(out)} reached" in lines, out
    assert any(line.startswith("jobkit preflight: passed in ") for line in lines), lines
    _program_ran(final, 2)
