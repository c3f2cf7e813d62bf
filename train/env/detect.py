"""One detector per launcher (torchrun, env, Open MPI, PMI, Slurm, PBS, single) and the
order they are tried in; see train/env/launch.py for the rules."""

from __future__ import annotations

from train.env.common import (
    EnvVars,
    LaunchEnv,
    LaunchEnvError,
    Reader,
    Resolver,
    allocation_hosts,
    check_ranks,
    hosts_to_check,
    master_address,
    pbs_nodefile_lines,
    read_job_id,
    read_restart_count,
    rendezvous_port,
    slurm_step_active,
)
from train.env.hostlist import (
    HostlistError,
    expand_hostlist,
    expand_tasks_per_node,
    unique_in_order,
)


def _check_srun_torchrun(env: EnvVars, torchrun_nodes: int) -> None:
    """torchrun under srun must be one task per node, on as many nodes as torchrun knows."""
    if not slurm_step_active(env):
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


def _from_torchelastic(env: EnvVars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("TORCHELASTIC_RUN_ID"):
        return None
    world = env.integer("WORLD_SIZE")
    local_world = env.integer("LOCAL_WORLD_SIZE")
    nodes = env.opt_int("GROUP_WORLD_SIZE")
    if nodes is None:
        nodes = max(1, world // max(local_world, 1))
    _check_srun_torchrun(env, nodes)
    job_id = read_job_id(env)
    result = LaunchEnv(
        launcher="torchrun",
        rank=env.integer("RANK"),
        local_rank=env.integer("LOCAL_RANK"),
        world_size=world,
        local_world_size=local_world,
        node_rank=env.integer("GROUP_RANK", default=0),
        num_nodes=nodes,
        master_addr=master_address(env, [], nodes, resolve, "torchrun"),
        master_port=rendezvous_port(env, job_id),
        job_id=job_id,
        restart_count=read_restart_count(env),
    )
    return check_ranks(result, ("RANK", "LOCAL_RANK", "GROUP_RANK"))


def _from_plain_env(env: EnvVars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("RANK", "WORLD_SIZE"):
        return None
    if (
        slurm_step_active(env)
        and env.text("JOBKIT_SPAWNED") != "1"  # spawn's children set their own numbers
        and env.text("RANK") == env.text("SLURM_PROCID")
        and env.text("WORLD_SIZE") == env.text("SLURM_NTASKS")
    ):
        return None  # srun's numbers, exported by jobkit's srun line: _from_slurm checks them
    world = env.integer("WORLD_SIZE")
    rank = env.integer("RANK")
    local_world = env.integer("LOCAL_WORLD_SIZE", default=world)
    local_rank = env.integer("LOCAL_RANK", default=rank % max(local_world, 1))
    nodes = env.integer("GROUP_WORLD_SIZE", default=max(1, -(-world // max(local_world, 1))))
    hosts, notes = hosts_to_check(env, read_text)
    job_id = read_job_id(env)
    result = LaunchEnv(
        launcher="env",
        rank=rank,
        local_rank=local_rank,
        world_size=world,
        local_world_size=local_world,
        node_rank=env.integer("GROUP_RANK", default=rank // max(local_world, 1)),
        num_nodes=nodes,
        master_addr=master_address(env, hosts, nodes, resolve, "env"),
        master_port=rendezvous_port(env, job_id),
        job_id=job_id,
        restart_count=read_restart_count(env),
        notes=notes,
    )
    return check_ranks(result, ("RANK", "LOCAL_RANK", "GROUP_RANK"))


def _mpi_env(
    launcher: str,
    env: EnvVars,
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
    hosts, notes = hosts_to_check(env, read_text)
    job_id = read_job_id(env)
    result = LaunchEnv(
        launcher=launcher,
        rank=rank,
        local_rank=local_rank,
        world_size=world,
        local_world_size=local_world,
        node_rank=rank // local_world,
        num_nodes=nodes,
        master_addr=master_address(env, hosts, nodes, resolve, launcher),
        master_port=rendezvous_port(env, job_id),
        job_id=job_id,
        restart_count=read_restart_count(env),
        notes=notes,
    )
    return check_ranks(result, names)


def _from_openmpi(env: EnvVars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        return None
    world = env.integer("OMPI_COMM_WORLD_SIZE")
    rank = env.integer("OMPI_COMM_WORLD_RANK")
    local_world = env.integer("OMPI_COMM_WORLD_LOCAL_SIZE", default=world)
    local_rank = env.integer("OMPI_COMM_WORLD_LOCAL_RANK", default=rank % max(local_world, 1))
    names = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "node rank")
    return _mpi_env("openmpi", env, rank, world, local_rank, local_world, names, resolve, read_text)


def _from_pmi(env: EnvVars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("PMI_RANK", "PMI_SIZE"):
        return None
    if not env.has("MPI_LOCALRANKID") and slurm_step_active(env):
        return None  # srun --mpi=pmi2 started us directly: Slurm's variables are exact
    world = env.integer("PMI_SIZE")
    rank = env.integer("PMI_RANK")
    if env.has("MPI_LOCALRANKID"):
        local_rank = env.integer("MPI_LOCALRANKID")
        local_world = env.integer("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", default=world)
    elif len(allocation_hosts(env, read_text)) > 1:
        raise LaunchEnvError(
            "PMI_RANK is set but the launcher gave no local rank (MPI_LOCALRANKID) on a"
            " multi-node allocation; use mpiexec from MPICH/Intel MPI (hydra) or srun"
        )
    else:
        local_rank, local_world = rank, world
    names = ("PMI_RANK", "MPI_LOCALRANKID", "node rank")
    return _mpi_env("pmi", env, rank, world, local_rank, local_world, names, resolve, read_text)


def _slurm_tasks_per_node(env: EnvVars, world: int, nodes: int) -> list[int]:
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


def _from_slurm(env: EnvVars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("SLURM_PROCID") or not slurm_step_active(env):
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
    job_id = read_job_id(env)
    result = LaunchEnv(
        launcher="slurm",
        rank=rank,
        local_rank=env.integer("SLURM_LOCALID"),
        world_size=world,
        local_world_size=local_world,
        node_rank=node_rank,
        num_nodes=nodes,
        master_addr=master_address(env, hosts, nodes, resolve, "slurm"),
        master_port=rendezvous_port(env, job_id),
        job_id=job_id,
        restart_count=read_restart_count(env),
    )
    return check_ranks(result, ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"))


def _from_pbs(env: EnvVars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    if not env.has("PBS_JOBID", "PBS_NODEFILE", "PBS_VNODENUM"):
        return None
    slots = pbs_nodefile_lines(env, read_text)
    rank = env.integer("PBS_VNODENUM")
    if rank >= len(slots):
        raise LaunchEnvError(
            f"PBS_VNODENUM={rank} is not below the {len(slots)} lines of PBS_NODEFILE"
        )
    host = slots[rank]
    hosts = unique_in_order(slots)
    job_id = read_job_id(env)
    result = LaunchEnv(
        launcher="pbs",
        rank=rank,
        local_rank=slots[:rank].count(host),
        world_size=len(slots),
        local_world_size=slots.count(host),
        node_rank=hosts.index(host),
        num_nodes=len(hosts),
        master_addr=master_address(env, hosts, len(hosts), resolve, "pbs"),
        master_port=rendezvous_port(env, job_id),
        job_id=job_id,
        restart_count=read_restart_count(env),
    )
    return check_ranks(result, ("PBS_VNODENUM", "local rank", "node rank"))


def _single(env: EnvVars, resolve: Resolver, read_text: Reader) -> LaunchEnv | None:
    job_id = read_job_id(env)
    return LaunchEnv(
        launcher="single",
        rank=0,
        local_rank=0,
        world_size=1,
        local_world_size=1,
        node_rank=0,
        num_nodes=1,
        master_addr=env.text("MASTER_ADDR") or "127.0.0.1",
        master_port=rendezvous_port(env, job_id),
        job_id=job_id,
        restart_count=read_restart_count(env),
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
