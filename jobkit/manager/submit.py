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
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.backends.base import Backend, SubmitRequest, Submitted
from jobkit.backends.registry import BackendUnavailable, get_backend
from jobkit.core import private
from jobkit.core.errors import JobkitError, SchedulerError
from jobkit.core.lifecycle import StateSource
from jobkit.manager.badnodes import leave_out_bad_nodes
from jobkit.registry.store import SUBMITTING, JobRecord, Store, new_token

if TYPE_CHECKING:
    from jobkit.render.attempt import Attempt
    from jobkit.spec.schema import JobSpec

SCRIPT_NAME = "job.sh"
SUBMIT_STARTED = "submit-started"
"""Left in the job folder just before the submit command runs: without it, a lost
submission certainly never reached the scheduler (`_give_up`)."""
SCRIPT_MODE = private.SCRIPT_MODE
ORPHAN_AGE_S = 150.0
"""A SUBMITTING row from another host (or without a submitter) is looked for after this."""
LOST_AFTER_S = 300.0
"""A SUBMITTING row that no scheduler knows after this long becomes FAILED."""
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
) -> Plan:
    """Render the script and work out the submit command; runs nothing, records nothing.
    `attempt`: the run this is a later attempt of (None: a new run)."""
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
    argv = backend.submit_argv(placeholder)
    return Plan(spec, script, workdir.resolve(), spec.backend, argv, attempt, template_dir)


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
        extra={"submitter": submitter_identity(), **_template_fact(plan)},
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
    if plan.attempt is not None:  # a later attempt's run folder is the run's
        submitted = replace(
            submitted, log_paths={**submitted.log_paths, "run_dir": plan.attempt.run_dir}
        )
    return store.mark_submitted(
        record.jobkit_id,
        scheduler_id=submitted.scheduler_id,
        argv=submitted.argv,
        log_paths=submitted.log_paths,
        extra={**submitted.extra, **left_out.facts()},
    )


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
    private.write_file(script_path, plan.script, SCRIPT_MODE)
    logs_dir = plan.workdir / plan.spec.logs.dir
    try:
        private.make_dir(logs_dir)
    except OSError as err:
        raise JobkitError(f"cannot create logs.dir {logs_dir}: {err.strerror or err}") from None
    return _request(
        plan.spec,
        plan.script,
        workdir=plan.workdir,
        jobkit_id=record.jobkit_id,
        job_dir=record.job_dir,
        token=record.token,
    )


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


