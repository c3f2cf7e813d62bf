"""The job-spec schema: every key a job YAML may hold, its type, default and checks.

This module is the contract. Loading, layering and error locations live in spec.py;
rendering in render.py. Values here are already normalised: durations in seconds,
memory in megabytes, commands as argument lists.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    WithJsonSchema,
    model_validator,
)

from jobkit.backends.registry import backend_class, backend_names, builtin_names, is_known
from jobkit.backends.sge.options import SgeOptions
from jobkit.core.errors import CrossFieldError
from jobkit.core.units import parse_duration, parse_memory_mb
from jobkit.spec.model import StrictModel

LAUNCHERS = ("torchrun", "srun", "mpirun")

_FORBIDDEN_CHARS = {"\n": "newline", "\r": "carriage return", "\x00": "NUL"}


def _no_control_chars(value: str) -> str:
    for char, label in _FORBIDDEN_CHARS.items():
        if char in value:
            raise ValueError(f"must not contain a {label} (it would end the script line)")
    return value


SafeStr = Annotated[str, AfterValidator(_no_control_chars)]
"""Any string that reaches a script: newline, CR and NUL are refused."""

NonEmptySafeStr = Annotated[SafeStr, Field(min_length=1)]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def _job_name(value: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(
            "must start with a letter or digit and hold only letters, digits and . _ + -"
            f" (at most 128 characters; got {value!r})"
        )
    return value


JobName = Annotated[str, AfterValidator(_job_name)]


def _backend_name(value: str) -> str:
    if not is_known(value):
        raise ValueError(f"must be one of: {', '.join(backend_names())} (got {value!r})")
    return value


BackendName = Annotated[
    str, AfterValidator(_backend_name), WithJsonSchema({"enum": list(builtin_names())})
]
"""A backend in backends/registry.py (built in, or a plug-in's entry point)."""

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_name(value: str) -> str:
    if not _ENV_NAME_RE.match(value):
        raise ValueError(f"is not a valid environment variable name: {value!r}")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


def _duration(value: object) -> int:
    return parse_duration(value)


def _memory(value: object) -> int:
    return parse_memory_mb(value)


class SourceText:
    """Marker on a type: this key reads an unquoted YAML scalar as written (`24:00:00`), not
    as YAML 1.1's number (jobkit/spec/scalars.py)."""


DurationSeconds = Annotated[int, BeforeValidator(_duration), SourceText()]
MemoryMB = Annotated[int, BeforeValidator(_memory), SourceText()]


def _as_list(value: object) -> object:
    """Accept a single string where a list of strings is expected."""
    return [value] if isinstance(value, str) else value


def _as_argv(value: object) -> object:
    """A command given as one string is split like a shell would (no expansion)."""
    if isinstance(value, str):
        _no_control_chars(value)
        try:
            return shlex.split(value)
        except ValueError as err:
            raise ValueError(f"cannot be split into arguments: {err}") from None
    return value


StrList = Annotated[list[SafeStr], BeforeValidator(_as_list)]
Argv = Annotated[list[SafeStr], BeforeValidator(_as_argv), Field(min_length=1)]
ScalarValue = SafeStr | int | float | bool

_SIGNAL_RE = re.compile(r"^(?:B:)?(?:SIG)?(?P<sig>[A-Z0-9]+)@(?P<secs>\d+)$")
_ARRAY_RE = re.compile(r"^\d+(?:-\d+)?(?::\d+)?(?:,\d+(?:-\d+)?(?::\d+)?)*(?:%\d+)?$")
_HOST_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9._:-]*[A-Za-z0-9_])?$")


def _signal(value: str) -> str:
    match = _SIGNAL_RE.match(value.strip())
    if not match:
        raise ValueError(f"must look like USR2@120 (signal@seconds before the end; got {value!r})")
    return f"{match['sig']}@{match['secs']}"


