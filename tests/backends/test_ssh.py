"""The ssh backend against the real loopback sshd (hosts n1, n2): one torchrun per host.

What is running on a host is checked over ssh on that host, from the processes' environment
(every process of a job carries its JOBKIT_JOB_ID), zombies excluded.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobkit.backends import processes
from jobkit.backends.base import TrackedJob
from jobkit.backends.ssh import clean_hosts, pgid_file
from tests.backends.cli import Jobkit
from tests.plugins.cluster import SshHosts

pytestmark = pytest.mark.ssh

# Prints "pid state command" for each live process of job $1 on the host it runs on.
_LIST_JOB = r"""
for f in $(grep -lzxF "JOBKIT_JOB_ID=$1" /proc/[0-9]*/environ 2>/dev/null); do
  p=${f#/proc/}; p=${p%/environ}
  ps -o pid=,stat=,comm= -p "$p" 2>/dev/null | awk '$2 !~ /^Z/'
done
"""


def job_processes_on(hosts: SshHosts, host: str, job_id: str) -> list[str]:
    """The live processes of a job on `host`, seen over ssh."""
    done = subprocess.run(
        hosts.argv(host, shlex.join(["sh", "-c", _LIST_JOB, "list", job_id])),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture
def jobkit(tmp_path: Path, ssh_hosts: SshHosts) -> Jobkit:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return Jobkit(workdir=workdir, home=tmp_path / "home")


def write_spec(jobkit: Jobkit, name: str, code: str, hosts: SshHosts) -> str:
    """An ssh job on every host; the ssh settings come from the spec alone (not ~/.ssh/config)."""
    (jobkit.workdir / f"{name}.py").write_text(code)
    spec: dict[str, Any] = {
        "name": name,
        "backend": "ssh",
        "resources": {"nodes": len(hosts)},
        "launch": {"nproc_per_node": 1},
        "ssh": {
            "hosts": list(hosts),
            "port": hosts.port,
            "user": "root",
            "identity_file": str(hosts.key),
            "options": [
                f"UserKnownHostsFile={hosts.known_hosts}",
                "StrictHostKeyChecking=yes",
                "IdentitiesOnly=yes",
                "CheckHostIP=no",
            ],
        },
        "env": {"venv": str(Path(sys.executable).parent.parent)},
        "run": {"command": ["python3", f"{name}.py"]},
    }
    path = jobkit.workdir / f"{name}.yaml"
    path.write_text(json.dumps(spec))
    return path.name


PRINT = (
    "import os, time\n"
    "for i in range(3):\n"
    "    os.write(1, f\"rank {os.environ['RANK']} line {i}\\n\".encode())  # one write a line\n"
    "    time.sleep(0.3)\n"
)
SLEEP = "import os, time; os.write(1, b'up\\n'); time.sleep(600)"


def wait_up(job: dict[str, Any], hosts: int) -> None:
    run_dir = Path(job["log_paths"]["run_dir"])
    deadline = time.monotonic() + 90
    for node in range(hosts):
        out = run_dir / f"node-{node}.out"
        while not (out.exists() and "up" in out.read_text().split()):
            assert time.monotonic() < deadline, f"host {node} did not start: {out}"
            time.sleep(0.1)


def test_an_ssh_job_is_tracked_and_followed_on_both_hosts(
    jobkit: Jobkit, ssh_hosts: SshHosts
) -> None:
    job = jobkit.submit(write_spec(jobkit, "printer", PRINT, ssh_hosts))
    assert job["backend"] == "ssh"
    follower = jobkit.run("logs", job["jobkit_id"], "-f", "--all-ranks", timeout=180)
    assert follower.returncode == 0, follower.stderr
    printed = follower.stdout.splitlines()
    ranks = set()
    for node in (0, 1):
        mine = [ln for ln in printed if ln.startswith(f"[node {node}] rank")]
        rank = mine[0].split()[3]  # c10d rendezvous gives node ranks in arrival order
        ranks.add(rank)
        assert mine == [f"[node {node}] rank {rank} line {i}" for i in range(3)]
    assert ranks == {"0", "1"}
    state = jobkit.status(job["jobkit_id"])
    assert (state["state"], state["exit_code"]) == ("SUCCEEDED", 0)
    # The launcher knows its hosts, its start and its end: status shows them.
    assert state["nodes"] == ",".join(ssh_hosts)
    assert state["elapsed_s"] is not None and 0.5 < state["elapsed_s"] < 120, state
    table = jobkit.run("status").stdout
    row = next(line for line in table.splitlines() if line.startswith(job["jobkit_id"]))
    assert f" {','.join(ssh_hosts)} " in row and " - " not in row.split("ssh", 1)[1], row
    out = jobkit.run("logs", job["jobkit_id"])
    assert "jobkit: finished with exit code 0" in out.stdout.splitlines()


def test_a_host_without_the_interpreter_is_refused_before_launch(
    jobkit: Jobkit, ssh_hosts: SshHosts
) -> None:
    """One ssh check per host before anything starts: a missing interpreter is one line
    naming the key, the path and the host; nothing is recorded or launched."""
    name = write_spec(jobkit, "nopython", PRINT, ssh_hosts)
    spec = json.loads((jobkit.workdir / name).read_text())
    del spec["env"]["venv"]
    spec["env"]["python"] = "/opt/no-such-env/bin/python"
    (jobkit.workdir / name).write_text(json.dumps(spec))
    done = jobkit.run("submit", name)
    assert done.returncode == 2
    assert done.stderr == (
        f"jobkit: {name}:1: env.python: /opt/no-such-env/bin/python not found on"  # JSON: line 1
        f" {next(iter(ssh_hosts))}\n"
    )
    listed = jobkit.run("status", "--all", "--json")
    assert json.loads(listed.stdout) == []
    assert not (jobkit.workdir / "logs").exists()


def test_cancel_leaves_nothing_on_either_host(jobkit: Jobkit, ssh_hosts: SshHosts) -> None:
    job = jobkit.submit(write_spec(jobkit, "sleeper", SLEEP, ssh_hosts))
    job_id = job["jobkit_id"]
    follower = jobkit.start("logs", job_id, "-f")
    wait_up(job, len(ssh_hosts))
    for host in ssh_hosts:
        assert job_processes_on(ssh_hosts, host, job_id), f"nothing of the job runs on {host}"
    done = jobkit.run("cancel", job_id)
    assert done.returncode == 0, done.stderr
    for node, host in enumerate(ssh_hosts):
        assert job_processes_on(ssh_hosts, host, job_id) == [], host
        no_pgid = ssh_hosts.argv(host, "test", "!", "-e", pgid_file(job_id, node))
        assert subprocess.run(no_pgid).returncode == 0
    _out, err = follower.communicate(timeout=60)
    assert "ended CANCELLED" in err
    assert jobkit.status(job_id)["state"] == "CANCELLED"


def test_hosts_are_cleaned_over_ssh_when_the_launcher_died_uncleanly(
    jobkit: Jobkit, ssh_hosts: SshHosts
) -> None:
    """SIGKILL the launcher and its ssh clients: the torchruns on the hosts live on, and
    the per-host clean-up (over ssh, from the pgid files and the environment) stops them."""
    job = jobkit.submit(write_spec(jobkit, "orphans", SLEEP, ssh_hosts))
    job_id = job["jobkit_id"]
    wait_up(job, len(ssh_hosts))
    launcher = int(job["extra"]["pid"])
    local = processes.descendants(launcher)
    os.kill(launcher, signal.SIGKILL)
    processes.signal_processes(local, signal.SIGKILL)
    time.sleep(0.5)
    for host in ssh_hosts:
        assert job_processes_on(ssh_hosts, host, job_id), (
            f"the job on {host} died with its launcher"
        )
    tracked = TrackedJob(
        jobkit_id=job_id,
        scheduler_id=job["scheduler_id"],
        job_dir=Path(job["job_dir"]),
        workdir=Path(job["workdir"]),
        extra={k: str(v) for k, v in job["extra"].items()},
    )
    checks = clean_hosts(tracked, grace_s=5)
    assert [c.ok for c in checks] == [True, True], checks
    # On loopback both hosts are this machine: the first clean-up may have stopped both.
    assert {c.stdout for c in checks} <= {"stopped", "clean"}
    assert "stopped" in {c.stdout for c in checks}
    for host in ssh_hosts:
        assert job_processes_on(ssh_hosts, host, job_id) == [], host
    assert jobkit.status(job_id)["state"] == "FAILED"  # no exit code, not cancelled by jobkit
