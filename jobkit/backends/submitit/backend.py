"""The submitit backend: submitit's AutoExecutor submits a Python callable to Slurm.

A submitit job is a Slurm job: `poll`, `cancel` and finding lost submissions are the Slurm
backend's (one batched squeue/sacct, scancel), so nothing here parses scheduler output.
submitit is imported only when a job is submitted (jobkit/backends/submitit/job.py), so
`jobkit status` never loads it.

Output follows submitit's own layout: the folder `{logs.dir}/{name}-<id>/` holds
`<id>_<task>_log.out|.err` (one per task, i.e. per rank), its pickles, and everything the
program writes to JOBKIT_RUN_DIR (the same folder).
"""

from __future__ import annotations

import contextlib
import io
import math
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from jobkit.backends.base import (
    FROZEN_CODE,
    Backend,
    Observation,
    SubmitRequest,
    Submitted,
    TrackedJob,
)
from jobkit.backends.slurm.backend import COMMENT_PREFIX, SlurmBackend
from jobkit.core.errors import CrossFieldError, JobkitError, SchedulerError, SpecError
from jobkit.spec.schema import JobSpec

if TYPE_CHECKING:
    from jobkit.backends.honours import How
    from jobkit.backends.waiting import Explanation, WaitInfo

SUBMITIT_MARK = "(submitit)"
"""First word of `submit_argv`: no command runs; submitit writes and sbatches its own file."""


def folder_pattern(spec: JobSpec, workdir: Path) -> str:
    """submitit's folder, `%j` standing for the job id: `{logs.dir}/{name}-%j`, absolute.

    A `%` of the submission folder's own would be read by submitit as a placeholder too:
    refused (logs.dir's is refused with the spec).
    """
    if "%" in str(workdir):
        raise JobkitError(
            f"the submitit backend cannot submit from {workdir}: submitit reads %j, %t..."
            " in its folder's path (submit from a folder without %)"
        )
    logs_dir = Path(spec.logs.dir)
    if not logs_dir.is_absolute():
        logs_dir = workdir / logs_dir
    return str(logs_dir / f"{spec.name}-%j")


TOKEN_PLACEHOLDER = "SUBMISSION_TOKEN"
"""Stands for the submission token in a rendered script (it exists only at submit time;
letters and _ only, so that it is quoted like a real token)."""

RENDER_NOTE = """\
# submitit's sbatch file for this job, as `jobkit submit` has submitit write it: submitit
# writes and submits this file itself, beside the pickled call to run, in the folder on
# the srun line ({placeholder} stands for the submission token, made at submit time).
"""


@contextlib.contextmanager
def _srun_assumed(executor_class: Any) -> Iterator[None]:
    """submitit's SlurmExecutor refuses to be built where `srun` is not on PATH (a laptop),
    although writing its sbatch file runs nothing: `jobkit render` is pure, so while the
    executor is built its Slurm detection answers "present" (restored at once; the submit
    path keeps the real detection and refuses in one line)."""
    real = executor_class.__dict__["affinity"]
    executor_class.affinity = classmethod(lambda cls: 2)
    try:
        yield
    finally:
        executor_class.affinity = real


def sbatch_text(spec: JobSpec, workdir: Path, token: str = TOKEN_PLACEHOLDER) -> str:
    """The sbatch file submitit would write for `spec` (nothing is submitted or written),
    with jobkit's note after the first line."""
    import submitit

    with _srun_assumed(submitit.SlurmExecutor):
        executor = submitit.AutoExecutor(folder=folder_pattern(spec, workdir), cluster="slurm")
    try:
        executor.update_parameters(**executor_parameters(spec, token))
    except ValueError as err:
        raise JobkitError(f"submitit refused the parameters: {err}") from None
    slurm: Any = executor._executor  # the SlurmExecutor behind the AutoExecutor
    text: str = slurm._make_submission_file_text(slurm._submitit_command_str, "render")
    first, _, rest = text.partition("\n")
    return f"{first}\n{RENDER_NOTE.format(placeholder=TOKEN_PLACEHOLDER)}{rest}"