def _array(value: object) -> str:
    text = str(value).strip()
    if not _ARRAY_RE.match(text):
        raise ValueError(f"must look like 0-9, 1,3,5 or 0-99%10 (got {value!r})")
    return text


def _host(value: str) -> str:
    if not _HOST_RE.match(value):
        raise ValueError(f"is not a host name: {value!r}")
    return value


HostName = Annotated[str, AfterValidator(_host)]


def _python_choice(value: str) -> str:
    if value in ("auto", "system") or value.startswith(("/", "~/")):
        return value
    raise ValueError(
        f"must be auto, system or an absolute path to a python (got {value!r}; a path relative"
        " to where you submit would not mean the same on the compute nodes)"
    )


PythonChoice = Annotated[NonEmptySafeStr, AfterValidator(_python_choice)]


class Resources(StrictModel):
    """What the job asks the scheduler for."""

    nodes: int = Field(1, ge=1, le=100_000, description="Number of nodes (hosts).")
    gpus_per_node: int = Field(0, ge=0, le=64, description="GPUs per node (0: CPU job).")
    gpu_type: SafeStr | None = Field(None, description="GPU model for gres/ngpus, e.g. a100.")
    tasks_per_node: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Scheduler tasks per node. Default: 1 for torchrun, nproc_per_node for"
        " srun/mpirun.",
    )
    cpus_per_process: int | None = Field(
        None,
        ge=1,
        le=4096,
        description='CPU cores for each training process ("cores per GPU"); jobkit asks the'
        " scheduler for the right per-task count whatever the launcher, and sets"
        " OMP_NUM_THREADS to it.",
    )
    cpus_per_task: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="CPUs per scheduler task, as given (one task per node with torchrun, one per"
        " process with srun/mpirun); prefer cpus_per_process.",
    )
    mem: MemoryMB | None = Field(None, description="Memory per node: 32G, 500M, or megabytes.")
    time: DurationSeconds | None = Field(
        None, description="Wall-time limit: minutes, HH:MM:SS or D-HH:MM:SS."
    )
    partition: SafeStr | None = Field(None, description="Slurm partition; PBS queue.")
    account: SafeStr | None = Field(None, description="Account / project to charge.")
    qos: SafeStr | None = Field(None, description="Quality of service.")
    constraint: SafeStr | None = Field(None, description="Node features (Slurm --constraint).")
    exclusive: bool = Field(False, description="Ask for whole nodes.")


class Scheduler(StrictModel):
    """Scheduler behaviour beyond resources."""

    array: Annotated[str, BeforeValidator(_array), SourceText()] | None = Field(
        None, description="Job array: 0-9, 1,3,5, 0-99%10."
    )
    dependency: SafeStr | None = Field(None, description="e.g. afterok:12345.")
    mail_user: SafeStr | None = Field(None, description="Where the scheduler sends mail.")
    mail_type: StrList = Field(
        default_factory=list, description="When to send mail, e.g. [END, FAIL]; needs mail_user."
    )
    requeue: bool = Field(False, description="Let the scheduler (and jobkit) requeue the job.")
    signal: Annotated[SafeStr, AfterValidator(_signal)] | None = Field(
        None, description="Preemption warning, e.g. USR2@120: that signal 120 s before the end."
    )
    extra: StrList = Field(
        default_factory=list,
        description="Raw directives added as-is after the generated ones, e.g. --reservation=x."
        " Each is split into words and every word is quoted.",
    )
    pbs_flavor: Literal["pro", "torque"] = Field("pro", description="PBS Pro or Torque syntax.")
    pbs_spawner: Literal["pbsdsh", "mpiexec", "ssh"] = Field(
        "pbsdsh", description="How a multi-node PBS job starts one torchrun on each host."
    )


