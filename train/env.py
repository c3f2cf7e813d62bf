"""Who am I in this distributed job? Rank, world size, node and master, from any launcher.

Importable by user programs (`from train.env import detect_launch_env`): stdlib only (and
jobkit.core.ports, stdlib only too: the one rule for the auto port).

Detection order (the first launcher whose variables are present wins):

1. torchrun / torchelastic: TORCHELASTIC_RUN_ID (RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK,
   LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
2. env: RANK and WORLD_SIZE set by hand or by a wrapper (LOCAL_RANK, LOCAL_WORLD_SIZE,
   GROUP_RANK optional).
3. Open MPI: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE.
4. PMI (MPICH, Intel MPI hydra): PMI_RANK / PMI_SIZE with MPI_LOCALRANKID / MPI_LOCALNRANKS.
5. Slurm srun: SLURM_PROCID inside a job step (SLURM_STEP_ID), not the batch shell.
6. PBS pbsdsh: PBS_VNODENUM with PBS_NODEFILE and PBS_JOBID.
7. single: one process.

MPI comes before Slurm on purpose: `mpirun` inside a Slurm job starts its daemons with
srun, so its ranks inherit the daemon's SLURM_PROCID (the node index, not the rank).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from jobkit.core.ports import auto_port
from train.hostlist import HostlistError, expand_hostlist, expand_tasks_per_node, unique_in_order

DEFAULT_PORT = 29500
"""torch's own default, for a process no job id tells a port for."""
# Slurm's step ids for the batch shell and the extern step are near 2**32.
_SLURM_SPECIAL_STEP = 0xFFFFFFF0

Resolver = Callable[[str], object]
Reader = Callable[[str], str]


class LaunchEnvError(ValueError):
    """The launcher's variables contradict each other; the message is one line."""


@dataclass(frozen=True)
class LaunchEnv:
    """This process's place in the job, whatever started it."""

    launcher: str
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    master_addr: str
    master_port: int
    job_id: str | None
    restart_count: int = 0

    @property
    def is_main(self) -> bool:
        """True on global rank 0."""
        return self.rank == 0

    def describe(self) -> str:
        """One line for logs: every field as key=value."""
        return (
            f"launcher={self.launcher} rank={self.rank} local_rank={self.local_rank}"
            f" world_size={self.world_size} local_world_size={self.local_world_size}"
            f" node_rank={self.node_rank} num_nodes={self.num_nodes}"
            f" master={self.master_addr}:{self.master_port} job_id={self.job_id}"
            f" restart_count={self.restart_count}"
        )


def port_from_job_id(job_id: str | None, array_index: int = 0) -> int | None:
    """The rendezvous port for a job id: jobkit's one rule (jobkit/core/ports.py, docs/design.md
    "Ports"), the same the templates use. None without a job id."""
    return auto_port(job_id, array_index)


class _Vars:
    """Typed reads of the environment with one-line errors naming the variable."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def has(self, *names: str) -> bool:
        return all(self.environ.get(name, "").strip() != "" for name in names)

    def text(self, *names: str) -> str | None:
        """The first of `names` that is set and not empty."""
        for name in names:
            value = self.environ.get(name, "").strip()
            if value:
                return value
        return None

    def integer(self, *names: str, default: int | None = None) -> int:
        """The first of `names` that is set, as a non-negative integer."""
        for name in names:
            value = self.environ.get(name, "").strip()
            if value:
                if not value.isdigit():
                    raise LaunchEnvError(f"{name}={value!r} is not a non-negative integer")
                return int(value)
        if default is None:
            raise LaunchEnvError(f"{' or '.join(names)} is not set")
        return default

    def opt_int(self, *names: str) -> int | None:
        for name in names:
            if self.has(name):
                return self.integer(name)
        return None


def _job_id(env: _Vars) -> str | None:
    return env.text("SLURM_JOB_ID", "PBS_JOBID", "JOBKIT_JOB_ID")


def _restart_count(env: _Vars) -> int:
    return env.integer("SLURM_RESTART_COUNT", "PBS_RUN_COUNT", default=0)


def _port(env: _Vars, job_id: str | None) -> int:
    if env.has("MASTER_PORT"):
        port = env.integer("MASTER_PORT")
        if not 1 <= port <= 65535:
            raise LaunchEnvError(f"MASTER_PORT={port} is not a port number (1-65535)")
        return port
    index = (
        env.integer("PBS_ARRAY_INDEX", "PBS_ARRAYID", default=0) if _is_pbs_id(env, job_id) else 0
    )
    derived = port_from_job_id(job_id, index)
    return derived if derived is not None else DEFAULT_PORT


def _is_pbs_id(env: _Vars, job_id: str | None) -> bool:
    """The id is PBS's: its array tasks share their number, the index tells them apart."""
    return job_id is not None and job_id == env.text("PBS_JOBID")


