"""`jobkit retry ID... [--last]`: submit ended jobs (or sweep tasks) again as the next attempt
of their runs.

The new job reuses the run's folder and JOBKIT_RUN_ID (the trainer resumes from the run's
checkpoints; docs/runs.md). An ID is a jobkit id (or a unique prefix), a scheduler id, or a
sweep's id: its tasks that ended without succeeding (one line names the others, left as they
are). Exit 1 (one line each) for a job still running or one that succeeded, and for every
retry but one of the same attempt run at once (manager/attempts.py retry_once); the other
jobs named are still retried.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from jobkit.core.errors import JobkitError, UsageError
from jobkit.core.states import State
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store

if TYPE_CHECKING:
    from jobkit.manager.attempts import Resubmission


@click.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--last", is_flag=True, help="The last submission (a whole sweep too).")
@click.option("--json", "as_json", is_flag=True, help="Print the new attempts as JSON.")
def retry(ids: tuple[str, ...], last: bool, as_json: bool) -> int:
    """Resubmit failed, cancelled or timed-out jobs (or sweep tasks) as their runs' next
    attempts: same run folder, same JOBKIT_RUN_ID, the same spec (a sweep task alone).

    An ID names any attempt of a run (the newest one is retried), or a sweep: its tasks that
    ended without succeeding.
    """
    from jobkit.manager.refresh import refresh

    if not ids and not last:
        raise UsageError("give one or more job IDs, or --last")
    code = 0
    done: list[dict[str, object]] = []
    with Store() as store:
        named = _named_runs(store, ids, last)
        latest = refresh(store, [store.attempts(r.run_key)[-1] for r, _ in named]).records
        picked, notes = _worth_retrying(list(zip(latest, [s for _, s in named], strict=True)))
        single = len(named) == 1 and named[0][1] is None and len(ids) + int(last) == 1
        for note in notes:
            click.echo(f"jobkit: {note}", err=True)
        for record in picked:
            try:
                resubmitted = _retry_one(store, record)
            except JobkitError as err:
                if single:
                    raise
                click.echo(f"jobkit: {err.show()}", err=True)
                code = 1
                continue
            done.append(resubmitted.to_dict())
            if not as_json:
                click.echo(resubmitted.line())
            from jobkit.chain.relink import relink_after  # a chain's stage: docs/chains.md

            for line in relink_after(store, resubmitted.previous, resubmitted.record):
                click.echo(f"jobkit: {line}", err=True)
    if as_json and done:
        click.echo(json.dumps(done[0] if single else done, indent=2))
    return code if done else 1


def _retry_one(store: Store, latest: JobRecord) -> Resubmission:
    """The run of `latest` (its newest attempt, refreshed) submitted again; JobkitError with
    one line when it cannot be (running, succeeded, retried already)."""
    from jobkit.manager.attempts import Resubmission, already_retried, has_ended, retry_once

    attempts = store.attempts(latest.run_key)
    label = f"{latest.jobkit_id} ({latest.scheduler_id or '-'})"
    if latest.state == State.SUCCEEDED.value:
        raise JobkitError(f"{label} succeeded: nothing to retry")
    if not has_ended(latest) and len(attempts) > 1:
        done_before = already_retried(store, attempts[-2], wait_s=0)
        raise JobkitError(f"{done_before}; retry takes a job that ended")
    if not has_ended(latest):
        raise JobkitError(
            f"{label} is {latest.state}: retry takes a job that ended"
            " (`jobkit cancel` it first to start it again)"
        )
    why = f"ended {latest.state}"
    new = retry_once(store, latest, why=f"{why} (jobkit retry)")
    return Resubmission(latest, new, why)


def _named_runs(store: Store, ids: Sequence[str], last: bool) -> list[tuple[JobRecord, str | None]]:
    """The runs named, once each, with the sweep id that named them (None: named itself)."""
    from jobkit.registry.ids import resolve_jobs, with_last
    from jobkit.registry.selection import named_sweeps, newest_attempts

    texts = with_last(store, ids, last)
    sweeps, _ = named_sweeps(store, texts)
    named: list[tuple[JobRecord, str | None]] = []
    seen: set[str] = set()
    for text in texts:
        sweep_id = text.strip() if text.strip() in sweeps else None
        found = newest_attempts(sweeps[sweep_id]) if sweep_id else resolve_jobs(store, [text])
        for record in found:
            if record.run_key not in seen:
                seen.add(record.run_key)
                named.append((record, sweep_id))
    return named


def _worth_retrying(
    latest: Sequence[tuple[JobRecord, str | None]],
) -> tuple[list[JobRecord], list[str]]:
    """The newest attempts to retry: each named job (refused one by one when it cannot be),
    a sweep's tasks only when they ended without succeeding; one line per sweep for the
    tasks left as they are."""
    from jobkit.manager.attempts import has_ended

    picked: list[JobRecord] = []
    left: dict[str, list[JobRecord]] = {}
    for record, sweep_id in latest:
        if sweep_id is None or (has_ended(record) and record.state != State.SUCCEEDED.value):
            picked.append(record)
        else:
            left.setdefault(sweep_id, []).append(record)
    notes = [f"sweep {sweep}: not retried: {_counts(rows)}" for sweep, rows in left.items()]
    return picked, notes


def _counts(records: Sequence[JobRecord]) -> str:
    """`2 SUCCEEDED, 1 RUNNING` of these records' states."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.state] = counts.get(record.state, 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