class Nccl(StrictModel):
    """NCCL network settings: a preset plus overrides."""

    preset: Literal["auto", "ethernet", "infiniband"] = Field(
        "auto", description="auto: NCCL decides; ethernet: sockets only; infiniband: IB verbs."
    )
    socket_ifname: SafeStr | None = Field(None, description="NCCL_SOCKET_IFNAME, e.g. eth0.")
    ib_hca: SafeStr | None = Field(None, description="NCCL_IB_HCA, e.g. mlx5.")
    vars: dict[EnvName, ScalarValue] = Field(
        default_factory=dict, description="Any NCCL_* overrides."
    )


def _nccl_shorthand(value: object) -> object:
    return {"preset": value} if isinstance(value, str) else value


class Env(StrictModel):
    """The software environment the job runs in."""

    modules: StrList = Field(default_factory=list, description="`module load` these, in order.")
    conda: SafeStr | None = Field(None, description="Conda environment name or prefix.")
    venv: SafeStr | None = Field(None, description="Python venv folder to activate.")
    python: PythonChoice = Field(
        "auto",
        description="The Python the job runs with. auto: without env.venv or env.conda, the"
        " environment jobkit runs from (the active virtualenv or conda env, else jobkit's own"
        " interpreter), written into the script as an absolute path whose bin/ goes first on"
        " PATH (so torchrun and python come from it); system: whatever PATH finds on the node;"
        " or an absolute path to a python. On a cluster the path must exist on the compute"
        " nodes (a shared file system).",
    )
    setup: StrList = Field(
        default_factory=list,
        description="Shell lines run before launch. The one field rendered as code, unquoted.",
    )
    vars: dict[EnvName, ScalarValue] = Field(default_factory=dict, description="Exported vars.")
    nccl: Annotated[Nccl, BeforeValidator(_nccl_shorthand)] = Field(
        default_factory=Nccl,
        description="NCCL network settings; a preset name alone is short for {preset: NAME}.",
    )
    debug: bool = Field(
        False, description="TORCH_DISTRIBUTED_DEBUG=DETAIL, NCCL_DEBUG=INFO and friends."
    )


class Launch(StrictModel):
    """How processes are started on each node."""

    launcher: Literal["torchrun", "srun", "mpirun"] = Field(
        "torchrun",
        description="torchrun: one per node starts the processes; srun / mpirun: one task per"
        " process, started by the scheduler.",
    )
    nproc_per_node: int | Literal["auto"] = Field(
        "auto", description="Processes per node; auto: gpus_per_node, or 1 without GPUs."
    )
    master_port: int | Literal["auto"] = Field(
        "auto", description="Rendezvous port; auto: derived from the job id."
    )
    rdzv: Literal["c10d", "static"] = Field(
        "c10d", description="torchrun rendezvous: c10d (elastic) or static (--node-rank)."
    )
    max_restarts: int = Field(0, ge=0, le=100, description="torchrun worker restarts.")

    @model_validator(mode="after")
    def _check_ranges(self) -> Launch:
        if isinstance(self.nproc_per_node, int) and not 1 <= self.nproc_per_node <= 1024:
            raise CrossFieldError(
                "launch.nproc_per_node", f"must be between 1 and 1024 (got {self.nproc_per_node})"
            )
        if isinstance(self.master_port, int) and not 1024 <= self.master_port <= 65535:
            raise CrossFieldError(
                "launch.master_port", f"must be between 1024 and 65535 (got {self.master_port})"
            )
        return self


class TrainRun(StrictModel):
    """The bundled trainer: `python -m train --config CONFIG --set k=v ...`."""

    config: NonEmptySafeStr = Field(
        description="A bundled config name (tiny-lm, mlp) or a path to a trainer YAML."
    )
    overrides: dict[SafeStr, ScalarValue] = Field(
        default_factory=dict, description="Trainer --set overrides, e.g. {train.steps: 200}."
    )


