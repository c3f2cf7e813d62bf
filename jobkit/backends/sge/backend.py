"""The Grid Engine backend (Son of Grid Engine, Univa/Altair GE): qsub -terse / qstat -xml +
qacct -j / qdel. The script is templates/sge/job.sh.j2; its options are the spec's `sge:`
section (jobkit/backends/sge/options.py).

Grid Engine forgets a job in qstat once it ends; `qacct -j` then answers from the accounting
file (written a little after the end). Between the two, the run folder's exit_code file does
(sge/observe.py reads all three; sge/adoption.py finds lost submissions).
"""

from __future__ import annotations

import contextlib
import getpass
import re
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from jobkit.backends.base import FROZEN_CODE, Observation, SubmitRequest, TrackedJob
from jobkit.backends.batch import BatchScheduler, mail_letters
from jobkit.backends.commands import GRID_ENGINE
from jobkit.backends.sge.observe import (
    cancelled_file,
    finished_observation,
    live_observation,
    parse_live,
    runs_of,
)
from jobkit.backends.sge.parse import (
    FinishedRun,
    LiveJob,
    job_number,
    job_task,
    parse_qacct,
    parse_qsub_terse,
    tasks_include,
)
from jobkit.core import proc
from jobkit.core.conventions import EXIT_CODE_FILE, job_log_paths
from jobkit.core.errors import CrossFieldError, JobkitError, SchedulerError

if TYPE_CHECKING:
    from jobkit.backends.honours import How
    from jobkit.backends.preflight import Preflight
    from jobkit.backends.waiting import WaitInfo
    from jobkit.core.usage import Usage
    from jobkit.spec.schema import JobSpec

_ARRAY = re.compile(r"^\d+(?:-\d+(?::\d+)?)?$")
_AFTERANY = re.compile(r"^afterany(?::[0-9]+)+$")
_NO_ACCOUNTING = re.compile(r"error: job id \S+ not found|no jobs? (?:found|running)", re.I)