def _slurm_step_active(env: _Vars) -> bool:
    """True inside an srun job step; False in the sbatch/salloc shell itself."""
    step = env.text("SLURM_STEP_ID", "SLURM_STEPID")
    return bool(step and step.isdigit() and int(step) < _SLURM_SPECIAL_STEP)


def _allocation_hosts(env: _Vars, read_text: Reader) -> list[str]:
    """The hosts of the scheduler allocation this process runs in, first host first."""
    try:
        if env.has("SLURM_JOB_ID"):
            nodelist = env.text("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
            return expand_hostlist(nodelist or "")
    except HostlistError as err:
        raise LaunchEnvError(str(err)) from None
    if env.has("PBS_JOBID", "PBS_NODEFILE"):
        return unique_in_order(_pbs_nodefile_lines(env, read_text))
    return []


def _pbs_nodefile_lines(env: _Vars, read_text: Reader) -> list[str]:
    path = env.text("PBS_NODEFILE") or ""
    try:
        text = read_text(path)
    except OSError as err:
        raise LaunchEnvError(f"cannot read PBS_NODEFILE={path}: {err.strerror or err}") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _master_addr(
    env: _Vars, hosts: list[str], num_nodes: int, resolve: Resolver, launcher: str
) -> str:
    """MASTER_ADDR if set, else the first host; never localhost for several nodes."""
    explicit = env.text("MASTER_ADDR")
    if explicit and hosts and explicit in hosts and explicit != hosts[0]:
        raise LaunchEnvError(
            f"MASTER_ADDR={explicit} is not the first host of the job ({hosts[0]}),"
            " where rank 0 runs"
        )
    addr = explicit or (hosts[0] if hosts else None)
    if num_nodes > 1:
        if not addr:
            raise LaunchEnvError(
                f"{num_nodes} nodes ({launcher}) but no master address: set MASTER_ADDR to"
                " rank 0's host"
            )
        try:
            resolve(addr)
        except (OSError, UnicodeError) as err:
            raise LaunchEnvError(
                f"cannot resolve the master address {addr!r} ({num_nodes} nodes, {launcher}):"
                f" {getattr(err, 'strerror', None) or err}"
            ) from None
    return addr or "127.0.0.1"


def _check_ranks(env: LaunchEnv, names: tuple[str, str, str]) -> LaunchEnv:
    """Ranks inside their sizes; `names` say which variables the numbers came from."""
    rank_name, local_name, node_name = names
    if env.world_size < 1:
        raise LaunchEnvError(f"world size is {env.world_size} ({env.launcher})")
    if env.rank >= env.world_size:
        raise LaunchEnvError(
            f"{rank_name}={env.rank} is not below the world size {env.world_size} ({env.launcher})"
        )
    if env.local_world_size < 1 or env.local_rank >= env.local_world_size:
        raise LaunchEnvError(
            f"{local_name}={env.local_rank} is not below the local world size"
            f" {env.local_world_size} ({env.launcher})"
        )
    if env.node_rank >= env.num_nodes:
        raise LaunchEnvError(
            f"{node_name}={env.node_rank} is not below the number of nodes {env.num_nodes}"
            f" ({env.launcher})"
        )
    if env.local_world_size > env.world_size:
        raise LaunchEnvError(
            f"local world size {env.local_world_size} exceeds the world size"
            f" {env.world_size} ({env.launcher})"
        )
    return env


def _check_srun_torchrun(env: _Vars, torchrun_nodes: int) -> None:
    """torchrun under srun must be one task per node, on as many nodes as torchrun knows."""
    if not _slurm_step_active(env):
        return
    per_node_text = env.text("SLURM_STEP_TASKS_PER_NODE")
    step_tasks = env.opt_int("SLURM_STEP_NUM_TASKS")
    step_nodes = env.opt_int("SLURM_STEP_NUM_NODES")
    several = False
    if per_node_text:
        try:
            several = max(expand_tasks_per_node(per_node_text)) > 1
        except HostlistError as err:
            raise LaunchEnvError(str(err)) from None
    elif step_tasks is not None and step_nodes is not None:
        several = step_tasks > step_nodes
    else:
        several = env.integer("SLURM_NTASKS_PER_NODE", default=1) > 1
    if several:
        shown = per_node_text or env.text("SLURM_NTASKS_PER_NODE") or f"{step_tasks} tasks"
        raise LaunchEnvError(
            f"srun started several tasks per node ({shown}) and each ran torchrun: every"
            ' torchrun starts its own workers on the same GPUs ("Duplicate GPU detected");'
            " use srun --ntasks-per-node=1 with torchrun, or let srun start the workers"
            " without torchrun"
        )
    if step_nodes is not None and step_nodes > torchrun_nodes:
        raise LaunchEnvError(
            f"srun runs torchrun on {step_nodes} nodes but torchrun was told --nnodes"
            f" {torchrun_nodes}: each node would train alone; pass --nnodes {step_nodes}"
        )


def _from_torchelastic(env: _Vars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("TORCHELASTIC_RUN_ID"):
        return None
    world = env.integer("WORLD_SIZE")
    local_world = env.integer("LOCAL_WORLD_SIZE")
    nodes = env.opt_int("GROUP_WORLD_SIZE")
    if nodes is None:
        nodes = max(1, world // max(local_world, 1))
    _check_srun_torchrun(env, nodes)
    job_id = _job_id(env)
    result = LaunchEnv(
        launcher="torchrun",
        rank=env.integer("RANK"),
        local_rank=env.integer("LOCAL_RANK"),
        world_size=world,
        local_world_size=local_world,
        node_rank=env.integer("GROUP_RANK", default=0),
        num_nodes=nodes,
        master_addr=_master_addr(env, [], nodes, resolve, "torchrun"),
        master_port=_port(env, job_id),
        job_id=job_id,
        restart_count=_restart_count(env),
    )
    return _check_ranks(result, ("RANK", "LOCAL_RANK", "GROUP_RANK"))


def _from_plain_env(env: _Vars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("RANK", "WORLD_SIZE"):
        return None
    world = env.integer("WORLD_SIZE")
    rank = env.integer("RANK")
    local_world = env.integer("LOCAL_WORLD_SIZE", default=world)
    local_rank = env.integer("LOCAL_RANK", default=rank % max(local_world, 1))
    nodes = env.integer("GROUP_WORLD_SIZE", default=max(1, -(-world // max(local_world, 1))))
    hosts = _allocation_hosts(env, read_text)
    job_id = _job_id(env)
    result = LaunchEnv(
        launcher="env",
        rank=rank,
        local_rank=local_rank,
        world_size=world,
        local_world_size=local_world,
        node_rank=env.integer("GROUP_RANK", default=rank // max(local_world, 1)),
        num_nodes=nodes,
        master_addr=_master_addr(env, hosts, nodes, resolve, "env"),
        master_port=_port(env, job_id),
        job_id=job_id,
        restart_count=_restart_count(env),
    )
    return _check_ranks(result, ("RANK", "LOCAL_RANK", "GROUP_RANK"))


def _mpi_env(
    launcher: str,
    env: _Vars,
    rank: int,
    world: int,
    local_rank: int,
    local_world: int,
    names: tuple[str, str, str],
    resolve: Resolver,
    read_text: Reader,
) -> LaunchEnv:
    """Shared by Open MPI and PMI: nodes assumed filled in order, local_world ranks each."""
    if local_world < 1 or world % local_world:
        raise LaunchEnvError(
            f"{launcher} placed {world} ranks with {local_world} on this node: uneven ranks per"
            " node are not supported; map the same number of ranks to every node"
            " (e.g. mpirun --map-by ppr:N:node)"
        )
    nodes = world // local_world
    hosts = _allocation_hosts(env, read_text)
    job_id = _job_id(env)
    result = LaunchEnv(
        launcher=launcher,
        rank=rank,
        local_rank=local_rank,
        world_size=world,
        local_world_size=local_world,
        node_rank=rank // local_world,
        num_nodes=nodes,
        master_addr=_master_addr(env, hosts, nodes, resolve, launcher),
        master_port=_port(env, job_id),
        job_id=job_id,
        restart_count=_restart_count(env),
    )
    return _check_ranks(result, names)


def _from_openmpi(env: _Vars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        return None
    world = env.integer("OMPI_COMM_WORLD_SIZE")
    rank = env.integer("OMPI_COMM_WORLD_RANK")
    local_world = env.integer("OMPI_COMM_WORLD_LOCAL_SIZE", default=world)
    local_rank = env.integer("OMPI_COMM_WORLD_LOCAL_RANK", default=rank % max(local_world, 1))
    names = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "node rank")
    return _mpi_env("openmpi", env, rank, world, local_rank, local_world, names, resolve, read_text)


def _from_pmi(env: _Vars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("PMI_RANK", "PMI_SIZE"):
        return None
    if not env.has("MPI_LOCALRANKID") and _slurm_step_active(env):
        return None  # srun --mpi=pmi2 started us directly: Slurm's variables are exact
    world = env.integer("PMI_SIZE")
    rank = env.integer("PMI_RANK")
    if env.has("MPI_LOCALRANKID"):
        local_rank = env.integer("MPI_LOCALRANKID")
        local_world = env.integer("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", default=world)
    elif len(_allocation_hosts(env, read_text)) > 1:
        raise LaunchEnvError(
            "PMI_RANK is set but the launcher gave no local rank (MPI_LOCALRANKID) on a"
            " multi-node allocation; use mpiexec from MPICH/Intel MPI (hydra) or srun"
        )
    else:
        local_rank, local_world = rank, world
    names = ("PMI_RANK", "MPI_LOCALRANKID", "node rank")
    return _mpi_env("pmi", env, rank, world, local_rank, local_world, names, resolve, read_text)


def _slurm_tasks_per_node(env: _Vars, world: int, nodes: int) -> list[int]:
    """One task count per node of the step, checked against the task total."""
    text = env.text("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    try:
        if text:
            counts = expand_tasks_per_node(text)
            source = text
        elif env.has("SLURM_NTASKS_PER_NODE"):
            counts = [env.integer("SLURM_NTASKS_PER_NODE")] * nodes
            source = f"SLURM_NTASKS_PER_NODE={counts[0]}"
        else:
            counts = [-(-world // nodes)] * nodes
            source = ""
    except HostlistError as err:
        raise LaunchEnvError(str(err)) from None
    if source and (len(counts) != nodes or sum(counts) != world):
        raise LaunchEnvError(
            f"SLURM says {world} tasks on {nodes} nodes but its tasks per node ({source}) give"
            f" {sum(counts)} tasks on {len(counts)} nodes"
        )
    return counts


def _from_slurm(env: _Vars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("SLURM_PROCID") or not _slurm_step_active(env):
        return None
    world = env.integer("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
    rank = env.integer("SLURM_PROCID")
    if env.has("PMI_RANK") and env.integer("PMI_RANK") != rank:
        raise LaunchEnvError(
            f"PMI_RANK={env.integer('PMI_RANK')} differs from SLURM_PROCID={rank}: an MPI launcher"
            " inside srun without MPI_LOCALRANKID; start the ranks with srun alone"
        )
    try:
        nodelist = env.text("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
        hosts = expand_hostlist(nodelist or "")
    except HostlistError as err:
        raise LaunchEnvError(str(err)) from None
    nodes = env.integer(
        "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", default=len(hosts) or 1
    )
    if hosts and len(hosts) != nodes:
        raise LaunchEnvError(
            f"SLURM says {nodes} nodes but its node list {nodelist} has {len(hosts)}"
        )
    step_tasks = env.opt_int("SLURM_STEP_NUM_TASKS")
    job_tasks = env.opt_int("SLURM_NTASKS")
    if step_tasks is None and job_tasks is not None and job_tasks != world:
        raise LaunchEnvError(f"SLURM_NTASKS={job_tasks} differs from the step's {world} tasks")
    node_rank = env.integer("SLURM_NODEID")
    counts = _slurm_tasks_per_node(env, world, nodes)
    local_world = counts[node_rank] if node_rank < len(counts) else 0
    job_id = _job_id(env)
    result = LaunchEnv(
        launcher="slurm",
        rank=rank,
        local_rank=env.integer("SLURM_LOCALID"),
        world_size=world,
        local_world_size=local_world,
        node_rank=node_rank,
        num_nodes=nodes,
        master_addr=_master_addr(env, hosts, nodes, resolve, "slurm"),
        master_port=_port(env, job_id),
        job_id=job_id,
        restart_count=_restart_count(env),
    )
    return _check_ranks(result, ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"))


def _from_pbs(env: _Vars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("PBS_JOBID", "PBS_NODEFILE", "PBS_VNODENUM"):
        return None
    slots = _pbs_nodefile_lines(env, read_text)
    rank = env.integer("PBS_VNODENUM")
    if rank >= len(slots):
        raise LaunchEnvError(
            f"PBS_VNODENUM={rank} is not below the {len(slots)} lines of PBS_NODEFILE"
        )
    host = slots[rank]
    hosts = unique_in_order(slots)
    job_id = _job_id(env)
    result = LaunchEnv(
        launcher="pbs",
        rank=rank,
        local_rank=slots[:rank].count(host),
        world_size=len(slots),
        local_world_size=slots.count(host),
        node_rank=hosts.index(host),
        num_nodes=len(hosts),
        master_addr=_master_addr(env, hosts, len(hosts), resolve, "pbs"),
        master_port=_port(env, job_id),
        job_id=job_id,
        restart_count=_restart_count(env),
    )
    return _check_ranks(result, ("PBS_VNODENUM", "local rank", "node rank"))


def _single(env: _Vars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    job_id = _job_id(env)
    return LaunchEnv(
        launcher="single",
        rank=0,
        local_rank=0,
        world_size=1,
        local_world_size=1,
        node_rank=0,
        num_nodes=1,
        master_addr=env.text("MASTER_ADDR") or "127.0.0.1",
        master_port=_port(env, job_id),
        job_id=job_id,
        restart_count=_restart_count(env),
    )


DETECTION_ORDER = (
    ("torchrun", _from_torchelastic),
    ("env", _from_plain_env),
    ("openmpi", _from_openmpi),
    ("pmi", _from_pmi),
    ("slurm", _from_slurm),
    ("pbs", _from_pbs),
    ("single", _single),
)
"""(launcher name, detector) in the order they are tried; the first answer wins."""


def _default_resolve(host: str) -> object:
    return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)


def _default_read_text(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def detect_launch_env(
    environ: Mapping[str, str] | None = None,
    *,
    resolve: Resolver | None = None,
    read_text: Reader | None = None,
) -> LaunchEnv:
    """This process's LaunchEnv from `environ` (default os.environ); see the module doc.

    Raises LaunchEnvError (one line) when the variables contradict each other or a
    multi-node job has no resolvable master address. `resolve(host)` must raise OSError
    for an unknown host (default: socket.getaddrinfo); `read_text(path)` reads PBS_NODEFILE.
    """
    env = _Vars(os.environ if environ is None else environ)
    resolver = resolve or _default_resolve
    reader = read_text or _default_read_text
    for _name, detector in DETECTION_ORDER:
        found = detector(env, resolver, reader)
        if found is not None:
            return found
    raise AssertionError("the single-process detector always answers")


def apply_to_environ(env: LaunchEnv, environ: MutableMapping[str, str] | None = None) -> None:
    """Export RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE,
    MASTER_ADDR and MASTER_PORT so torch.distributed's `init_method="env://"` sees this job."""
    target = os.environ if environ is None else environ
    target["RANK"] = str(env.rank)
    target["WORLD_SIZE"] = str(env.world_size)
    target["LOCAL_RANK"] = str(env.local_rank)
    target["LOCAL_WORLD_SIZE"] = str(env.local_world_size)
    target["GROUP_RANK"] = str(env.node_rank)
    target["GROUP_WORLD_SIZE"] = str(env.num_nodes)
    target["MASTER_ADDR"] = env.master_addr
    target["MASTER_PORT"] = str(env.master_port)
