"""The PBS backend (PBS Pro and Torque): qsub, one qstat per poll, qdel.

Torque answers `qstat -f IDS` in text; PBS Pro answers `qstat -f -F json -x IDS` (with
finished jobs, `-x`). Which one a job uses is `pbs.flavor`, kept in its extra.
Parsing is done by pure functions so tests can feed them real or recorded output.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from jobkit.backends.base import FROZEN_CODE, Observation, SubmitRequest, TrackedJob
from jobkit.backends.batch import BatchScheduler, exit_file_observation, mail_letters
from jobkit.backends.commands import PBS
from jobkit.backends.pbs.parse import (
    by_flavor,
    job_number,
    match_submissions,
    observe_pro,
    observe_torque,
    parse_or_fail,
    parse_pro_json,
    parse_qsub_output,
    parse_torque_text,
)
from jobkit.backends.pbs.states import (
    FINISHED_LETTERS,
)
from jobkit.core import proc
from jobkit.core.errors import CrossFieldError, SchedulerError, SpecError
from jobkit.core.run_files import read_exit_file
from jobkit.core.states import State

if TYPE_CHECKING:
    from jobkit.backends.honours import How
    from jobkit.backends.waiting import WaitInfo
    from jobkit.core.usage import Usage
    from jobkit.spec.schema import JobSpec


_PBS_PRO_ARRAY = re.compile(r"^\d+-\d+(?::\d+)?$")
_UNKNOWN_JOB = re.compile(r"unknown job id", re.IGNORECASE)
UNKNOWN_JOB_RC = 153
"""PBSE_UNKJOBID (15001) as an exit status: every id asked about is unknown."""


class PbsBackend(BatchScheduler):
    """PBS Pro / Torque: qsub / qstat / qdel."""

    name = "pbs"
    template = "pbs/job.sh.j2"
    code_in_script = True
    launchers = ("torchrun", "mpirun", "none")
    container_runtimes = frozenset(("apptainer", "singularity", "charliecloud", "podman"))
    display_name = "PBS"
    chooses_nodes = True
    options_section = "pbs"
    honours: ClassVar[Mapping[str, How]] = {
        "resources.mem": "directive",
        "resources.time": "directive",
        "resources.partition": "directive",
        "resources.account": "directive",
        "resources.constraint": "directive",
        "resources.exclusive": "directive",
        "scheduler.array": "directive",
        "scheduler.dependency": "directive",
        "scheduler.mail_user": "directive",
        "scheduler.mail_type": "directive",
        "scheduler.requeue": "directive",
        "scheduler.max_attempts": "jobkit",
        "scheduler.extra": "directive",
        **FROZEN_CODE,
        "scheduler.exclude_bad_nodes_for": "jobkit",
    }
    unhonoured_hints: ClassVar[Mapping[str, str]] = {
        "resources.gpu_type": "sites name GPU models differently: add yours through"
        " scheduler.extra, or remove the key",
        "scheduler.signal": "PBS sends SIGTERM, then SIGKILL, when a job must stop; remove the key",
    }

    @classmethod
    def unhonoured_here(cls, spec: JobSpec) -> Mapping[str, str]:
        """PBS Pro has no standard node-feature resource (Torque's nodes=N:FEATURE has)."""
        if spec.pbs.flavor == "pro":
            return {
                "resources.constraint": "PBS Pro has no standard node-feature resource (add"
                " yours through scheduler.extra, use pbs.flavor torque, or remove the key)"
            }
        return {}

    @classmethod
    def reads_sections(cls, spec: JobSpec) -> tuple[str, ...]:
        """`pbs:`, and `ssh:` when pbs.spawner is ssh."""
        return ("pbs", "ssh") if spec.pbs.spawner == "ssh" else ("pbs",)

    @classmethod
    def template_filters(cls) -> Mapping[str, Callable[..., str]]:
        """`pbs_mail`: mail types as -m letters."""
        return {"pbs_mail": mail_letters}

    @classmethod
    def split_task_id(cls, scheduler_id: str) -> tuple[str, str | None]:
        """`123[4].server` -> ("123[].server", "4"); `123_4` (Slurm's Torque wrappers)."""
        number, dot, server = scheduler_id.partition(".")
        if "[" in number and number.endswith("]"):
            base, _, task = number[:-1].partition("[")
            return (f"{base}[]{dot}{server}", task) if task.isdigit() else (scheduler_id, None)
        return super().split_task_id(scheduler_id)

    @classmethod
    def validate(cls, spec: JobSpec) -> None:
        """A sweep's running-task limit: Torque syntax only."""
        sweep = spec.sweep
        if spec.pbs.flavor == "pro" and sweep is not None and sweep.max_parallel:
            raise CrossFieldError(
                "sweep.max_parallel",
                "PBS Pro arrays take no limit of running tasks (%K is Slurm/Torque syntax):"
                " leave sweep.max_parallel out, or use pbs.flavor torque",
            )

    @classmethod
    def check_script(cls, spec: JobSpec, script: str) -> None:
        """What PBS Pro's array syntax cannot express."""
        array = spec.scheduler.array
        if spec.pbs.flavor == "pro" and array and not _PBS_PRO_ARRAY.match(array):
            raise SpecError(
                f"PBS Pro arrays are START-END[:STEP] (got {array!r}; lists and %limits are"
                " Slurm/Torque syntax)",
                key="scheduler.array",
            )

    @classmethod
    def task_job_id(cls, scheduler_id: str, task: str) -> str:
        """`123[4].server` (PBS Pro, Torque) from `123[].server`; `123[4]` from the bare
        `123` that Slurm's Torque wrappers print (which cannot address it: see `cancel`)."""
        number, dot, server = scheduler_id.partition(".")
        return f"{number.removesuffix('[]')}[{task}]{dot}{server}"

    def log_paths(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """The shared rule; an array's files per task, named as the script names its job
        (`123[{task}].server` under PBS, `123_{task}` under Slurm's Torque wrappers)."""
        if not request.spec.scheduler.array:
            return super().log_paths(request, scheduler_id)
        number, dot, server = scheduler_id.partition(".")
        base = number.removesuffix("[]")
        job_id = f"{base}[{{task}}]{dot}{server}" if dot else f"{base}_{{task}}"
        return super().log_paths(request, job_id)

    @classmethod
    def task_label(cls, scheduler_id: str, task: str) -> str:
        """`123[4]`, as PBS names a subjob."""
        return job_number(cls.task_job_id(scheduler_id, task))

    refusal_marks = re.compile(r"^qsub: |^\s*sbatch: (?:error|fatal): ", re.MULTILINE)
    """qsub's refusal (`qsub: Unknown queue`); Slurm's Torque wrappers quote sbatch's."""
    lost_reply_fate_unknown = True
    """A qsub whose reply was lost and whose job `find_launched` cannot see may still have
    been accepted (qstat forgets finished jobs; Slurm's Torque wrappers show no submit
    arguments): such a submission is recorded as of unknown fate, never as FAILED."""

    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """`qsub [-W depend=...] <script>`, run in the submission directory."""
        return ["qsub", *self.dependency_args(request), str(request.script_path)]

    def dependency_args(self, request: SubmitRequest) -> list[str]:
        """`-W depend=afterok:ID` (afterany, afternotok): PBS Pro's and Torque's words, which
        Slurm's Torque wrapper passes on as --dependency (docs/chains.md)."""
        if not request.after:
            return []
        words = {"ok": "afterok", "any": "afterany", "fail": "afternotok"}
        needs = ",".join(f"{words[a.condition]}:{a.scheduler_id}" for a in request.after)
        return ["-W", f"depend={needs}"]

    def own_command(self, argv: list[str]) -> list[str]:
        """qsub by its absolute path (backends/commands.py: PBS)."""
        return PBS.argv(argv)

    def parse_submit_output(self, argv: list[str], stdout: str, stderr: str) -> str:
        """The job id qsub prints (`123.server`, `123[].server` for an array)."""
        return parse_qsub_output(argv, stdout, stderr)

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """token -> PBS id of submissions whose qsub reply was lost, found by their script's
        path (in jobkit's job folder, unique to the job) in qstat's submit arguments
        (`Submit_arguments`, Torque's `submit_args`): one qstat of all jobs per flavor."""
        found: dict[str, str] = {}
        groups: dict[str, dict[str, SubmitRequest]] = defaultdict(dict)
        for token, request in requests.items():
            if request is None:
                continue
            groups[request.spec.pbs.flavor][token] = request
        for flavor, group in groups.items():
            if flavor == "pro":
                argv = ["qstat", "-f", "-F", "json", "-x"]
                jobs = parse_or_fail(argv, self._qstat(argv), parse_pro_json)
            else:
                argv = ["qstat", "-f"]
                jobs = parse_or_fail(argv, self._qstat(argv), parse_torque_text)
            found.update(match_submissions(jobs, group))
        return found

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """What `submit` records beside the id (for a job adopted after a lost reply)."""
        extra = super().submit_extra(request, scheduler_id)
        extra["pbs_flavor"] = request.spec.pbs.flavor
        return extra

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """One qstat per flavor in use (usually one) for all the jobs."""
        result: dict[str, Observation] = {}
        for flavor, group in by_flavor(jobs).items():
            ids = [j.scheduler_id for j in group]
            if flavor == "pro":
                argv = ["qstat", "-f", "-F", "json", "-x", *ids]
                raw = parse_or_fail(argv, self._qstat(argv), parse_pro_json)
                seen = {key: observe_pro(attrs) for key, attrs in raw.items()}
            else:
                argv = ["qstat", "-f", *ids]
                text = parse_or_fail(argv, self._qstat(argv), parse_torque_text)
                seen = {key: observe_torque(attrs) for key, attrs in text.items()}
            result.update(_match_ids(group, seen))
        return result

    usage_note = "CPU and memory use: qstat -f no longer lists the job (PBS forgets finished jobs)"

    def usage(self, jobs: Sequence[TrackedJob]) -> dict[str, Usage]:
        """resources_used (cput, mem, walltime) from one qstat -f per flavor (pbs/usage.py)."""
        from jobkit.backends.pbs.usage import query_usage

        return query_usage(jobs, self._qstat)

    def explain_waiting(self, jobs: Sequence[TrackedJob]) -> dict[str, WaitInfo]:
        """comment, estimated start and times from one qstat -f per flavor (pbs/waiting.py)."""
        from jobkit.backends.pbs.waiting import pbs_wait_info

        result: dict[str, WaitInfo] = {}
        for flavor, group in by_flavor(jobs).items():
            ids = [j.scheduler_id for j in group]
            if flavor == "pro":
                argv = ["qstat", "-f", "-F", "json", "-x", *ids]
                raw = parse_or_fail(argv, self._qstat(argv), parse_pro_json)
            else:
                argv = ["qstat", "-f", *ids]
                raw = parse_or_fail(argv, self._qstat(argv), parse_torque_text)
            by_number = {job_number(key): attrs for key, attrs in raw.items()}
            for job in group:
                attrs = raw.get(job.scheduler_id) or by_number.get(job_number(job.scheduler_id))
                if attrs is not None:
                    result[job.scheduler_id] = pbs_wait_info(attrs, job.scheduler_id, flavor)
        return result

    def _qstat(self, argv: list[str]) -> proc.Completed:
        done = proc.run(PBS.argv(argv), timeout=self.query_timeout_s, check=False)
        if done.returncode != 0:
            other = [
                line
                for line in done.stderr.splitlines()
                if line.strip() and not _UNKNOWN_JOB.search(line)
            ]
            only_unknown = not other and (done.stderr.strip() or done.returncode == UNKNOWN_JOB_RC)
            if not only_unknown:
                raise SchedulerError(argv, done.returncode, done.stdout, done.stderr)
        return done

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """One qdel for all the jobs (a subjob id `123[4].server`: that task only).

        Slurm's Torque wrappers cannot address one task: their qdel reads `123[4]` as the
        number 123 and would stop the whole array, so such tasks are refused (say how to
        cancel them with scancel) after the other jobs were cancelled.
        """
        unaddressable = [j for j in jobs if _wrapper_task(j.scheduler_id)]
        ids = [j.scheduler_id for j in jobs if not _wrapper_task(j.scheduler_id)]
        if ids:
            proc.run(PBS.argv(["qdel", *ids]), timeout=self.query_timeout_s)
        if unaddressable:
            hints = ", ".join(
                f"scancel {job_number(j.scheduler_id).replace('[', '_').rstrip(']')}"
                for j in unaddressable
            )
            raise SchedulerError(
                ["qdel"],
                None,
                "",
                "",
                reason="Slurm's Torque wrappers cannot stop one task of an array (their qdel"
                f" would stop all of it); stop it with Slurm itself: {hints}",
            )


def _wrapper_task(scheduler_id: str) -> bool:
    """One task (`123[4]`) of an array submitted through Slurm's Torque wrappers (their ids
    have no server part)."""
    number, dot, _ = scheduler_id.partition(".")
    return not dot and number.endswith("]") and not number.endswith("[]")


def _match_ids(
    jobs: Sequence[TrackedJob], seen: Mapping[str, Observation]
) -> dict[str, Observation]:
    """Map qstat's ids to ours (qstat may add or drop the server suffix); exit-file fallback.

    A job qstat no longer knows is answered from its run folder's exit_code file when the
    script left one (PBS forgets finished jobs); otherwise it is left out.
    """
    by_number = {job_number(key): obs for key, obs in seen.items()}
    result: dict[str, Observation] = {}
    for job in jobs:
        obs = seen.get(job.scheduler_id) or by_number.get(job_number(job.scheduler_id))
        if obs is None:
            found = exit_file_observation(
                job, "qstat no longer knows the job; exit code from its run folder"
            )
            if found is not None:
                result[job.scheduler_id] = found
            continue
        if obs.raw_state.split("/")[0] in FINISHED_LETTERS and obs.exit_code is None:
            obs = _with_exit_file(obs, job)
        result[job.scheduler_id] = obs
    return result


def _with_exit_file(obs: Observation, job: TrackedJob) -> Observation:
    """A finished job whose qstat shows no exit status (Slurm's Torque wrappers).

    The run folder's exit_code file decides; without it the outcome is UNKNOWN rather
    than a guessed success.
    """
    if obs.signal is not None or obs.state not in (State.SUCCEEDED, State.FAILED):
        return obs
    if obs.nodes is None:
        # Finished with no exec_host: deleted before it started (a chain's stage that can
        # never start). The run folder is shared with the run's other attempts: its
        # exit_code file, if any, is another attempt's.
        return replace(
            obs,
            state=State.CANCELLED,
            reason="finished without starting (qstat shows no exec_host): deleted while waiting",
        )
    code = read_exit_file(job.extra.get("run_dir"), job.scheduler_id)
    if code is None:
        return replace(
            obs,
            state=State.UNKNOWN,
            reason="finished, but qstat shows no exit status and the run folder has no"
            " exit_code file",
        )
    state = State.SUCCEEDED if code == 0 else State.FAILED
    return replace(obs, state=state, exit_code=code, source="exit-file")
