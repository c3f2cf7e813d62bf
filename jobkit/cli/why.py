"""`jobkit why ID... [--json]`: why a job waits, what fixes it, when it may start, and its
timeline (submitted, eligible, started, ended, each requeue).

One query per backend for all the jobs asked about (Slurm: one squeue and one sacct). The
registry is not changed: `jobkit status` records states. Exit codes: 0; 2 for an unknown
or ambiguous id; 3 when a scheduler query failed (what is known is still shown).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Sequence

import click

from jobkit.backends.waiting import WaitInfo
from jobkit.core.display import printable_lines
from jobkit.core.errors import JobkitError, UsageError
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store

EXIT_STALE = 3


@click.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--last", is_flag=True, help="The newest job.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def why(ids: tuple[str, ...], last: bool, as_json: bool) -> int:
    """Why each job waits, the fix, the scheduler's start estimate and the job's timeline.

    An ID is a jobkit id (or a unique prefix of one), the scheduler's id, or a sweep's id
    (each of its tasks; --last: the last submission, a whole sweep too). A job that is not
    waiting is said to be so, with its timeline. See docs/why.md.
    """
    from jobkit.cli.whyview import JobWhy, render_why, why_dict
    from jobkit.registry.selection import named_jobs

    if not ids and not last:
        raise UsageError("give one or more job IDs (or --last)")
    with Store() as store:
        records = named_jobs(store, ids, last)
    infos, failed = explain(records)
    jobs = [JobWhy(r, infos.get(r.jobkit_id, WaitInfo())) for r in records]
    if as_json:
        click.echo(json.dumps([why_dict(job) for job in jobs], indent=2))
    else:
        now = time.time()
        click.echo(printable_lines("\n\n".join(render_why(job, now) for job in jobs)))
    return EXIT_STALE if failed else 0


def explain(records: Sequence[JobRecord]) -> tuple[dict[str, WaitInfo], bool]:
    """WaitInfo by jobkit id: one `explain_waiting` call per backend. A backend that cannot
    answer is warned about on stderr (True is returned) and its jobs get a note."""
    from jobkit.backends.registry import get_backend

    groups: dict[str, list[JobRecord]] = defaultdict(list)
    infos: dict[str, WaitInfo] = {}
    for record in records:
        if record.scheduler_id:
            groups[record.backend].append(record)
        else:
            infos[record.jobkit_id] = WaitInfo(notes=("not submitted yet (still submitting)",))
    failed = False
    for name, group in groups.items():
        try:
            answers = get_backend(name).explain_waiting([r.tracked() for r in group])
        except JobkitError as err:
            click.echo(
                f"jobkit: warning: {name}: could not ask the scheduler: {err.show()}", err=True
            )
            failed = True
            note = "the scheduler could not be asked (see the warning); the state is jobkit's last"
            answers = {r.scheduler_id or "": WaitInfo(notes=(note,)) for r in group}
        for record in group:
            infos[record.jobkit_id] = answers.get(record.scheduler_id or "", WaitInfo())
    return infos, failed
