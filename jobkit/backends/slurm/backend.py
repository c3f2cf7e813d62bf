"""The Slurm backend: sbatch to submit, one squeue (+ at most one sacct) to poll, scancel.

Parsing is in parse.py, the states of tasks and arrays in tasks.py, one Observation per job
from them in observe.py (pure functions, fed output captured from the real cluster in
tests); lost submissions are found again in lost.py.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from jobkit.backends.base import (
    FROZEN_CODE,
    JOB_NOTIFY,
    Allocation,
    Observation,
    SubmitRequest,
    TrackedJob,
)
from jobkit.backends.batch import BatchScheduler
from jobkit.backends.slurm.lost import COMMENT_PREFIX as COMMENT_PREFIX  # submitit's too
from jobkit.core.conventions import job_log_paths
from jobkit.core.errors import JobkitError, SchedulerError, SpecError
from jobkit.core.states import State

if TYPE_CHECKING:  # the parsers and proc load when a command runs: render stays quick
    from jobkit.backends.honours import How
    from jobkit.backends.preflight import Preflight
    from jobkit.backends.slurm.tasks import TaskMap
    from jobkit.backends.waiting import Explanation, WaitInfo
    from jobkit.core.usage import Usage
    from jobkit.spec.schema import JobSpec

_HETJOB_LINE = re.compile(r"^#SBATCH\s+(hetjob|packjob)(\s|$)", re.IGNORECASE)


def percent_doubled(value: object) -> str:
    """The `slurm_filename` filter: `%` doubled, so sbatch/srun patterns keep it literal."""
    from jobkit.render.quoting import shell_word

    return shell_word(value).replace("%", "%%")


class SlurmBackend(BatchScheduler):
    """Slurm: sbatch / squeue + sacct / scancel."""

    name = "slurm"
    template = "slurm/job.sh.j2"
    launchers = ("torchrun", "srun", "mpirun", "spawn", "distributed-launch", "none")
    container_runtimes = frozenset(("apptainer", "singularity", "pyxis", "charliecloud", "podman"))
    node_ranges = True
    excludes_nodes = True
    refusal_marks = re.compile(
        r"^sbatch: (?:error|fatal): |^sbatch: (?:unrecognized|invalid) option", re.MULTILINE
    )
    """The submit command's own words for a refusal (a bad option, partition or value)."""
    display_name = "Slurm"
    remote_commands = ("sbatch", "squeue", "sacct", "scancel")
    chooses_nodes = True
    accounting_sources = frozenset({"sacct"})
    honours: ClassVar[Mapping[str, How]] = {
        "resources.gpu_type": "directive",
        "resources.mem": "directive",
        "resources.time": "directive",
        "resources.partition": "directive",
        "resources.account": "directive",
        "resources.qos": "directive",
        "resources.constraint": "directive",
        "resources.exclusive": "directive",
        "scheduler.array": "directive",
        "scheduler.dependency": "directive",
        "scheduler.mail_user": "directive",
        "scheduler.mail_type": "directive",
        "scheduler.requeue": "directive",
        "scheduler.max_attempts": "jobkit",
        "scheduler.signal": "directive",
        "scheduler.extra": "directive",
        "scheduler.exclude_bad_nodes_for": "jobkit",
        **FROZEN_CODE,
        **JOB_NOTIFY,
    }

    @classmethod
    def template_filters(cls) -> Mapping[str, Callable[..., str]]:
        """`slurm_filename`: `%` doubled, so sbatch/srun file patterns keep it literal."""
        return {"slurm_filename": percent_doubled}

    @classmethod
    def split_task_id(cls, scheduler_id: str) -> tuple[str, str | None]:
        """`123_4` (also `123_4;cluster`, `123_4.batch`) -> ("123", "4")."""
        head = scheduler_id.split(";", 1)[0].split(".", 1)[0]
        job, sep, task = head.partition("_")
        return (job, task) if sep and task.isdigit() else (scheduler_id, None)

    @classmethod
    def check_script(cls, spec: JobSpec, script: str) -> None:
        """A backslash in logs.dir stops sbatch expanding %j; an #SBATCH line starting with
        the word hetjob (or packjob) splits the job in two."""
        if "\\" in spec.logs.dir:
            raise SpecError(
                "must not contain a backslash with the slurm backend (sbatch then stops"
                " expanding %j in --output)",
                key="logs.dir",
            )
        for number, line in enumerate(script.split("\n"), start=1):
            if _HETJOB_LINE.match(line):
                raise SpecError(
                    f"line {number} of the script ({line!r}) would make a heterogeneous job,"
                    " which jobkit does not support",
                    key="scheduler.extra",
                )

    @classmethod
    def task_job_id(cls, scheduler_id: str, task: str) -> str:
        """`123_4` (`123_4;cluster` on a federation): what squeue, sacct and scancel take."""
        job, sep, cluster = scheduler_id.partition(";")
        return f"{job}_{task}{sep}{cluster}"

    @classmethod
    def task_label(cls, scheduler_id: str, task: str) -> str:
        """`123_4`, as squeue shows an array task."""
        return cls.task_job_id(scheduler_id, task).partition(";")[0]

    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """`sbatch --parsable --comment=jobkit:<token> [--exclude=NODES] <script>` (the token
        adopts lost replies; bad nodes are left out, slurm/exclude.py)."""
        from jobkit.backends.slurm.exclude import exclude_args

        return [
            "sbatch",
            "--parsable",
            f"--comment={COMMENT_PREFIX}{request.token}",
            *exclude_args(request.exclude_nodes),
            *self.dependency_args(request),
            str(request.script_path),
        ]

    def dependency_args(self, request: SubmitRequest) -> list[str]:
        """`--dependency=afterok:ID` (afterany, afternotok) and `--kill-on-invalid-dep`: yes,
        so that Slurm itself cancels a stage that can never start whatever the site's
        DependencyParameters say; no with --keep-broken (docs/chains.md)."""
        if not request.after:
            return []
        words = {"ok": "afterok", "any": "afterany", "fail": "afternotok"}
        needs = ",".join(
            f"{words[a.condition]}:{a.scheduler_id.split(';')[0]}" for a in request.after
        )
        kill = "no" if request.keep_broken else "yes"
        return [f"--dependency={needs}", f"--kill-on-invalid-dep={kill}"]

    @classmethod
    def node_names(cls, nodes: str) -> tuple[str, ...]:
        """`n[1-2]` -> ('n1', 'n2')."""
        from jobkit.backends.slurm.usage import expand_nodelist

        return expand_nodelist(nodes)

    def usable_nodes(self, spec: JobSpec) -> tuple[str, ...] | None:
        """The nodes of the job's partition (or the default one): one sinfo."""
        from jobkit.backends.slurm.exclude import usable_nodes

        return usable_nodes(spec.resources.partition, self.query_timeout_s)

    def parse_submit_output(self, argv: list[str], stdout: str, stderr: str) -> str:
        """`123` or `123;cluster` from sbatch --parsable."""
        from jobkit.backends.slurm.parse import parse_sbatch_output

        return parse_sbatch_output(argv, stdout, stderr)

    def submit_env(self, request: SubmitRequest) -> dict[str, str]:
        """JOBKIT_ID and the frozen code's variables for the job's environment (sbatch
        exports the submitter's)."""
        return {"JOBKIT_ID": request.jobkit_id, **request.code_env()}

    def check_submission(self, request: SubmitRequest) -> None:
        """sbatch makes a relative --output absolute with the submission directory, then reads
        the whole path as a file-name pattern: a % or a backslash in the directory sends the
        output elsewhere and the job fails."""
        _check_submission_dir(request)

    def log_paths(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """`{logs.dir}/{name}-{id}.out/.err` and the run folder; arrays use `{id}_{task}`."""
        from jobkit.backends.slurm.parse import SlurmId

        spec = request.spec
        job = SlurmId.parse(scheduler_id).job
        job_id = f"{job}_{{task}}" if spec.scheduler.array else job
        return job_log_paths(request.workdir, spec.logs.dir, spec.name, job_id)

    def preflight(self, spec: JobSpec, script: str, workdir: Path, *, thorough: bool) -> Preflight:
        """Partition, nodes, memory directives; thorough: sacctmgr association and QoS
        limits and `sbatch --test-only` (slurm/preflight.py)."""
        from jobkit.backends.slurm.preflight import preflight

        return preflight(spec, script, workdir, thorough=thorough, timeout=self.query_timeout_s)

    # -- polling ----------------------------------------------------------------------------

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """One squeue for all jobs, then one sacct for those squeue shows ended or not at all."""
        result: dict[str, Observation] = {}
        for cluster, group in _by_cluster(jobs).items():
            result.update(self._poll_cluster(cluster, group))
        return result

    def _poll_cluster(
        self, cluster: str | None, jobs: Sequence[TrackedJob]
    ) -> dict[str, Observation]:
        from jobkit.backends.slurm.observe import (
            exit_file_fallback,
            lost_exit_code,
            observe,
            preempted,
            settled_live,
        )
        from jobkit.backends.slurm.parse import (
            ACCOUNTING_DISABLED,
            SlurmId,
            parse_sacct,
            parse_squeue,
        )
        from jobkit.backends.slurm.tasks import sacct_tasks, squeue_tasks

        # squeue and sacct are asked by the array's number, also for one task (`123_4`):
        # sacct shows tasks not yet started only as the range `123_[2-5]`, under the array.
        ids = {job.scheduler_id: SlurmId.parse(job.scheduler_id) for job in jobs}
        numbers = list(dict.fromkeys(slurm_id.base for slurm_id in ids.values()))
        live = squeue_tasks(parse_squeue(self._squeue(numbers, cluster)))
        need_sacct = list(
            dict.fromkeys(
                ids[job.scheduler_id].base
                for job in jobs
                if not settled_live(live, ids[job.scheduler_id], job)
            )
        )
        done: dict[str, TaskMap] = {}
        accounting = True
        if need_sacct:
            try:
                done = sacct_tasks(parse_sacct(self._sacct(need_sacct, cluster)))
            except SchedulerError as err:
                if ACCOUNTING_DISABLED not in (err.stderr + err.stdout).lower():
                    raise
                accounting = False
        result: dict[str, Observation] = {}
        for job in jobs:
            obs = observe(ids[job.scheduler_id], job, live, done)
            if not accounting and (obs is None or obs.exit_code is None):
                obs = exit_file_fallback(obs, job)
            elif obs is not None and obs.state is State.FAILED and obs.exit_code is None:
                obs = lost_exit_code(obs, job)
            if obs is not None and obs.state in (State.FAILED, State.PREEMPTED):
                obs = preempted(obs, job, ids[job.scheduler_id])
            if obs is not None:
                result[job.scheduler_id] = obs
        return result

    def _squeue(self, numbers: Sequence[str], cluster: str | None) -> str:
        from jobkit.backends.slurm.parse import SQUEUE_FORMAT
        from jobkit.core import proc

        argv = ["squeue", "--noheader", "--array", "--states=all"]
        argv += _cluster_args(cluster)
        argv += [f"--jobs={','.join(numbers)}", f"--Format={SQUEUE_FORMAT}"]
        done = proc.run(argv, timeout=self.query_timeout_s, check=False)
        if done.returncode != 0:
            if "invalid job id" in done.stderr.lower():
                return ""  # a single id Slurm has forgotten: not an error
            raise SchedulerError(argv, done.returncode, done.stdout, done.stderr)
        return done.stdout

    def _sacct(self, numbers: Sequence[str], cluster: str | None) -> str:
        from jobkit.backends.slurm.parse import SACCT_FIELDS
        from jobkit.core import proc

        argv = ["sacct", "--noheader", "--parsable2", "--duplicates"]
        argv += _cluster_args(cluster)
        argv += [f"--jobs={','.join(numbers)}", f"--format={SACCT_FIELDS}"]
        return proc.run(argv, timeout=self.query_timeout_s).stdout

    def usage(self, jobs: Sequence[TrackedJob]) -> dict[str, Usage]:
        """Steps, CPUs, CPU time and memory of all these jobs from one sacct (slurm/usage.py)."""
        from jobkit.backends.slurm.usage import query_usage

        return query_usage(jobs, self.query_timeout_s)

    def explain_waiting(self, jobs: Sequence[TrackedJob]) -> dict[str, WaitInfo]:
        """Reasons, start estimates and timelines: one squeue and one sacct per cluster
        (slurm/waiting.py)."""
        from jobkit.backends.slurm.waiting import explain_waiting

        result: dict[str, WaitInfo] = {}
        for cluster, group in _by_cluster(jobs).items():
            result.update(explain_waiting(group, _cluster_args(cluster), self.query_timeout_s))
        return result

    @classmethod
    def describe_reason(cls, reason: str, scheduler_id: str = "ID") -> Explanation | None:
        """A recorded squeue reason in plain words (slurm/reasons.py)."""
        from jobkit.backends.slurm.reasons import explain

        return explain(reason, {"job": scheduler_id.split(";")[0]})

    # -- adoption of lost submissions ------------------------------------------------------

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """Scheduler ids of jobs whose comment carries one of these tokens: token -> id
        (slurm/lost.py)."""
        from jobkit.backends.slurm.lost import find_lost

        return find_lost(requests, since, self.query_timeout_s)

    # -- interactive ------------------------------------------------------------------------

    def interactive_argv(
        self, spec: JobSpec, script: str, inner: Sequence[str]
    ) -> list[str] | None:
        """`salloc` with the script's #SBATCH options, then `srun --pty` (slurm/interactive.py)."""
        from jobkit.backends.slurm.interactive import salloc_argv

        return salloc_argv(script, inner)

    @classmethod
    def current_allocation(cls, environ: Mapping[str, str]) -> Allocation | None:
        """SLURM_JOB_ID (array task: `A_T`) inside salloc, srun or a batch job."""
        from jobkit.backends.slurm.interactive import current_allocation

        return current_allocation(environ)

    # -- cancel -----------------------------------------------------------------------------

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        """`srun --overlap --jobid JOB -w NODE ARGV` (slurm/overlap.py)."""
        from jobkit.backends.slurm.overlap import overlap_argv

        return overlap_argv(job.scheduler_id, node, argv)

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """One scancel for all jobs (per cluster); a task id (`123_4`) stops that task only."""
        from jobkit.backends.slurm.parse import SlurmId
        from jobkit.core import proc

        for cluster, group in _by_cluster(jobs).items():
            numbers = [SlurmId.parse(j.scheduler_id).job for j in group]
            proc.run(["scancel", *_cluster_args(cluster), *numbers], timeout=self.query_timeout_s)


def _check_submission_dir(request: SubmitRequest) -> None:
    """sbatch makes a relative --output absolute with the submission directory, then reads
    the whole path as a file-name pattern: a % or a backslash in the directory sends the
    output elsewhere and the job fails. Refuse before anything is submitted."""
    if Path(request.spec.logs.dir).is_absolute():
        return
    folder = str(request.workdir)
    for char in ("%", "\\"):
        if char in folder:
            raise JobkitError(
                f"cannot submit to Slurm from {folder!r}: sbatch would read the {char!r} in"
                " this directory as part of the --output file pattern and the job would fail;"
                " submit from another directory or make logs.dir absolute"
            )


def _cluster_args(cluster: str | None) -> list[str]:
    return [f"--clusters={cluster}"] if cluster else []


def _by_cluster(jobs: Iterable[TrackedJob]) -> dict[str | None, list[TrackedJob]]:
    from jobkit.backends.slurm.parse import SlurmId

    groups: dict[str | None, list[TrackedJob]] = defaultdict(list)
    for job in jobs:
        groups[SlurmId.parse(job.scheduler_id).cluster].append(job)
    return groups
