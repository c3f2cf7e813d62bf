"""`jobkit retry ID`: submit an ended job (or sweep task) again as the next attempt of its run.

The new job reuses the run's folder and JOBKIT_RUN_ID (the trainer resumes from the run's
checkpoints; docs/runs.md). Exit 1 (one line) for a job still running or one that succeeded,
and for every retry but one of the same attempt run at once (manager/attempts.py retry_once).
"""

from __future__ import annotations

import json

import click

from jobkit.core.errors import JobkitError
from jobkit.core.states import State
from jobkit.registry.store import Store


@click.command()
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the new attempt as JSON.")
def retry(job_id: str, as_json: bool) -> int:
    """Resubmit a failed, cancelled or timed-out job (or sweep task) as its run's next
    attempt: same run folder, same JOBKIT_RUN_ID, the same spec (a sweep task alone).

    ID names any attempt of the run; the newest one is retried.
    """
    from jobkit.manager.attempts import Resubmission, already_retried, has_ended, retry_once
    from jobkit.manager.refresh import refresh
    from jobkit.registry.ids import resolve_job

    with Store() as store:
        named = resolve_job(store, job_id)
        attempts = store.attempts(named.run_key)
        latest = refresh(store, [attempts[-1]]).records[0]
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
        done = Resubmission(latest, new, why)
        click.echo(json.dumps(done.to_dict(), indent=2) if as_json else done.line())
    return 0