def _directive(word: str) -> tuple[str, Any]:
    if not word.startswith("--") or len(word) < 3:
        raise SpecError(
            f"the submitit backend takes only --name=value directives (got {word!r})",
            key="scheduler.extra",
        )
    name, sep, value = word[2:].partition("=")
    return name, (value if sep else True)


def setup_lines(spec: JobSpec) -> list[str]:
    """Shell lines submitit runs in the batch script before srun: modules, conda, venv,
    env.setup (as written), then the exported variables, every value quoted."""
    from jobkit.render.environment import env_exports

    env = spec.env
    lines = [f"module load {shlex.quote(module)}" for module in env.modules]
    if env.conda:
        lines.append(f"conda activate {shlex.quote(env.conda)}")
    if env.venv:
        lines.append(f"source {shlex.quote(env.venv + '/bin/activate')}")
    lines.extend(env.setup)
    lines.extend(f"export {name}={shlex.quote(value)}" for name, value in env_exports(spec))
    return lines


def executor_parameters(spec: JobSpec, token: str) -> dict[str, Any]:
    """The AutoExecutor parameters for this spec (submitit names; pure, imports nothing)."""
    if spec.scheduler.array:
        raise SpecError(
            "job arrays are not supported by the submitit backend (use backend slurm)",
            key="scheduler.array",
        )
    res, sched = spec.resources, spec.scheduler
    params: dict[str, Any] = {
        "name": spec.name,
        "nodes": res.nodes,
        "tasks_per_node": spec.procs_per_node,
        "slurm_comment": f"{COMMENT_PREFIX}{token}",
        "slurm_setup": setup_lines(spec),
    }
    if res.partition:
        params["slurm_partition"] = res.partition
    if spec.cpus_per_scheduler_task:
        params["cpus_per_task"] = spec.cpus_per_scheduler_task
    if res.gpus_per_node:
        if res.gpu_type:
            params["slurm_gres"] = f"gpu:{res.gpu_type}:{res.gpus_per_node}"
        else:
            params["gpus_per_node"] = res.gpus_per_node
    if res.mem:
        params["mem_gb"] = res.mem / 1024
    if res.time:
        params["timeout_min"] = max(1, math.ceil(res.time / 60))
    if res.account:
        params["slurm_account"] = res.account
    if res.qos:
        params["slurm_qos"] = res.qos
    if res.constraint:
        params["slurm_constraint"] = res.constraint
    if res.exclusive:
        params["slurm_exclusive"] = True
    if sched.signal:
        params["slurm_signal_delay_s"] = int(sched.signal.split("@")[1])
    if sched.dependency:
        params["slurm_dependency"] = sched.dependency
    if sched.mail_user:
        params["slurm_mail_user"] = sched.mail_user
    if sched.mail_type:
        params["slurm_mail_type"] = ",".join(sched.mail_type)
    additional: dict[str, Any] = {}
    if sched.requeue:
        additional["requeue"] = True
    for line in sched.extra:
        try:
            split = shlex.split(line)
        except ValueError as err:
            raise SpecError(
                f"cannot split {line!r} into words: {err}", key="scheduler.extra"
            ) from None
        for word in split:
            name, value = _directive(word)
            additional[name] = value
    if additional:
        params["slurm_additional_parameters"] = additional
    return params


def _paths(spec: JobSpec, workdir: Path, scheduler_id: str) -> dict[str, str]:
    folder = Path(folder_pattern(spec, workdir).replace("%j", scheduler_id))
    return {
        "out": str(folder / f"{scheduler_id}_0_log.out"),
        "err": str(folder / f"{scheduler_id}_0_log.err"),
        "run_dir": str(folder),
    }