def _start_time(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 and fields[0] not in (b"Z", b"X") else None


def submitter_identity() -> dict[str, Any]:
    """This process: host, pid and start time (so a crashed submit can be recognised)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _start_time(pid)}


def submitter_alive(record: JobRecord) -> bool | None:
    """Whether the process that recorded this intent still runs; None if not knowable here."""
    who = record.extra.get("submitter")
    if not isinstance(who, dict) or who.get("host") != socket.gethostname():
        return None
    pid = who.get("pid")
    if not isinstance(pid, int):
        return None
    started = _start_time(pid)
    return started is not None and started == who.get("start")


# -- reconciliation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Reconciled:
    """What `reconcile_submissions` did."""

    adopted: list[JobRecord]
    lost: list[JobRecord]
    errors: list[JobkitError]


def reconcile_submissions(store: Store, *, now: float | None = None) -> Reconciled:
    """Settle SUBMITTING rows whose submitter is gone: adopt the job or mark it lost.

    A row is looked at once its submitting process has exited (same host), or after
    ORPHAN_AGE_S otherwise. Backends with `find_submissions(tokens, since)` (Slurm: the
    token is in the job's comment) are asked once for all such rows; a found job is
    adopted (state QUEUED, then refreshed as usual). A row nobody knows after
    LOST_AFTER_S becomes FAILED "submission lost". A scheduler error leaves rows as they
    are and is returned, not raised.
    """
    at = time.time() if now is None else now
    orphans: dict[str, list[JobRecord]] = defaultdict(list)
    for record in store.submitting():
        alive = submitter_alive(record) if record.state == SUBMITTING else False
        age = at - record.created_at
        if alive or (alive is None and age < ORPHAN_AGE_S):
            continue
        orphans[record.backend].append(record)
    adopted: list[JobRecord] = []
    lost: list[JobRecord] = []
    errors: list[JobkitError] = []
    for backend_name, records in orphans.items():
        found: dict[str, str] = {}
        try:
            backend = get_backend(backend_name)
            found = _find_submissions(backend, records)
        except (SchedulerError, BackendUnavailable) as err:
            errors.append(err)
            continue
        for record in records:
            scheduler_id = found.get(submission_token(record))
            if scheduler_id is not None:
                adopted.append(_adopt(store, backend, record, scheduler_id))
            elif at - record.created_at >= LOST_AFTER_S and record.state == SUBMITTING:
                lost.append(_give_up(store, backend, record))
    return Reconciled(adopted, lost, errors)


def note_submit_started(job_dir: Path) -> None:
    """Mark that the submit command is about to run (SUBMIT_STARTED)."""
    (job_dir / SUBMIT_STARTED).touch()


def _give_up(store: Store, backend: Backend, record: JobRecord) -> JobRecord:
    """A submission nobody found: FAILED where a lost reply means a lost job, or where the
    submit command never ran; of unknown fate where the scheduler may have taken it unseen
    (PBS, Grid Engine: `lost_reply_fate_unknown`)."""
    started = (record.job_dir / SUBMIT_STARTED).exists()
    if backend.lost_reply_fate_unknown and started:
        return store.mark_fate_unknown(
            record.jobkit_id,
            "submission reply lost: the scheduler may have accepted it, but no job of its"
            " was found (check qstat; jobkit keeps looking)",
        )
    return store.mark_failed(
        record.jobkit_id,
        "submission lost: jobkit stopped before the scheduler answered, and no job with its"
        " token was found",
    )


def submission_token(record: JobRecord) -> str:
    """The token the row's job was submitted with: its own, or (a sweep task on an "array"
    backend) its sweep's array job's."""
    shared = record.extra.get(ARRAY_TOKEN)
    return shared if isinstance(shared, str) and shared else record.token


def _array_task_row(record: JobRecord) -> bool:
    """A sweep task submitted as one task of its sweep's array job (manager/sweep.py)."""
    return record.task is not None and bool(record.extra.get(ARRAY_TOKEN))


def _submission_request(record: JobRecord) -> SubmitRequest:
    """The request the row's submission sent (a sweep task's: its array job's)."""
    request = request_for(record)
    if _array_task_row(record) and record.sweep_id:
        return replace(request, jobkit_id=record.sweep_id, token=submission_token(record))
    return request


def _find_submissions(backend: Backend, records: Sequence[JobRecord]) -> dict[str, str]:
    """submission token -> scheduler id of the orphaned rows' jobs the backend can find
    (Backend.find_lost: schedulers by token or script path, local and ssh launchers in their
    run folders). The tasks of one array job share one token: it is looked for once."""
    requests: dict[str, SubmitRequest | None] = {}
    for record in records:
        try:
            requests[submission_token(record)] = _submission_request(record)
        except ValueError:
            requests[submission_token(record)] = None  # a spec this jobkit cannot read back
    return backend.find_lost(requests, min(r.created_at for r in records))


def _adopt(store: Store, backend: Backend, record: JobRecord, scheduler_id: str) -> JobRecord:
    """Record the found job as the row's (a sweep task: its own task of the array job
    `scheduler_id`, with that task's id, files and state), source ADOPTED."""
    submitted = Submitted(scheduler_id=scheduler_id, argv=[], log_paths={}, extra={})
    try:
        request = _submission_request(record)
        submitted = replace(
            submitted,
            log_paths=backend.log_paths(request, scheduler_id),
            extra=backend.submit_extra(request, scheduler_id),
        )
    except ValueError:
        pass  # a spec this jobkit cannot read back: adopt without log paths
    if _array_task_row(record):
        submitted = as_array_task(backend, submitted, record.task or "0")
    current = store.get(record.jobkit_id)
    if current.state != SUBMITTING and current.scheduler_id is not None:
        return current
    return store.mark_submitted(
        record.jobkit_id,
        scheduler_id=submitted.scheduler_id,
        argv=[],
        log_paths=submitted.log_paths,
        extra={**submitted.extra, "adopted": True},
        source=StateSource.ADOPTED,
    )


def dumps_plan(plan: Plan) -> str:
    """The plan as JSON text."""
    return json.dumps(plan.to_dict(), indent=2)
