"""How `jobkit why` shows a job: its state, why it waits and what fixes it, the scheduler's
start estimate (labelled as one) and its timeline; as text or as JSON."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from jobkit.backends.waiting import ESTIMATE_LABEL, WAITING_STATES, WaitInfo
from jobkit.cli.jobview import format_time
from jobkit.core.units import format_duration
from jobkit.registry.record import SUBMITTING, JobRecord

NO_ESTIMATE = "none from the scheduler (it plans a start only for a job it could run)"
WAITING_VALUES = frozenset(state.value for state in WAITING_STATES)
NEVER_LINE = "THIS JOB WILL NEVER START as it is: apply the fix below or cancel it"


@dataclass(frozen=True)
class JobWhy:
    """One job as `jobkit why` shows it: the registry's record and the backend's answer."""

    record: JobRecord
    info: WaitInfo

    @property
    def state(self) -> str:
        """The scheduler's state now, else the registry's."""
        return self.info.state.value if self.info.state else self.record.state

    @property
    def waiting(self) -> bool:
        """Waiting to start, as the scheduler says (else as jobkit last saw it)."""
        if self.info.state is not None or self.info.never_queues:
            return self.info.waiting
        return self.record.state in WAITING_VALUES

    @property
    def raw_state(self) -> str | None:
        return self.info.raw_state or self.record.raw_state


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch))


def _status_words(job: JobWhy) -> str:
    if job.waiting:
        return "waiting to start" + ("" if job.info.state else " (jobkit's last known state)")
    if job.record.state == SUBMITTING:
        return "not submitted yet"
    ended = job.info.state.is_final if job.info.state else job.record.is_final
    if ended:
        return "not waiting: it has ended"
    return f"not waiting: it is {job.state.lower()}"


def _estimate(info: WaitInfo, now: float) -> str:
    """The earliest start the scheduler plans (an array: its first task), as an estimate."""
    planned = [r for r in info.reasons if r.start_estimate is not None]
    if not planned:
        return info.no_estimate or NO_ESTIMATE
    first = min(planned, key=lambda r: r.start_estimate or 0.0)
    at = first.start_estimate or 0.0
    ahead = at - now
    relative = f"in {format_duration(ahead)}" if ahead > 0 else "any moment now"
    nodes = f" on {first.planned_nodes}" if first.planned_nodes else ""
    task = f" (task {first.task})" if first.task else ""
    return f"{format_time(at)}{task}{nodes} ({relative}; {ESTIMATE_LABEL})"


def render_why(job: JobWhy, now: float) -> str:
    """The text block of one job."""
    record = job.record
    raw = f" ({job.raw_state})" if job.raw_state and job.raw_state != job.state else ""
    lines = [
        f"{record.jobkit_id}  {record.name}  ({record.backend} {record.scheduler_id or '-'})",
        f"  state     {job.state}{raw}: {_status_words(job)}",
    ]
    for reason in job.info.reasons:
        found = reason.explanation
        label = f"why, task {reason.task}" if reason.task else "why"
        code = f"  [{found.code}]" if found.known else ""
        lines.append(f"  {label:<9} {found.meaning}{code}")
        if found.never:
            lines.append(f"  !!        {NEVER_LINE}")
        if found.fix:
            lines.append(f"  fix       {found.fix}")
    never = any(r.explanation.never for r in job.info.reasons)
    if job.waiting and job.info.state and not never:
        lines.append(f"  starts    {_estimate(job.info, now)}")
    lines += [f"  note      {note}" for note in job.info.notes]
    if job.info.timeline:
        lines.append("  timeline")
        for event in job.info.timeline:
            detail = f"  {event.detail}" if event.detail else ""
            if event.at > now:
                detail += "  (to come)"
            lines.append(f"    {format_time(event.at)}  {event.what:<9}{detail}".rstrip())
    return "\n".join(lines)


def why_dict(job: JobWhy) -> dict[str, Any]:
    """The JSON form of one job (times as epoch seconds and local ISO text)."""
    record = job.record
    return {
        "jobkit_id": record.jobkit_id,
        "scheduler_id": record.scheduler_id,
        "backend": record.backend,
        "name": record.name,
        "state": job.state,
        "raw_state": job.raw_state,
        "waiting": job.waiting,
        "reasons": [
            {
                "task": r.task,
                "code": r.explanation.code,
                "meaning": r.explanation.meaning,
                "fix": r.explanation.fix,
                "never_starts": r.explanation.never,
                "known": r.explanation.known,
                "start_estimate": r.start_estimate,
                "start_estimate_time": _iso(r.start_estimate),
                "start_estimate_note": ESTIMATE_LABEL if r.start_estimate else None,
                "planned_nodes": r.planned_nodes,
            }
            for r in job.info.reasons
        ],
        "timeline": [
            {"at": e.at, "time": _iso(e.at), "event": e.what, "detail": e.detail}
            for e in job.info.timeline
        ],
        "notes": list(job.info.notes),
    }
