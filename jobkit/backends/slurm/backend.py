"""The Slurm backend: sbatch to submit, one squeue (+ at most one sacct) to poll, scancel.

Parsing is in parse.py, the states of tasks and arrays in tasks.py (pure functions, fed
output captured from the real cluster in tests).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from jobkit.backends.base import Allocation, Observation, SubmitRequest, TrackedJob
from jobkit.backends.batch import BatchScheduler
from jobkit.core.conventions import job_log_paths
from jobkit.core.errors import JobkitError, SchedulerError, SpecError
from jobkit.core.run_files import read_exit_file, read_preempted_note
from jobkit.core.states import State

if TYPE_CHECKING:  # the parsers and proc load when a command runs: render stays quick
    from jobkit.backends.honours import How
    from jobkit.backends.preflight import Preflight
    from jobkit.backends.slurm.parse import SlurmId
    from jobkit.backends.slurm.tasks import TaskMap
    from jobkit.backends.waiting import Explanation, WaitInfo
    from jobkit.core.usage import Usage
    from jobkit.spec.schema import JobSpec

_HETJOB_LINE = re.compile(r"^#SBATCH\s+(hetjob|packjob)(\s|$)", re.IGNORECASE)
COMMENT_PREFIX = "jobkit:"


def percent_doubled(value: object) -> str:
    """The `slurm_filename` filter: `%` doubled, so sbatch/srun patterns keep it literal."""
    from jobkit.render.engine import shell_word

    return shell_word(value).replace("%", "%%")


class SlurmBackend(BatchScheduler):
    """Slurm: sbatch / squeue + sacct / scancel."""

    name = "slurm"
    template = "slurm/job.sh.j2"
    launchers = ("torchrun", "srun", "mpirun", "spawn", "distributed-launch", "none")
    node_ranges = True
    excludes_nodes = True
    refusal_marks = re.compile(
        r"^sbatch: (?:error|fatal): |^sbatch: (?:unrecognized|invalid) option", re.MULTILINE
    )
    """The submit command's own words for a refusal (a bad option, partition or value)."""
    display_name = "Slurm"
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
            str(request.script_path),
        ]

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
        """JOBKIT_ID for the job's environment (sbatch exports the submitter's)."""
        return {"JOBKIT_ID": request.jobkit_id}

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
                if not _settled_live(live, ids[job.scheduler_id], job)
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
            obs = _observe(ids[job.scheduler_id], job, live, done)
            if not accounting and (obs is None or obs.exit_code is None):
                obs = _exit_file_fallback(obs, job)
            elif obs is not None and obs.state is State.FAILED and obs.exit_code is None:
                obs = _lost_exit_code(obs, job)
            if obs is not None and obs.state is State.FAILED:
                obs = _preempted(obs, job, ids[job.scheduler_id])
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
        """Scheduler ids of jobs whose comment carries one of these tokens.

        One squeue of this user's jobs; sacct (from `since`) only for tokens squeue
        did not show. Returns token -> scheduler id.
        """
        from jobkit.core import proc

        wanted = {f"{COMMENT_PREFIX}{t}": t for t in requests}
        found: dict[str, str] = {}
        argv = ["squeue", "--noheader", "--me", "--states=all", "--format=%F|%k"]
        for line in proc.run(argv, timeout=self.query_timeout_s).stdout.splitlines():
            job, _, comment = line.partition("|")
            if comment.strip() in wanted:
                found[wanted[comment.strip()]] = job.strip()
        if len(found) < len(wanted):
            found.update(self._find_in_sacct(wanted, found, since))
        return found

    def _find_in_sacct(
        self, wanted: Mapping[str, str], found: Mapping[str, str], since: float
    ) -> dict[str, str]:
        """Jobs that left squeue, by their comment or (where accounting does not store
        comments: AccountingStoreFlags without job_comment) the `--comment=` of their
        submit line."""
        from jobkit.backends.slurm.parse import ACCOUNTING_DISABLED
        from jobkit.core import proc

        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 60))
        argv = [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--starttime={start}",
            "--format=JobIDRaw,JobID,Comment,SubmitLine",
        ]
        try:
            stdout = proc.run(argv, timeout=self.query_timeout_s).stdout
        except SchedulerError as err:
            if ACCOUNTING_DISABLED in (err.stderr + err.stdout).lower():
                return {}
            raise
        extra: dict[str, str] = {}
        for line in stdout.splitlines():
            fields = line.split("|", 3)  # the submit line (last) may hold `|`
            if len(fields) < 3:
                continue
            token = wanted.get(fields[2].strip()) or _token_in_submit_line(
                fields[3] if len(fields) > 3 else "", wanted
            )
            if token and token not in found:
                extra[token] = fields[1].split("_")[0].strip()
        return extra

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


def _token_in_submit_line(line: str, wanted: Mapping[str, str]) -> str | None:
    """The token of the `--comment=jobkit:<token>` argument in sacct's SubmitLine, if wanted."""
    for word in line.split():
        if word.startswith("--comment="):
            token = wanted.get(word.removeprefix("--comment=").strip("'\""))
            if token:
                return token
    return None


