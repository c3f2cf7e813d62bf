"""A seed's spec must not silently do something else (issue 24): each case in the seed's own
words, with the value that comes out (the refused line, the rendered request, the note)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import SpecError
from jobkit.render.engine import render
from jobkit.render.interpreter import Interpreter
from jobkit.render.notes import spec_notes
from jobkit.spec.commands import command_launcher
from jobkit.spec.load import load_spec
from jobkit.spec.schema import JobSpec
from tests.plugins.invoke import Invoke

VENV_PYTHON = Interpreter("/opt/venv/bin/python", "env.python auto: test")


def load(folder: Path, **sections: Any) -> JobSpec:
    data = {"name": "seed", **sections}
    (folder / "job.yaml").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return load_spec("job.yaml", profile_dirs=[folder]).spec


def error_of(folder: Path, **sections: Any) -> str:
    with pytest.raises(SpecError) as caught:
        load(folder, **sections)
    return str(caught.value)


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("torchrun --nproc_per_node=2 main.py", "torchrun"),
        ("python -m torch.distributed.run --nproc_per_node 2 main.py", "torchrun"),
        ("python3.11 -m torch.distributed.launch --use_env main.py", "torch.distributed.launch"),
        ("srun python main.py", "srun"),
        ("mpirun -np 4 python main.py", "mpirun"),
        ("mpiexec -n 4 python main.py", "mpirun"),
        ("deepspeed main.py", "deepspeed"),
        ("accelerate launch main.py", "accelerate launch"),
        ("env OMP_NUM_THREADS=4 /opt/bin/torchrun main.py", "torchrun"),
        ("python main.py", None),
        ("python -m train", None),
        ("bash -c 'torchrun main.py'", None),
    ],
)
def test_a_command_that_is_itself_a_launcher_is_recognised(command: str, found: str | None) -> None:
    assert command_launcher(shlex.split(command)) == found


def test_torchrun_inside_torchrun_is_refused_in_one_line(in_tmp: Path) -> None:
    message = error_of(in_tmp, run={"command": "torchrun --nproc_per_node=2 main.py"})
    assert message.startswith(
        "job.yaml:4: run.command: starts its own launcher (torchrun), which launch.launcher"
        " torchrun would run inside torchrun"
    ), message
    assert "set launch.launcher: none" in message and "\n" not in message


def test_srun_launcher_refuses_an_srun_command(in_tmp: Path) -> None:
    message = error_of(
        in_tmp,
        backend="slurm",
        launch={"launcher": "srun"},
        run={"command": "srun python main.py"},
    )
    assert "run.command: starts its own launcher (srun), which launch.launcher srun" in message


def test_launcher_none_runs_the_seed_command_verbatim_once_per_node(in_tmp: Path) -> None:
    seed = (
        "torchrun --nproc_per_node=2 --nnodes=$NNODES --node_rank=$NODE_RANK"
        " --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT main.py"
    )
    command = ["sh", "-c", seed]
    spec = load(
        in_tmp,
        backend="slurm",
        resources={"nodes": 2},
        launch={"launcher": "none"},
        run={"command": command},
    )
    script = render(spec, interpreter=VENV_PYTHON)
    assert 'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1' in script
    assert (
        "sh -c 'export JOBKIT_NODE_INDEX=$SLURM_NODEID NODE_RANK=$SLURM_NODEID"
        " NNODES=$SLURM_JOB_NUM_NODES RANK=$SLURM_NODEID LOCAL_RANK=0"
        " WORLD_SIZE=$SLURM_JOB_NUM_NODES LOCAL_WORLD_SIZE=1 GROUP_RANK=$SLURM_NODEID;"
        """ exec "$@"' none""" in script
    )
    assert shlex.join(command) in script
    assert "exec torchrun" not in script  # no torchrun of jobkit's own around it


