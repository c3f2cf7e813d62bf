"""The contract every backend implements, and the records passed across it.

Backends never touch the registry: the CLI records intent, calls `submit`, records the
result; `poll` answers for many jobs in one batched scheduler query. The records live in
backends/submission.py (After, SubmitRequest, Submitted) and core/records.py (TrackedJob,
Observation, Allocation); they are named here too, the one import a backend needs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from jobkit.backends.submission import After, SubmitRequest, Submitted
from jobkit.core.conventions import job_log_paths
from jobkit.core.records import Allocation, Observation, TrackedJob

if TYPE_CHECKING:  # the schema pulls in pydantic (~0.1 s): not needed to poll or cancel
    from jobkit.backends.honours import How
    from jobkit.backends.preflight import Preflight
    from jobkit.backends.waiting import Explanation, WaitInfo
    from jobkit.core.errors import SchedulerError
    from jobkit.core.usage import Usage
    from jobkit.spec.schema import JobSpec

__all__ = [
    "FROZEN_CODE",
    "JOB_NOTIFY",
    "After",
    "Allocation",
    "Backend",
    "Observation",
    "SubmitRequest",
    "Submitted",
    "TrackedJob",
]

FROZEN_CODE: Mapping[str, How] = {
    "code.snapshot": "jobkit",
    "code.include_untracked": "jobkit",
    "code.max_size": "jobkit",
}
"""The `code:` keys, for a backend's `honours` when its job runs from the snapshot jobkit
takes at submit (its working folder comes in JOBKIT_CODE_DIR: docs/provenance.md)."""

JOB_NOTIFY: Mapping[str, How] = {"notify.from": "launcher"}
"""`notify.from: job`, for a backend's `honours` when jobkit hands the job its environment
(JOBKIT_NOTIFY_FILE: the 0600 file of the job's notify section, docs/notify.md)."""


class Backend(ABC):
    """A scheduler or launcher jobkit can submit to (docs/design.md, "How to add a backend").

    Required: `name`, `submit_argv` (the dry run), `submit`, `poll`, `cancel`. The rest are
    capabilities with defaults: a backend overrides what its scheduler can do better.
    Instances are built with no arguments and hold no per-job state.
    """

    name: ClassVar[str]
    """The `backend:` value in a job spec; the key in backends/registry.py."""
    template: ClassVar[str | None] = None
    """Main template under templates/ (None: the backend writes its own file, see `script`)."""
    poll_interval_s: ClassVar[float] = 3.0
    """How often `jobkit logs -f` asks for the state (a scheduler query costs the cluster)."""
    launchers: ClassVar[tuple[str, ...]] = ("torchrun",)
    """The `launch.launcher` values this backend can start."""
    code_in_script: ClassVar[bool] = False
    """The frozen code's folder reaches the job written into its script (`jobkit submit`
    fills in the line CODE_PLACEHOLDER leaves: provenance/script_code.py), not through its
    environment: qsub passes no environment on (docs/provenance.md)."""
    container_runtimes: ClassVar[frozenset[str]] = frozenset()
    """The `container.runtime` values its script runs the launch in (docs/containers.md)."""
    node_ranges: ClassVar[bool] = False
    """True where the scheduler can allocate an elastic range of nodes (resources.nodes MIN:MAX)."""
    memory_key: ClassVar[str] = "resources.mem"
    """The spec key that asks this backend for memory, as `jobkit doctor`'s fixes name it."""
    nodes_from_hosts: ClassVar[bool] = False
    """True where the spec's ssh.hosts are the nodes: resources.nodes, when not given, is their
    number."""
    task_per_process: ClassVar[bool] = False
    """True where the scheduler starts one task per training process whatever the launcher
    (submitit): a task's CPUs are then one process's."""
    counts_gpus_at_start: ClassVar[bool] = False
    """True where no scheduler hands out GPUs (local, ssh): with launch.nproc_per_node auto and
    no resources.gpus_per_node, each host counts its own GPUs when the job starts."""
    lost_reply_fate_unknown: ClassVar[bool] = False
    """True where a submission whose reply was lost and that `find_lost` cannot see may still
    have been accepted: such a row becomes UNKNOWN (kept looked for), never FAILED."""
    sweep_mode: ClassVar[str] = "none"
    """How a sweep (`sweep:` in the spec) runs here: "array" (one array job; each task is
    tracked by `task_job_id`), "each" (one job per task, JOBKIT_TASK_ID exported; at most
    sweep.max_parallel run at once) or "none" (refused)."""
    remote_commands: ClassVar[tuple[str, ...]] = ()
    """The scheduler's commands jobkit runs on a cluster's login node when this backend is a
    remote cluster's (`submit --on`, docs/remote.md); empty: no remote cluster can use it (its
    status has no one-round-trip query over ssh yet)."""
    excludes_nodes: ClassVar[bool] = False
    """True where `submit_argv` leaves SubmitRequest.exclude_nodes out of the job's nodes
    (Slurm --exclude); elsewhere bad nodes (`jobkit nodes`) are only warned about."""

    # -- facts about the scheduler (read by manager/, cli/, check/, render/, report/) ------

    display_name: ClassVar[str | None] = None
    """The scheduler's name in sentences (`Grid Engine`); None: the backend's `name`."""
    chooses_nodes: ClassVar[bool] = False
    """True where the scheduler picks the job's nodes (a batch scheduler): its failed nodes
    are tracked as bad nodes (`jobkit nodes`, manager/badnodes.py). False: the job runs on
    the hosts the spec names."""
    remote_hosts: ClassVar[bool] = False
    """True where the job runs on hosts this machine cannot look into before it starts (the
    ssh hosts): `jobkit check` does not look for the program here."""
    runs_here: ClassVar[bool] = False
    """True where the job runs on this very machine (local): what `jobkit check` finds here
    (a container runtime on the PATH) is what the job finds."""
    accounting_sources: ClassVar[frozenset[str]] = frozenset()
    """The Observation.source values that come from the scheduler's accounting (a finished
    job's record: sacct, qacct), as opposed to its live queue."""
    options_section: ClassVar[str | None] = None
    """The top-level spec section of this backend's own options (`sge:`); by convention the
    backend's name. Other backends refuse keys set there (backends/honours.py)."""

    # -- the spec keys it honours (backends/honours.py) ------------------------------------

    honours: ClassVar[Mapping[str, How]] = {}
    """Each key of honours.SCHEDULER_KEYS this backend honours, and how. A key the user sets
    that is not here is refused at spec loading (or ignored with --ignore-unsupported)."""
    unhonoured_hints: ClassVar[Mapping[str, str]] = {}
    """key -> what to do instead, for the refusal of a key not honoured here (default:
    "remove the key")."""

    @classmethod
    def label(cls) -> str:
        """The scheduler's name in sentences: `display_name`, else `name`."""
        return cls.display_name or cls.name

    @classmethod
    def reads_sections(cls, spec: JobSpec) -> tuple[str, ...]:
        """The options sections this spec's job reads (default: the backend's own)."""
        return (cls.options_section,) if cls.options_section else ()

    @classmethod
    def unhonoured_here(cls, spec: JobSpec) -> Mapping[str, str]:
        """Keys of `honours` that this particular spec cannot have honoured (PBS Pro has no
        constraint resource), key -> the refusal's words. Default: none."""
        return {}

    @classmethod
    def spec_hosts(cls, spec: JobSpec) -> tuple[str, ...]:
        """The hosts the spec names for the job (ssh.hosts), host 0 first; () where the
        scheduler chooses them (the default)."""
        return ()

    @classmethod
    def template_filters(cls) -> Mapping[str, Callable[..., str]]:
        """Jinja filters this backend's template uses beyond the common ones (render/engine.py):
        name -> function."""
        return {}

    @classmethod
    def split_task_id(cls, scheduler_id: str) -> tuple[str, str | None]:
        """A tracked id back into (array job id, the scheduler's task number), the inverse of
        `task_label`; (id, None) for an id that names no task (default: `JOB_TASK`)."""
        head, sep, task = scheduler_id.partition("_")
        return (head, task) if sep and task.isdigit() else (scheduler_id, None)

    # -- before submitting ----------------------------------------------------------------

    @classmethod
    def validate(cls, spec: JobSpec) -> None:
        """Checks of the spec that only this backend needs; raise spec.schema.CrossFieldError.

        Runs as the spec is loaded (torch-free, no command run)."""
        return None

    def script(self, spec: JobSpec, template_dir: Path | None, workdir: Path) -> str:
        """The script `jobkit render` prints and `submit` sends (default: the template)."""
        from jobkit.render.engine import render

        return render(spec, template_dir=template_dir)

    @classmethod
    def task_label(cls, scheduler_id: str, task: str) -> str:
        """How this scheduler names one task of an array job (for messages)."""
        return f"{scheduler_id}_{task}"

    @classmethod
    def array_task(cls, task: str) -> str:
        """The scheduler's own number of sweep task `task` ("0".."N-1"), as its array
        variables, ids and log names show it (default: the same; Grid Engine: task + 1)."""
        return task

    @classmethod
    def task_job_id(cls, scheduler_id: str, task: str) -> str:
        """The id this scheduler's own commands (poll, cancel) accept for one task of the
        array job `scheduler_id`: a sweep's task rows are tracked by it (default:
        `task_label` of `array_task`)."""
        return cls.task_label(scheduler_id, cls.array_task(task))

    @classmethod
    def template_context(cls, spec: JobSpec) -> dict[str, Any]:
        """Variables this backend's template needs beyond the common ones (render/engine.py
        `template_context`); they win over the common ones."""
        return {}

    @classmethod
    def check_script(cls, spec: JobSpec, script: str) -> None:
        """Refuse a value the scheduler's syntax cannot express, or a rendered script it would
        misread: raise SpecError naming the key (runs at render, also for site templates)."""
        return None

    def checked_hosts(self, spec: JobSpec) -> list[tuple[str, list[str] | None]] | None:
        """Hosts whose Python environment `jobkit submit` checks before launching: (name shown,
        the argv that runs `bash -s` there, or None for this machine). None (the default): the
        job's script checks its own environment where it runs (a batch job's nodes are not
        known before it starts)."""
        return None

    def preflight(self, spec: JobSpec, script: str, workdir: Path, *, thorough: bool) -> Preflight:
        """What the scheduler would refuse or never start, asked before queueing (`jobkit
        check`; `jobkit submit` with thorough=False: only its fast questions). `script` is the
        rendered script. Default: not available for this backend (a note says so)."""
        from jobkit.backends.preflight import Preflight

        return Preflight(notes=(f"scheduler checks are not available for the {self.name} backend",))

    def dependency_args(self, request: SubmitRequest) -> list[str]:
        """The submit command's options that make the job wait for `request.after`
        (docs/chains.md); [] without any. Default: this backend cannot chain jobs (refused)."""
        if not request.after:
            return []
        from jobkit.core.errors import JobkitError

        raise JobkitError(f"the {self.name} backend cannot start a job after another (chains)")

    @abstractmethod
    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """The exact command `submit` will run (shown by --dry-run / --show-command)."""

    # -- submitting -------------------------------------------------------------------------

    @abstractmethod
    def submit(self, request: SubmitRequest) -> Submitted:
        """Launch the job; raise SchedulerError with the scheduler's stderr on refusal."""

    def submission_refused(self, err: SchedulerError) -> bool:
        """Whether `submit`'s SchedulerError proves that nothing was submitted (the row then
        ends FAILED at once); False leaves the outcome unknown, settled by `find_lost`
        (manager/submit.py). Default: a command that never ran or exited non-zero, not a
        timeout (a launcher's own exit status is certain)."""
        from jobkit.core.proc import SchedulerTimeout

        if isinstance(err, SchedulerTimeout):
            return False
        return err.returncode is None or err.returncode != 0

    def log_paths(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """Absolute 'out', 'err' and 'run_dir' of a job (default: the shared rule in
        core/conventions.py)."""
        return job_log_paths(
            request.workdir, request.spec.logs.dir, request.spec.name, scheduler_id
        )

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """Facts kept with the job beside its id (also for a job adopted after a lost reply)."""
        return {"run_dir": self.log_paths(request, scheduler_id)["run_dir"]}

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """token -> scheduler id of submissions whose reply was lost, found by their token or
        script path; `since` is when the oldest was recorded. A request is None where the
        recorded spec cannot be read back (only the token is known). Default: none found."""
        return {}

    # -- bad nodes left out (`jobkit nodes`, manager/badnodes.py) -----------------------------

    @classmethod
    def node_names(cls, nodes: str) -> tuple[str, ...]:
        """A job's recorded node list (JobRecord.nodes) as node names (default: split at
        commas and spaces)."""
        return tuple(name for name in nodes.replace(",", " ").split() if name)

    def usable_nodes(self, spec: JobSpec) -> tuple[str, ...] | None:
        """Every node a job of this spec could run on (its partition's), from one scheduler
        query, so that leaving bad nodes out never makes a job that cannot start. None (the
        default): not known."""
        return None

    # -- after submitting -------------------------------------------------------------------

    @abstractmethod
    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """States of many jobs in one batched query, keyed by scheduler_id.

        A scheduler_id may be one task of an array (`task_job_id`): answered for that task
        alone. Jobs the scheduler does not know are left out. Raise SchedulerError when the
        scheduler cannot answer: the caller then changes no job's state.
        """

    @abstractmethod
    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """Stop these jobs (and every process they started); a task id stops that task only."""

    # -- why a job waits (`jobkit why`) ----------------------------------------------------

    def explain_waiting(self, jobs: Sequence[TrackedJob]) -> dict[str, WaitInfo]:
        """Why each job waits, the scheduler's start estimate and the job's timeline, keyed
        by scheduler_id: one batched query for all the jobs (backends/waiting.py). Raise
        SchedulerError when the scheduler cannot answer. Default: not available for this
        backend (every job gets a note saying so)."""
        from jobkit.backends.waiting import WaitInfo

        note = f"`jobkit why` is not available for the {self.name} backend"
        return {job.scheduler_id: WaitInfo(notes=(note,)) for job in jobs}

    @classmethod
    def describe_reason(cls, reason: str, scheduler_id: str = "ID") -> Explanation | None:
        """A recorded waiting reason (the registry's `reason`) in plain words, its fix naming
        the job, without any scheduler call (`jobkit status ID`). Default: None."""
        return None

    # -- what a job used (`jobkit report`) --------------------------------------------------

    usage_note: ClassVar[str] = "CPU and memory use: not available for this backend"
    """What `jobkit report` says when `usage` has no answer for a job."""

    def usage(self, jobs: Sequence[TrackedJob]) -> dict[str, Usage]:
        """What each job used (CPU time, memory; per step and node where the scheduler says),
        keyed by scheduler_id, from one batched accounting query. Jobs it cannot answer for are
        left out. Default: {} (`jobkit report` then shows `usage_note`)."""
        return {}

    # -- interactive (`jobkit shell`, `jobkit run --here`) ----------------------------------

    def interactive_argv(
        self, spec: JobSpec, script: str, inner: Sequence[str]
    ) -> list[str] | None:
        """The command that asks for the allocation `spec` describes (the directives of its
        rendered `script`) and runs `inner` with a terminal on its first node (`jobkit
        shell`). None (the default): not available for this backend."""
        return None

    @classmethod
    def current_allocation(cls, environ: Mapping[str, str]) -> Allocation | None:
        """This backend's allocation that this process runs in, read from `environ`
        (`jobkit run --here`); None outside one (the default)."""
        return None

    # -- looking inside a running job -------------------------------------------------------

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        """The command that runs `argv` on one node of the running `job` (`jobkit doctor`'s
        stack dumps): `node` is the name the rank saw (Slurm's node name, else its host name),
        `node_index` the job's host number. None (the default): not available here."""
        return None
