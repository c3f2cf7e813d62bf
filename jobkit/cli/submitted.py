"""What every form of `jobkit submit` (one job, a sweep, a chain) does around the pipeline:
the problems found shown, interrupted submissions reconciled, `--wait` followed to the end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from jobkit.manager.refresh import BackendFailure, Waiter
from jobkit.registry.store import JobRecord, Store

if TYPE_CHECKING:
    from jobkit.check.problems import Problem
    from jobkit.cli.progress import ProgressLine
    from jobkit.logs.follow import LogSource


EXIT_PROBLEMS = 2
"""A check found a problem: nothing was submitted or recorded."""


def show_problems(problems: Sequence[Problem]) -> None:
    """The fast checks' problems (manager/prepare.py), one line each on stderr; nothing is
    recorded."""
    for problem in problems:
        click.echo(problem.line_text(), err=True)
    count = len(problems)
    click.echo(
        f"jobkit: not submitted: {count} problem{'s' if count > 1 else ''}"
        " (`jobkit check` for more; --no-check submits anyway)",
        err=True,
    )


def reconcile(store: Store) -> None:
    from jobkit.manager.reconcile import reconcile_submissions

    done = reconcile_submissions(store)
    for err in done.errors:
        click.echo(f"jobkit: warning: could not reconcile submissions: {err.show()}", err=True)


def wait_for_job(store: Store, record: JobRecord, *, stream: bool) -> JobRecord:
    """Follow the job: its output on stdout (when there is a log file), states on stderr,
    and (with `stream`) a training job's progress line (cli/progress.py)."""
    from jobkit.cli.progress import ProgressLine

    progress = ProgressLine() if stream else None

    def on_change(current: JobRecord) -> None:
        if progress is not None:
            progress.clear()
        words = [f"jobkit: {current.jobkit_id} {current.state}"]
        if current.raw_state and current.raw_state != current.state:
            words.append(f"({current.raw_state})")
        if current.nodes:
            words.append(f"on {current.nodes}")
        if current.reason and current.state != "RUNNING":
            words.append(f"- {current.reason}")
        if current.exit_code is not None and current.is_final:
            words.append(f"exit code {current.exit_code}")
        click.echo(" ".join(words), err=True)

    def on_failure(failure: BackendFailure) -> None:
        if progress is not None:
            progress.clear()
        click.echo(f"jobkit: {failure.warning()}", err=True)

    from jobkit.cli.watch import next_attempt

    try:
        while True:  # each attempt of the run in turn (docs/runs.md)
            waiter = Waiter(store, record.jobkit_id, on_change, on_failure)
            final = _wait_attempt(store, record, waiter, progress=progress)
            following = next_attempt(store, final)
            if following is None:
                return final
            record = following
    finally:
        if progress is not None:
            progress.clear()


def _wait_attempt(
    store: Store, record: JobRecord, waiter: Waiter, *, progress: ProgressLine | None
) -> JobRecord:
    """Follow one job to its end (a job preempted and not requeued never becomes final:
    accounting saying it ended is its end)."""
    from jobkit.manager.attempts import has_ended
    from jobkit.notify.dispatch import notify_jobs

    def done() -> bool:
        current = store.get(record.jobkit_id)
        if progress is not None:
            progress.update([current])
        ended = waiter.done() or has_ended(current)
        for line in notify_jobs(store, [store.get(record.jobkit_id)]):  # docs/notify.md
            if progress is not None:
                progress.clear()
            click.echo(f"jobkit: {line}", err=True)
        return ended

    sources = _log_sources(record) if progress is not None else []
    if sources:
        from jobkit.logs.follow import FollowTiming, follow

        for line in follow(sources, done, timing=FollowTiming(done_interval_s=0.5)):
            if progress is not None:
                progress.clear()
            click.echo(line.render())
    else:
        while not done():
            waiter.sleep_until_due()
    return store.get(record.jobkit_id)


def _log_sources(record: JobRecord) -> list[LogSource]:
    """What `jobkit logs ID -f` shows (rank 0's output and the job's own); none for an array."""
    if record.is_array or "out" not in record.log_paths:
        return []
    from jobkit.logs.files import job_view

    selection = job_view(record.log_paths, record.spec, record.extra)
    if selection.note:
        click.echo(f"jobkit: {selection.note}", err=True)
    return selection.sources