@pytest.mark.parametrize("backend", ["local", "ssh", "pbs", "sge"])
def test_launcher_none_on_the_per_host_launchers(in_tmp: Path, backend: str) -> None:
    ssh = {"hosts": ["n1", "n2"]} if backend == "ssh" else {}
    nodes = 1 if backend == "local" else 2
    spec = load(
        in_tmp,
        backend=backend,
        **({"sge": {"pe": "mpi"}} if backend == "sge" else {}),
        resources={} if backend == "ssh" else {"nodes": nodes},
        ssh=ssh,
        launch={"launcher": "none"},
        run={"command": "bash seed.sh"},
    )
    script = render(spec, interpreter=VENV_PYTHON)
    assert 'setsid env NODE_RANK="$rank" NNODES="$JOBKIT_NNODES"' in script
    assert "bash seed.sh" in script and "torchrun --nnodes" not in script


def test_launcher_none_refuses_the_bundled_trainer_with_several_processes(in_tmp: Path) -> None:
    message = error_of(
        in_tmp,
        launch={"launcher": "none", "nproc_per_node": 2},
        run={"train": {"config": "mlp"}},
    )
    assert "launch.launcher: none runs the program once per node, but the bundled trainer" in (
        message
    )


def test_srun_tasks_get_the_torchrun_variables(in_tmp: Path) -> None:
    spec = load(
        in_tmp,
        backend="slurm",
        resources={"nodes": 2},
        launch={"launcher": "srun", "nproc_per_node": 2},
        run={"command": "python ddp.py"},
    )
    script = render(spec, interpreter=VENV_PYTHON)
    assert (
        "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS"
        " LOCAL_WORLD_SIZE=2 GROUP_RANK=$SLURM_NODEID NODE_RANK=$SLURM_NODEID" in script
    )
    assert "export MASTER_ADDR\n" in script and "export MASTER_PORT\n" in script


def test_cpus_per_task_means_per_process_and_says_so(in_tmp: Path) -> None:
    """The seed's "4 cores per GPU" under the default torchrun: 2 processes x 4 CPUs."""
    spec = load(
        in_tmp,
        backend="slurm",
        resources={"nodes": 2, "gpus_per_node": 2, "cpus_per_task": 4},
        run={"command": "python main.py"},
    )
    script = render(spec, interpreter=VENV_PYTHON)
    assert "#SBATCH --cpus-per-task=8\n" in script
    assert "export OMP_NUM_THREADS=4\n" in script
    assert spec_notes(spec, VENV_PYTHON) == [
        "resources.cpus_per_task 4 is taken per process (as resources.cpus_per_process): each"
        " node's one torchrun task asks for 4 x 2 = 8 CPUs"
    ]


def test_torque_cpus_per_task_per_process(in_tmp: Path) -> None:
    spec = load(
        in_tmp,
        backend="pbs",
        scheduler={"pbs_flavor": "torque"},
        resources={"nodes": 1, "gpus_per_node": 4, "cpus_per_task": 4},
        run={"command": "python main.py"},
    )
    assert ":ppn=16" in render(spec, interpreter=VENV_PYTHON)


def test_no_cpu_request_with_several_processes_is_said(in_tmp: Path) -> None:
    spec = load(
        in_tmp,
        backend="pbs",
        scheduler={"pbs_flavor": "torque"},
        resources={"gpus_per_node": 4},
        run={"command": "python main.py"},
    )
    assert spec_notes(spec, VENV_PYTHON) == [
        "no CPU request (resources.cpus_per_process): the scheduler's default (often 1 CPU per"
        " task) is shared by the 4 processes of each node; set resources.cpus_per_process: N"
        " for N cores each"
    ]


def test_python_auto_before_a_module_loaded_python_is_said(in_tmp: Path) -> None:
    spec = load(in_tmp, env={"modules": ["python/3.11"]}, run={"command": "python main.py"})
    assert spec_notes(spec, VENV_PYTHON) == [
        "env.python auto: the job runs /opt/venv/bin/python (the environment jobkit runs from),"
        " ahead of the Python that env.modules (python/3.11) puts on PATH; env.python: system"
        " uses the module's"
    ]
    spec = load(in_tmp, env={"modules": ["cuda/12.4"]}, run={"command": "python main.py"})
    assert spec_notes(spec, VENV_PYTHON) == []  # a module that brings no Python
    spec = load(
        in_tmp,
        env={"modules": ["python/3.11"], "python": "system"},
        run={"command": "python main.py"},
    )
    assert spec_notes(spec, VENV_PYTHON) == []


