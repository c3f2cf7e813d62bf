"""Keeping the registry in step with the schedulers: batched refresh and waiting for a job.

    result = refresh(store, records)   # one poll per backend, whatever the number of jobs
    final = wait_for(store, jobkit_id, on_change=show, on_failure=warn)

A backend that cannot answer changes no job's state: its error and the age of the states
shown come back in `result.failures`, for the caller to warn about.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from jobkit.backends.base import Observation
from jobkit.backends.registry import BackendUnavailable, get_backend
from jobkit.core import lifecycle
from jobkit.core.conventions import EXIT_CODE_FILE
from jobkit.core.errors import JobkitError, SchedulerError
from jobkit.core.lifecycle import (
    FINAL_EXIT_WAIT_S,
    MISSING_GRACE_S,
    MISSING_REASON,
    UNKNOWN_WAIT_S,
    VANISHED_GRACE_S,
    State,
)
from jobkit.core.run_files import read_failure_note
from jobkit.core.units import format_age
from jobkit.registry.store import JobRecord, Store

__all__ = [
    "FINAL_EXIT_WAIT_S",
    "MISSING_GRACE_S",
    "UNKNOWN_WAIT_S",
    "VANISHED_GRACE_S",
    "BackendFailure",
    "RefreshResult",
    "Waiter",
    "exit_status_for",
    "format_age",
    "refresh",
    "wait_for",
    "wait_settled",
]


@dataclass(frozen=True)
class BackendFailure:
    """A backend whose query failed during a refresh."""

    backend: str
    error: JobkitError
    """A SchedulerError (the query failed) or BackendUnavailable (cannot even ask)."""
    oldest_observation: float | None
    """When the states now shown for its jobs were last observed (None: never)."""
    jobkit_ids: list[str] = field(default_factory=list)

    def warning(self, now: float | None = None) -> str:
        """One line for stderr: what failed and how old the shown states are."""
        at = time.time() if now is None else now
        argv = getattr(self.error, "argv", None)
        cmd = argv[0] if argv else f"backend {self.backend}"
        why = " ".join(self.error.show().split())
        if self.oldest_observation is None:
            age = "no state was ever observed for its jobs"
        else:
            age = f"showing states from {format_age(at - self.oldest_observation)} ago"
        return f"warning: {cmd} failed ({why}); {age}"


@dataclass(frozen=True)
class RefreshResult:
    """The records after a refresh (same order as given) and the backends that failed."""

    records: list[JobRecord]
    failures: list[BackendFailure]
    polled: int
    """How many jobs were asked about."""


def refresh(
    store: Store, records: Sequence[JobRecord], *, now: float | None = None
) -> RefreshResult:
    """Ask each backend once about the given jobs that need it and record the answers.

    A non-final job the scheduler no longer knows (MISSING_GRACE_S after submission, or
    VANISHED_GRACE_S after the scheduler last reported it) becomes UNKNOWN with a reason;
    one that already ended keeps its state, even when the backend now answers UNKNOWN.
    """
    at = time.time() if now is None else now
    groups: dict[str, list[JobRecord]] = defaultdict(list)
    for record in records:
        if record.needs_poll(at):
            groups[record.backend].append(record)
    failures: list[BackendFailure] = []
    observations: dict[str, Observation] = {}
    for backend_name, group in groups.items():
        try:
            backend = get_backend(backend_name)
            answer = backend.poll([r.tracked() for r in group])
        except (SchedulerError, BackendUnavailable) as err:
            seen = [r.observed_at for r in group if r.observed_at is not None]
            failures.append(
                BackendFailure(
                    backend_name, err, min(seen) if seen else None, [r.jobkit_id for r in group]
                )
            )
            continue
        for record in group:
            obs = answer.get(record.scheduler_id or "")
            since = record.submitted_at or record.created_at
            if obs is not None:
                if lifecycle.holds_a_hold(record, obs, backend.accounting_sources):
                    obs = _hold_kept(record, obs)
                if not lifecycle.forgets_a_known_end(record, obs):
                    observations[record.jobkit_id] = _with_failure_note(record, obs)
            elif lifecycle.is_missing(record, since=since, at=at):
                # source: the backend's name (StateSource's docstring)
                observations[record.jobkit_id] = Observation(
                    state=State.UNKNOWN, raw_state="", source=backend_name, reason=MISSING_REASON
                )
    changed = store.record_observations(observations, now=at) if observations else {}
    polled = sum(len(g) for g in groups.values())
    if not polled:
        return RefreshResult(list(records), failures, 0)
    fresh = [r.with_columns(changed[r.jobkit_id]) if r.jobkit_id in changed else r for r in records]
    return RefreshResult(fresh, failures, polled)


def _with_failure_note(record: JobRecord, obs: Observation) -> Observation:
    """A failed job whose script left a `failure` note in its run folder (a missing venv...)
    gets that line as its reason: it says more than the scheduler's state."""
    if obs.state is not State.FAILED or record.is_array:
        return obs
    note = read_failure_note(record.run_dir)
    return replace(obs, reason=note) if note else obs