class SgeBackend(BatchScheduler):
    """Grid Engine: one qsub per job, one qstat -xml (and at most one qacct) per poll."""

    name = "sge"
    template = "sge/job.sh.j2"
    launchers = ("torchrun", "none")
    container_runtimes = frozenset(("apptainer", "singularity", "charliecloud", "podman"))
    memory_key = (
        "scheduler.extra (e.g. -l h_vmem=8G: Grid Engine sites name memory limits their own"
        " way, and jobkit does not send resources.mem)"
    )
    excludes_nodes = True
    refusal_marks = re.compile(r"^Unable to run job: |^qsub: ", re.MULTILINE)
    """The submit command's own words for a refusal (a bad option, partition or value)."""
    lost_reply_fate_unknown = True
    """A qsub whose reply was lost is found by its token, the account string `jobkit.<token>`
    (qstat -j while Grid Engine knows the job, qacct once it ended: sge/adoption.py). Where
    the user's own account applies, a job that already ended leaves no trace of jobkit's in
    qacct: such a submission is of unknown fate (kept looked for), never FAILED."""
    display_name = "Grid Engine"
    code_in_script = True
    chooses_nodes = True
    accounting_sources = frozenset({"qacct"})
    options_section = "sge"
    honours: ClassVar[Mapping[str, How]] = {
        "resources.time": "directive",
        "resources.partition": "directive",
        "resources.account": "directive",
        "scheduler.array": "directive",
        "scheduler.dependency": "directive",
        "scheduler.mail_user": "directive",
        "scheduler.mail_type": "directive",
        "scheduler.requeue": "directive",
        "scheduler.max_attempts": "jobkit",
        "scheduler.extra": "directive",
        "scheduler.exclude_bad_nodes_for": "jobkit",
        **FROZEN_CODE,
    }
    unhonoured_hints: ClassVar[Mapping[str, str]] = {
        "resources.mem": "add your site's memory resource, h_vmem or mem_free, through"
        " scheduler.extra, or remove the key",
        "resources.gpu_type": "add your site's GPU-model resource through scheduler.extra,"
        " or remove the key",
        "scheduler.signal": "Grid Engine sends SIGTERM, then SIGKILL, when a job must stop;"
        " remove the key",
    }

    @classmethod
    def reads_sections(cls, spec: JobSpec) -> tuple[str, ...]:
        """`sge:`, and `ssh:` when sge.spawner is ssh."""
        return ("sge", "ssh") if spec.sge.spawner == "ssh" else ("sge",)

    @classmethod
    def template_context(cls, spec: JobSpec) -> dict[str, Any]:
        """`sweep_array_from_1`: a sweep's scheduler.array as Grid Engine numbers its tasks
        (from 1: `range` every id plus one, `limit` the %K), None without a sweep."""
        from jobkit.spec.sweep import one_based

        array = spec.scheduler.array
        return {"sweep_array_from_1": one_based(array) if spec.sweep and array else None}

    @classmethod
    def template_filters(cls) -> Mapping[str, Callable[..., str]]:
        """`pbs_mail`: mail types as -m letters."""
        return {"pbs_mail": mail_letters}

    @classmethod
    def split_task_id(cls, scheduler_id: str) -> tuple[str, str | None]:
        """`123.5` -> ("123", "5"); the Slurm form `123_5` is read too."""
        job, sep, task = scheduler_id.partition(".")
        return (job, task) if sep and task.isdigit() else super().split_task_id(scheduler_id)

    @classmethod
    def task_label(cls, scheduler_id: str, task: str) -> str:
        """JOB_ID.TASK, as qstat and qacct show it."""
        return f"{scheduler_id}.{task}"

    @classmethod
    def array_task(cls, task: str) -> str:
        """Grid Engine numbers array tasks from 1: sweep task i is its task i+1
        (templates/sge/job.sh.j2)."""
        return str(int(task) + 1) if task.isdigit() else task

    @classmethod
    def task_job_id(cls, scheduler_id: str, task: str) -> str:
        """`123.5` for sweep task 4: what qdel takes for one task (poll finds it in qstat's
        and qacct's rows)."""
        return f"{job_number(scheduler_id)}.{cls.array_task(task)}"

    @classmethod
    def validate(cls, spec: JobSpec) -> None:
        """What Grid Engine's syntax cannot express, said before anything is queued."""
        slots = spec.resources.nodes * spec.procs_per_node
        if slots > 1 and not spec.sge.pe:
            raise CrossFieldError(
                "sge.pe",
                f"the sge backend needs a parallel environment for {slots} slots"
                f" ({spec.resources.nodes} node(s) x {spec.procs_per_node} process(es);"
                " `qconf -spl` lists them)",
            )
        array = spec.scheduler.array
        if array and spec.sweep is not None:
            array = array.partition("%")[0]  # a sweep's limit becomes -tc (templates/sge)
        if array and not _ARRAY.match(array):
            raise CrossFieldError(
                "scheduler.array",
                f"Grid Engine arrays are START[-END[:STEP]] (got {array!r})",
            )
        dependency = spec.scheduler.dependency
        if dependency and not _AFTERANY.match(dependency):
            raise CrossFieldError(
                "scheduler.dependency",
                "Grid Engine's -hold_jid waits for jobs to end whatever their exit: write"
                f" afterany:ID[:ID...] (got {dependency!r})",
            )

    # -- submitting -------------------------------------------------------------------------

    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """`qsub -terse [-A jobkit.<token>] [-l h=!NODE...] <script>`, run in the submission
        directory: the token as the account string unless the user gives one (a lost reply's
        job is found by it: sge/adoption.py), bad nodes left out (sge/exclude.py)."""
        from jobkit.backends.sge.adoption import account_args
        from jobkit.backends.sge.exclude import exclude_args

        return [
            "qsub",
            "-terse",
            *account_args(request),
            *exclude_args(request.exclude_nodes),
            *self.dependency_args(request),
            str(request.script_path),
        ]

    def dependency_args(self, request: SubmitRequest) -> list[str]:
        """`-hold_jid ID,...`: Grid Engine waits for the end whatever it was, so for "ok" and
        "fail" jobkit checks the outcome and cancels a stage that must not run
        (chain/settle.py, docs/chains.md)."""
        if not request.after:
            return []
        args = ["-hold_jid", ",".join(a.scheduler_id.split(".")[0] for a in request.after)]
        checked = [a for a in request.after if a.condition != "any"]
        if len(checked) == 1 and checked[0].facts.get("run_dir"):
            # the script checks the previous stage's exit code itself (templates/sge): no
            # race with jobkit's cancel, and right even when no jobkit runs meanwhile
            exit_file = f"{checked[0].facts['run_dir']}/{EXIT_CODE_FILE}"
            if "," in exit_file or "=" in exit_file:
                raise JobkitError(
                    f"cannot chain after {checked[0].scheduler_id} on Grid Engine: its run"
                    f" folder {checked[0].facts['run_dir']} holds ',' or '=' (qsub -v splits"
                    " there)"
                )
            args += ["-v", f"JOBKIT_CHAIN_AFTER={checked[0].condition}:{exit_file}"]
        return args

    def usable_nodes(self, spec: JobSpec) -> tuple[str, ...] | None:
        """The execution hosts (`qconf -sel`)."""
        from jobkit.backends.sge.exclude import usable_nodes

        return usable_nodes(self.query_timeout_s)

    def preflight(self, spec: JobSpec, script: str, workdir: Path, *, thorough: bool) -> Preflight:
        """`qsub -w v` and the queue's h_rt (thorough only: sge/preflight.py)."""
        from jobkit.backends.sge.preflight import preflight

        return preflight(spec, script, workdir, thorough=thorough, timeout=self.query_timeout_s)

    def own_command(self, argv: list[str]) -> list[str]:
        """qsub by its absolute path (backends/commands.py: GRID_ENGINE)."""
        return GRID_ENGINE.argv(argv)

    def parse_submit_output(self, argv: list[str], stdout: str, stderr: str) -> str:
        """The job number qsub -terse prints (`123`, `123.1-3:1` for an array)."""
        return parse_qsub_terse(argv, stdout, stderr)

    def log_paths(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """`{logs.dir}/{name}-{JOB_ID}` (arrays: `{JOB_ID}.{task}`) .out/.err and run folder."""
        spec = request.spec
        job_id = f"{scheduler_id}.{{task}}" if spec.scheduler.array else scheduler_id
        return job_log_paths(request.workdir, spec.logs.dir, spec.name, job_id)

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """The run folder (exit-code fallback), array range and submit time (qacct -b): when
        the script was written, just before qsub (a job adopted long after its lost reply
        started before its adoption)."""
        extra = super().submit_extra(request, scheduler_id)
        submitted = time.time()
        with contextlib.suppress(OSError):
            submitted = min(submitted, request.script_path.stat().st_mtime)
        extra["submitted_at"] = str(int(submitted))
        return extra

    # -- polling ----------------------------------------------------------------------------

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """One qstat -xml of this user's jobs; one qacct for the jobs it no longer shows.
        `-g t`: a parallel job's row on every host it runs on (MASTER and SLAVE), not only
        the master's."""
        if not jobs:
            return {}
        argv = ["qstat", "-xml", "-g", "t", "-u", getpass.getuser()]
        live: dict[str, list[LiveJob]] = defaultdict(list)
        for row in parse_live(
            argv, proc.run(GRID_ENGINE.argv(argv), timeout=self.query_timeout_s).stdout
        ):
            live[row.number].append(row)
        result: dict[str, Observation] = {}
        ended = []
        for job in jobs:
            rows = live.get(job_number(job.scheduler_id))
            task = job_task(job.scheduler_id)
            if rows and task is not None:  # one task: its row (running) or its range (waiting)
                rows = [row for row in rows if tasks_include(row.tasks, task)]
            if rows:
                result[job.scheduler_id] = live_observation(rows)
            else:
                ended.append(job)
        if ended:
            runs = self._accounting(ended)
            for job in ended:
                obs = finished_observation(job, runs_of(job, runs))
                if obs is not None:
                    result[job.scheduler_id] = obs
        return result

    def _accounting(self, jobs: Sequence[TrackedJob]) -> dict[str, list[FinishedRun]]:
        """qacct records of these jobs, by job number: one `qacct -j ID` for a single job,
        else one `qacct -b START -j` of everything since the oldest was submitted."""
        from jobkit.backends.sge.adoption import qacct_since_argv

        if len(jobs) == 1:
            argv = ["qacct", "-j", job_number(jobs[0].scheduler_id)]
        else:
            argv = qacct_since_argv(min(int(j.extra.get("submitted_at") or 0) for j in jobs))
        runs: dict[str, list[FinishedRun]] = defaultdict(list)
        for run in self._qacct(argv):
            runs[run.number].append(run)
        return runs

    def _qacct(self, argv: list[str]) -> list[FinishedRun]:
        """The records qacct prints; none where it has none yet (not written, or never)."""
        done = proc.run(GRID_ENGINE.argv(argv), timeout=self.query_timeout_s, check=False)
        if done.returncode != 0:
            if _NO_ACCOUNTING.search(done.stderr + done.stdout):
                return []  # not written yet (or never): the exit file may answer
            raise SchedulerError(argv, done.returncode, done.stdout, done.stderr)
        return parse_qacct(done.stdout)

    usage_note = "CPU and memory use: qacct has no record of the job yet (or the job is running)"

    def usage(self, jobs: Sequence[TrackedJob]) -> dict[str, Usage]:
        """cpu, ru_maxrss and ru_wallclock from the one qacct the poll uses (sge/usage.py)."""
        from jobkit.backends.sge.usage import usage_from_runs

        runs = self._accounting(jobs) if jobs else {}
        found = {
            j.scheduler_id: usage_from_runs(runs.get(job_number(j.scheduler_id), [])) for j in jobs
        }
        return {key: usage for key, usage in found.items() if usage is not None}

    def explain_waiting(self, jobs: Sequence[TrackedJob]) -> dict[str, WaitInfo]:
        """States from one qstat -xml, messages from one qstat -j for the jobs it lists
        (sge/waiting.py)."""
        from jobkit.backends.sge.waiting import gone, live_state, parse_qstat_j, sge_wait_info

        argv = ["qstat", "-xml", "-u", getpass.getuser()]
        live: dict[str, list[LiveJob]] = defaultdict(list)
        for row in parse_live(
            argv, proc.run(GRID_ENGINE.argv(argv), timeout=self.query_timeout_s).stdout
        ):
            live[row.number].append(row)
        listed = [job_number(j.scheduler_id) for j in jobs if job_number(j.scheduler_id) in live]
        blocks = {}
        if listed:
            argv = ["qstat", "-j", ",".join(dict.fromkeys(listed))]
            done = proc.run(GRID_ENGINE.argv(argv), timeout=self.query_timeout_s, check=False)
            blocks = parse_qstat_j(done.stdout)  # a job that ended meanwhile is left out
        result: dict[str, WaitInfo] = {}
        for job in jobs:
            number = job_number(job.scheduler_id)
            if number not in live:
                result[job.scheduler_id] = gone(number)
                continue
            state, letters = live_state(live[number])
            result[job.scheduler_id] = sge_wait_info(number, state, letters, blocks.get(number, {}))
        return result

    # -- cancel ------------------------------------------------------------------------------

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """One qdel for all the jobs (a task id `123.4`: that task only); each job's folder
        notes that jobkit cancelled it (a task's own note: a sweep's tasks share a folder).
        A note that cannot be written (a full disk) does not keep the job running."""
        for job in jobs:
            with contextlib.suppress(OSError):
                job.job_dir.mkdir(parents=True, exist_ok=True)
                cancelled_file(job).write_text("cancelled by jobkit\n")
        ids = [
            j.scheduler_id if job_task(j.scheduler_id) else job_number(j.scheduler_id) for j in jobs
        ]
        proc.run(GRID_ENGINE.argv(["qdel", *sorted(set(ids))]), timeout=self.query_timeout_s)

    # -- lost submissions ---------------------------------------------------------------------

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """token -> job number of these submissions: a job Grid Engine still knows by its
        account string `jobkit.<token>` or its script file (qstat -j), one that ended by its
        account string in qacct (sge/adoption.py); qacct is read only for tokens qstat did
        not show."""
        from jobkit.backends.sge.adoption import find_live, qacct_since_argv, wanted_accounts

        accounts = wanted_accounts(requests)
        scripts = {str(r.script_path): token for token, r in requests.items() if r is not None}
        found = find_live(accounts, scripts, self.query_timeout_s)
        if len(found) < len(requests):
            for run in self._qacct(qacct_since_argv(since)):
                token = accounts.get((run.account or "").strip())
                if token is not None and token not in found:
                    found[token] = run.number
        return found