def test_render_prints_the_note_on_stderr(in_tmp: Path, cli: Invoke) -> None:
    load(
        in_tmp,
        backend="slurm",
        resources={"cpus_per_task": 4},
        launch={"nproc_per_node": 2},
        run={"command": "python main.py"},
    )
    result = cli("render", "job.yaml")
    assert result.code == 0, result.err
    assert "jobkit: note: resources.cpus_per_task 4 is taken per process" in result.err
    assert "#SBATCH --cpus-per-task=8" in result.out


def test_ssh_hosts_give_the_node_count(in_tmp: Path) -> None:
    """The seed's `launch_torchrun_auto.sh cfg 8 n1 n2 n3`: the hosts are the nodes."""
    spec = load(
        in_tmp, backend="ssh", ssh={"hosts": ["n1", "n2", "n3"]}, run={"command": "python main.py"}
    )
    assert spec.resources.nodes == 3 and spec.world_size == 3
    message = error_of(
        in_tmp,
        backend="ssh",
        resources={"nodes": 2},
        ssh={"hosts": ["n1", "n2", "n3"]},
        run={"command": "python main.py"},
    )
    assert message == (
        "job.yaml:5: resources.nodes: must equal the number of ssh.hosts (3: n1, n2, n3; got 2):"
        " one node per host; leave resources.nodes out and it follows ssh.hosts"
    )


@pytest.mark.parametrize(
    ("launcher", "backend", "expected"),
    [
        ("torchrun", "slurm", "--max-restarts 0 --rdzv-conf=read_timeout=300 '--log-dir=/a b' "),
        ("srun", "slurm", "/rank-%t.out\" --rdzv-conf=read_timeout=300 '--log-dir=/a b' \\"),
        ("mpirun", "slurm", "mpirun -np 2 --rdzv-conf=read_timeout=300 '--log-dir=/a b' "),
        ("torchrun", "local", "--max-restarts 0 --rdzv-conf=read_timeout=300 '--log-dir=/a b' "),
    ],
)
def test_extra_args_reach_the_launcher_quoted(
    in_tmp: Path, launcher: str, backend: str, expected: str
) -> None:
    spec = load(
        in_tmp,
        backend=backend,
        resources={"nodes": 1 if backend == "local" else 2},
        launch={
            "launcher": launcher,
            "extra_args": ["--rdzv-conf=read_timeout=300 '--log-dir=/a b'"],
        },
        run={"command": "python main.py"},
    )
    assert expected in render(spec, interpreter=VENV_PYTHON)


def test_extra_args_refused_where_nothing_takes_them(in_tmp: Path) -> None:
    message = error_of(
        in_tmp, launch={"launcher": "none", "extra_args": ["--x"]}, run={"command": "sh a.sh"}
    )
    assert "launch.extra_args: launcher none has no launcher to pass them to" in message
    message = error_of(in_tmp, launch={"extra_args": ["--x 'y"]}, run={"command": "sh a.sh"})
    assert "launch.extra_args[0]: cannot be split into words like a shell" in message


def test_rendezvous_timeout_fix_names_the_launch_key() -> None:
    from jobkit.doctor.classes import BY_NAME

    assert "launch.rdzv_timeout" in BY_NAME["rendezvous_timeout"].fix


def test_dp_strategy_with_two_gpus_is_refused_before_the_queue(in_tmp: Path, cli: Invoke) -> None:
    """`distributed.strategy: dp` is one process over the node's GPUs: nproc auto (2 GPUs)
    would start 2, which the trainer refuses after the queue wait."""
    load(
        in_tmp,
        backend="slurm",
        resources={"gpus_per_node": 2},
        run={"train": {"config": "mlp", "overrides": {"distributed.strategy": "dp"}}},
    )
    result = cli("render", "job.yaml")
    assert result.code == 2
    assert result.err.strip() == (
        "jobkit: job.yaml:5: launch.nproc_per_node: the trainer's distributed.strategy dp runs"
        " one process using every GPU of its node, but this spec starts 2 (1 node(s) x 2): set"
        " launch.nproc_per_node: 1 (it sees all 2 GPUs of resources.gpus_per_node)"
    )
    result = cli("render", "job.yaml", "--set", "launch.nproc_per_node=1")
    assert result.code == 0, result.err
    assert "--nproc-per-node 1 " in result.out