def wait_settled(record: JobRecord, now: float) -> bool:
    """True once waiting can stop: final, confirmed, and with its exit code (or long enough)."""
    return lifecycle.settled(record, now)


END_LOOK_S = 0.5
"""How often a waiter looks at the job's exit_code file between polls (a stat of one file)."""


@dataclass
class Waiter:
    """Polls one job with backoff and reports each state change; used by `submit --wait`.

    Between polls it looks at the run folder's exit_code file, which the job script writes
    as its last act: when the file appears or changes, it polls at once and from then on
    often again, so a job that ended is seen within about a second, not at the end of a
    backoff of up to `max_interval_s` (docs/logs.md "Waiting for the end").
    """

    store: Store
    jobkit_id: str
    on_change: Callable[[JobRecord], None]
    on_failure: Callable[[BackendFailure], None]
    min_interval_s: float = 0.5
    max_interval_s: float = 10.0
    _interval: float = 0.0
    _next_poll: float = 0.0
    _last: tuple[str, str | None] | None = None
    _unknown_since: float | None = None
    _exit_mark: tuple[int, int, int] | None = None

    def check(self) -> JobRecord:
        """Poll now (if due, or if the exit_code file changed) and return the latest record."""
        record = self.store.get(self.jobkit_id)
        now = time.monotonic()
        mark = _exit_file_mark(record)
        ended = mark is not None and mark != self._exit_mark
        if now < self._next_poll and not ended:
            return record
        self._exit_mark = mark
        result = refresh(self.store, [record])
        record = result.records[0]
        for failure in result.failures:
            self.on_failure(failure)
        key = (record.state, record.raw_state)
        changed = key != self._last
        if changed:
            self._last = key
            self.on_change(record)
        if changed or ended:
            self._interval = self.min_interval_s
        else:
            self._interval = min(
                max(self._interval, self.min_interval_s) * 1.5, self.max_interval_s
            )
        self._next_poll = time.monotonic() + self._interval
        return record

    def done(self) -> bool:
        """Poll if due; True once the job is settled (see wait_settled) or long UNKNOWN."""
        record = self.check()
        if record.state != State.UNKNOWN.value:
            self._unknown_since = None
        elif self._unknown_since is None:
            self._unknown_since = time.monotonic()
        elif time.monotonic() - self._unknown_since >= UNKNOWN_WAIT_S:
            return True
        return wait_settled(record, time.time())

    def sleep_until_due(self) -> None:
        """Sleep until the next poll is due, or the next look at the exit_code file."""
        time.sleep(min(max(self._next_poll - time.monotonic(), 0.0), END_LOOK_S))


def _exit_file_mark(record: JobRecord) -> tuple[int, int, int] | None:
    """The run folder's exit_code file as (inode, size, mtime), or None while there is none
    (an array's folder is a pattern: none)."""
    run_dir = record.run_dir
    if not run_dir or record.is_array:
        return None
    try:
        found = os.stat(os.path.join(run_dir, EXIT_CODE_FILE))
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def wait_for(
    store: Store,
    jobkit_id: str,
    *,
    on_change: Callable[[JobRecord], None],
    on_failure: Callable[[BackendFailure], None],
    timeout_s: float | None = None,
) -> JobRecord:
    """Poll with backoff until the job is settled; returns its final record."""
    waiter = Waiter(store, jobkit_id, on_change, on_failure)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not waiter.done():
        if deadline is not None and time.monotonic() > deadline:
            break
        waiter.sleep_until_due()
    return store.get(jobkit_id)


def exit_status_for(record: JobRecord) -> int:
    """The exit code `submit --wait` ends with: the job's own, 128+signal, or 1.

    SUCCEEDED -> 0. Any other end -> the job's non-zero exit code if it has one, else
    128 + its signal, else 1 (e.g. CANCELLED while queued, TIMEOUT).
    """
    if record.state == State.SUCCEEDED.value:
        return 0
    if record.exit_code:
        return record.exit_code if 0 < record.exit_code < 256 else 1
    if record.signal:
        return 128 + record.signal
    return 1


def _hold_kept(record: JobRecord, obs: Observation) -> Observation:
    """An accounting answer of a HELD job with the hold kept (lifecycle.holds_a_hold): the
    queue's own words and reason stay; sacct's 0:0 of a job that has not run is no exit."""
    return replace(
        obs,
        state=State.HELD,
        raw_state=record.raw_state or obs.raw_state,
        exit_code=None,
        signal=None,
        reason=record.reason,
    )
