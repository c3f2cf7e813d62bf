"""launch.launcher spawn / distributed-launch, ssh.fanout pdsh and `jobkit render --node-rank`:
what the spec refuses (one line naming the key) and what the rendered lines hold (pure)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import SpecError
from jobkit.render.engine import render
from jobkit.spec.load import load_spec
from tests.plugins.invoke import Invoke

TRAIN = {"train": {"config": "mlp"}}


def write(folder: Path, **sections: Any) -> str:
    data = {"name": "t", "run": TRAIN, **sections}
    (folder / "job.yaml").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return "job.yaml"


def error_of(folder: Path, **sections: Any) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(write(folder, **sections), profile_dirs=[folder])
    return str(caught.value)


def test_spawn_refuses_several_nodes(in_tmp: Path) -> None:
    message = error_of(
        in_tmp, backend="slurm", resources={"nodes": 2}, launch={"launcher": "spawn"}
    )
    assert "launch.launcher: spawn starts the processes of one node (resources.nodes is 2)" in (
        message
    )
    assert "\n" not in message


def test_spawn_refuses_a_users_command(in_tmp: Path) -> None:
    message = error_of(in_tmp, launch={"launcher": "spawn"}, run={"command": "python x.py"})
    assert "launch.launcher: spawn starts the bundled trainer's processes (run.train)" in message


@pytest.mark.parametrize("launcher", ["spawn", "distributed-launch"])
def test_backends_without_the_launcher_name_those_with_it(in_tmp: Path, launcher: str) -> None:
    message = error_of(in_tmp, backend="pbs", launch={"launcher": launcher})
    expected = f"job.yaml:10: launch.launcher: {launcher} needs the local or slurm or ssh backend"
    assert message == f"{expected} (backend is pbs)", message


def test_pdsh_refuses_options_it_cannot_pass(in_tmp: Path) -> None:
    ssh = {"hosts": ["n1", "n2"], "fanout": "pdsh", "options": ["ProxyCommand=ssh -W %h:%p gw"]}
    message = error_of(in_tmp, backend="ssh", resources={"nodes": 2}, ssh=ssh)
    assert "ssh.options: must hold no spaces or % with ssh.fanout pdsh" in message


def test_pdsh_refuses_a_host_twice(in_tmp: Path) -> None:
    ssh = {"hosts": ["n1", "n1"], "fanout": "pdsh"}
    message = error_of(in_tmp, backend="ssh", resources={"nodes": 2}, ssh=ssh)
    assert "ssh.hosts: must be distinct with ssh.fanout pdsh" in message


def script(folder: Path, **sections: Any) -> str:
    return render(load_spec(write(folder, **sections), profile_dirs=[folder]).spec)


def test_slurm_distributed_launch_line(in_tmp: Path) -> None:
    text = script(
        in_tmp,
        backend="slurm",
        resources={"nodes": 2},
        launch={"launcher": "distributed-launch", "nproc_per_node": 2, "master_port": 29400},
    )
    assert "#SBATCH --ntasks-per-node=1\n" in text
    assert 'exec "$0" -m torch.distributed.launch --node_rank "$SLURM_NODEID" "$@"' in text
    assert '--use_env --nnodes "$SLURM_JOB_NUM_NODES" --nproc_per_node 2 \\' in text
    assert '--master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT"' in text
    assert "MASTER_PORT=29400\n" in text
    assert 'scancel --signal=TERM "$SLURM_JOB_ID"' in text


def test_slurm_spawn_line(in_tmp: Path) -> None:
    text = script(in_tmp, backend="slurm", launch={"launcher": "spawn", "nproc_per_node": 3})
    assert "srun --nodes=1 --ntasks-per-node=1 --kill-on-bad-exit=1" in text
    assert "-m train --config mlp --spawn 3 &\n" in text
    assert "torchrun" not in text.split("# ---- Launch")[1]


def test_pdsh_launcher_reaches_hosts_with_the_spec_ssh_options(in_tmp: Path) -> None:
    ssh = {"hosts": ["a", "b"], "fanout": "pdsh", "port": 2222, "user": "me"}
    text = script(in_tmp, backend="ssh", resources={"nodes": 2}, ssh=ssh)
    assert "export PDSH_RCMD_TYPE=ssh\n" in text
    assert 'PDSH_SSH_ARGS="${jobkit_ssh[*]:1} %h"' in text
    assert "jobkit_ssh=(ssh -o BatchMode=yes -o ServerAliveInterval=30 -p 2222 -l me)" in text
    assert "jobkit_pdsh=(pdsh -S -R ssh -f 2)" in text
    assert "jobkit_start_nodes_pdsh\njobkit_watch_pdsh\n" in text


def test_render_node_rank_prints_the_static_command(in_tmp: Path, jobkit: Invoke) -> None:
    spec = write(
        in_tmp,
        backend="slurm",
        resources={"nodes": 3},
        launch={"launcher": "distributed-launch", "nproc_per_node": 2},
    )
    done = jobkit("render", spec, "--node-rank", "2", "--master", "gpu-01", "--port", "29411")
    assert done.code == 0, done.err
    assert "export MASTER_ADDR=gpu-01\nexport MASTER_PORT=29411\n" in done.out
    assert "export JOBKIT_NODE_INDEX=2\n" in done.out
    launch = done.out[done.out.index("-m torch.distributed.launch") :]
    words = shlex.split(launch.replace("\\\n", " "))
    assert words[words.index("--nnodes") + 1] == "3"
    assert words[words.index("--node_rank") + 1] == "2"
    assert words[words.index("--nproc_per_node") + 1] == "2"


def test_render_node_rank_without_master_asks_for_it(in_tmp: Path, jobkit: Invoke) -> None:
    spec = write(in_tmp, backend="slurm", resources={"nodes": 2})
    done = jobkit("render", spec, "--node-rank", "0")
    assert done.code == 0, done.err
    assert 'export MASTER_ADDR="${MASTER_ADDR:?set MASTER_ADDR to the address of node 0' in done.out
    assert "--rdzv-backend static --node-rank 0 " in done.out
    assert "export MASTER_PORT=29500\n" in done.out


@pytest.mark.parametrize(
    ("sections", "args", "error"),
    [
        (
            {"resources": {"nodes": 2}},
            ["--node-rank", "2"],
            "jobkit: --node-rank 2: the job has 2 node(s), so give 0 to 1",
        ),
        (
            {"launch": {"launcher": "srun"}},
            ["--node-rank", "0"],
            "jobkit: --node-rank: launcher srun is started by the scheduler",
        ),
        ({}, ["--master", "x"], "jobkit: --master and --port go with --node-rank N"),
    ],
)
def test_render_node_rank_errors_are_one_line(
    in_tmp: Path, jobkit: Invoke, sections: dict[str, Any], args: list[str], error: str
) -> None:
    spec = write(in_tmp, backend="slurm", **sections)
    done = jobkit("render", spec, *args)
    assert done.code == 2
    assert done.err.startswith(error), done.err
    assert done.err.count("\n") == 1 and done.out == ""