def _sbatch_error(err: Exception) -> SchedulerError:
    """submitit's failed sbatch as jobkit's SchedulerError: argv, exit code, output verbatim."""
    cause = err.__cause__
    if isinstance(cause, subprocess.CalledProcessError):
        return SchedulerError(
            [str(word) for word in cause.cmd],
            cause.returncode,
            str(cause.stdout or ""),
            str(cause.stderr or ""),
        )
    return SchedulerError(["sbatch"], None, "", str(err), reason="submitit could not submit")


class SubmititBackend(Backend):
    """submitit on Slurm; tracked and cancelled as the Slurm job it is."""

    name = "submitit"
    launchers = ("torchrun", "srun")
    accounting_sources = frozenset({"sacct"})
    unhonoured_hints: ClassVar[Mapping[str, str]] = {
        "sweep": "use backend slurm (the same cluster, one array job) or local",
    }
    honours: ClassVar[Mapping[str, How]] = {
        "resources.gpu_type": "directive",
        "resources.mem": "directive",
        "resources.time": "directive",
        "resources.partition": "directive",
        "resources.account": "directive",
        "resources.qos": "directive",
        "resources.constraint": "directive",
        "resources.exclusive": "directive",
        "scheduler.dependency": "directive",
        "scheduler.mail_user": "directive",
        "scheduler.mail_type": "directive",
        "scheduler.requeue": "directive",
        "scheduler.max_attempts": "jobkit",
        "scheduler.signal": "directive",
        "scheduler.extra": "directive",
        "scheduler.exclude_bad_nodes_for": "jobkit",
        **FROZEN_CODE,
    }
    task_per_process = True
    poll_interval_s = SlurmBackend.poll_interval_s

    @classmethod
    def unhonoured_here(cls, spec: JobSpec) -> Mapping[str, str]:
        """submitit runs a run.command under the Python that submits it: env.python (which
        puts its bin/ first on PATH elsewhere) has no say there; it writes its own srun line,
        so launch.extra_args has no launcher line to join."""
        refused: dict[str, str] = {}
        if spec.env.python != "auto" and spec.run.command is not None:
            refused["env.python"] = (
                "submitit runs run.command with the Python that submits it"
                " (use backend slurm, or remove the key)"
            )
        if spec.launch.extra_args:
            refused["launch.extra_args"] = (
                "submitit writes its own srun line and starts no torchrun"
                " (use backend slurm, or remove the key)"
            )
        return refused

    @classmethod
    def validate(cls, spec: JobSpec) -> None:
        """submitit reads %j, %t... in its folder's path."""
        if "%" in spec.logs.dir:
            raise CrossFieldError(
                "logs.dir",
                "must not contain % with the submitit backend (submitit reads %j, %t... in its"
                f" folder; got {spec.logs.dir!r})",
            )
        if spec.launch.preflight:
            raise CrossFieldError(
                "launch.preflight",
                "the submitit backend runs no jobkit script, so it cannot run the preflight:"
                " use backend slurm (the same cluster, jobkit's script) or leave it off",
            )

    def script(self, spec: JobSpec, template_dir: Path | None, workdir: Path) -> str:
        """The sbatch file submitit writes for this job (no jobkit template)."""
        return sbatch_text(spec, workdir)

    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """A readable description (no command exists): `(submitit) AutoExecutor folder=...
        key=value... -- PROGRAM`, the call and parameters `submit` will use."""
        params = executor_parameters(request.spec, request.token)
        words = [
            SUBMITIT_MARK,
            "AutoExecutor",
            f"folder={folder_pattern(request.spec, request.workdir)}",
        ]
        if request.spec.run.workdir:
            words.append(f"cwd={request.workdir / request.spec.run.workdir}")
        if isinstance(request.spec.launch.master_port, int):
            words.append(f"master_port={request.spec.launch.master_port}")
        for key in sorted(params):
            if key != "slurm_setup":
                words.append(f"{key}={params[key]}")
        words.extend(f"setup={line}" for line in params["slurm_setup"])
        return [*words, "--", *self._program(request.spec)]

    @staticmethod
    def _program(spec: JobSpec) -> list[str]:
        from jobkit.render.engine import program_argv

        return program_argv(spec)

    def submit(self, request: SubmitRequest) -> Submitted:
        """Build the callable and the executor, submit; the Slurm job id comes back."""
        import submitit

        from jobkit.backends.submitit import job as submitit_job

        spec = request.spec
        params = executor_parameters(spec, request.token)
        folder = folder_pattern(spec, request.workdir)
        # Frozen code (docs/provenance.md): the tasks start in the snapshot's copy of the
        # submit folder; JOBKIT_SUBMIT_DIR is the submit folder itself.
        base = request.code_dir or request.workdir
        cwd = base / spec.run.workdir if spec.run.workdir else base
        port = spec.launch.master_port
        exports = {**request.code_env(), "JOBKIT_SUBMIT_DIR": str(request.workdir)}
        program = submitit_job.RankProgram(
            argv=self._program(spec),
            cwd=str(cwd),
            exports=exports,
            run_dir_pattern=folder,
            master_port=port if isinstance(port, int) else None,
        )
        job_callable: Any = (
            submitit_job.TrainerJob(program)
            if spec.run.train is not None
            else submitit_job.CommandJob(program)
        )
        if shutil.which("srun") is None:
            raise JobkitError(
                "the submitit backend submits through Slurm, and no srun is on PATH here:"
                " submit from a Slurm login node (`jobkit render` shows the sbatch file anywhere)"
            )
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
        try:
            executor.update_parameters(**params)
        except ValueError as err:
            raise JobkitError(f"submitit refused the parameters: {err}") from None
        try:
            # submitit prints sbatch's stderr itself on failure; it is in the error instead.
            with contextlib.redirect_stderr(io.StringIO()):
                job = executor.submit(job_callable)
        except (
            submitit.core.utils.FailedJobError,
            submitit.core.utils.FailedSubmissionError,
        ) as err:
            raise _sbatch_error(err) from None
        except OSError as err:
            raise SchedulerError(["sbatch"], None, "", "", reason=f"cannot run: {err}") from None
        scheduler_id = str(job.job_id)
        return Submitted(
            scheduler_id=scheduler_id,
            argv=self.submit_argv(request),
            log_paths=_paths(spec, request.workdir, scheduler_id),
            extra=self.submit_extra(request, scheduler_id),
        )

    def log_paths(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """Task 0's `<id>_0_log.out|.err` and the submitit folder (for adopted jobs too)."""
        return _paths(request.spec, request.workdir, scheduler_id)

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """The folder and the per-rank file pattern (`{rank}`) for `jobkit logs --rank`."""
        folder = _paths(request.spec, request.workdir, scheduler_id)["run_dir"]
        return {
            "run_dir": folder,
            "submitit_folder": folder,
            "rank_file": str(Path(folder) / f"{scheduler_id}_{{rank}}_log.out"),
        }

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """The Slurm backend's batched squeue/sacct query."""
        return SlurmBackend().poll(jobs)

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """scancel, through the Slurm backend."""
        SlurmBackend().cancel(jobs)

    def explain_waiting(self, jobs: Sequence[TrackedJob]) -> dict[str, WaitInfo]:
        """A submitit job is a Slurm job: the Slurm backend's squeue + sacct."""
        return SlurmBackend().explain_waiting(jobs)

    @classmethod
    def describe_reason(cls, reason: str, scheduler_id: str = "ID") -> Explanation | None:
        """Slurm's reason in plain words."""
        return SlurmBackend.describe_reason(reason, scheduler_id)

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """Lost submissions by their comment token, through the Slurm backend."""
        return SlurmBackend().find_lost(requests, since)
