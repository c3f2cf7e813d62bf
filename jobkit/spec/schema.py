"""The job-spec schema: every key a job YAML may hold, its type, default and checks.

This module is the contract: JobSpec composes the sections (spec/sections.py) of field types
(spec/values.py) and checks what involves several keys. Loading, layering and error locations
live in spec/load.py; rendering in render/engine.py. Values here are already normalised:
durations in seconds, memory in megabytes, commands as argument lists.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    model_validator,
)

from jobkit.backends.pbs.options import PbsOptions
from jobkit.backends.registry import backend_class, builtin_names
from jobkit.backends.sge.options import SgeOptions
from jobkit.backends.ssh_options import Ssh
from jobkit.core.errors import CrossFieldError
from jobkit.spec.commands import command_launcher, launcher_in_command_message
from jobkit.spec.model import StrictModel
from jobkit.spec.sections import (
    Env,
    Launch,
    Logs,
    Monitor,
    Resources,
    Run,
    Scheduler,
    Sweep,
)
from jobkit.spec.sweep import check_sweep_backend
from jobkit.spec.values import BackendName, JobName, SafeStr

NODE_LAUNCHERS = ("torchrun", "distributed-launch", "spawn", "none")
"""Launchers started once per node, which start that node's processes themselves (`none`: the
program itself, once per node)."""


class JobSpec(StrictModel):
    """A whole job: the top level of a job YAML."""

    name: JobName = Field(
        description="Job name: letters, digits and . _ + - (used in log and run folder names)."
    )
    backend: BackendName = Field("local", description="Where the job runs.")
    profile: SafeStr | None = Field(None, description="Site profile to layer under this file.")
    resources: Resources = Field(default_factory=Resources)
    scheduler: Scheduler = Field(default_factory=Scheduler)
    env: Env = Field(default_factory=Env)
    launch: Launch = Field(default_factory=Launch)
    run: Run
    ssh: Ssh = Field(default_factory=Ssh)
    sge: SgeOptions = Field(default_factory=SgeOptions)
    pbs: PbsOptions = Field(default_factory=PbsOptions)
    monitor: Monitor = Field(default_factory=Monitor)
    logs: Logs = Field(default_factory=Logs)
    sweep: Sweep | None = Field(
        None,
        description="A parameter sweep: the job runs once per override set, as one array job"
        " (slurm, pbs, sge) or one job per task (local, ssh); docs/sweeps.md.",
    )

    @model_validator(mode="after")
    def _cross_field(self) -> JobSpec:
        _move_deprecated_pbs_keys(self)
        backend = backend_class(self.backend)
        if backend.nodes_from_hosts and "nodes" not in self.resources.model_fields_set:
            self.resources.nodes = max(1, len(self.ssh.hosts))  # one node per host
        check_cross_fields(self)
        backend_class(self.backend).validate(self)
        return self

    # Derived values the templates use; pure functions of the spec.

    @property
    def procs_per_node(self) -> int:
        """Processes per node after resolving `auto`."""
        if self.launch.nproc_per_node != "auto":
            return int(self.launch.nproc_per_node)
        return self.resources.gpus_per_node or 1

    @property
    def tasks_per_node(self) -> int:
        """Scheduler tasks per node: one launcher per node (torchrun, distributed-launch,
        spawn), else one task per process."""
        if self.resources.tasks_per_node is not None:
            return self.resources.tasks_per_node
        return 1 if self.launch.launcher in NODE_LAUNCHERS else self.procs_per_node

    @property
    def world_size(self) -> int:
        """Total training processes."""
        return self.resources.nodes * self.procs_per_node

    @property
    def cpus_per_scheduler_task(self) -> int | None:
        """CPUs to ask for each scheduler task: the CPUs per process times the processes a
        task starts (all of a node's with torchrun, one with srun, mpirun and submitit)."""
        per_process = self.cpus_per_process
        if per_process is None:
            return None
        if backend_class(self.backend).task_per_process:
            return per_process
        return per_process * self.procs_per_node // self.tasks_per_node

    @property
    def cpus_per_process(self) -> int | None:
        """CPU cores of each training process: cpus_per_process, else cpus_per_task read the
        same way (a seed's "cores per GPU"; render/notes.py says so where a node's one task
        then asks for more); None when neither is given."""
        res = self.resources
        return res.cpus_per_process if res.cpus_per_process is not None else res.cpus_per_task

    @property
    def cpus_per_task_reinterpreted(self) -> bool:
        """cpus_per_task is given where one scheduler task starts several processes: it is
        taken per process, so the task asks for more than the number written."""
        res = self.resources
        if res.cpus_per_task is None or backend_class(self.backend).task_per_process:
            return False
        return self.procs_per_node > self.tasks_per_node


def _move_deprecated_pbs_keys(spec: JobSpec) -> None:
    """scheduler.pbs_flavor / pbs_spawner (deprecated, as recorded specs still hold them)
    become pbs.flavor / pbs.spawner; both given and different is refused."""
    sched = spec.scheduler
    for old, new in (("pbs_flavor", "flavor"), ("pbs_spawner", "spawner")):
        value = getattr(sched, old)
        if value is None:
            continue
        if new in spec.pbs.model_fields_set and getattr(spec.pbs, new) != value:
            raise CrossFieldError(
                f"scheduler.{old}",
                f"is deprecated and differs from pbs.{new}: keep pbs.{new} alone",
            )
        setattr(spec.pbs, new, value)
        setattr(sched, old, None)


def check_cross_fields(spec: JobSpec) -> None:
    """Checks that involve several keys; raise CrossFieldError naming the key to fix."""
    res, launch = spec.resources, spec.launch
    _check_launcher(spec)
    backend = backend_class(spec.backend)
    check_sweep_backend(spec, backend.sweep_mode, backend.unhonoured_hints.get("sweep"))
    _check_node_range(spec)
    _check_node_launcher(spec)
    _check_command_launcher(spec)
    if launch.launcher in NODE_LAUNCHERS and res.tasks_per_node not in (None, 1):
        raise CrossFieldError(
            "resources.tasks_per_node",
            f"must be 1 with launcher {launch.launcher} (one {launch.launcher} per node starts the"
            " processes;"
            f" several would each claim every GPU; got {res.tasks_per_node})",
        )
    if (
        launch.launcher not in NODE_LAUNCHERS
        and res.tasks_per_node is not None
        and (res.tasks_per_node != spec.procs_per_node)
    ):
        raise CrossFieldError(
            "resources.tasks_per_node",
            f"must equal launch.nproc_per_node ({spec.procs_per_node}) with launcher"
            f" {launch.launcher} (one task per process; got {res.tasks_per_node})",
        )
    if res.gpus_per_node and spec.procs_per_node > res.gpus_per_node:
        raise CrossFieldError(
            "launch.nproc_per_node",
            f"must not exceed resources.gpus_per_node ({res.gpus_per_node}) on a GPU job"
            f" (got {spec.procs_per_node})",
        )
    if res.cpus_per_process is not None and res.cpus_per_task is not None:
        raise CrossFieldError(
            "resources.cpus_per_process",
            "give resources.cpus_per_process or resources.cpus_per_task, not both (both mean"
            " the CPUs of each process)",
        )
    if res.gpu_type and not res.gpus_per_node:
        raise CrossFieldError("resources.gpu_type", "needs resources.gpus_per_node >= 1")
    if spec.scheduler.mail_type and not spec.scheduler.mail_user:
        raise CrossFieldError("scheduler.mail_user", "is needed when scheduler.mail_type is set")


def _check_node_launcher(spec: JobSpec) -> None:
    """spawn: one node, the bundled trainer only."""
    if spec.launch.launcher == "spawn":
        if spec.resources.nodes > 1:
            raise CrossFieldError(
                "launch.launcher",
                f"spawn starts the processes of one node (resources.nodes is"
                f" {spec.resources.nodes}): use torchrun or distributed-launch for several",
            )
        if spec.run.command is not None:
            raise CrossFieldError(
                "launch.launcher",
                "spawn starts the bundled trainer's processes (run.train); a run.command"
                " program that spawns its own processes runs with torchrun and nproc_per_node 1",
            )


def _check_command_launcher(spec: JobSpec) -> None:
    """A run.command that is itself a launcher runs only under launcher none; launch.extra_args
    need a launcher to pass them to; launcher none runs the bundled trainer as one process."""
    launcher = spec.launch.launcher
    found = command_launcher(spec.run.command or [])
    if found is not None and launcher != "none":
        raise CrossFieldError("run.command", launcher_in_command_message(found, launcher))
    if spec.launch.extra_args and launcher in ("none", "spawn"):
        raise CrossFieldError(
            "launch.extra_args",
            f"launcher {launcher} has no launcher to pass them to (torchrun, srun, mpirun,"
            " distributed-launch take them): put them in run.command",
        )
    if launcher == "none" and spec.run.train is not None and spec.procs_per_node > 1:
        raise CrossFieldError(
            "launch.launcher",
            f"none runs the program once per node, but the bundled trainer would need"
            f" {spec.procs_per_node} processes per node (launch.nproc_per_node): use torchrun",
        )


def _check_node_range(spec: JobSpec) -> None:
    """An elastic range (nodes MIN:MAX) needs a backend that allocates one, and torchrun with
    c10d rendezvous to start on however many nodes came."""
    res = spec.resources
    if res.max_nodes is None:
        return
    shown = f"{res.nodes}:{res.max_nodes}"
    if not backend_class(spec.backend).node_ranges:
        able = [name for name in builtin_names() if backend_class(name).node_ranges]
        raise CrossFieldError(
            "resources.nodes",
            f"the {spec.backend} backend cannot run a node range ({shown}): give one number,"
            f" or use the {' or '.join(able)} backend",
        )
    if spec.launch.launcher != "torchrun" or spec.launch.rdzv != "c10d":
        raise CrossFieldError(
            "resources.nodes",
            f"a node range ({shown}) needs launch.launcher torchrun with launch.rdzv c10d",
        )


def _check_launcher(spec: JobSpec) -> None:
    """The launcher must be one the backend can start (Backend.launchers)."""
    launcher = spec.launch.launcher
    if launcher in backend_class(spec.backend).launchers:
        return
    able = [name for name in builtin_names() if launcher in backend_class(name).launchers]
    raise CrossFieldError(
        "launch.launcher",
        f"{launcher} needs the {' or '.join(able)} backend (backend is {spec.backend})",
    )


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a job spec, for editors and docs/spec.md."""
    return JobSpec.model_json_schema()