class Run(StrictModel):
    """What runs: exactly one of `train` or `command`."""

    train: TrainRun | None = Field(None, description="Run the bundled trainer.")
    command: Argv | None = Field(
        None, description="Your own program and arguments: a string (split like a shell) or list."
    )
    python: NonEmptySafeStr | None = Field(
        None,
        description="Interpreter for the bundled trainer (default: env.python's, else python3).",
    )
    workdir: SafeStr | None = Field(None, description="cd here before launching.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Run:
        if self.train is None and self.command is None:
            raise CrossFieldError(
                "run", "give exactly one of run.train or run.command (got neither)"
            )
        if self.train is not None and self.command is not None:
            raise CrossFieldError(
                "run.command", "give exactly one of run.train or run.command (got both)"
            )
        return self


class Ssh(StrictModel):
    """Hosts for the ssh backend; host 0 is the rendezvous host."""

    hosts: list[HostName] = Field(
        default_factory=list, description="Host names, one per node; the first is the master."
    )
    user: SafeStr | None = Field(None, description="Remote user (default: ssh's own choice).")
    port: int | None = Field(None, ge=1, le=65535, description="ssh port (default: ssh's).")
    identity_file: SafeStr | None = Field(None, description="Private key file (ssh -i).")
    options: StrList = Field(
        default_factory=list, description="ssh -o options, e.g. StrictHostKeyChecking=accept-new."
    )


class Logs(StrictModel):
    """Where logs go: DIR/NAME-JOBID.out for the job, DIR/NAME-JOBID/ for ranks and checkpoints."""

    dir: NonEmptySafeStr = Field(
        "logs", description="Log folder, relative to the directory you submit from."
    )


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
    logs: Logs = Field(default_factory=Logs)

    @model_validator(mode="after")
    def _cross_field(self) -> JobSpec:
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
        """Scheduler tasks per node: one torchrun per node, else one task per process."""
        if self.resources.tasks_per_node is not None:
            return self.resources.tasks_per_node
        return 1 if self.launch.launcher == "torchrun" else self.procs_per_node

    @property
    def world_size(self) -> int:
        """Total training processes."""
        return self.resources.nodes * self.procs_per_node

    @property
    def cpus_per_scheduler_task(self) -> int | None:
        """CPUs to ask for each scheduler task: cpus_per_task as given, else cpus_per_process
        times the processes a task starts (all of a node's with torchrun, one with srun,
        mpirun and submitit)."""
        res = self.resources
        if res.cpus_per_task is not None or res.cpus_per_process is None:
            return res.cpus_per_task
        if backend_class(self.backend).task_per_process:
            return res.cpus_per_process
        return res.cpus_per_process * self.procs_per_node // self.tasks_per_node

    @property
    def cpus_per_process(self) -> int | None:
        """CPU cores of each training process: cpus_per_process, or a task's cpus_per_task
        shared by the processes it starts; None when neither is given."""
        res = self.resources
        if res.cpus_per_process is not None or res.cpus_per_task is None:
            return res.cpus_per_process
        if backend_class(self.backend).task_per_process:
            return res.cpus_per_task
        return max(1, res.cpus_per_task * self.tasks_per_node // self.procs_per_node)


def check_cross_fields(spec: JobSpec) -> None:
    """Checks that involve several keys; raise CrossFieldError naming the key to fix."""
    res, launch = spec.resources, spec.launch
    _check_launcher(spec)
    if launch.launcher == "torchrun" and res.tasks_per_node not in (None, 1):
        raise CrossFieldError(
            "resources.tasks_per_node",
            "must be 1 with launcher torchrun (one torchrun per node starts the processes;"
            f" several would each claim every GPU; got {res.tasks_per_node})",
        )
    if (
        launch.launcher != "torchrun"
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
            "give resources.cpus_per_process or resources.cpus_per_task, not both (cpus_per_task"
            " is per scheduler task: one per node with torchrun, one per process otherwise)",
        )
    if res.gpu_type and not res.gpus_per_node:
        raise CrossFieldError("resources.gpu_type", "needs resources.gpus_per_node >= 1")
    if spec.scheduler.mail_type and not spec.scheduler.mail_user:
        raise CrossFieldError("scheduler.mail_user", "is needed when scheduler.mail_type is set")


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
