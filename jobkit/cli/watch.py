"""`jobkit watch [ID]... [--interval S]`: follow runs across their attempts until they end.

Every S seconds one refresh per backend of the runs' latest attempts; a run whose job ended
without being requeued by its scheduler (preempted, NODE_FAIL, a refused requeue) is
resubmitted as its next attempt (docs/runs.md), with one line saying so. Ends when no
followed run is unfinished. Exit 0, or 3 when the last scheduler query failed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import click

from jobkit.core.errors import UsageError
from jobkit.registry.store import JobRecord, Store

EXIT_STALE = 3
DEFAULT_INTERVAL_S = 30.0
FOLLOW_RECENT_S = 86_400.0


def resubmit_ended_runs(
    store: Store, before: Sequence[JobRecord], after: Sequence[JobRecord], *, as_json: bool = False
) -> list[JobRecord]:
    """After a refresh, what manager/followup.py does (bad nodes, broken chains, next
    attempts, re-linked chains), one line on stderr each (a resubmission as JSON on stdout
    with --json); the new attempts' rows."""
    from jobkit.manager.followup import follow_up

    done = follow_up(store, before, after)
    for line in done.notes:
        click.echo(f"jobkit: {line}", err=True)
    for resubmission in done.resubmissions:
        if as_json:
            click.echo(json.dumps({"event": "resubmitted", **resubmission.to_dict()}))
        else:
            click.echo(resubmission.line(), err=True)
    for line in done.later:
        click.echo(f"jobkit: {line}", err=True)
    return [r.record for r in done.resubmissions]


def next_attempt(store: Store, record: JobRecord) -> JobRecord | None:
    """The attempt jobkit submitted after this ended one (None when the run stops here)."""
    new = resubmit_ended_runs(store, [], [record])
    return new[0] if new else None


def _latest(store: Store, run_keys: Sequence[str]) -> list[JobRecord]:
    """Each run's newest attempt."""
    return [store.attempts(key)[-1] for key in run_keys if store.attempts(key)]


def _followed(store: Store, ids: Sequence[str]) -> list[str]:
    """The runs to follow: of the given jobs (a sweep's id: its tasks), or of every
    unfinished tracked job."""
    from jobkit.manager.attempts import has_ended
    from jobkit.registry.selection import named_jobs

    records = (
        named_jobs(store, ids, False) if ids else store.list_jobs(recent_final_s=FOLLOW_RECENT_S)
    )
    keys = list(dict.fromkeys(r.run_key for r in records))
    if ids:
        return keys
    return [r.run_key for r in _latest(store, keys) if not has_ended(r)]


CLAIM_WAIT_S = 300.0
"""How long an ended attempt that another process is resubmitting keeps `watch` waiting for
the next attempt's row (a process killed mid-submission leaves the claim behind)."""


def going_on(record: JobRecord, claimed: dict[str, float]) -> bool:
    """True when the run goes on after this ended attempt: another jobkit process (a
    `status`, a `retry`) claimed it and is submitting the next attempt, whose row is not
    there yet. `claimed` keeps when each claim was first seen; after CLAIM_WAIT_S it no
    longer counts."""
    from jobkit.manager.attempts import CLAIMED

    if record.extra.get("resubmitted_as") != CLAIMED:
        return False
    first = claimed.setdefault(record.jobkit_id, time.monotonic())
    return time.monotonic() - first < CLAIM_WAIT_S


def _event(record: JobRecord) -> str:
    """`jobkit: jkABC (123) attempt 2 RUNNING on n1`."""
    words = [f"jobkit: {record.jobkit_id} ({record.scheduler_id or '-'})"]
    if record.attempt > 1:
        words.append(f"attempt {record.attempt}")
    words.append(record.state)
    if record.nodes and record.state == "RUNNING":
        words.append(f"on {record.nodes}")
    if record.reason and record.state != "RUNNING":
        words.append(f"- {record.reason}")
    return " ".join(words)


@click.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option(
    "--interval",
    type=float,
    default=DEFAULT_INTERVAL_S,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between refreshes.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line per event.")
def watch(ids: tuple[str, ...], interval: float, as_json: bool) -> int:
    """Follow runs (of IDs, or every unfinished job) until none is unfinished.

    A run whose job the scheduler did not requeue (preempted, NODE_FAIL, `scontrol requeue`
    refused) is resubmitted as its next attempt, up to scheduler.max_attempts
    (docs/runs.md). Each state change is one line on stderr. A job's `notify:` events are
    sent from here, each once (docs/notify.md); a broken chain is said once (docs/chains.md).
    """
    from jobkit.cli.progress import ProgressLine
    from jobkit.core.display import printable
    from jobkit.manager.attempts import has_ended
    from jobkit.manager.refresh import refresh
    from jobkit.notify.dispatch import notify_jobs

    if interval <= 0:
        raise UsageError(f"--interval {interval:g}: must be a positive number of seconds")
    code = 0
    with Store() as store:
        runs = _followed(store, ids)
        if not runs:
            click.echo("jobkit: no unfinished run to watch", err=True)
            return 0
        seen: dict[str, tuple[str, str | None]] = {}
        claimed: dict[str, float] = {}
        progress = None if as_json else ProgressLine()
        while True:
            before = _latest(store, runs)
            result = refresh(store, before)
            code = EXIT_STALE if result.failures else 0
            for failure in result.failures:
                click.echo(f"jobkit: {failure.warning()}", err=True)
            resubmit_ended_runs(store, before, result.records, as_json=as_json)
            latest = _latest(store, runs)
            for line in notify_jobs(store, latest):  # once each, whoever sees it first
                click.echo(f"jobkit: {line}", err=True)
            for record in latest:
                key = (record.state, record.scheduler_id)
                if seen.get(record.jobkit_id) != key:
                    seen[record.jobkit_id] = key
                    if as_json:
                        click.echo(json.dumps({"event": "state", **record.to_dict()}))
                    else:
                        if progress is not None:
                            progress.clear()
                        click.echo(printable(_event(record)), err=True)
            if all(has_ended(r) and not going_on(r, claimed) for r in latest):
                if progress is not None:
                    progress.clear()
                return code
            if progress is not None:
                progress.update(latest)  # the running ones' step and ETA (cli/progress.py)
            time.sleep(interval)
