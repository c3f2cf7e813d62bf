"""`jobkit doctor ID... [--json]`: why jobs failed, read from every rank's and node's log.

A failed job: the failure class, the first failing rank and host, the lines that show it and
the fix (docs/troubleshooting.md). A running job: the errors in its logs so far and the hang
section (stalled ranks and their stacks, jobkit/hang). A job that succeeded or has not run
yet is said to be so. Several ids are diagnosed in order; a sweep's id (or --last after a
sweep) stands for its failed tasks, else its running ones, with a line saying which. The
states are refreshed first (one scheduler query per backend). Exit codes: 0 (whatever the
jobs did); 2 for an unknown or ambiguous id; 3 when a scheduler query failed (the last known
state is used).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import click

from jobkit.core.display import printable_lines
from jobkit.core.errors import UsageError
from jobkit.core.lifecycle import State
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store

EXIT_STALE = 3


@click.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--last", is_flag=True, help="The last submission (a whole sweep too).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def doctor(ids: tuple[str, ...], last: bool, as_json: bool) -> int:
    """Why a job failed: the failure class, the first failing rank and host, the log lines
    that show it, and the spec key to change. For a running job: errors so far and stalled
    ranks. Several IDs are diagnosed in turn; a sweep's ID: its failed tasks (else its running
    ones). See docs/troubleshooting.md.
    """
    from jobkit.doctor.cache import STATUS_STATES, remember
    from jobkit.doctor.classify import diagnose_record
    from jobkit.doctor.diagnosis import Diagnosis
    from jobkit.manager.refresh import refresh

    if not ids and not last:
        raise UsageError("give one or more job IDs, or --last")
    code = 0
    now = time.time()
    with Store() as store:
        named, notes = _named(store, ids, last)
        result = refresh(store, [record for record, _ in named], now=now)
        for failure in result.failures:
            click.echo(f"jobkit: {failure.warning(now)}", err=True)
            code = EXIT_STALE
        found: list[tuple[Diagnosis | None, str | None]] = []
        for record, (_, note) in zip(result.records, named, strict=True):
            if note is not None:
                found.append((None, note))
            here = _files_here(record)
            diagnosis = diagnose_record(here)
            if record.is_final and record.state in STATUS_STATES:
                remember(store, record, diagnosis)
            if diagnosis.outcome == "running":  # heartbeats read here; stacks taken there
                _add_hang_section(diagnosis, here, now)
            found.append((diagnosis, None))
    found += [(None, note) for note in notes]
    single = len(ids) + int(last) == 1 and len(named) == 1 and named[0][1] is None and not notes
    if as_json:
        data: list[dict[str, Any]] = [
            d.to_dict() if d is not None else {"note": note} for d, note in found
        ]
        click.echo(json.dumps(data[0] if single else data, indent=2))
    else:
        blocks = ["\n".join(d.lines()) if d is not None else f"{note}" for d, note in found]
        click.echo(printable_lines("\n\n".join(blocks)))
    return code


def _files_here(record: JobRecord) -> JobRecord:
    """A job on a cluster (`--on`): its logs copied here first (docs/remote.md)."""
    if "@" not in record.backend:
        return record
    from jobkit.remote.mirror import local_view

    return local_view(record)


FAILED_STATES = frozenset(
    {
        State.FAILED.value,
        State.TIMEOUT.value,
        State.NODE_FAIL.value,
        State.OUT_OF_MEMORY.value,
        State.PREEMPTED.value,
    }
)
"""A sweep's tasks that doctor diagnoses first."""


def _named(
    store: Store, ids: Sequence[str], last: bool
) -> tuple[list[tuple[JobRecord, str | None]], list[str]]:
    """The jobs to diagnose, in order, once each, the first of a sweep's with the line that
    says which of its tasks these are; and lines for sweeps with nothing to diagnose."""
    from jobkit.registry.ids import resolve_jobs, with_last
    from jobkit.registry.selection import named_sweeps, newest_attempts

    texts = with_last(store, ids, last)
    sweeps, _ = named_sweeps(store, texts)
    named: list[tuple[JobRecord, str | None]] = []
    notes: list[str] = []
    seen: set[str] = set()
    for text in texts:
        sweep_id = text.strip()
        if sweep_id in sweeps:
            tasks = newest_attempts(sweeps[sweep_id])
            picked, note = _sweep_tasks(sweep_id, tasks)
            picked = [r for r in picked if r.jobkit_id not in seen]
            if not picked:
                notes.append(note)
            named += [(r, note if i == 0 else None) for i, r in enumerate(picked)]
        else:
            picked = [r for r in resolve_jobs(store, [text]) if r.jobkit_id not in seen]
            named += [(r, None) for r in picked]
        seen.update(r.jobkit_id for r in picked)
    return named, notes


def _sweep_tasks(sweep_id: str, tasks: Sequence[JobRecord]) -> tuple[list[JobRecord], str]:
    """A sweep's tasks worth a diagnosis (failed ones, else running ones) and the line that
    says so, with the count of each state."""
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.state] = counts.get(task.state, 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    head = f"sweep {sweep_id}: {len(tasks)} tasks ({states})"
    failed = [t for t in tasks if t.state in FAILED_STATES]
    if failed:
        return failed, f"{head}: each failed task diagnosed"
    running = [t for t in tasks if t.state == State.RUNNING.value]
    if running:
        return running, f"{head}: no task failed; each running task diagnosed"
    return [], f"{head}: no task failed or runs, nothing to diagnose"


def _add_hang_section(diagnosis: object, record: object, now: float) -> None:
    """The hang helper's section (progress, stalled ranks, their stacks) of a running job."""
    from jobkit.doctor.diagnosis import Diagnosis
    from jobkit.hang.report import hang_section

    assert isinstance(diagnosis, Diagnosis) and isinstance(record, JobRecord)
    report = hang_section(record, now, collect_stacks=True)
    if report is not None:
        diagnosis.add_hang(report)
