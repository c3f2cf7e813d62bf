"""`jobkit doctor ID [--json]`: why a job failed, read from every rank's and node's log.

A failed job: the failure class, the first failing rank and host, the lines that show it and
the fix (docs/troubleshooting.md). A running job: the errors in its logs so far and the hang
section (stalled ranks and their stacks, jobkit/hang). A job that succeeded or has not run
yet is said to be so. The job's state is refreshed first (one scheduler query). Exit codes:
0 (whatever the job did); 2 for an unknown or ambiguous id; 3 when the scheduler query failed
(the last known state is used).
"""

from __future__ import annotations

import json
import time

import click

from jobkit.core.errors import UsageError
from jobkit.registry.store import Store

EXIT_STALE = 3


@click.command()
@click.argument("job_id", required=False, metavar="ID")
@click.option("--last", is_flag=True, help="The newest job.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def doctor(job_id: str | None, last: bool, as_json: bool) -> int:
    """Why a job failed: the failure class, the first failing rank and host, the log lines
    that show it, and the spec key to change. For a running job: errors so far and stalled
    ranks. See docs/troubleshooting.md.
    """
    from jobkit.doctor.cache import STATUS_STATES, remember
    from jobkit.doctor.classify import diagnose_record
    from jobkit.manager.refresh import refresh
    from jobkit.registry.ids import resolve_jobs

    if (job_id is None) == (not last):
        raise UsageError("give a job ID or --last (not both)")
    code = 0
    with Store() as store:
        record = resolve_jobs(store, [job_id] if job_id else [], last=last)[0]
        now = time.time()
        result = refresh(store, [record], now=now)
        for failure in result.failures:
            click.echo(f"jobkit: {failure.warning(now)}", err=True)
            code = EXIT_STALE
        record = result.records[0]
        diagnosis = diagnose_record(record)
        if record.is_final and record.state in STATUS_STATES:
            remember(store, record, diagnosis)
    if diagnosis.outcome == "running":
        _add_hang_section(diagnosis, record, now)
    if as_json:
        click.echo(json.dumps(diagnosis.to_dict(), indent=2))
    else:
        click.echo("\n".join(diagnosis.lines()))
    return code


def _add_hang_section(diagnosis: object, record: object, now: float) -> None:
    """The hang helper's section (progress, stalled ranks, their stacks) of a running job."""
    from jobkit.doctor.diagnosis import Diagnosis
    from jobkit.hang.report import hang_section
    from jobkit.registry.record import JobRecord

    assert isinstance(diagnosis, Diagnosis) and isinstance(record, JobRecord)
    report = hang_section(record, now, collect_stacks=True)
    if report is not None:
        diagnosis.add_hang(report)
