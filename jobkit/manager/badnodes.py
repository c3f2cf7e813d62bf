"""Bad nodes left out (docs/nodes.md): a node that failed a job goes on the user's exclude
list (the registry's `bad_nodes`) for `scheduler.exclude_bad_nodes_for`, and later
submissions of that backend leave it out (Slurm `--exclude`).

    lines = note_bad_nodes(store, before, after)          # after a refresh (`jobkit status`)
    request, facts = leave_out_bad_nodes(store, backend, request)   # before a submission

A node is bad after a NODE_FAIL (every node of the job's node list) or a failed in-job
preflight whose failure line names it (`jobkit preflight: node I (HOST): REASON`). The
decisions are pure functions of registry rows; the functions at the end do the I/O.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from jobkit.backends.registry import known_class
from jobkit.core.states import State
from jobkit.core.units import format_age, parse_period

if TYPE_CHECKING:
    from jobkit.backends.base import Backend, SubmitRequest
    from jobkit.registry.record import JobRecord
    from jobkit.registry.store import BadNode, Store

DEFAULT_HOLD_S = 6 * 3600
"""scheduler.exclude_bad_nodes_for's default (a row recorded before the key existed)."""
PREFLIGHT_FAILED = re.compile(
    r"^jobkit preflight: node \d+ \((?P<host>[^)\s]+)\): (?!ok\b)(?P<why>\S.*)"
)
"""A node's own preflight failure line (train/preflight.py; doctor's preflight_failed)."""
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""What a node name may be (it goes into sbatch's --exclude and qsub's -l)."""
HAND_REASON = "added by hand"
"""The reason of a node put on the list by `jobkit nodes --add` without --reason."""
NOTE_KEY = "bad_nodes"
"""The key of a job's `extra` that holds what its submission left out, and the line shown."""


@dataclass(frozen=True)
class Failure:
    """Nodes a job showed to be bad, and why."""

    backend: str
    cluster: str
    nodes: tuple[str, ...]
    reason: str
    jobkit_id: str
    hold_s: int
    """How long they stay excluded (the job's scheduler.exclude_bad_nodes_for)."""


@dataclass(frozen=True)
class Exclusion:
    """What a submission leaves out, and the one line `jobkit submit` prints about it."""

    nodes: tuple[str, ...] = ()
    note: str | None = None

    def facts(self) -> dict[str, Any]:
        """What is kept in the job's `extra` (empty when nothing was said)."""
        if not self.nodes and not self.note:
            return {}
        return {NOTE_KEY: {"excluded": list(self.nodes), "note": self.note}}


# -- deciding (pure) -----------------------------------------------------------------------


def hold_seconds(spec: Mapping[str, Any]) -> int:
    """A recorded spec's scheduler.exclude_bad_nodes_for in seconds (0: off)."""
    scheduler = spec.get("scheduler")
    value = scheduler.get("exclude_bad_nodes_for") if isinstance(scheduler, Mapping) else None
    if value is None:
        return DEFAULT_HOLD_S
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # the validated spec holds seconds
    try:
        return parse_period(value)
    except ValueError:
        return DEFAULT_HOLD_S


def newly_failed(before: Sequence[JobRecord], after: Sequence[JobRecord]) -> list[JobRecord]:
    """The records (of `after`, in the same order as `before`) that became NODE_FAIL or
    FAILED in this refresh; with no `before`, those of `after` that ended so."""
    watched = (State.NODE_FAIL.value, State.FAILED.value)
    if not before:
        return [record for record in after if record.state in watched]
    return [
        new
        for old, new in zip(before, after, strict=True)
        if new is not old and new.state != old.state and new.state in watched
    ]


def failure_of(record: JobRecord, node_names: Callable[[str], tuple[str, ...]]) -> Failure | None:
    """The bad nodes a NODE_FAIL or a node's preflight failure shows, or None (another end,
    a backend that does not choose nodes, or exclusion switched off)."""
    chooser = known_class(record.backend)
    if chooser is None or not chooser.chooses_nodes:
        return None  # bad nodes are noted only where the scheduler chooses the nodes
    if record.state == State.NODE_FAIL.value:
        nodes = node_names(record.nodes or "")
        reason = "NODE_FAIL"
    else:
        match = PREFLIGHT_FAILED.match(record.reason or "")
        if record.state != State.FAILED.value or match is None:
            return None
        nodes = (match["host"],)
        reason = f"preflight: {match['why'].strip()}"
    nodes = tuple(n for n in dict.fromkeys(nodes) if NODE_NAME.match(n))
    hold = hold_seconds(record.spec)
    if not nodes or hold <= 0:
        return None
    cluster = (record.scheduler_id or "").partition(";")[2]
    return Failure(record.backend, cluster, nodes, reason, record.jobkit_id, hold)


