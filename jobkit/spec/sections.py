"""The job spec's sections (resources, scheduler, launch, run, monitor, logs, code, sweep;
env in env_section.py): each key, its type, default and description. spec/schema.py composes
them into JobSpec, with the backends' own sections (backends/ssh_options.py, sge/options.py,
pbs/options.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    model_validator,
)

from jobkit.core.errors import CrossFieldError
from jobkit.core.units import parse_period
from jobkit.spec.model import StrictModel, empty_dict, empty_list
from jobkit.spec.noderange import node_count, split_node_range
from jobkit.spec.sweep import check_sweep
from jobkit.spec.values import (
    Argv,
    DurationSeconds,
    MemoryMB,
    NonEmptySafeStr,
    SafeStr,
    ScalarValue,
    ShellWordsList,
    SourceText,
    StrList,
    _array,
    _signal,
)


class Resources(StrictModel):
    """What the job asks the scheduler for."""

    nodes: Annotated[int, BeforeValidator(node_count), SourceText()] = Field(
        1,
        ge=1,
        le=100_000,
        description="Number of nodes (hosts); MIN:MAX (`2:4`, unquoted is fine) asks for an"
        " elastic range: nodes is then MIN and max_nodes MAX.",
    )
    max_nodes: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Elastic jobs: the most nodes (nodes is the least); Slurm only, launcher"
        " torchrun with c10d rendezvous (docs/e2e.md).",
    )
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
        description='The same as cpus_per_process (a seed\'s "4 cores per GPU"): CPUs for each'
        " process whatever the launcher. With torchrun (one scheduler task per node starting"
        " every process) the task asks for this times nproc_per_node, and render/submit say"
        " so in one line.",
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

    @model_validator(mode="before")
    @classmethod
    def _node_range(cls, data: object) -> object:
        """`nodes: MIN:MAX` is short for nodes: MIN, max_nodes: MAX."""
        return split_node_range(data)

    @model_validator(mode="after")
    def _check_node_range(self) -> Resources:
        if self.max_nodes is not None and self.max_nodes < self.nodes:
            raise CrossFieldError(
                "resources.max_nodes",
                f"must be at least resources.nodes ({self.nodes}; got {self.max_nodes})",
            )
        if self.max_nodes == self.nodes:
            self.max_nodes = None  # 2:2 is just 2
        return self


class Scheduler(StrictModel):
    """Scheduler behaviour beyond resources."""

    array: Annotated[str, BeforeValidator(_array), SourceText()] | None = Field(
        None, description="Job array: 0-9, 1,3,5, 0-99%10."
    )
    dependency: SafeStr | None = Field(None, description="e.g. afterok:12345.")
    mail_user: SafeStr | None = Field(None, description="Where the scheduler sends mail.")
    mail_type: StrList = Field(
        default_factory=empty_list,
        description="When to send mail, e.g. [END, FAIL]; needs mail_user.",
    )
    requeue: bool = Field(False, description="Let the scheduler (and jobkit) requeue the job.")
    max_attempts: int = Field(
        5,
        ge=1,
        le=1000,
        description="With requeue on: how many jobs a run may take in all; jobkit submits the"
        " next attempt when the scheduler could not requeue (preempted, NODE_FAIL, a refused"
        " requeue). 1: never (docs/runs.md).",
    )
    signal: Annotated[SafeStr, AfterValidator(_signal)] | None = Field(
        None, description="Preemption warning, e.g. USR2@120: that signal 120 s before the end."
    )
    extra: StrList = Field(
        default_factory=empty_list,
        description="Raw directives added as-is after the generated ones, e.g. --reservation=x."
        " Each is split into words and every word is quoted.",
    )
    pbs_flavor: Literal["pro", "torque"] | None = Field(
        None, description="Deprecated: write pbs.flavor (still read, with a note)."
    )
    pbs_spawner: Literal["pbsdsh", "mpiexec", "ssh"] | None = Field(
        None, description="Deprecated: write pbs.spawner (still read, with a note)."
    )
    exclude_bad_nodes_for: Annotated[int, BeforeValidator(parse_period), SourceText()] = Field(
        "6h",
        validate_default=True,
        description="After a NODE_FAIL, or a failed launch.preflight naming a node, later jobs"
        " of this backend leave that node out (Slurm --exclude) for this long: 6h, 30m, 1d,"
        " minutes or HH:MM:SS; 0 switches it off (docs/nodes.md, `jobkit nodes`).",
    )


class Launch(StrictModel):
    """How processes are started on each node."""

    launcher: Literal["torchrun", "srun", "mpirun", "spawn", "distributed-launch", "none"] = Field(
        "torchrun",
        description="torchrun: one per node starts the processes; srun / mpirun: one task per"
        " process, started by the scheduler (each gets RANK, LOCAL_RANK, WORLD_SIZE,"
        " MASTER_ADDR, MASTER_PORT); spawn: the bundled trainer starts its own"
        " processes with torch.multiprocessing (one node); distributed-launch: the legacy"
        " `python -m torch.distributed.launch --use_env`, one per node like torchrun; none:"
        " run.command runs as written once per node (a command that is itself a launcher:"
        " `torchrun ... main.py`), with MASTER_ADDR, MASTER_PORT, NODE_RANK and NNODES"
        " exported, and its own exit code.",
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
    preflight: bool = Field(
        False,
        description="Before the program: on every node check the GPUs, TCP to"
        " MASTER_ADDR:MASTER_PORT and an all-reduce over every rank; a failure stops the job"
        " with one line naming the node (docs/preflight.md).",
    )
    extra_args: ShellWordsList = Field(
        default_factory=empty_list,
        description="More arguments for the launcher, after jobkit's own: torchrun's (e.g."
        " --rdzv-conf=read_timeout=300), srun's (--cpu-bind=cores, --mpi=pmix) or mpirun's"
        " (--bind-to core). Each entry is split like a shell and every word quoted.",
    )
    rdzv_timeout: int | None = Field(
        None,
        ge=1,
        le=86_400,
        description="c10d rendezvous: seconds to wait for the nodes to join (torchrun"
        " --rdzv-conf join_timeout; default torch's 600).",
    )

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
        if self.preflight and self.launcher == "mpirun":
            raise CrossFieldError(
                "launch.preflight", "needs launcher torchrun or srun (mpirun has no preflight)"
            )
        return self


class TrainRun(StrictModel):
    """The bundled trainer: `python -m train --config CONFIG --set k=v ...`."""

    config: NonEmptySafeStr = Field(
        description="A bundled config name (tiny-lm, mlp) or a path to a trainer YAML."
    )
    overrides: dict[SafeStr, ScalarValue] = Field(
        default_factory=empty_dict, description="Trainer --set overrides, e.g. {train.steps: 200}."
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


class Monitor(StrictModel):
    """How jobkit watches a running job (docs/hangs.md)."""

    stall_after: DurationSeconds = Field(
        "00:10:00",
        validate_default=True,
        description="A running job whose ranks' heartbeats (the bundled trainer writes them)"
        " have not advanced for this long shows as STALLED in `jobkit status`: minutes or"
        " HH:MM:SS.",
    )


class Logs(StrictModel):
    """Where logs go: DIR/NAME-JOBID.out for the job, DIR/NAME-JOBID/ for ranks and checkpoints."""

    dir: NonEmptySafeStr = Field(
        "logs", description="Log folder, relative to the directory you submit from."
    )


class Code(StrictModel):
    """Frozen code (docs/provenance.md): the job runs from a snapshot of its git work tree
    taken at submit, so editing the source while the job waits changes nothing for it."""

    snapshot: bool = Field(
        True,
        description="Inside a git work tree, run the job from a snapshot of it taken at submit"
        " (tracked files at HEAD plus uncommitted changes), kept under $JOBKIT_HOME/snapshots"
        " and shared by identical submissions; false: run the submit folder as it is when"
        " the job starts.",
    )
    include_untracked: bool = Field(
        False,
        description="Put untracked files (not ignored by .gitignore) into the snapshot too.",
    )
    max_size: MemoryMB = Field(
        "300M",
        validate_default=True,
        description="The largest snapshot taken (sizes as resources.mem); a bigger one is"
        " refused, naming its biggest files.",
    )


def _sweep_key(value: str) -> str:
    if not value or "=" in value:
        raise ValueError(f"must be a key like optim.lr, without = (got {value!r})")
    return value


SweepKey = Annotated[SafeStr, AfterValidator(_sweep_key)]
"""A trainer or program key a sweep sets (`optim.lr`): reaches the program as `key=value`."""


class Sweep(StrictModel):
    """A parameter sweep: one task per override set (docs/sweeps.md)."""

    grid: dict[SweepKey, Annotated[list[ScalarValue], Field(min_length=1)]] | None = Field(
        None,
        min_length=1,
        description="Key -> the values to try, e.g. {optim.lr: [1e-3, 3e-4]}: every"
        " combination is a task (the last key varies fastest). Keys are trainer keys"
        " (--set KEY=VALUE) or, with run.command, KEY=VALUE words added to the command.",
    )
    sets: list[dict[SweepKey, ScalarValue]] | None = Field(
        None,
        min_length=1,
        description="Override sets, each one task (with a grid: each set with every grid"
        " combination), e.g. [{optim.lr: 0.1}, {optim.lr: 0.01, train.steps: 50}].",
    )
    max_parallel: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="At most this many tasks run at once (Slurm/PBS array %K; local, ssh:"
        " the later tasks wait for a free slot). Default: no limit on a scheduler; 1 on"
        " local and ssh (the tasks share the machines).",
    )

    @model_validator(mode="after")
    def _check(self) -> Sweep:
        check_sweep(self)
        return self
