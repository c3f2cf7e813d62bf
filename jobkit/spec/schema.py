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
from jobkit.backends.registry import DEFAULT as DEFAULT_BACKEND
from jobkit.backends.registry import backend_class, builtin_names
from jobkit.backends.sge.options import SgeOptions
from jobkit.backends.ssh_options import Ssh
from jobkit.container.checks import check_container
from jobkit.container.spec import Container
from jobkit.core.errors import CrossFieldError
from jobkit.notify.spec import Notify
from jobkit.spec import derived
from jobkit.spec.commands import command_launcher, launcher_in_command_message
from jobkit.spec.derived import NODE_LAUNCHERS
from jobkit.spec.env_section import Env
from jobkit.spec.model import StrictModel, default_section
from jobkit.spec.sections import (
    Code,
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


class JobSpec(StrictModel, derived.DerivedValues):
    """A whole job: the top level of a job YAML."""

    name: JobName = Field(
        description="Job name: letters, digits and . _ + - (used in log and run folder names)."
    )
    backend: BackendName = Field(DEFAULT_BACKEND, description="Where the job runs.")
    profile: SafeStr | None = Field(None, description="Site profile to layer under this file.")
    cluster: SafeStr | None = Field(
        None,
        description="Submit to this cluster of clusters.yaml over ssh, as `jobkit submit --on"
        " NAME` (`--on` wins); docs/remote.md.",
    )
    resources: Resources = Field(default_factory=default_section(Resources))
    scheduler: Scheduler = Field(default_factory=default_section(Scheduler))
    env: Env = Field(default_factory=default_section(Env))
    launch: Launch = Field(default_factory=default_section(Launch))
    run: Run
    ssh: Ssh = Field(default_factory=default_section(Ssh))
    sge: SgeOptions = Field(default_factory=default_section(SgeOptions))
    pbs: PbsOptions = Field(default_factory=default_section(PbsOptions))
    container: Container | None = Field(
        None, description="Run the launcher inside an image on every node (docs/containers.md)."
    )
    monitor: Monitor = Field(default_factory=default_section(Monitor))
    logs: Logs = Field(default_factory=default_section(Logs))
    notify: Notify | None = Field(
        None, description="Messages when the job starts, ends, fails or stalls; docs/notify.md."
    )
    code: Code = Field(default_factory=default_section(Code))
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
    check_container(spec)
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
