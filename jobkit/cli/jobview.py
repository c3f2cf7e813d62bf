"""How tracked jobs are shown: the status table, the detail view, durations and times."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from jobkit.core.lifecycle import State
from jobkit.hang.stall import state_text
from jobkit.registry.reader import RegistryReader
from jobkit.registry.record import JobRecord, StateChange

TABLE_COLUMNS = ("ID", "SCHED ID", "NAME", "BACKEND", "STATE", "ELAPSED", "NODES", "EXIT")


def format_duration(seconds: float | None) -> str:
    """`0:05`, `1:02:03`, `2-03:04:05` (Slurm's style); `-` when unknown."""
    if seconds is None:
        return "-"
    total = int(max(seconds, 0))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def format_time(epoch: float | None) -> str:
    """Local `YYYY-MM-DD HH:MM:SS`, or `-`."""
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def elapsed_now(record: JobRecord, now: float) -> float | None:
    """The job's run time, extrapolated from the last observation while it runs."""
    if record.elapsed_s is None:
        return None
    if record.state == State.RUNNING.value and record.observed_at is not None:
        return record.elapsed_s + max(now - record.observed_at, 0.0)
    return record.elapsed_s


def shown_exit_code(record: JobRecord) -> int | None:
    """The exit code to show: a 0 only for a job that succeeded. Slurm reports `0:0` for a
    job it ended (TIMEOUT, CANCELLED, NODE_FAIL, PREEMPTED): the program did not exit 0, its
    code is unknown (None: shown `-`)."""
    if record.exit_code == 0 and record.state != State.SUCCEEDED.value:
        return None
    return record.exit_code


def format_exit(record: JobRecord) -> str:
    """`0`, `3`, `sig 9`, `3 (sig 9)` or `-` (see shown_exit_code)."""
    code = shown_exit_code(record)
    if code is None and not record.signal:
        return "-"
    if code is None:
        return f"sig {record.signal}"
    if record.signal:
        return f"{code} (sig {record.signal})"
    return str(code)


def table_rows(records: Sequence[JobRecord], now: float) -> list[tuple[str, ...]]:
    """One row of TABLE_COLUMNS per job."""
    return [
        (
            r.jobkit_id,
            r.scheduler_id or "-",
            r.name,
            r.backend,
            state_text(r, now),
            format_duration(elapsed_now(r, now)),
            r.nodes or "-",
            format_exit(r),
        )
        for r in records
    ]


def render_table(records: Sequence[JobRecord], now: float) -> str:
    """The status table with a header, columns padded to their widest cell."""
    from jobkit.core.display import table_cell

    rows = [TABLE_COLUMNS, *(tuple(map(table_cell, r)) for r in table_rows(records, now))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    from jobkit.doctor.cache import table_notes

    return "\n".join(lines + table_notes(records))


def render_detail(
    record: JobRecord,
    history: Sequence[StateChange],
    now: float,
    store: RegistryReader | None = None,
) -> str:
    """Everything jobkit knows about one job, one fact per line (with `store`: its run's
    other attempts too)."""
    sched = record.scheduler_id or "(not yet submitted)"
    seen = ""
    if record.observed_at is not None:
        age = _age(now - record.observed_at)
        seen = f", from {record.state_source or '?'} {age} ago"
    raw = f"raw {record.raw_state}" if record.raw_state else "no raw state"
    lines = [
        f"{record.jobkit_id}  {record.name}  ({record.backend} {sched})",
        f"  state       {state_text(record, now)} ({raw}{seen})",
    ]
    facts: list[tuple[str, str]] = [
        *_run_facts(record, store),
        ("reason", record.reason or "-"),
        *_why_fact(record),
        *_diagnosis_fact(record),
        ("nodes", record.nodes or "-"),
        ("elapsed", format_duration(elapsed_now(record, now))),
        ("exit code", _or_dash(shown_exit_code(record))),
        ("signal", "-" if record.signal is None else str(record.signal)),
        ("requeues", str(record.requeues)),
        ("max rss", record.max_rss or "-"),
        ("cpu time", record.cpu_time or "-"),
        ("submitted", format_time(record.submitted_at or record.created_at)),
        ("workdir", str(record.workdir)),
        ("job dir", str(record.job_dir)),
    ]
    if record.is_array:
        facts.append(("array", str(record.extra.get("array"))))
    for key in ("out", "err", "run_dir"):
        if key in record.log_paths:
            facts.append((key.replace("_", " "), record.log_paths[key]))
    lines += [f"  {key:<11} {value}" for key, value in facts]
    lines.append("  history")
    for change in history:
        words = [format_time(change.at), change.state.ljust(13)]
        if change.raw_state and change.raw_state != change.state:
            words.append(f"({change.raw_state})")
        if change.source:
            words.append(f"[{change.source}]")
        if change.reason:
            words.append(change.reason)
        lines.append("    " + " ".join(words).rstrip())
    return "\n".join(lines)


def _attempts(record: JobRecord, store: RegistryReader | None) -> list[JobRecord]:
    """The attempts of the record's run, when it has more than one."""
    if store is None:
        return []
    found = store.attempts(record.run_key)
    return found if len(found) > 1 else []


def _run_facts(record: JobRecord, store: RegistryReader | None) -> list[tuple[str, str]]:
    """`sweep jkS task 2 (lr=...)` and `attempts 1 jkA 123 PREEMPTED, 2 jkB 130 RUNNING`."""
    from jobkit.cli.sweepview import attempts_line, sweep_fact

    facts: list[tuple[str, str]] = []
    sweep = sweep_fact(record)
    if sweep:
        facts.append(("sweep", sweep))
    attempts = _attempts(record, store)
    if attempts:
        facts.append(("attempts", attempts_line(attempts)))
    elif record.attempt > 1:
        facts.append(("attempt", str(record.attempt)))
    return facts


def _why_fact(record: JobRecord) -> list[tuple[str, str]]:
    """A waiting job's recorded reason in plain words (no scheduler call; `jobkit why`)."""
    from jobkit.backends.waiting import one_line_why

    line = one_line_why(record.backend, record.state, record.reason, record.scheduler_id)
    return [("why", line)] if line else []


def _diagnosis_fact(record: JobRecord) -> list[tuple[str, str]]:
    """A failed job's cached one-line diagnosis (`jobkit doctor ID` has the details)."""
    from jobkit.doctor.cache import one_line

    line = one_line(record)
    return [("diagnosis", f"{line} (jobkit doctor {record.jobkit_id})")] if line else []


def _age(seconds: float) -> str:
    from jobkit.manager.refresh import format_age

    return format_age(seconds)


def detail_dict(
    record: JobRecord, history: Sequence[StateChange], store: RegistryReader | None = None
) -> dict[str, Any]:
    """The detail view as JSON: the record, its history, spec and script (with `store`:
    its run's attempts; a sweep's task: its overrides)."""
    from jobkit.cli.sweepview import task_overrides

    data = record.to_dict()
    if record.sweep_id is not None:
        data["overrides"] = task_overrides(record, {})
    data["attempts"] = [
        {
            "attempt": r.attempt,
            "jobkit_id": r.jobkit_id,
            "scheduler_id": r.scheduler_id,
            "state": r.state,
        }
        for r in _attempts(record, store)
    ]
    data["history"] = [change.to_dict() for change in history]
    data["why"] = next((line for _, line in _why_fact(record)), None)
    data["diagnosis"] = next((line for _, line in _diagnosis_fact(record)), None)
    data["spec"] = record.spec
    data["script"] = record.script
    return data


def submitted_line(record: JobRecord) -> str:
    """`submitted jk3f9a2 (slurm job 123): NAME`."""
    return (
        f"submitted {record.jobkit_id} ({record.backend} job {record.scheduler_id}): {record.name}"
    )


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
