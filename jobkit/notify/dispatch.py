"""Which events are due for a job, claimed once in the registry, then sent (docs/notify.md).

An event is due when the job reached it (start: running or past running; end: final; fail:
final and not SUCCEEDED; stall: STALLED). Each is claimed with `Store.claim_extra` (one
atomic UPDATE): of two watchers, exactly one sends it, and a job seen only after it ended
still gets its end (but no start: that moment has passed). A send that fails is said in one
line and kept as failed; it is not retried (once, not at least once).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from jobkit.notify.message import Message, final_loss
from jobkit.notify.send import SendError, run_command, send_email, send_webhook
from jobkit.notify.spec import sender
from jobkit.registry.store import JobRecord, Store

CLAIM_PREFIX = "notified_"
"""extra[notified_<event>]: when it was claimed, and how sending went."""
_STARTED = frozenset({"RUNNING", "SUSPENDED"})


def due_events(record: JobRecord, wanted: Sequence[str], now: float) -> list[str]:
    """The wanted events this job's present state has reached."""
    due: list[str] = []
    if "start" in wanted and record.state in _STARTED:
        due.append("start")
    if record.is_final:
        if "end" in wanted:
            due.append("end")
        if "fail" in wanted and record.state != "SUCCEEDED":
            due.append("fail")
    if "stall" in wanted and record.state == "RUNNING":
        from jobkit.hang.stall import job_stall

        if job_stall(record, now) is not None:
            due.append("stall")
    return due


def _notify_spec(record: JobRecord) -> dict[str, Any] | None:
    """The job's notify section, None without one or when the job sends its own
    (`notify.from: job`: notify/jobside.py)."""
    spec = record.spec.get("notify") if record.spec_json else None
    if not isinstance(spec, dict) or sender(spec) == "job":
        return None
    return spec


def notify_jobs(
    store: Store, records: Sequence[JobRecord], *, now: float | None = None
) -> list[str]:
    """Send each due, unclaimed event of these jobs; one line per message sent or failed."""
    at = time.time() if now is None else now
    lines: list[str] = []
    for record in records:
        spec = _notify_spec(record)
        if spec is None:
            continue
        for event in due_events(record, spec.get("on") or ["fail"], at):
            if CLAIM_PREFIX + event in record.extra:
                continue  # claimed before (no write needed to know it)
            if not store.claim_extra(record.jobkit_id, CLAIM_PREFIX + event, {"at": at}):
                continue  # another jobkit process sends (or sent) it
            lines += _send(store, record, event, spec, at)
    return lines


def _message(store: Store, record: JobRecord, event: str, at: float) -> Message:
    diagnosis = None
    stalled_for = None
    if record.is_final and record.state != "SUCCEEDED":
        from jobkit.doctor.cache import one_line, with_diagnoses

        record = with_diagnoses(store, [record])[0]
        diagnosis = one_line(record) or record.reason
    if event == "stall":
        from jobkit.hang.stall import format_age, job_stall

        progress = job_stall(record, at)
        if progress is not None:
            stalled_for = f"no progress for {format_age(progress.since_progress_s)}"
            diagnosis = f"stalled at step {progress.last_step}: {stalled_for}"
    loss = final_loss(record) if record.state == "SUCCEEDED" else None
    return Message(event, record, diagnosis, loss, stalled_for)


def _send(
    store: Store, record: JobRecord, event: str, spec: dict[str, Any], at: float
) -> list[str]:
    message = _message(store, record, event, at)
    outcomes, lines = deliver(spec, message)
    store.update_extra(record.jobkit_id, {CLAIM_PREFIX + event: {"at": at, **outcomes}})
    return lines


def deliver(spec: Mapping[str, Any], message: Message) -> tuple[dict[str, str], list[str]]:
    """Send `message` to each of the section's webhook, email and command: how each went
    (`sent` or `failed: ...`), and one line for each (the watcher's and the job's alike)."""
    record = message.record
    lines: list[str] = []
    outcomes: dict[str, str] = {}
    for kind in ("webhook", "email", "command"):
        value = spec.get(kind)
        if not value:
            continue
        try:
            if kind == "webhook":
                send_webhook(str(value), message)
            elif kind == "email":
                send_email(str(value), spec.get("smtp"), message)
            else:
                run_command([str(word) for word in value], message)
        except SendError as err:
            outcomes[kind] = f"failed: {err}"
            lines.append(f"notify: {record.jobkit_id} {message.event}: {kind} {outcomes[kind]}")
            continue
        outcomes[kind] = "sent"
        lines.append(f"notify: {record.jobkit_id} {message.event}: sent by {kind}")
    return outcomes, lines
