"""The submit pipeline as a library: render, record intent, write the script, submit, record.

    plan = plan_submission(spec, workdir=Path.cwd(), template_dir=None)   # pure: --dry-run
    record = submit(store, plan)                                           # runs the scheduler

The intent (state SUBMITTING, with a token) is in the registry before the scheduler is
called; `reconcile_submissions` later adopts or fails rows whose submitter died.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.backends.base import After, Backend, SubmitRequest, Submitted
from jobkit.backends.registry import get_backend
from jobkit.core import private
from jobkit.core.errors import JobkitError, SchedulerError
from jobkit.manager.badnodes import leave_out_bad_nodes
from jobkit.registry.store import JobRecord, Store, new_token

if TYPE_CHECKING:
    from jobkit.provenance.record import FrozenCode
    from jobkit.render.attempt import Attempt
    from jobkit.spec.schema import JobSpec

SCRIPT_NAME = "job.sh"
SUBMIT_STARTED = "submit-started"
"""Left in the job folder just before the submit command runs: without it, a lost
submission certainly never reached the scheduler (`_give_up`)."""
SCRIPT_MODE = private.SCRIPT_MODE
ARRAY_TOKEN = "array_token"
"""extra key of a sweep task row on an "array" backend: the token of its sweep's one array
job (in that job's comment); the task is adopted as its own task of the array found by it."""


@dataclass(frozen=True)
class Plan:
    """Everything about a submission that can be known without running anything."""

    spec: JobSpec
    script: str
    workdir: Path
    backend: str
    argv: list[str]
    """The submit command, with `<job dir>/job.sh` standing for the script's path."""
    attempt: Attempt | None = None
    """A later attempt of a run (manager/attempts.py); None for a new run."""
    template_dir: Path | None = None
    """The site templates it was rendered with (kept in the row: later attempts use them)."""
    after: tuple[After, ...] = ()
    """The jobs it starts after (a chain's previous stage: jobkit/chain, docs/chains.md)."""
    keep_broken: bool = False
    """Left waiting (not cancelled by the scheduler) if `after` can no longer be met."""
    code: FrozenCode | None = None
    """The code snapshot the job runs from and its provenance (docs/provenance.md); None:
    nothing recorded (a dry run, or a caller that took none)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for `submit --dry-run --json`)."""
        return {
            "backend": self.backend,
            "name": self.spec.name,
            "workdir": str(self.workdir),
            "argv": self.argv,
            "script": self.script,
        }


def render_script(
    spec: JobSpec,
    template_dir: Path | None = None,
    workdir: Path | None = None,
    attempt: Attempt | None = None,
) -> str:
    """The script `jobkit render` prints for this spec: the template's, or for submitit the
    sbatch file submitit writes (its folder is absolute: under `workdir`, default the cwd).
    `attempt`: a later attempt of a run, rendered from the template (docs/runs.md)."""
    backend = get_backend(spec.backend)
    if attempt is None:
        return backend.script(spec, template_dir, workdir or Path.cwd())
    if backend.template is None:
        raise JobkitError(
            f"backend {spec.backend} runs no jobkit script: a later attempt of a run (which"
            " reuses the run's folder) cannot be submitted there"
        )
    from jobkit.render.engine import render

    return render(spec, template_dir=template_dir, attempt=attempt)


def plan_submission(
    spec: JobSpec,
    *,
    workdir: Path,
    template_dir: Path | None = None,
    attempt: Attempt | None = None,
    after: tuple[After, ...] = (),
    keep_broken: bool = False,
) -> Plan:
    """Render the script and work out the submit command; runs nothing, records nothing.
    `attempt`: the run this is a later attempt of (None: a new run); `after`: the jobs it
    waits for (a backend that cannot chain refuses here, before anything is recorded)."""
    script = render_script(spec, template_dir, workdir.resolve(), attempt)
    backend = get_backend(spec.backend)
    placeholder = _request(
        spec,
        script,
        workdir=workdir.resolve(),
        jobkit_id="<jobkit-id>",
        job_dir=Path("<job-dir>"),
        token="<token>",
    )
    placeholder = replace(placeholder, after=after, keep_broken=keep_broken)
    backend.dependency_args(placeholder)  # a backend that cannot chain refuses here
    argv = backend.submit_argv(placeholder)
    return Plan(
        spec,
        script,
        workdir.resolve(),
        spec.backend,
        argv,
        attempt,
        template_dir,
        after,
        keep_broken,
    )


def submit(
    store: Store,
    plan: Plan,
    *,
    run_id: str | None = None,
    attempt: int = 1,
    sweep_id: str | None = None,
    task: str | None = None,
) -> JobRecord:
    """Record the intent, write the script and logs folder, submit, and record the result.

    A certain refusal (Backend.submission_refused: the scheduler said why, raised verbatim
    as SchedulerError) or a failure before anything reached the scheduler leaves the row
    FAILED. When it is not known whether the scheduler took the job (a timeout, a transient
    error such as Slurm's "Socket timed out", an unreadable reply: SubmissionUnknown is
    raised; Ctrl-C while the submit command ran: raised again) the row stays SUBMITTING for
    `reconcile_submissions`, which adopts the job by its token or calls it lost.

    run_id/attempt: the run this job is an attempt of (None: a new run, see
    manager/attempts.py); sweep_id/task: the sweep task it runs. A task on an "array"
    backend is tracked by the scheduler's id of that task (the plan's scheduler.array names
    it alone); on an "each" backend the launcher gets JOBKIT_TASK_ID.
    """
    backend = get_backend(plan.backend)
    record = store.create_intent(
        backend=plan.backend,
        name=plan.spec.name,
        spec=plan.spec.model_dump(mode="json"),
        script=plan.script,
        workdir=plan.workdir,
        token=new_token(),
        extra={"submitter": submitter_identity(), **_template_fact(plan), **code_fact(plan)},
        run_id=run_id,
        attempt=attempt,
        sweep_id=sweep_id,
        task=task,
    )
    return submit_recorded(store, backend, plan, record)


def submit_recorded(store: Store, backend: Backend, plan: Plan, record: JobRecord) -> JobRecord:
    """Submit a job whose intent is recorded (`submit`; each task of a local or ssh sweep,
    manager/sweep.py) and record the result, as `submit` says."""
    task = record.task
    try:
        request = _prepare(record, plan)
        if task is not None and backend.sweep_mode == "each":
            request = replace(request, task=task, sweep_id=record.sweep_id)
        request, left_out = leave_out_bad_nodes(store, backend, request)  # docs/nodes.md
        note_submit_started(request.job_dir)
    except BaseException as err:
        store.mark_failed(record.jobkit_id, f"submission failed: {_one_line(err)}")
        raise
    try:
        submitted = backend.submit(request)
    except SchedulerError as err:
        if not backend.submission_refused(err):
            raise SubmissionUnknown(record.jobkit_id, backend.name, err) from err
        store.mark_failed(record.jobkit_id, f"submission refused: {_one_line(err)}")
        raise
    except JobkitError as err:
        store.mark_failed(record.jobkit_id, f"submission failed: {_one_line(err)}")
        raise
    if task is not None and backend.sweep_mode == "array":
        submitted = as_array_task(backend, submitted, task)
    if plan.attempt is not None:  # a later attempt's run folder is the run's (the backend's
        # extra['run_dir'] too: its exit code is read there, else "launcher vanished")
        run_dir = {"run_dir": plan.attempt.run_dir}
        extra = {**submitted.extra, **run_dir} if "run_dir" in submitted.extra else submitted.extra
        submitted = replace(submitted, log_paths={**submitted.log_paths, **run_dir}, extra=extra)
    return store.mark_submitted(
        record.jobkit_id,
        scheduler_id=submitted.scheduler_id,
        argv=submitted.argv,
        log_paths=submitted.log_paths,
        extra={**submitted.extra, **left_out.facts()},
    )


def code_fact(plan: Plan) -> dict[str, Any]:
    """The code's summary (extra['code']: commit, snapshot...), when provenance was taken."""
    from jobkit.provenance.record import registry_summary

    return registry_summary(plan.code)


def _template_fact(plan: Plan) -> dict[str, str]:
    """The site template folder, when one was used (extra['template_dir'])."""
    return {"template_dir": str(plan.template_dir)} if plan.template_dir else {}


TASK_PLACEHOLDER = "{task}"
"""Where an array job's log paths hold its task number."""


def as_array_task(backend: Backend, submitted: Submitted, task: str) -> Submitted:
    """One task of an array job's submission, as its row records it: the scheduler's id of
    that task, its own files (named by the scheduler's task number: Grid Engine counts
    from 1), the array's id in extra['array_job']."""
    number = backend.array_task(task)
    extra: dict[str, Any] = {
        key: str(value).replace(TASK_PLACEHOLDER, number) for key, value in submitted.extra.items()
    }
    extra.pop("array", None)  # the row is one task, not the array
    extra["array_job"] = submitted.scheduler_id
    return replace(
        submitted,
        scheduler_id=backend.task_job_id(submitted.scheduler_id, task),
        log_paths={
            key: value.replace(TASK_PLACEHOLDER, number)
            for key, value in submitted.log_paths.items()
        },
        extra=extra,
    )


class SubmissionUnknown(JobkitError):
    """The submit command failed in a way that does not prove the scheduler refused the job
    (Backend.submission_refused): the rows stay SUBMITTING and the next jobkit command looks
    for the job by its token (`reconcile_submissions`): adopted if it was taken, else lost."""

    def __init__(self, jobkit_id: str, backend: str, err: SchedulerError) -> None:
        self.jobkit_id = jobkit_id
        self.backend = backend
        self.error = err
        super().__init__(self.show())

    def show(self) -> str:
        return (
            f"{self.jobkit_id}: whether {self.backend} took the job is unknown"
            f" ({_one_line(self.error)}); it stays SUBMITTING until `jobkit status` settles it"
            " (adopted under its real id if the scheduler has it, else reported lost)"
        )


def _prepare(record: JobRecord, plan: Plan) -> SubmitRequest:
    """Write the script into the job folder and create logs.dir; the backend's request."""
    script_path = record.job_dir / SCRIPT_NAME
    private.make_dir(record.job_dir)
    code_dir, provenance = _code_for(plan, record)
    script = plan.script
    if plan.code is not None and get_backend(plan.backend).code_in_script:
        from jobkit.provenance.script_code import fill_code_line

        script = fill_code_line(script, code_dir, provenance)
    private.write_file(script_path, script, SCRIPT_MODE)
    logs_dir = plan.workdir / plan.spec.logs.dir
    try:
        if "@" not in plan.backend:  # `slurm@cluster`: made there (docs/remote.md)
            private.make_dir(logs_dir)
    except OSError as err:
        raise JobkitError(f"cannot create logs.dir {logs_dir}: {err.strerror or err}") from None
    request = _request(
        plan.spec,
        script,
        workdir=plan.workdir,
        jobkit_id=record.jobkit_id,
        job_dir=record.job_dir,
        token=record.token,
    )
    from jobkit.notify.jobfile import job_notify_file  # notify.from: job (docs/notify.md)

    notify_file = job_notify_file(plan.spec, record.jobkit_id, logs_dir)
    request = replace(
        request, after=plan.after, keep_broken=plan.keep_broken, notify_file=notify_file
    )
    return replace(request, code_dir=code_dir, provenance_file=provenance)


def _code_for(plan: Plan, record: JobRecord) -> tuple[Path | None, Path | None]:
    """The snapshot's folder the job runs from and the provenance file written for it
    (None, None: no provenance taken); docs/provenance.md."""
    if plan.code is None:
        return None, None
    from jobkit.provenance.record import write_for_job

    return write_for_job(plan, record.jobkit_id, record.job_dir)


def _request(
    spec: JobSpec, script: str, *, workdir: Path, jobkit_id: str, job_dir: Path, token: str
) -> SubmitRequest:
    return SubmitRequest(
        jobkit_id=jobkit_id,
        spec=spec,
        script=script,
        script_path=job_dir / SCRIPT_NAME,
        job_dir=job_dir,
        workdir=workdir,
        token=token,
    )


def request_for(record: JobRecord) -> SubmitRequest:
    """The SubmitRequest a recorded job was (or would have been) submitted with."""
    from jobkit.spec.schema import JobSpec

    spec = JobSpec.model_validate(record.spec)
    return _request(
        spec,
        record.script,
        workdir=record.workdir,
        jobkit_id=record.jobkit_id,
        job_dir=record.job_dir,
        token=record.token,
    )


def _one_line(err: BaseException) -> str:
    text = err.show() if isinstance(err, JobkitError) else f"{type(err).__name__}: {err}"
    return " ".join(text.split())


# -- the submitting process, to tell an in-flight submission from an orphaned one ---------


def submitter_identity() -> dict[str, Any]:
    """This process: host, pid and start time (so a crashed submit can be recognised)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": process_start_time(pid)}


# -- reconciliation ------------------------------------------------------------------------


def note_submit_started(job_dir: Path) -> None:
    """Mark that the submit command is about to run (SUBMIT_STARTED)."""
    (job_dir / SUBMIT_STARTED).touch()


def dumps_plan(plan: Plan) -> str:
    """The plan as JSON text."""
    return json.dumps(plan.to_dict(), indent=2)


def process_start_time(pid: int) -> str | None:
    """The process's start time (clock ticks from /proc), None when it is gone."""
    if not Path("/proc/self/stat").exists():  # macOS (a laptop: docs/remote.md)
        return _ps_start_time(pid)
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 and fields[0] not in (b"Z", b"X") else None


def _ps_start_time(pid: int) -> str | None:
    """The process's start time where there is no /proc: POSIX `ps -o lstart=`."""
    import subprocess

    try:
        done = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None
