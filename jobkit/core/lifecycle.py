"""A tracked job's lifecycle: its states, who said so, the grace periods, and how an
observation changes what is known of a job. Pure (stdlib only, no SQLite): the registry
stores what these functions decide, `refresh` asks them what to poll and when to give up.

    new = apply_observation(job, obs, now)   # None: ignore the observation
    if new is not None and is_history_change(job, new): ...add a history line
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Protocol, TypeVar

from jobkit.core.states import FINAL_STATES, State

__all__ = [
    "CANCEL_GRACE_S",
    "CANCEL_REASON",
    "EXIT_CODE_GRACE_S",
    "FINAL_EXIT_WAIT_S",
    "FINAL_STATES",
    "MISSING_GRACE_S",
    "MISSING_REASON",
    "OBSERVED_FIELDS",
    "SUBMITTING",
    "UNKNOWN_WAIT_S",
    "VANISHED_GRACE_S",
    "JobProgress",
    "Observed",
    "Progress",
    "Source",
    "State",
    "StateSource",
    "apply_observation",
    "cancelled",
    "forgets_a_known_end",
    "is_final",
    "is_history_change",
    "is_missing",
    "needs_poll",
    "settled",
    "source_of",
]

SUBMITTING = "SUBMITTING"
"""Registry-only state: intent recorded, the scheduler's answer not yet."""

CANCEL_GRACE_S = 60.0
"""After `jobkit cancel`, a non-final observation is ignored for this long."""
EXIT_CODE_GRACE_S = 600.0
"""A final job without an exit code is polled again for this long (accounting lag)."""
MISSING_GRACE_S = 60.0
"""A submitted job the scheduler does not know is left alone this long (it may lag)."""
VANISHED_GRACE_S = 300.0
"""A job the scheduler did report, then neither its queue nor its accounting knows, keeps its
last state this long after that report (accounting lags, e.g. after slurmdbd restarts)."""
FINAL_EXIT_WAIT_S = 15.0
"""`wait_for` waits this long past a final state for a late exit code (accounting lag)."""
UNKNOWN_WAIT_S = 60.0
"""`wait_for` gives up on a job that has stayed UNKNOWN this long."""
MISSING_REASON = "the scheduler no longer knows this job"
"""The reason of the UNKNOWN a missing or vanished job becomes."""
CANCEL_REASON = "cancelled by jobkit"
"""The reason `jobkit cancel` records (until the scheduler's answer replaces it)."""


class StateSource(str, Enum):
    """Who said a job's state: `state_source` in the registry (the value is the stored text).

    A source outside this enum is the backend's own word (Observation.source: the query that
    answered), or a backend's name: the backend no longer reported the job, and `refresh`
    called it UNKNOWN (see `is_missing`). Which of a backend's sources are accounting is the
    backend's fact (Backend.accounting_sources).
    """

    JOBKIT = "jobkit"
    """jobkit itself: intent recorded, submission refused or lost, fate unknown."""
    SUBMIT = "submit"
    """The scheduler's reply to the submit command."""
    ADOPTED = "adopted"
    """A lost submission found again by its token or script (reconciliation)."""
    CANCEL = "cancel"
    """`jobkit cancel`, not yet confirmed by the scheduler."""
    PIDFILE = "pidfile"
    """A launcher's process (alive, vanished, elsewhere)."""
    EXIT_FILE = "exit-file"
    """The run folder's `exit_code` file."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec)


Source = StateSource | str
"""A state source as stored: a StateSource, or a backend's name (see StateSource)."""

_T = TypeVar("_T")
_SOURCES = {member.value: member for member in StateSource}
JOBKIT_SOURCES = frozenset(
    {StateSource.JOBKIT, StateSource.SUBMIT, StateSource.ADOPTED, StateSource.CANCEL}
)
"""Sources that are jobkit's own, not something a scheduler said."""


def source_of(text: str | None) -> Source | None:
    """The stored text as a StateSource where it is one (a backend's name stays text)."""
    if text is None:
        return None
    return _SOURCES.get(text, text)


def is_final(state: str) -> bool:
    """True once a job in this state (a State value or SUBMITTING) will not run again."""
    return state != SUBMITTING and State(state) in FINAL_STATES


class JobProgress(Protocol):
    """What is known of a job's run (a JobRecord, or a Progress)."""

    @property
    def state(self) -> str: ...
    @property
    def raw_state(self) -> str | None: ...
    @property
    def state_source(self) -> Source | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def observed_at(self) -> float | None: ...
    @property
    def final_at(self) -> float | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def signal(self) -> int | None: ...
    @property
    def requeues(self) -> int: ...
    @property
    def nodes(self) -> str | None: ...
    @property
    def elapsed_s(self) -> float | None: ...
    @property
    def max_rss(self) -> str | None: ...
    @property
    def cpu_time(self) -> str | None: ...