def describe(row: BadNode, now: float) -> str:
    """`n2 (NODE_FAIL of jkabc12 2h ago, until 18:40)` for a bad_nodes row."""
    why = _short(row.reason or HAND_REASON)
    seconds = now - row.added_at
    ago = "just now" if seconds < 60 else f"{format_age(seconds)} ago"
    if row.jobkit_id:
        said = f"{why} of {row.jobkit_id} {ago}"
    elif why == HAND_REASON:
        said = f"{HAND_REASON} {ago}"
    else:
        said = f"{why}: {HAND_REASON} {ago}"
    return f"{row.node} ({said}, until {clock(row.until, now)})"


def clock(at: float, now: float) -> str:
    """`18:40` within a day of now, else `11-27 18:40` (local time)."""
    form = "%H:%M" if abs(at - now) < 86400 else "%m-%d %H:%M"
    return time.strftime(form, time.localtime(at))


def plan_exclusion(
    rows: Sequence[BadNode],
    *,
    backend: str,
    excludes: bool,
    usable: Sequence[str] | None,
    needed: int,
    now: float,
) -> Exclusion:
    """What to leave out of a job needing `needed` nodes, given the backend's active bad-node
    rows and the nodes its partition has (`usable`; None: not known). Nodes not in the
    partition are not named (sbatch refuses an unknown node); a list that would leave fewer
    than `needed` nodes is not used (the job could never start): a warning says so."""
    if not rows:
        return Exclusion()
    if usable is not None:
        rows = [r for r in rows if r.node in usable]
        if not rows:
            return Exclusion()
    named = ", ".join(describe(r, now) for r in rows)
    if not excludes:
        return Exclusion(
            note=f"warning: the {backend} backend cannot leave nodes out; not excluding {named}"
            ": jobkit nodes"
        )
    nodes = tuple(dict.fromkeys(r.node for r in rows))
    if usable is not None:
        left = len(set(usable) - set(nodes))
        if left < needed:
            return Exclusion(
                note=f"warning: not excluding {named}: the job needs {needed} node(s) and only"
                f" {left} of the partition's {len(set(usable))} would be left: jobkit nodes"
            )
    return Exclusion(nodes, f"excluding {named}: jobkit nodes")


def submit_note(record: JobRecord) -> str | None:
    """The line `jobkit submit` prints about the bad nodes its job left out (or could not)."""
    facts = record.extra.get(NOTE_KEY)
    note = facts.get("note") if isinstance(facts, Mapping) else None
    return str(note) if note else None


def _event(reason: str) -> str:
    """`NODE_FAIL`, or `failed preflight` for a `preflight: ...` reason."""
    return "failed preflight" if reason.startswith("preflight:") else reason


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- doing ---------------------------------------------------------------------------------


def note_bad_nodes(
    store: Store,
    before: Sequence[JobRecord],
    after: Sequence[JobRecord],
    *,
    now: float | None = None,
) -> list[str]:
    """Put the nodes of the jobs that failed in this refresh (`before` -> `after`, same order)
    on the exclude list; one line per job for the user. Costs nothing when none failed."""
    failed = newly_failed(before, after)
    if not failed:
        return []
    from jobkit.backends.registry import backend_class
    from jobkit.core.errors import JobkitError

    at = time.time() if now is None else now
    lines: list[str] = []
    for record in failed:
        try:
            names = backend_class(record.backend).node_names
        except JobkitError:  # a backend no longer installed
            continue
        failure = failure_of(record, names)
        if failure is None:
            continue
        until = at + failure.hold_s
        store.add_bad_nodes(
            failure.backend,
            failure.cluster,
            failure.nodes,
            reason=failure.reason,
            jobkit_id=failure.jobkit_id,
            until=until,
            now=at,
        )
        lines.append(
            f"{', '.join(failure.nodes)} left out of later {failure.backend} jobs until"
            f" {clock(until, at)} ({_event(failure.reason)} of {failure.jobkit_id}):"
            " jobkit nodes"
        )
    return lines


def leave_out_bad_nodes(
    store: Store, backend: Backend, request: SubmitRequest, *, now: float | None = None
) -> tuple[SubmitRequest, Exclusion]:
    """The request with the backend's bad nodes left out (`exclude_nodes`), and what was
    decided. No scheduler query unless the list has a node of this backend; a failed query
    submits without exclusion and says so."""
    from jobkit.core.errors import SchedulerError

    if request.spec.scheduler.exclude_bad_nodes_for <= 0:
        return request, Exclusion()
    at = time.time() if now is None else now
    rows = store.bad_nodes(backend.name, now=at)
    if not rows:
        return request, Exclusion()
    usable: tuple[str, ...] | None = None
    if backend.excludes_nodes:
        try:
            usable = backend.usable_nodes(request.spec)
        except SchedulerError as err:
            line = " ".join(err.show().split())
            return request, Exclusion(
                note=f"warning: not excluding bad nodes: cannot list the nodes ({line})"
            )
    exclusion = plan_exclusion(
        rows,
        backend=backend.name,
        excludes=backend.excludes_nodes,
        usable=usable,
        needed=request.spec.resources.nodes,
        now=at,
    )
    if exclusion.nodes:
        request = replace(request, exclude_nodes=exclusion.nodes)
    return request, exclusion
