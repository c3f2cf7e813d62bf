"""Rendered scripts on the real test cluster (tests/cluster/up.sh): Slurm, Slurm's Torque
wrappers (qsub) and the loopback sshd. Each job is small: a 2-process gloo all-reduce, a
line per rank, or a few seconds of sleep. They skip when the cluster is down (fail under
CI=true).

A torchrun agent costs ~3 CPU-s per node and a rank that imports torch ~2-3 CPU-s: each job
runs as few of them as its subject needs. The all-reduce (torch) runs where the rendezvous of
the ranks is the subject (Slurm's 2 nodes, PBS); the ssh job with hostile paths prints a
line per rank (its 2 torchruns still rendezvous over ssh; the bundled trainer's DDP over ssh
is tests/e2e/test_ssh.py's). The program that finished then got a signal runs on 1 node (the
script's reading of torchrun's exit is per job, not per node), and scancel's job runs its
ranks as srun tasks (the script's requeue decision is the same for every launcher; the
warning signal through torchrun is the requeue test's).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobkit.render.engine import render
from tests.plugins.cluster import PbsCluster, SlurmCluster, SshHosts, sbatch, wait_slurm_job
from tests.render.helpers import spec_from

JOB_TIMEOUT_S = 480.0  # the cluster is shared with other tests: allow for queueing

DDP = """\
import os
import re
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
total = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(total)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {total.item()}", flush=True)
print("HOSTILE=" + os.environ.get("HOSTILE", ""), flush=True)
dist.destroy_process_group()
"""

RANKS = """\
import os
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}", flush=True)
print("HOSTILE=" + os.environ.get("HOSTILE", ""), flush=True)
"""
"""What each rank got from its launcher: no torch."""

# On SIGTERM or SIGUSR2: rank 0 leaves the requeue marker, every rank exits 75 (the trainer's
# preemption contract, docs/design.md).
PREEMPTIBLE = """\
import os, pathlib, signal, sys, time
rank = int(os.environ["RANK"])
def stop(signum, frame):
    print(f"rank {rank} got signal {signum}", flush=True)
    if rank == 0:
        pathlib.Path(os.environ["JOBKIT_RUN_DIR"], "requeue-requested").touch()
    sys.exit(75)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGUSR2, stop)
