"""Seeds' habits run for real (issue 24): the program's own exit code, a command that is its
own launcher (launch.launcher none), srun tasks that get the torchrun variables, nproc auto
counting the GPUs at run time, a local sweep's slots sharing the GPUs. Local jobs here; the
Slurm ones on the test cluster's two nodes."""

from __future__ import annotations

import json
import os
import shlex
import socket
from pathlib import Path

import pytest

from tests.e2e import runs
from tests.e2e.cli import Jobkit, trainer_sets

ENV_LINE = (
    'echo "seen node=$NODE_RANK nnodes=$NNODES rank=${RANK:-} world=${WORLD_SIZE:-}'
    " local=${LOCAL_RANK:-} master=$MASTER_ADDR:$MASTER_PORT"
    ' cvd=${CUDA_VISIBLE_DEVICES:-unset} nproc=$JOBKIT_NPROC_PER_NODE"'
)
"""What a task saw, one line (the seed's own script would read these variables)."""


def _write_spec(folder: Path, name: str, text: str) -> str:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\n{text}", encoding="utf-8")
    return str(path)


def _seen(run_dir: Path, name: str = "node-0.out") -> list[str]:
    text = (run_dir / name).read_text()
    return [line for line in text.splitlines() if line.startswith("seen ")]


def test_local_exit_code_is_the_programs(jobkit: Jobkit, tmp_path: Path) -> None:
    """`run.command: bash -c 'exit 3'` ends FAILED (exit 3), `submit --wait` exits 3, and
    doctor names rank 0 from torchrun's root-cause block."""
    spec = _write_spec(tmp_path, "exit3", "run:\n  command: bash -c 'exit 3'\n")
    sub = jobkit.submit(spec, venv=False)
    assert sub.returncode == 3, sub.explain()
    assert f"{sub.jobkit_id} FAILED (exit 3)" in sub.stderr, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("FAILED", 3), record
    done = jobkit.run("doctor", "--json", sub.jobkit_id)
    diagnosis = json.loads(done.stdout)
    assert diagnosis["class"] == "program_exit", diagnosis
    assert diagnosis["rank"] == 0, diagnosis
    assert diagnosis["summary"] == "rank 0 exited with code 3 (torchrun's root cause)"


def test_local_launcher_none_runs_the_command_once_with_its_exit_code(
    jobkit: Jobkit, tmp_path: Path
) -> None:
    """launch.launcher none: the command as written, once, with NODE_RANK/NNODES (and, one
    process per node, RANK/WORLD_SIZE) exported; its own exit code; no torchrun traceback."""
    command = shlex.join(["sh", "-c", f"{ENV_LINE}; exit 4"])
    spec = _write_spec(
        tmp_path, "none", f"launch:\n  launcher: none\nrun:\n  command: {json.dumps(command)}\n"
    )
    sub = jobkit.submit(spec, venv=False)
    assert sub.returncode == 4, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("FAILED", 4), record
    run_dir = Path(record["log_paths"]["run_dir"])
    (line,) = _seen(run_dir)
    assert line.startswith("seen node=0 nnodes=1 rank=0 world=1 local=0 master=127.0.0.1:"), line
    assert "ChildFailedError" not in (run_dir / "node-0.out").read_text()


