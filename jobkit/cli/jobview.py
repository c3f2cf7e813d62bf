"""How tracked jobs are shown: the status table, the detail view, durations and times."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from jobkit.core.earlier_runs import COUNT_KEY, earlier_runs
from jobkit.core.lifecycle import State
from jobkit.core.units import format_duration
from jobkit.hang.stall import state_text
from jobkit.registry.reader import RegistryReader
from jobkit.registry.record import JobRecord, StateChange

TABLE_COLUMNS = ("ID", "SCHED ID", "NAME", "BACKEND", "STATE", "ELAPSED", "NODES", "EXIT")


def format_time(epoch: float | None) -> str:
    """Local `YYYY-MM-DD HH:MM:SS`, or `-`."""
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def elapsed_now(record: JobRecord, now: float) -> float | None:
    """The job's run time, extrapolated from the last observation while it runs; a requeued
    job's earlier runs included (core/earlier_runs.py)."""
    earlier = _earlier_seconds(record)
    if record.elapsed_s is None:
        return earlier
    current = record.elapsed_s
    if record.state == State.RUNNING.value and record.observed_at is not None:
        current += max(now - record.observed_at, 0.0)
    return current + (earlier or 0.0)


def _earlier_seconds(record: JobRecord) -> float | None:
    if COUNT_KEY not in record.extra:  # the common case: never requeued, nothing to decode
        return None
    found = earlier_runs(record.extra)
    return found.seconds if found.count else None


def runs_started(record: JobRecord) -> int:
    """How many runs of the job have started: its earlier runs (a requeued job) and this one
    once it runs or ran."""
    if COUNT_KEY not in record.extra:
        return 1
    waiting = record.state in (State.QUEUED.value, State.HELD.value) and not record.elapsed_s
    return earlier_runs(record.extra).count + (0 if waiting else 1)


def format_elapsed(record: JobRecord, now: float) -> str:
    """ELAPSED: `1:02:03`, or with the runs it adds up once requeued: `0:07 (1 run)`,
    `0:19 (2 runs)`."""
    text = format_duration(elapsed_now(record, now))
    if COUNT_KEY not in record.extra:
        return text
    runs = runs_started(record)
    return f"{text} ({runs} run{'s' if runs != 1 else ''})"


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
            format_elapsed(r, now),
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
        ("elapsed", _elapsed_fact(record, now)),
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
    from jobkit.cli.taskfacts import attempts_line, sweep_fact

    facts: list[tuple[str, str]] = []
    sweep = sweep_fact(record)
    if sweep:
        facts.append(("sweep", sweep))
    attempts = _attempts(record, store)
    if attempts:
        facts.append(("attempts", attempts_line(attempts)))
    elif record.attempt > 1:
        facts.append(("attempt", str(record.attempt)))
    if store is not None:  # a stage of a chain: the whole chain (docs/chains.md)
        from jobkit.chain.settle import broken_reason
        from jobkit.chain.view import chain_views

        views = chain_views(store, [record])
        facts += [("chain", view.line().removeprefix("chain ")) for view in views]
        if (broken := broken_reason(record)) is not None:
            facts.append(("not run", broken))
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
    from jobkit.core.units import format_age

    return format_age(seconds)


def detail_dict(
    record: JobRecord, history: Sequence[StateChange], store: RegistryReader | None = None
) -> dict[str, Any]:
    """The detail view as JSON: the record, its history, spec and script (with `store`:
    its run's attempts; a sweep's task: its overrides)."""
    from jobkit.cli.taskfacts import task_overrides

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


def _elapsed_fact(record: JobRecord, now: float) -> str:
    """`0:19 (2 runs: 0:07 before the requeue, from sacct)`."""
    text = format_elapsed(record, now)
    if COUNT_KEY not in record.extra:
        return text
    earlier = earlier_runs(record.extra)
    if not earlier.count:
        return text
    how = f"from {earlier.source}" if earlier.exact else "at least: as last seen"
    before = f"{format_duration(earlier.seconds)} before requeue"
    before += "" if earlier.count == 1 else f"s (the {earlier.count} earlier runs)"
    return f"{text.removesuffix(')')}: {before}, {how})"


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