print(f"rank {rank} started restart={os.environ.get('SLURM_RESTART_COUNT', '0')}", flush=True)
time.sleep(600)
"""


@pytest.fixture
def cleanup() -> Iterator[list[str]]:
    """Job ids to scancel after the test, whatever happened."""
    ids: list[str] = []
    yield ids
    if ids:
        subprocess.run(["scancel", *ids], check=False, capture_output=True)


def _python_env() -> dict[str, Any]:
    """env settings that put this interpreter's torchrun on PATH on every node."""
    if sys.prefix != sys.base_prefix:
        return {"venv": sys.prefix}
    return {"setup": [f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH"]}


def _workdir(tmp_path: Path, program: str) -> Path:
    workdir = tmp_path / "submit dir"
    (workdir / "logs").mkdir(parents=True)  # jobkit submit creates logs.dir
    (workdir / "prog.py").write_text(program)
    return workdir


def _write(workdir: Path, data: dict[str, Any]) -> Path:
    script = workdir / "job.sh"
    script.write_text(render(spec_from(data)))
    return script


def _scontrol_field(job_id: str, field: str) -> str | None:
    done = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=False
    )
    for line in done.stdout.splitlines():
        for item in line.split():
            if item.startswith(field + "="):
                return item.split("=", 1)[1]
    return None


def _wait_for_text(path: Path, text: str, count: int = 1, timeout: float = JOB_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count(text) >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not {count} time(s) in {path} after {timeout} s")


def _slurm_job(name: str, partition: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "backend": "slurm",
        "resources": {"nodes": 2, "time": 10, "partition": partition},
        "launch": {"nproc_per_node": 1},
        "env": _python_env(),
        "run": {"command": ["python3", "prog.py"]},
    }
    for key, value in extra.items():
        data[key] = {**data.get(key, {}), **value}
    return data


@pytest.mark.slurm
def test_two_node_torchrun_job(
    tmp_path: Path, slurm_cluster: SlurmCluster, cleanup: list[str]
) -> None:
    workdir = _workdir(tmp_path, DDP)
    data = _slurm_job("two-node", slurm_cluster.partition, env={"vars": {"HOSTILE": "a'b $(x)"}})
    job_id = sbatch(str(_write(workdir, data)), cwd=workdir)
    cleanup.append(job_id)
    end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
    run_dir = workdir / "logs" / f"two-node-{job_id}"
    outputs = [(run_dir / f"node-{i}.out").read_text() for i in (0, 1)]
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), outputs
    # c10d numbers the hosts itself; each worker noted its host (ranks/R): the note is right.
    hosts = {rank: int((run_dir / "ranks" / str(rank)).read_text()) for rank in (0, 1)}
    assert sorted(hosts.values()) == [0, 1], hosts
    for rank, host in hosts.items():
        assert f"rank {rank} of 2 sum 3.0" in outputs[host], (hosts, outputs)
    assert all("HOSTILE=a'b $(x)" in out for out in outputs)
    # the code, then the job that wrote it (a run's attempts share the folder)
    assert (run_dir / "exit_code").read_text().splitlines() == ["0", job_id]
    header = (workdir / "logs" / f"two-node-{job_id}.out").read_text()
    assert f"jobkit: job {job_id} (two-node) on 2 node(s): n1 n2" in header
    assert f"master n1:{15000 + int(job_id) % 15000}" in header


@pytest.mark.slurm
def test_warning_signal_reaches_workers_as_sigterm_and_requeues(
    tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    workdir = _workdir(tmp_path, PREEMPTIBLE)
    data = _slurm_job(
        "preempt", slurm_cluster.partition, scheduler={"requeue": True, "signal": "USR2@60"}
    )
    job_id = sbatch(str(_write(workdir, data)), cwd=workdir)
    run_dir = workdir / "logs" / f"preempt-{job_id}"
    try:
        for i in (0, 1):
            _wait_for_text(run_dir / f"node-{i}.out", "started restart=0")
        # What Slurm does 60 s before the time limit, now.
        subprocess.run(["scancel", "--batch", "--signal=USR2", job_id], check=True)
        deadline = time.monotonic() + 60
        while _scontrol_field(job_id, "Restarts") != "1":
            assert time.monotonic() < deadline, "the job was not requeued"
            time.sleep(0.5)
    finally:
        subprocess.run(["scancel", job_id], check=False)
    out = (workdir / "logs" / f"preempt-{job_id}.out").read_text()
    err = (workdir / "logs" / f"preempt-{job_id}.err").read_text()
    assert "received SIGUSR2" in err
    assert f"the program asked to be requeued: scontrol requeue {job_id}" in out
    # torchrun's workers got SIGTERM (15), passed on by torchrun from scancel --signal=TERM.
    # (c10d rendezvous numbers the nodes: rank 0 may run on either host.)
    nodes = (run_dir / "node-0.out").read_text() + (run_dir / "node-1.out").read_text()
    assert "rank 0 got signal 15" in nodes and "rank 1 got signal 15" in nodes
    assert not (run_dir / "requeue-requested").exists()


# Notes its work complete (as the bundled trainer does), then dies of a signal: what torchrun
# reports when a time-limit warning comes as training ends.
FINISHES_THEN_SIGNALLED = """\
import os, signal
with open(os.path.join(os.environ["JOBKIT_RUN_DIR"], "finished"), "w") as note:
    note.write("step 300 final loss 1.9\\n")
os.kill(os.getpid(), signal.SIGTERM)
"""


@pytest.mark.slurm
def test_a_program_that_finished_is_a_success_whatever_signal_came_at_the_end(
    tmp_path: Path, slurm_cluster: SlurmCluster, cleanup: list[str]
) -> None:
    workdir = _workdir(tmp_path, FINISHES_THEN_SIGNALLED)
    data = _slurm_job("finished", slurm_cluster.partition, resources={"nodes": 1})
    job_id = sbatch(str(_write(workdir, data)), cwd=workdir)
    cleanup.append(job_id)
    end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
    out = (workdir / "logs" / f"finished-{job_id}.out").read_text()
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), out
    assert re.search(
        r"^jobkit: the program had finished \(step 300 final loss 1\.9\), although the job"
        r" step ended with exit code (1|143): exit 0$",
        out,
        re.MULTILINE,
    ), out
    exit_file = workdir / "logs" / f"finished-{job_id}" / "exit_code"
    assert exit_file.read_text().splitlines() == ["0", job_id]


@pytest.mark.slurm
def test_scancel_is_final_even_when_the_program_asks_for_a_requeue(
    tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    workdir = _workdir(tmp_path, PREEMPTIBLE)
    data = _slurm_job(
        "cancelled",
        slurm_cluster.partition,
        scheduler={"requeue": True, "signal": "USR2@60"},
        launch={"launcher": "srun"},  # the ranks are srun's tasks: no torchrun
    )
    job_id = sbatch(str(_write(workdir, data)), cwd=workdir)
    run_dir = workdir / "logs" / f"cancelled-{job_id}"
    try:
        for i in (0, 1):
            _wait_for_text(run_dir / f"rank-{i}.out", "started restart=0")
        subprocess.run(["scancel", job_id], check=True)
        end = wait_slurm_job(job_id, timeout=120)
    finally:
        subprocess.run(["scancel", job_id], check=False)
    assert end.state == "CANCELLED"
    err = workdir / "logs" / f"cancelled-{job_id}.err"
    _wait_for_text(err, "not requeueing", timeout=30)
    assert _scontrol_field(job_id, "Restarts") in (None, "0")


@pytest.mark.slurm
def test_sbatch_reads_quoted_directives_as_rendered(
    tmp_path: Path, slurm_cluster: SlurmCluster, cleanup: list[str]
) -> None:
    """What sbatch makes of dq-quoted #SBATCH values: exactly the values given."""
    workdir = _workdir(tmp_path, "")
    comment = 'a\'b "c" \\d #e $(f) `g` %h ünï'
    logs_dir = 'logs/50% it\'s "odd" #dir'
    (workdir / logs_dir).mkdir(parents=True)
    data = _slurm_job(
        "quoting",
        slurm_cluster.partition,
        resources={"nodes": 1},
        launch={"launcher": "srun"},
        scheduler={"extra": ["--hold", shlex.join(["--comment=" + comment])]},
        logs={"dir": logs_dir},
        run={"command": ["echo", "hello"]},
    )
    job_id = sbatch(str(_write(workdir, data)), cwd=workdir)
    cleanup.append(job_id)
    shown = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%k"], capture_output=True, text=True, check=True
    )
    assert shown.stdout.rstrip("\n") == comment
    subprocess.run(["scontrol", "release", job_id], check=True)
    end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
    # The "%" of logs.dir went through sbatch's file pattern as "%%": the files carry one "%".
    out = workdir / logs_dir / f"quoting-{job_id}.out"
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), out.read_text()
    assert f"jobkit: job {job_id} (quoting)" in out.read_text()
    assert (workdir / logs_dir / f"quoting-{job_id}.err").exists()
    assert "hello" in (workdir / logs_dir / f"quoting-{job_id}" / "rank-0.out").read_text()


