"""Launch-environment resolution for every launcher, and its failure messages (no torch)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from train.env import (
    DETECTION_ORDER,
    LaunchEnv,
    LaunchEnvError,
    apply_to_environ,
    detect_launch_env,
    port_from_job_id,
)

KNOWN_HOSTS = {"n1", "n2", "gpu-01", "c1", "h0", "a1-b3", "localhost", "127.0.0.1", "node7"}


def resolve(host: str) -> object:
    """A resolver that knows only KNOWN_HOSTS (so tests do not depend on /etc/hosts)."""
    if host not in KNOWN_HOSTS:
        raise OSError(-2, "Name or service not known")
    return [("stub",)]


def env_of(**fields: object) -> LaunchEnv:
    base: dict[str, object] = {
        "launcher": "single",
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "local_world_size": 1,
        "node_rank": 0,
        "num_nodes": 1,
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "job_id": None,
        "restart_count": 0,
    }
    base.update(fields)
    return LaunchEnv(**base)  # type: ignore[arg-type]


TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "job7",
    "RANK": "3",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2",
    "MASTER_ADDR": "n1",
    "MASTER_PORT": "29400",
}
SRUN_STEP = {  # a 7-task step on 4 nodes, this task is global rank 6 on the last node
    "SLURM_JOB_ID": "123456",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "6",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "3",
    "SLURM_NTASKS": "7",
    "SLURM_STEP_NUM_TASKS": "7",
    "SLURM_STEP_NUM_NODES": "4",
    "SLURM_STEP_TASKS_PER_NODE": "2(x3),1",
    "SLURM_STEP_NODELIST": "gpu-[01-03],cpu5",
    "SLURM_JOB_NODELIST": "gpu-[01-03],cpu5",
}

CASES = {
    "nothing set: one process": ({}, env_of()),
    "jobkit local id gives the port": (
        {"JOBKIT_JOB_ID": "local-1700000000-4242"},
        env_of(master_port=19242, job_id="local-1700000000-4242"),
    ),
    "torchrun, second node": (
        TORCHRUN,
        env_of(
            launcher="torchrun",
            rank=3,
            local_rank=1,
            world_size=4,
            local_world_size=2,
            node_rank=1,
            num_nodes=2,
            master_addr="n1",
            master_port=29400,
        ),
    ),
    "torchrun started by srun, one task per node, after a requeue": (
        {
            **TORCHRUN,
            "SLURM_JOB_ID": "555",
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": "1",
            "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
            "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_STEP_NUM_NODES": "2",
            "SLURM_NTASKS_PER_NODE": "4",  # the batch job's, inherited: the step's value wins
            "SLURM_RESTART_COUNT": "2",
        },
        env_of(
            launcher="torchrun",
            rank=3,
            local_rank=1,
            world_size=4,
            local_world_size=2,
            node_rank=1,
            num_nodes=2,
            master_addr="n1",
            master_port=29400,
            job_id="555",
            restart_count=2,
        ),
    ),
    "srun tasks, uneven tasks per node, hostlist with padding": (
        SRUN_STEP,
        env_of(
            launcher="slurm",
            rank=6,
            local_rank=0,
            world_size=7,
            local_world_size=1,
            node_rank=3,
            num_nodes=4,
            master_addr="gpu-01",
            master_port=18456,
            job_id="123456",
        ),
    ),
    "srun with job-level variables only": (
        {
            "SLURM_JOB_ID": "42",
            "SLURM_STEP_ID": "3",
            "SLURM_PROCID": "3",
            "SLURM_LOCALID": "1",
            "SLURM_NODEID": "1",
            "SLURM_NTASKS": "4",
            "SLURM_NNODES": "2",
            "SLURM_TASKS_PER_NODE": "2(x2)",
            "SLURM_JOB_NODELIST": "n[1-2]",
            "MASTER_PORT": "20000",
        },
        env_of(
            launcher="slurm",
            rank=3,
            local_rank=1,
            world_size=4,
            local_world_size=2,
            node_rank=1,
            num_nodes=2,
            master_addr="n1",
            master_port=20000,
            job_id="42",
        ),
    ),
    "sbatch shell (no job step) is one process": (
        {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_JOB_NODELIST": "n[1-2]"},
        env_of(job_id="77", master_port=15077),
    ),
    "sbatch shell with the batch step id is one process": (
        {"SLURM_JOB_ID": "78", "SLURM_STEP_ID": "4294967294", "SLURM_PROCID": "0"},
        env_of(job_id="78", master_port=15078),
    ),
    "srun --mpi=pmi2 direct: Slurm's numbers are used": (
        {**SRUN_STEP, "PMI_RANK": "6", "PMI_SIZE": "7"},
        env_of(
            launcher="slurm",
            rank=6,
            world_size=7,
            local_world_size=1,
            node_rank=3,
            num_nodes=4,
            master_addr="gpu-01",
            master_port=18456,
            job_id="123456",
        ),
    ),
    "mpirun inside Slurm: Open MPI ranks, not the daemon's SLURM_PROCID": (
        {
            "SLURM_JOB_ID": "31",
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": "1",
            "SLURM_NODEID": "1",
            "SLURM_LOCALID": "0",
            "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_STEP_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": "a[1-2]-b[3-4]",
            "SLURM_STEP_NODELIST": "a[1-2]-b[3-4]",
            "OMPI_COMM_WORLD_RANK": "3",
            "OMPI_COMM_WORLD_SIZE": "8",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        },
        env_of(
            launcher="openmpi",
            rank=3,
            local_rank=1,
            world_size=8,
            local_world_size=2,
            node_rank=1,
            num_nodes=4,
            master_addr="a1-b3",
            master_port=15031,
            job_id="31",
        ),
    ),
    "Open MPI on one node without a scheduler": (
        {
            "OMPI_COMM_WORLD_RANK": "1",
            "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        },
        env_of(launcher="openmpi", rank=1, local_rank=1, world_size=2, local_world_size=2),
    ),
    "MPICH/Intel MPI hydra (PMI)": (
        {
            "PMI_RANK": "2",
            "PMI_SIZE": "4",
            "MPI_LOCALRANKID": "0",
            "MPI_LOCALNRANKS": "2",
            "MASTER_ADDR": "h0",
            "PBS_JOBID": "99.pbs",
        },
        env_of(
            launcher="pmi",
            rank=2,
            world_size=4,
            local_world_size=2,
            node_rank=1,
            num_nodes=2,
            master_addr="h0",
            master_port=15099,
            job_id="99.pbs",
        ),
    ),
    "RANK and WORLD_SIZE set by a wrapper": (
        {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "1234"},
        env_of(
            launcher="env",
            rank=1,
            local_rank=1,
            world_size=2,
            local_world_size=2,
            master_addr="localhost",
            master_port=1234,
        ),
    ),
    "PBS job shell without a rank variable is one process": (
        {"PBS_JOBID": "4567.server", "PBS_NODEFILE": "NODEFILE"},
        env_of(job_id="4567.server", master_port=19567),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_detects(case: str, tmp_path: Path) -> None:
    environ, expected = CASES[case]
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("c1\nc1\nc2\nc2\n")
    environ = {k: (str(nodefile) if v == "NODEFILE" else v) for k, v in environ.items()}
    assert detect_launch_env(environ, resolve=resolve) == expected


def test_pbsdsh_ranks_from_the_node_file(tmp_path: Path) -> None:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("c1\nc1\nc2\nc2\n")
    environ = {"PBS_JOBID": "4567.server", "PBS_NODEFILE": str(nodefile), "PBS_VNODENUM": "3"}
    assert detect_launch_env(environ, resolve=resolve) == env_of(
        launcher="pbs",
        rank=3,
        local_rank=1,
        world_size=4,
        local_world_size=2,
        node_rank=1,
        num_nodes=2,
        master_addr="c1",
        master_port=19567,
        job_id="4567.server",
    )


ERRORS = {
    "srun 2 tasks per node each running torchrun": (
        {**TORCHRUN, "SLURM_STEP_ID": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"},
        "srun started several tasks per node (2(x2)) and each ran torchrun: every torchrun"
        ' starts its own workers on the same GPUs ("Duplicate GPU detected"); use srun'
        " --ntasks-per-node=1 with torchrun, or let srun start the workers without torchrun",
    ),
    "srun step with more tasks than nodes, each running torchrun": (
        {
            **TORCHRUN,
            "SLURM_STEP_ID": "0",
            "SLURM_STEP_NUM_TASKS": "4",
            "SLURM_STEP_NUM_NODES": "2",
        },
        "srun started several tasks per node (4 tasks) and each ran torchrun: every torchrun"
        ' starts its own workers on the same GPUs ("Duplicate GPU detected"); use srun'
        " --ntasks-per-node=1 with torchrun, or let srun start the workers without torchrun",
    ),
    "SLURM_NTASKS_PER_NODE>1 with torchrun when srun gives nothing finer": (
        {**TORCHRUN, "SLURM_STEP_ID": "0", "SLURM_NTASKS_PER_NODE": "2"},
        "srun started several tasks per node (2) and each ran torchrun: every torchrun"
        ' starts its own workers on the same GPUs ("Duplicate GPU detected"); use srun'
        " --ntasks-per-node=1 with torchrun, or let srun start the workers without torchrun",
    ),
    "srun over 2 nodes but torchrun --nnodes 1": (
        {
            **TORCHRUN,
            "RANK": "1",
            "GROUP_RANK": "0",
            "WORLD_SIZE": "2",
            "GROUP_WORLD_SIZE": "1",
            "SLURM_STEP_ID": "0",
            "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
            "SLURM_STEP_NUM_NODES": "2",
        },
        "srun runs torchrun on 2 nodes but torchrun was told --nnodes 1: each node would train"
        " alone; pass --nnodes 2",
    ),
    "SLURM_NTASKS does not match tasks per node x nodes": (
        {
            "SLURM_JOB_ID": "1",
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_NODEID": "0",
            "SLURM_NTASKS": "5",
            "SLURM_NNODES": "2",
            "SLURM_TASKS_PER_NODE": "2(x2)",
            "SLURM_JOB_NODELIST": "n[1-2]",
        },
        "SLURM says 5 tasks on 2 nodes but its tasks per node (2(x2)) give 4 tasks on 2 nodes",
    ),
    "SLURM_NTASKS_PER_NODE x nodes does not match SLURM_NTASKS": (
        {
            "SLURM_JOB_ID": "1",
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_NODEID": "0",
            "SLURM_NTASKS": "6",
            "SLURM_NNODES": "2",
            "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_JOB_NODELIST": "n[1-2]",
        },
        "SLURM says 6 tasks on 2 nodes but its tasks per node (SLURM_NTASKS_PER_NODE=2) give"
        " 4 tasks on 2 nodes",
    ),
    "rank not below world size (torchrun)": (
        {**TORCHRUN, "RANK": "4"},
        "RANK=4 is not below the world size 4 (torchrun)",
    ),
    "rank not below world size (srun)": (
        {**SRUN_STEP, "SLURM_PROCID": "7"},
        "SLURM_PROCID=7 is not below the world size 7 (slurm)",
    ),
    "local rank beyond the node's tasks": (
        {**SRUN_STEP, "SLURM_LOCALID": "1"},
        "SLURM_LOCALID=1 is not below the local world size 1 (slurm)",
    ),
    "multi-node srun whose first host does not resolve": (
        {**SRUN_STEP, "SLURM_STEP_NODELIST": "nosuch[1-3],cpu5"},
        "cannot resolve the master address 'nosuch1' (4 nodes, slurm): Name or service not known",
    ),
    "multi-node MPI with no master at all": (
        {
            "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        },
        "2 nodes (openmpi) but no master address: set MASTER_ADDR to rank 0's host",
    ),
    "MASTER_ADDR names a host that is not rank 0's": (
        {**SRUN_STEP, "MASTER_ADDR": "gpu-02"},
        "MASTER_ADDR=gpu-02 is not the first host of the job (gpu-01), where rank 0 runs",
    ),
    "bad Slurm host list": (
        {**SRUN_STEP, "SLURM_STEP_NODELIST": "gpu-[01-03"},
        "unbalanced '[' in host list 'gpu-[01-03'",
    ),
    "node list length differs from node count": (
        {**SRUN_STEP, "SLURM_STEP_NODELIST": "gpu-[01-03]"},
        "SLURM says 4 nodes but its node list gpu-[01-03] has 3",
    ),
    "not a number": (
        {**SRUN_STEP, "SLURM_PROCID": "six"},
        "SLURM_PROCID='six' is not a non-negative integer",
    ),
    "uneven Open MPI mapping": (
        {
            "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": "3",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "MASTER_ADDR": "n1",
        },
        "openmpi placed 3 ranks with 2 on this node: uneven ranks per node are not supported;"
        " map the same number of ranks to every node (e.g. mpirun --map-by ppr:N:node)",
    ),
    "bad MASTER_PORT": (
        {**TORCHRUN, "MASTER_PORT": "70000"},
        "MASTER_PORT=70000 is not a port number (1-65535)",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_refuses(case: str) -> None:
    environ, message = ERRORS[case]
    with pytest.raises(LaunchEnvError) as caught:
        detect_launch_env(environ, resolve=resolve)
    assert str(caught.value) == message
    assert "\n" not in str(caught.value)


def test_pbs_rank_beyond_node_file(tmp_path: Path) -> None:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("c1\nc2\n")
    environ = {"PBS_JOBID": "1.s", "PBS_NODEFILE": str(nodefile), "PBS_VNODENUM": "2"}
    with pytest.raises(LaunchEnvError) as caught:
        detect_launch_env(environ, resolve=resolve)
    assert str(caught.value) == "PBS_VNODENUM=2 is not below the 2 lines of PBS_NODEFILE"


def test_unreadable_pbs_node_file(tmp_path: Path) -> None:
    environ = {"PBS_JOBID": "1.s", "PBS_NODEFILE": str(tmp_path / "gone"), "PBS_VNODENUM": "0"}
    with pytest.raises(LaunchEnvError, match=r"^cannot read PBS_NODEFILE=.*gone: No such file"):
        detect_launch_env(environ, resolve=resolve)


def test_single_node_never_resolves() -> None:
    def refuse(host: str) -> object:
        raise AssertionError(f"resolved {host}")

    environ = {**TORCHRUN, "GROUP_WORLD_SIZE": "1", "GROUP_RANK": "0", "MASTER_ADDR": "nosuch"}
    assert detect_launch_env(environ, resolve=refuse).master_addr == "nosuch"


def test_real_resolver_refuses_unknown_master() -> None:
    environ = {**TORCHRUN, "MASTER_ADDR": "no-such-host.invalid"}
    with pytest.raises(
        LaunchEnvError, match=re.escape("cannot resolve the master address 'no-such-host.invalid'")
    ):
        detect_launch_env(environ)


@pytest.mark.parametrize(
    ("job_id", "port"),
    [
        ("12345", 27345),
        ("12345_7", 27345),
        ("987654.pbs01", 27654),
        ("123[4].server", 15123),
        ("local-1700000000-4242", 19242),
        ("30000", 15000),
        ("abc", 28368),  # jobkit's own ids are read in base 36 (jobkit/core/ports.py)
        ("", None),
        (None, None),
    ],
)
def test_port_from_job_id(job_id: str | None, port: int | None) -> None:
    assert port_from_job_id(job_id) == port


def test_detection_order_is_documented() -> None:
    names = [name for name, _ in DETECTION_ORDER]
    assert names == ["torchrun", "env", "openmpi", "pmi", "slurm", "pbs", "single"]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "train.md").read_text()
    table = doc[doc.index("### Detection order") : doc.index("Why this order")]
    rows = re.findall(r"^\| (\d) \| `(\w+)` \|", table, re.M)
    assert rows == [(str(i), name) for i, name in enumerate(names, start=1)]


def test_apply_to_environ_round_trips() -> None:
    env = detect_launch_env(SRUN_STEP, resolve=resolve)
    exported: dict[str, str] = {}
    apply_to_environ(env, exported)
    assert exported == {
        "RANK": "6",
        "WORLD_SIZE": "7",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "3",
        "GROUP_WORLD_SIZE": "4",
        "MASTER_ADDR": "gpu-01",
        "MASTER_PORT": "18456",
    }


def test_env_module_imports_no_torch() -> None:
    code = "import sys, train.env; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("environ", "job_id", "port"),
    [
        ({"JOB_ID": "123", "SGE_TASK_ID": "4"}, "123.4", 15000 + 123 + 4),  # array task 4
        ({"JOB_ID": "77", "SGE_TASK_ID": "undefined"}, "77", 15000 + 77),  # not an array
        ({"JOB_ID": "77"}, None, 29500),  # JOB_ID alone is not Grid Engine's
    ],
)
def test_grid_engine_job_id_and_port(
    environ: dict[str, str], job_id: str | None, port: int
) -> None:
    """The same id and port as templates/sge/job.sh.j2 (JOB_ID.TASK; N + task index)."""
    assert detect_launch_env(environ, resolve=resolve) == env_of(job_id=job_id, master_port=port)


def test_srun_numbers_jobkit_exports_are_read_as_slurm() -> None:
    """jobkit's srun line exports RANK, LOCAL_RANK, WORLD_SIZE... from SLURM_PROCID...: the
    trainer reads them as Slurm's (with its checks), not as a plain env:// launcher."""
    environ = {
        "SLURM_JOB_ID": "77",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "1",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
        "RANK": "1",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "n1",
        "MASTER_PORT": "15077",
    }
    found = detect_launch_env(environ, resolve=resolve)
    assert (found.launcher, found.rank, found.world_size, found.node_rank) == ("slurm", 1, 2, 1)