def _cluster_args(cluster: str | None) -> list[str]:
    return [f"--clusters={cluster}"] if cluster else []


def _by_cluster(jobs: Iterable[TrackedJob]) -> dict[str | None, list[TrackedJob]]:
    from jobkit.backends.slurm.parse import SlurmId

    groups: dict[str | None, list[TrackedJob]] = defaultdict(list)
    for job in jobs:
        groups[SlurmId.parse(job.scheduler_id).cluster].append(job)
    return groups


def _plain(tasks: TaskMap | None) -> Observation | None:
    """A plain job's one observation (None when the source does not know it)."""
    from jobkit.backends.slurm.tasks import summary

    if not tasks:
        return None
    return tasks.get(None) or summary(tasks)


def _observe(
    slurm_id: SlurmId, job: TrackedJob, live: Mapping[str, TaskMap], done: Mapping[str, TaskMap]
) -> Observation | None:
    """One job's observation from both sources: one task of an array (`123_4`), a whole
    array (its tasks aggregated) or a plain job."""
    from jobkit.backends.slurm.tasks import array_observation, choose, task_observation
    from jobkit.core.arrays import array_size

    number, task = slurm_id.base, slurm_id.task
    if task is not None:
        return choose(
            task_observation(live.get(number), task), task_observation(done.get(number), task)
        )
    if job.extra.get("array"):
        return array_observation(live.get(number), done.get(number), array_size(job.extra["array"]))
    return choose(_plain(live.get(number)), _plain(done.get(number)))


def _settled_live(live: Mapping[str, TaskMap], slurm_id: SlurmId, job: TrackedJob) -> bool:
    """squeue alone answers: the job (or task) is there, not ended, and (arrays) every task
    is seen."""
    from jobkit.backends.slurm.tasks import summary, task_count, task_observation
    from jobkit.core.arrays import array_size

    tasks = live.get(slurm_id.base)
    if not tasks:
        return False
    if slurm_id.task is not None:
        obs = task_observation(tasks, slurm_id.task)
        return obs is not None and not obs.state.is_final
    if job.extra.get("array"):
        expected = array_size(job.extra["array"])
        seen = sum(task_count(key) for key in tasks if key is not None)
        if expected is not None and seen < expected:
            return False
    return not summary(tasks).state.is_final


def _lost_exit_code(obs: Observation, job: TrackedJob) -> Observation:
    """A FAILED job whose exit code accounting lost: the run folder's exit_code file."""
    code = read_exit_file(job.extra.get("run_dir"))
    if not code:
        return obs
    note = "exit code from the run folder (accounting recorded none)"
    return replace(obs, exit_code=code, reason=f"{obs.reason}; {note}" if obs.reason else note)


def _preempted(obs: Observation, job: TrackedJob, slurm_id: SlurmId) -> Observation:
    """A FAILED job that Slurm was preempting: PREEMPTED, whatever its exit code.

    Under PreemptMode=CANCEL with a GraceTime, Slurm signals the job step only; the program
    stops (torchrun exits 1, a plain command dies of SIGTERM) and the script ends with that
    failure before the grace time is over, so accounting says FAILED. The script asked Slurm
    (`scontrol show job`: PreemptTime) and noted it in the run folder's `preempted` file.
    """
    run_dir = job.extra.get("run_dir")
    if run_dir and slurm_id.task is not None:
        run_dir = run_dir.replace("{task}", slurm_id.task)
    noted = read_preempted_note(run_dir, slurm_id.job, obs.requeues)
    if noted is None:
        return obs
    code = "" if obs.exit_code is None else f" with exit code {obs.exit_code}"
    reason = f"preempted by Slurm ({noted}); the job step was stopped and the script ended{code}"
    return replace(obs, state=State.PREEMPTED, reason=reason)


def _exit_file_fallback(obs: Observation | None, job: TrackedJob) -> Observation | None:
    """Without accounting: the run folder's exit_code file, else UNKNOWN once it left squeue."""
    code = read_exit_file(job.extra.get("run_dir"))
    if obs is not None and obs.state.is_final:
        if code is None:
            return obs
        state = State.SUCCEEDED if code == 0 else State.FAILED
        if obs.state is State.SUCCEEDED or obs.state is State.FAILED:
            return replace(obs, state=state, exit_code=code, source="exit-file")
        return replace(obs, exit_code=code)
    if obs is not None:
        return obs
    if code is not None:
        return Observation(
            state=State.SUCCEEDED if code == 0 else State.FAILED,
            raw_state="",
            source="exit-file",
            exit_code=code,
            reason="left the queue; exit code from the run folder (accounting is disabled)",
        )
    return Observation(
        state=State.UNKNOWN,
        raw_state="",
        source="squeue",
        reason="left the queue; Slurm accounting is disabled, so how it ended is unknown",
    )