def test_nproc_auto_counts_the_gpus_when_the_job_starts(
    jobkit: Jobkit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local, gpus_per_node unset, nproc_per_node auto: one process per GPU the host shows
    (CUDA_VISIBLE_DEVICES stands for a 2-GPU box here), as torchrun's own auto."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    command = shlex.join(["sh", "-c", ENV_LINE])
    spec = _write_spec(tmp_path, "auto", f"run:\n  command: {json.dumps(command)}\n")
    sub = jobkit.submit(spec, venv=False)
    assert sub.returncode == 0, sub.explain()
    run_dir = Path(jobkit.status(sub.jobkit_id)["log_paths"]["run_dir"])
    seen = sorted(_seen(run_dir))
    assert [line.split(" local=")[0] for line in seen] == [
        "seen node= nnodes= rank=0 world=2",
        "seen node= nnodes= rank=1 world=2",
    ], seen
    assert "torchrun with 2 process(es)" in (run_dir / "node-0.out").read_text()


def test_local_sweep_slots_get_their_own_gpus(jobkit: Jobkit, tmp_path: Path) -> None:
    """max_parallel 2, gpus_per_node 1: the two tasks running side by side see GPU 0 and
    GPU 1, not both GPU 0 (the slot's share is the job script's, whatever the launcher: none
    here, no torchrun agent to start)."""
    command = shlex.join(["sh", "-c", f"{ENV_LINE}; sleep 4"])  # the two overlap
    spec = _write_spec(
        tmp_path,
        "slots",
        "resources:\n  gpus_per_node: 1\nlaunch:\n  launcher: none\n"
        f"run:\n  command: {json.dumps(command)}\n"
        "sweep:\n  grid: {x: [1, 2]}\n  max_parallel: 2\n",
    )
    sub = jobkit.run("submit", spec, *jobkit.common_sets(venv=False), "--wait", timeout=180)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    seen = sorted(
        line.split(" cvd=")[1].split()[0]
        for run_dir in jobkit.logs_dir.iterdir()
        if run_dir.is_dir() and run_dir.name.startswith("slots-")
        for line in _seen(run_dir)
    )
    assert seen == ["0", "1"], seen


@pytest.mark.slurm
def test_srun_runs_a_plain_ddp_script_on_two_nodes(jobkit: Jobkit, slurm_cluster: object) -> None:
    """The user's own env:// DDP script (examples/own_ddp.py, gloo) under launch.launcher
    srun: each task gets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT."""
    sub = jobkit.submit(
        "examples/own-script.yaml",
        "--set",
        "launch.launcher=srun",
        "--set",
        "run.command=python3 examples/own_ddp.py --epochs 1 --steps-per-epoch 5",
    )
    assert sub.returncode == 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("SUCCEEDED", 0), record
    run_dir = Path(record["log_paths"]["run_dir"])
    for rank in (0, 1):
        text = (run_dir / f"rank-{rank}.out").read_text()
        assert f"rank {rank}/2 (local 0) on cpu" in text, text


@pytest.mark.slurm
def test_slurm_launcher_none_runs_the_seeds_torchrun_line(
    jobkit: Jobkit, slurm_cluster: object
) -> None:
    """The seed's own command line (torchrun with --nnodes/--node_rank/--master_addr from
    the variables jobkit exports), once per node, verbatim."""
    seed = (
        "exec torchrun --nnodes=$NNODES --node_rank=$NODE_RANK --nproc_per_node=1"
        " --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT"
        " examples/own_ddp.py --epochs 1 --steps-per-epoch 5"
    )
    sub = jobkit.submit(
        "examples/own-script.yaml",
        "--set",
        "launch.launcher=none",
        "--set",
        f"run.command={shlex.join(['sh', '-c', seed])}",
    )
    assert sub.returncode == 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("SUCCEEDED", 0), record
    run_dir = Path(record["log_paths"]["run_dir"])
    text = (run_dir / "node-0.out").read_text() + (run_dir / "node-1.out").read_text()
    assert "rank 0/2 (local 0)" in text and "rank 1/2 (local 0)" in text, text


@pytest.mark.slurm
def test_slurm_exit_code_is_the_programs(jobkit: Jobkit, slurm_cluster: object) -> None:
    """Under torchrun on two Slurm nodes, a program's exit 3 is the job's exit code."""
    sub = jobkit.submit(
        "examples/own-script.yaml", "--set", "run.command=bash -c 'exit 3'", timeout=240
    )
    assert sub.returncode == 3, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("FAILED", 3), record


CRASH_AT_EXIT = """\
import ctypes, os, time
rank = int(os.environ["RANK"])
print(f"rank {rank}: training done", flush=True)
if rank == 0:
    time.sleep(30)  # still tearing down when the other node's rank aborts
else:
    time.sleep(2)
    ctypes.CDLL("libstdc++.so.6")._ZSt9terminatev()  # the teardown race's own abort
"""


@pytest.mark.slurm
def test_doctor_names_a_crash_at_exit_not_what_the_launchers_did_after(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    """Rank 1 (node 1) aborts at exit with `terminate called without an active exception`
    after its work; srun then stops node 0's torchrun (SIGTERM: SignalException). Doctor names
    the crash at exit, rank 1, and the fix, not the signal."""
    script = tmp_path / "crash_at_exit.py"
    script.write_text(CRASH_AT_EXIT, encoding="utf-8")
    sub = jobkit.submit(
        "examples/own-script.yaml", "--set", f"run.command=python3 {script}", timeout=240
    )
    assert sub.returncode != 0, sub.explain()
    done = jobkit.run("doctor", "--json", sub.jobkit_id)
    diagnosis = json.loads(done.stdout)
    assert diagnosis["class"] == "crash_at_exit", diagnosis
    assert diagnosis["rank"] == 1, diagnosis
    assert "destroy_process_group()" in diagnosis["fix"], diagnosis
    assert diagnosis["summary"] == "terminate called without an active exception", diagnosis


FAKE_CONDA = """#!/bin/bash
# A stand-in for conda (none can be installed on this machine): its shell hook defines a
# `conda` function whose `activate` fails as conda's does for a name it does not know.
if [[ "$1 $2" == "env list" ]]; then
  echo '{"envs": ["/opt/conda"]}'
elif [[ "$1 $2" == "shell.bash hook" ]]; then
  echo 'conda() { echo "EnvironmentNameNotFound: Could not find conda environment: $2" >&2'
  echo '  return 1; }'
fi
"""


def test_a_missing_conda_environment_stops_the_job_in_one_line(
    jobkit: Jobkit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """env.conda names an environment conda does not know. On local jobkit sees conda:
    `jobkit submit` refuses in one line before anything starts (manager/envcheck.py). Where
    the job's own setup comes first (env.setup may bring another conda), the job stops
    before the program with `jobkit: env.conda: ...`, and doctor classifies conda's
    EnvironmentNameNotFound."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "conda").write_text(FAKE_CONDA, encoding="utf-8")
    (bin_dir / "conda").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    body = "env:\n  conda: myenv\nlaunch:\n  launcher: none\nrun:\n  command: 'true'\n"
    refused = jobkit.run("submit", _write_spec(tmp_path, "conda", body))
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    assert refused.stderr.endswith(
        f"conda.yaml:3: env.conda: the conda environment myenv not found on"
        f" {socket.gethostname()} (`conda env list` names the environments there)\n"
    ), refused.stderr
    setup = body.replace("env:\n", "env:\n  setup: ['true']\n")
    sub = jobkit.submit(_write_spec(tmp_path, "conda", setup), venv=False)
    assert sub.returncode == 1, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert record["reason"] == (
        "jobkit: env.conda: the conda environment myenv (conda env list) not found on"
        f" {socket.gethostname()}"
    ), record
    diagnosis = json.loads(jobkit.run("doctor", "--json", sub.jobkit_id).stdout)
    assert diagnosis["class"] == "environment_missing", diagnosis


@pytest.mark.slurm
def test_mpirun_trains_the_bundled_model_on_two_slurm_nodes(
    jobkit: Jobkit, slurm_cluster: object
) -> None:
    """launch.launcher mpirun (Open MPI, openmpi-bin; tests/cluster/up.sh installs it): one
    rank per node, the ranks from OMPI_COMM_WORLD_*, gloo on CPU, to the last step."""
    sub = jobkit.submit(
        "examples/slurm-2node.yaml",
        "--set",
        "launch.launcher=mpirun",
        *trainer_sets(train__steps=10, logging__every_steps=5),
    )
    assert sub.returncode == 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("SUCCEEDED", 0), record
    run_dir = Path(record["log_paths"]["run_dir"])
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"launcher=openmpi rank={rank}" in log and "world_size=2" in log, log
        assert "step 10/10 loss" in log, log


@pytest.mark.sge
def test_grid_engine_launcher_none_runs_the_command_once_per_host(
    jobkit: Jobkit, sge_cluster: object, tmp_path: Path
) -> None:
    """launch.launcher none on two Grid Engine hosts (qrsh -inherit to host 1): each host runs
    the command once with its NODE_RANK, NNODES and, one process per node, RANK/WORLD_SIZE."""
    command = shlex.join(["sh", "-c", f"{ENV_LINE} host=$(hostname)"])
    spec = _write_spec(
        tmp_path,
        "sge-none",
        "backend: sge\nresources:\n  nodes: 2\nsge:\n  pe: jobkit\n"
        f"launch:\n  launcher: none\nrun:\n  command: {json.dumps(command)}\n",
    )
    sub = jobkit.submit(spec)
    assert sub.returncode == 0, sub.explain()
    run_dir = Path(jobkit.status(sub.jobkit_id)["log_paths"]["run_dir"])
    hosts = []
    for node in (0, 1):
        (line,) = _seen(run_dir, f"node-{node}.out")
        assert line.startswith(f"seen node={node} nnodes=2 rank={node} world=2 local=0 "), line
        master = line.split(" master=")[1].split(":")[0]
        hosts.append(line.rsplit(" host=", 1)[1])
    assert hosts[0] == master and sorted(hosts) == ["n1", "n2"], hosts  # node 0: the master


@pytest.mark.ssh
def test_ssh_hosts_are_the_nodes_and_launcher_none_runs_on_each(
    jobkit: Jobkit, ssh_hosts: object, tmp_path: Path
) -> None:
    """The seed's `launch_torchrun_auto.sh cfg 8 n1 n2`: ssh.hosts alone (no resources.nodes)
    gives two nodes; launcher none runs the command once on each host, over ssh."""
    command = shlex.join(["sh", "-c", ENV_LINE])
    spec = _write_spec(
        tmp_path,
        "ssh-none",
        "backend: ssh\nssh:\n  hosts: [n1, n2]\n"
        f"launch:\n  launcher: none\nrun:\n  command: {json.dumps(command)}\n",
    )
    sub = jobkit.submit(spec)
    assert sub.returncode == 0, sub.explain()
    run_dir = Path(jobkit.status(sub.jobkit_id)["log_paths"]["run_dir"])
    for node in (0, 1):
        (line,) = _seen(run_dir, f"node-{node}.out")
        assert line.startswith(f"seen node={node} nnodes=2 rank={node} world=2 local=0 master=n1:")
