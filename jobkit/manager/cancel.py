"""Cancelling jobs: one cancel command per backend for all the jobs named (`jobkit cancel`,
`Job.cancel()` and `Sweep.cancel()` of jobkit.api run this one function)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from jobkit.core.errors import JobkitError, SchedulerError
from jobkit.core.lifecycle import SUBMITTING, StateSource
from jobkit.registry.store import JobRecord, Store


@dataclass
class CancelOutcome:
    """What `cancel_jobs` did: the rows it cancelled, those it left alone (with why), the
    sweeps named, and the cancel commands that failed."""

    cancelled: list[JobRecord] = field(default_factory=list)
    skipped: list[tuple[JobRecord, str]] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)
    errors: list[JobkitError] = field(default_factory=list)
    pending: bool = False
    """A job was still being submitted (nothing to cancel yet: try again)."""

    def sweeps_already_ended(self) -> list[str]:
        """The sweeps named none of whose tasks needed cancelling."""
        return [s for s in self.sweeps if not any(r.sweep_id == s for r in self.cancelled)]


def cancel_jobs(store: Store, ids: Sequence[str], *, last: bool = False) -> CancelOutcome:
    """Cancel the jobs named (a sweep's id: its unfinished tasks' newest attempts; `last`:
    the last submission). Jobs that already ended are left alone; a failed cancel command is
    returned in `errors`, not raised. The registry records CANCELLED at once."""
    from jobkit.backends.registry import BackendUnavailable, get_backend
    from jobkit.manager.reconcile import reconcile_submissions
    from jobkit.manager.refresh import refresh
    from jobkit.registry.ids import resolve_jobs, with_last
    from jobkit.registry.selection import named_sweeps, newest_attempts

    reconcile_submissions(store)
    sweeps, job_ids = named_sweeps(store, with_last(store, ids, last))
    records = resolve_jobs(store, job_ids)
    named = {r.jobkit_id for r in records}
    tasks = [r for rows in sweeps.values() for r in newest_attempts(rows)]
    records += [r for r in tasks if r.jobkit_id not in named]
    records = refresh(store, records).records
    in_sweeps = {r.jobkit_id for r in tasks} - named
    outcome = CancelOutcome(sweeps=list(sweeps))
    groups: dict[str, list[JobRecord]] = defaultdict(list)
    for record in records:
        if record.state == SUBMITTING or record.scheduler_id is None:
            outcome.pending = True
            outcome.skipped.append((record, "is still being submitted; try again in a moment"))
        elif record.is_final and record.jobkit_id in in_sweeps:
            continue  # a sweep's ended task: nothing to say
        elif record.is_final and record.state_source != StateSource.CANCEL:
            outcome.skipped.append((record, f"already ended ({record.state}); nothing to cancel"))
        else:
            groups[record.backend].append(record)
    for backend_name, group in groups.items():
        try:
            get_backend(backend_name).cancel([r.tracked() for r in group])
        except (SchedulerError, BackendUnavailable) as err:
            outcome.errors.append(err)
            continue
        store.mark_cancelled([r.jobkit_id for r in group])
        outcome.cancelled.extend(store.get(r.jobkit_id) for r in group)
    return outcome
