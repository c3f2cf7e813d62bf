"""The launch environment's types and the reads every launcher's detection shares.

Stdlib only (and jobkit.core.ports, stdlib only too): see train/env/launch.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jobkit.core.ports import auto_port
from train.env.hostlist import HostlistError, expand_hostlist, unique_in_order

DEFAULT_PORT = 29500
"""torch's own default, for a process no job id tells a port for."""
# Slurm's step ids for the batch shell and the extern step are near 2**32.
_SLURM_SPECIAL_STEP = 0xFFFFFFF0

Resolver = Callable[[str], object]
Reader = Callable[[str], str]


class LaunchEnvError(ValueError):
    """The launcher's variables contradict each other; the message is one line."""


class HostFileUnreadable(LaunchEnvError):
    """The scheduler's host file ($PE_HOSTFILE, $PBS_NODEFILE) cannot be read here: inside a
    container that does not mount the scheduler's spool folder, for one."""


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
    notes: tuple[str, ...] = ()
    """What was not checked, one line each, for the run's log."""

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


class EnvVars:
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


def read_job_id(env: EnvVars) -> str | None:
    return env.text("SLURM_JOB_ID", "PBS_JOBID") or sge_job_id(env) or env.text("JOBKIT_JOB_ID")


def sge_job_id(env: EnvVars) -> str | None:
    """Grid Engine's JOB_ID (JOB_ID.TASK in an array, as jobkit names it); None outside SGE.

    JOB_ID alone is too common a name: SGE_TASK_ID (set in every SGE job, `undefined`
    outside arrays) says the job is Grid Engine's."""
    job, task = env.text("JOB_ID"), env.text("SGE_TASK_ID")
    if not job or task is None:
        return None
    return f"{job}.{task}" if task.isdigit() else job


def sge_task_index(env: EnvVars) -> int:
    """The array task number of a Grid Engine job (0 outside arrays)."""
    task = env.text("SGE_TASK_ID") or ""
    return int(task) if task.isdigit() else 0


def read_restart_count(env: EnvVars) -> int:
    return env.integer("SLURM_RESTART_COUNT", "PBS_RUN_COUNT", default=0)


def rendezvous_port(env: EnvVars, job_id: str | None) -> int:
    if env.has("MASTER_PORT"):
        port = env.integer("MASTER_PORT")
        if not 1 <= port <= 65535:
            raise LaunchEnvError(f"MASTER_PORT={port} is not a port number (1-65535)")
        return port
    index = 0
    if _is_pbs_id(env, job_id):
        index = env.integer("PBS_ARRAY_INDEX", "PBS_ARRAYID", default=0)
    elif job_id is not None and job_id == sge_job_id(env):
        index = sge_task_index(env)
    derived = port_from_job_id(job_id, index)
    return derived if derived is not None else DEFAULT_PORT


def _is_pbs_id(env: EnvVars, job_id: str | None) -> bool:
    """The id is PBS's: its array tasks share their number, the index tells them apart."""
    return job_id is not None and job_id == env.text("PBS_JOBID")


def slurm_step_active(env: EnvVars) -> bool:
    """True inside an srun job step; False in the sbatch/salloc shell itself."""
    step = env.text("SLURM_STEP_ID", "SLURM_STEPID")
    return bool(step and step.isdigit() and int(step) < _SLURM_SPECIAL_STEP)


def allocation_hosts(env: EnvVars, read_text: Reader) -> list[str]:
    """The hosts of the scheduler allocation this process runs in, first host first."""
    try:
        if env.has("SLURM_JOB_ID"):
            nodelist = env.text("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
            return expand_hostlist(nodelist or "")
    except HostlistError as err:
        raise LaunchEnvError(str(err)) from None
    if env.has("PBS_JOBID", "PBS_NODEFILE"):
        return unique_in_order(pbs_nodefile_lines(env, read_text))
    if sge_job_id(env) and env.has("PE_HOSTFILE"):
        return unique_in_order(
            [line.split()[0] for line in pe_hostfile_lines(env, read_text) if line.split()]
        )
    return []


def hosts_to_check(env: EnvVars, read_text: Reader) -> tuple[list[str], tuple[str, ...]]:
    """allocation_hosts where only a check needs them (the launcher exported MASTER_ADDR):
    an unreadable host file leaves the check out and says so in a note, instead of stopping
    a run that has all it needs (a container without the scheduler's spool folder)."""
    try:
        return allocation_hosts(env, read_text), ()
    except HostFileUnreadable as err:
        addr = env.text("MASTER_ADDR")
        if not addr:
            raise
        return [], (f"{err}: MASTER_ADDR={addr} is not checked against the job's hosts",)


def pe_hostfile_lines(env: EnvVars, read_text: Reader) -> list[str]:
    """The lines of Grid Engine's $PE_HOSTFILE (HOST SLOTS QUEUE PROCESSORS)."""
    path = env.text("PE_HOSTFILE") or ""
    try:
        text = read_text(path)
    except OSError as err:
        raise HostFileUnreadable(f"cannot read PE_HOSTFILE={path}: {err.strerror or err}") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def pbs_nodefile_lines(env: EnvVars, read_text: Reader) -> list[str]:
    path = env.text("PBS_NODEFILE") or ""
    try:
        text = read_text(path)
    except OSError as err:
        raise HostFileUnreadable(
            f"cannot read PBS_NODEFILE={path}: {err.strerror or err}"
        ) from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def master_address(
    env: EnvVars, hosts: list[str], num_nodes: int, resolve: Resolver, launcher: str
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


def check_ranks(env: LaunchEnv, names: tuple[str, str, str]) -> LaunchEnv:
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