class Observed(Protocol):
    """One observation of a job (backends.base.Observation)."""

    @property
    def state(self) -> State: ...
    @property
    def raw_state(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def signal(self) -> int | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def nodes(self) -> str | None: ...
    @property
    def elapsed_s(self) -> float | None: ...
    @property
    def requeues(self) -> int | None: ...
    @property
    def max_rss(self) -> str | None: ...
    @property
    def cpu_time(self) -> str | None: ...


@dataclass(frozen=True)
class Progress:
    """The values an observation decides (JobRecord's fields of the same names)."""

    state: str
    raw_state: str | None = None
    state_source: Source | None = None
    reason: str | None = None
    observed_at: float | None = None
    final_at: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    requeues: int = 0
    nodes: str | None = None
    elapsed_s: float | None = None
    max_rss: str | None = None
    cpu_time: str | None = None

    def columns(self) -> dict[str, object]:
        """The values by field name (the registry columns they are stored in)."""
        return dict(self.__dict__)


OBSERVED_FIELDS = tuple(f.name for f in fields(Progress))
"""The fields an observation writes, in Progress's order."""


def _known(new: _T | None, old: _T | None) -> _T | None:
    """The new value, or the old one where the scheduler said nothing."""
    return old if new is None else new


def apply_observation(job: JobProgress, obs: Observed, at: float) -> Progress | None:
    """What is known of the job once `obs` (observed at `at`) is taken in; None when the
    observation is to be ignored.

    After `jobkit cancel`, a non-final answer is ignored for CANCEL_GRACE_S (the scheduler
    may lag behind the cancel), and an end reported as FAILED, UNKNOWN or CANCELLED confirms
    CANCELLED (the job died of it); any other end (SUCCEEDED before the cancel reached it)
    stands. A job that goes from RUNNING back to QUEUED or HELD counts one requeue, unless
    the observation carries the scheduler's own count (never lowered). Values the
    scheduler did not give (None) keep what was known (not the elapsed time across a
    requeue); `final_at` is when a final state was first seen, cleared when the job runs
    again (a requeue).
    """
    new_state = obs.state
    if job.state_source == StateSource.CANCEL:
        if obs.state in (State.FAILED, State.UNKNOWN, State.CANCELLED):
            new_state = State.CANCELLED
        elif not obs.state.is_final and at - (job.observed_at or at) < CANCEL_GRACE_S:
            return None
    requeues = job.requeues
    if obs.requeues is not None:
        requeues = max(requeues, obs.requeues)
    elif job.state == State.RUNNING.value and obs.state in (State.QUEUED, State.HELD):
        requeues += 1
    # A requeue starts the scheduler's clock again: the ended run's time is not this run's
    # (core/earlier_runs.py keeps it).
    elapsed_s = obs.elapsed_s if requeues > job.requeues else _known(obs.elapsed_s, job.elapsed_s)
    final_at = None
    if new_state.is_final:
        final_at = job.final_at or at
    return Progress(
        state=new_state.value,
        raw_state=obs.raw_state,
        state_source=source_of(obs.source),
        reason=obs.reason,
        observed_at=at,
        final_at=final_at,
        exit_code=_known(obs.exit_code, job.exit_code),
        signal=_known(obs.signal, job.signal),
        requeues=requeues,
        nodes=_known(obs.nodes, job.nodes),
        elapsed_s=elapsed_s,
        max_rss=_known(obs.max_rss, job.max_rss),
        cpu_time=_known(obs.cpu_time, job.cpu_time),
    )


def holds_a_hold(job: JobProgress, obs: Observed, accounting: frozenset[str]) -> bool:
    """A HELD job that accounting (a source in `accounting`: the backend's
    Backend.accounting_sources) reports as just waiting (QUEUED): accounting does not record
    holds (sacct: PENDING, reason None), so the queue's answer was missing (an empty squeue),
    not a release. The caller keeps the job HELD until the queue or an end says otherwise."""
    return job.state == State.HELD.value and obs.state is State.QUEUED and obs.source in accounting


def cancelled(at: float) -> Progress:
    """What `jobkit cancel` records at `at` (its raw state and known values kept): CANCELLED,
    source `cancel`, until the scheduler confirms it (apply_observation)."""
    return Progress(
        State.CANCELLED.value,
        state_source=StateSource.CANCEL,
        reason=CANCEL_REASON,
        observed_at=at,
        final_at=at,
    )


def is_history_change(old: JobProgress, new: JobProgress) -> bool:
    """True when the state or the raw state changed: a line in the job's history."""
    return new.state != old.state or new.raw_state != old.raw_state


def needs_poll(job: JobProgress, *, submitted: bool, now: float) -> bool:
    """Whether a scheduler should be asked about the job again: it was submitted (has a
    scheduler id) and is not final, or its cancel is unconfirmed, or it ended without an
    exit code less than EXIT_CODE_GRACE_S ago."""
    if job.state == SUBMITTING or not submitted:
        return False
    if not is_final(job.state):
        return True
    if job.state_source == StateSource.CANCEL:
        return True
    return job.exit_code is None and (now - (job.final_at or now)) < EXIT_CODE_GRACE_S


def settled(job: JobProgress, now: float) -> bool:
    """True once waiting for the job can stop: final, not an unconfirmed cancel, and with its
    exit code (or FINAL_EXIT_WAIT_S past its end without one)."""
    if not is_final(job.state) or job.state_source == StateSource.CANCEL:
        return False
    if job.exit_code is not None:
        return True
    return now - (job.final_at or now) >= FINAL_EXIT_WAIT_S


def forgets_a_known_end(job: JobProgress, obs: Observed) -> bool:
    """An UNKNOWN answer about a job whose end was already observed (FAILED seen in squeue,
    then the job left it without accounting) would lose what is known: to be ignored."""
    return (
        obs.state is State.UNKNOWN
        and is_final(job.state)
        and job.state_source != StateSource.CANCEL
    )


def is_missing(job: JobProgress, *, since: float, at: float) -> bool:
    """Whether a job its scheduler did not report is to become UNKNOWN (MISSING_REASON).

    `since` is when it was submitted (or recorded). Final and UNKNOWN jobs never are. A job
    no scheduler ever reported (its state is jobkit's own) after MISSING_GRACE_S from
    `since`; one a scheduler did report, VANISHED_GRACE_S after that report.
    """
    if is_final(job.state) or job.state == State.UNKNOWN.value:
        return False
    if job.state_source is None or job.state_source in JOBKIT_SOURCES:
        return at - since >= MISSING_GRACE_S
    last_seen = job.observed_at or since
    return at - last_seen >= VANISHED_GRACE_S