def test_a_spawned_rank_0_inside_an_srun_step_keeps_spawns_numbers() -> None:
    """launch.launcher spawn on Slurm: one srun task (SLURM_PROCID 0 of 1) spawns 2 children.
    Child 0's RANK 0 equals SLURM_PROCID, but its WORLD_SIZE is spawn's 2: it must not be
    read as the srun task's (world 1), or it trains alone while child 1 waits forever (seen
    in CI: test_spawn_on_one_slurm_node hung)."""
    environ = {
        "SLURM_JOB_ID": "2034",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_STEP_NUM_TASKS": "1",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_STEP_NODELIST": "n1",
        "SLURM_STEP_TASKS_PER_NODE": "1",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "n1",
        "MASTER_PORT": "17034",
        "JOBKIT_SPAWNED": "1",
    }
    found = detect_launch_env(environ, resolve=resolve)
    assert (found.rank, found.world_size, found.local_world_size) == (0, 2, 2)


@pytest.mark.parametrize(
    "scheduler",
    [
        {"JOB_ID": "7", "SGE_TASK_ID": "undefined", "PE_HOSTFILE": "spool/7/pe_hostfile"},
        {"PBS_JOBID": "7.s", "PBS_NODEFILE": "spool/aux/7.s"},
    ],
    ids=["sge", "pbs"],
)
def test_unreadable_host_file_is_only_a_skipped_check_when_master_addr_is_given(
    tmp_path: Path, scheduler: dict[str, str]
) -> None:
    """Inside a container the scheduler's spool folder is not mounted (found with Charliecloud
    on Grid Engine, launch.launcher none). The node command exported every number and the
    master address: the run goes on, and its log says what was not checked. Without
    MASTER_ADDR the host file is the only source, and the error stays."""
    scheduler = {
        name: str(tmp_path / value) if "/" in value else value for name, value in scheduler.items()
    }
    ranks = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "MASTER_PORT": "29500"}
    found = detect_launch_env({**scheduler, **ranks, "MASTER_ADDR": "n1"}, resolve=resolve)
    assert (found.launcher, found.rank, found.node_rank, found.master_addr) == ("env", 1, 1, "n1")
    (note,) = found.notes
    path = scheduler.get("PE_HOSTFILE") or scheduler["PBS_NODEFILE"]
    name = "PE_HOSTFILE" if "PE_HOSTFILE" in scheduler else "PBS_NODEFILE"
    assert note == (
        f"cannot read {name}={path}: No such file or directory:"
        " MASTER_ADDR=n1 is not checked against the job's hosts"
    )
    with pytest.raises(LaunchEnvError, match=rf"^cannot read {name}="):
        detect_launch_env({**scheduler, **ranks}, resolve=resolve)
