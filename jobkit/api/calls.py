"""The top-level functions of jobkit.api: render, submit, and finding tracked jobs. Each runs
the function its CLI verb runs (manager/prepare.py, manager/submit.py, manager/sweep.py,
manager/refresh.py), so a job submitted here is tracked exactly like one of `jobkit submit`."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from jobkit.api.errors import CheckFailed, UsageError
from jobkit.api.handles import Job, Sweep
from jobkit.api.spec import Spec
from jobkit.registry.store import JobRecord, Store

log = logging.getLogger("jobkit")
"""Notes `jobkit submit` prints as `jobkit: note: ...` (seed-style specs, bad nodes left
out, submissions that could not be reconciled) go here at level WARNING."""

RECENT_S = 86_400.0
"""jobs() without filters: unfinished jobs and those ended in the last day (`jobkit status`)."""


def render_script(spec: Spec, *, workdir: str | Path | None = None) -> str:
    """The script `jobkit render` prints and `jobkit submit` sends for this spec. (Not
    `jobkit.render`: that name is the package jobkit/render/; `jobkit.api.render` is this.)"""
    from jobkit.manager.submit import render_script
    from jobkit.spec.trainer_check import check_trainer_config

    where = Path(workdir) if workdir is not None else Path.cwd()
    check_trainer_config(spec.loaded, where)
    return render_script(spec.spec, spec.loaded.template_dir, where.resolve())


def submit(
    spec: Spec, *, wait: bool = False, check: bool = True, workdir: str | Path | None = None
) -> Job:
    """Submit a spec without `sweep:` and track it (as `jobkit submit`); with `wait` return
    once it has settled. CheckFailed when the checks before queueing found problems
    (`check=False` skips them, like --no-check); a sweep's spec: use submit_sweep."""
    if spec.is_sweep:
        raise UsageError(f"{spec.name}: the spec has a sweep: section; use jobkit.submit_sweep")
    records = _submit(spec, check=check, workdir=workdir)
    job = Job(records[0])
    return job.wait() if wait else job


def submit_sweep(
    spec: Spec, *, wait: bool = False, check: bool = True, workdir: str | Path | None = None
) -> Sweep:
    """Submit a spec with `sweep:` (one array job, or one job per task on local and ssh:
    docs/sweeps.md); its tasks as Jobs."""
    if not spec.is_sweep:
        raise UsageError(f"{spec.name}: the spec has no sweep: section; use jobkit.submit")
    records = _submit(spec, check=check, workdir=workdir)
    sweep = Sweep(records[0].sweep_id or records[0].jobkit_id, [Job(r) for r in records])
    return sweep.wait() if wait else sweep


def _submit(spec: Spec, *, check: bool, workdir: str | Path | None) -> list[JobRecord]:
    """`jobkit submit`'s steps: prepare and check, the environment, reconcile, submit."""
    from jobkit.core.private import use_private_umask
    from jobkit.manager import submit as pipeline
    from jobkit.manager.badnodes import submit_note
    from jobkit.manager.prepare import check_job_environment, freeze_code, prepare_submission
    from jobkit.manager.reconcile import reconcile_submissions
    from jobkit.manager.sweep import submit_sweep as submit_tasks

    where = (Path(workdir) if workdir is not None else Path.cwd()).resolve()
    prepared = prepare_submission(spec.loaded, where, check=check)
    if prepared.problems:
        raise CheckFailed([problem.line_text() for problem in prepared.problems])
    for note in prepared.notes:
        log.warning("note: %s", note)
    check_job_environment(spec.loaded, where)
    plan, frozen_note = freeze_code(prepared.plan, spec.loaded)  # docs/provenance.md
    if frozen_note:
        log.warning("note: %s", frozen_note)
    user_umask = use_private_umask()  # what jobkit writes is its owner's only, as the CLI's
    try:
        with Store() as store:
            for err in reconcile_submissions(store).errors:
                log.warning("could not reconcile submissions: %s", err.show())
            if spec.is_sweep:
                return submit_tasks(store, plan)
            record = pipeline.submit(store, plan)
            if (left_out := submit_note(record)) is not None:
                log.warning("%s", left_out)
            return [record]
    finally:
        import os

        os.umask(user_umask)


def job(job_id: str) -> Job:
    """The job with this id (jobkit's, a unique prefix of it, or the scheduler's; a sweep
    task as `123_4`), refreshed: the state `jobkit status ID` shows."""
    from jobkit.registry.ids import resolve_job

    with Store() as store:
        record = resolve_job(store, job_id)
    return Job(record).refresh()


def sweep(sweep_id: str) -> Sweep:
    """The sweep with this id, its tasks refreshed."""
    with Store() as store:
        rows = store.sweep(sweep_id)
    if not rows:
        raise UsageError(f"no sweep {sweep_id!r}")
    return Sweep(sweep_id, []).refresh()


def jobs(
    ids: Sequence[str] = (),
    *,
    since: float | None = None,
    name: str | None = None,
    state: str | Sequence[str] | None = None,
    backend: str | None = None,
    all: bool = False,
) -> list[Job]:
    """Tracked jobs, refreshed with one query per backend, as `jobkit status` lists them:
    the jobs named (a sweep's id: its tasks), else the unfinished ones and those ended in
    the last day; `since` (epoch seconds), `name` (a glob), `state`, `backend` filter,
    `all` lists every job however old."""
    from jobkit.cli.status import parse_states
    from jobkit.manager.reconcile import reconcile_submissions
    from jobkit.manager.refresh import refresh
    from jobkit.registry.ids import resolve_jobs
    from jobkit.registry.selection import named_sweeps

    wanted = parse_states([state] if isinstance(state, str) else list(state or []))
    with Store() as store:
        reconcile_submissions(store)
        if ids:
            sweeps, job_ids = named_sweeps(store, list(ids))
            records = resolve_jobs(store, job_ids)
            records += [r for rows in sweeps.values() for r in rows]
        else:
            records = store.list_jobs(
                since=since,
                recent_final_s=None if (all or since is not None) else RECENT_S,
                name_glob=name,
                backend=backend,
            )
        fresh = refresh(store, records, now=time.time()).records
    return [Job(r) for r in fresh if not wanted or r.state in wanted]


render = render_script
"""jobkit.api.render: the same function (only `jobkit.render` is the package jobkit/render/)."""
