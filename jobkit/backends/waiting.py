"""What `Backend.explain_waiting` answers (`jobkit why`): why a job waits, when it may start,
and what happened to it so far. Plain records, shared by every backend; the scheduler's own
words are translated by each backend (Slurm: backends/slurm/reasons.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobkit.core.states import State

ESTIMATE_LABEL = "scheduler's estimate, may move"
"""How every start time a scheduler predicts is labelled: it is a plan, not a promise."""
UNKNOWN_REASON_HINT = "(no explanation known; see `man squeue` JOB REASON CODES)"
WAITING_STATES = frozenset({State.QUEUED, State.HELD})
"""States in which a job waits for the scheduler to start it."""


@dataclass(frozen=True)
class Explanation:
    """One reason a scheduler gave, in plain words, with what fixes it."""

    code: str
    """The scheduler's words, verbatim (`Resources`, `ReqNodeNotAvail, UnavailableNodes:n1`)."""
    meaning: str
    fix: str
    """A spec key, a command, or "wait"."""
    never: bool = False
    """True when the job will never start as it is (it must be changed or cancelled)."""
    known: bool = True
    """False for a reason jobkit has no explanation of (shown verbatim)."""


@dataclass(frozen=True)
class WaitReason:
    """Why one job (or a group of an array's tasks) waits, and the scheduler's start estimate."""

    explanation: Explanation
    task: str | None = None
    """The array task(s) it is about (`3`, `[4-9]`); None for a whole job."""
    start_estimate: float | None = None
    """Epoch seconds the scheduler plans to start it (ESTIMATE_LABEL); None: no estimate."""
    planned_nodes: str | None = None


@dataclass(frozen=True)
class Event:
    """One line of a job's timeline: submitted, eligible, started, ended, requeued."""

    at: float
    what: str
    detail: str = ""


@dataclass(frozen=True)
class WaitInfo:
    """A backend's answer about one job for `jobkit why`."""

    state: State | None = None
    """The state the scheduler reports now; None when it does not know the job (or cannot
    say: the registry's state is shown then)."""
    raw_state: str | None = None
    reasons: tuple[WaitReason, ...] = ()
    timeline: tuple[Event, ...] = ()
    notes: tuple[str, ...] = ()
    """What the user should know about this answer (e.g. a query that is switched off)."""
    no_estimate: str | None = None
    never_queues: bool = False
    """True for a launcher that starts jobs at once (local, ssh): never waiting."""
    """Why there is never a start estimate (a scheduler that makes none); None: it may."""

    @property
    def waiting(self) -> bool:
        """True while the scheduler has not started the job (queued or held)."""
        return self.state in WAITING_STATES


def unknown_reason(code: str) -> Explanation:
    """A reason jobkit cannot explain: shown verbatim, with where to look."""
    return Explanation(code, f"{code} {UNKNOWN_REASON_HINT}", "", known=False)


def one_line_why(
    backend: str, state: str, reason: str | None, scheduler_id: str | None
) -> str | None:
    """The one-line "why" of a waiting job from its recorded reason (no scheduler call):
    `Dependency: it waits for ... (fix: ...)`; None when the job is not waiting or the
    backend cannot translate its reasons."""
    from jobkit.backends.registry import BackendUnavailable, backend_class
    from jobkit.core.errors import UsageError

    if not reason or state not in {s.value for s in WAITING_STATES}:
        return None
    try:
        found = backend_class(backend).describe_reason(reason, scheduler_id or "ID")
    except (BackendUnavailable, UsageError):
        return None
    if found is None:
        return None
    line = found.meaning
    if found.never:
        line = f"WILL NEVER START as it is: {line}"
    return f"{line} (fix: {found.fix})" if found.fix else line


def parse_ctime(text: object) -> float | None:
    """Epoch seconds of a C `ctime` date as PBS and Grid Engine print them (`Mon May 20
    11:47:02 2024`, local time) or of a number of epoch seconds; None otherwise."""
    import time

    words = " ".join(str(text or "").split())
    if words.isdigit():
        return float(words)
    try:
        return time.mktime(time.strptime(words, "%a %b %d %H:%M:%S %Y"))
    except ValueError:
        return None