@pytest.mark.pbs
def test_pbs_script_through_the_torque_wrappers(
    tmp_path: Path, pbs_cluster: PbsCluster, cleanup: list[str]
) -> None:
    workdir = _workdir(tmp_path, DDP)
    data = {
        "name": "pbs-job",
        "backend": "pbs",
        "resources": {"nodes": 1, "time": 10, "partition": pbs_cluster.slurm.partition},
        "scheduler": {"pbs_flavor": "torque"},
        "launch": {"nproc_per_node": 2},
        "env": _python_env(),
        "run": {"command": ["python3", "prog.py"]},
    }
    script = _write(workdir, data)
    # Slurm's qsub wrapper passes the script path to sbatch unquoted: give it a plain name.
    done = subprocess.run(
        [str(pbs_cluster.qsub), script.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    job_id = done.stdout.strip().split(".")[0]
    cleanup.append(job_id)
    end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
    out = (workdir / "logs" / f"pbs-job-{job_id}.out").read_text()
    run_dir = workdir / "logs" / f"pbs-job-{job_id}"
    node = (run_dir / "node-0.out").read_text()
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), out + node
    assert f"jobkit: job {job_id} on 1 host(s)" in out
    assert "rank 0 of 2 sum 3.0" in node and "rank 1 of 2 sum 3.0" in node
    assert (run_dir / "exit_code").read_text().splitlines()[0] == "0"


@pytest.mark.ssh
def test_ssh_launcher_on_two_hosts_with_hostile_paths(tmp_path: Path, ssh_hosts: SshHosts) -> None:
    canary = tmp_path / "canary"
    workdir = tmp_path / f'it\'s a "dir" $(touch {canary})'
    workdir.mkdir(parents=True)
    (workdir / "prog.py").write_text(RANKS)
    hostile = f"x'; touch {canary} #`touch {canary}`"
    data = {
        "name": "over-ssh",
        "backend": "ssh",
        "resources": {"nodes": 2},
        "ssh": {
            "hosts": list(ssh_hosts.hosts),
            "port": ssh_hosts.port,
            "identity_file": str(ssh_hosts.key),
            "options": [
                f"UserKnownHostsFile={ssh_hosts.known_hosts}",
                "StrictHostKeyChecking=yes",
                "IdentitiesOnly=yes",
            ],
        },
        "env": {**_python_env(), "vars": {"HOSTILE": hostile}},
        "run": {"command": ["python3", "prog.py"]},
        "logs": {"dir": "my logs"},
    }
    script = _write(workdir, data)
    done = subprocess.run(
        ["bash", str(script)],
        cwd=workdir,
        env={"JOBKIT_JOB_ID": "jkssh01", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        check=False,
    )
    run_dir = workdir / "my logs" / "over-ssh-jkssh01"
    outputs = [(run_dir / f"node-{i}.out").read_text() for i in (0, 1)]
    assert done.returncode == 0, done.stdout + done.stderr + "".join(outputs)
    assert sorted(out.split("rank ")[1][:6] for out in outputs) == ["0 of 2", "1 of 2"]
    assert all(f"HOSTILE={hostile}" in out for out in outputs)
    assert (run_dir / "exit_code").read_text().splitlines()[0] == "0"
    assert not canary.exists()
