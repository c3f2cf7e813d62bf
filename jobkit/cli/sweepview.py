"""How sweeps and runs of several attempts are shown by `jobkit status` (docs/sweeps.md).

A sweep is one line (`4 tasks: 1 RUNNING, 2 SUCCEEDED, 1 FAILED`, the newest attempt of
each task counted); expanded, one line per task under it. A run's earlier attempts are
left out unless asked for. Rows outside sweeps and runs cost one attribute test each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.backends.registry import known_class
from jobkit.cli.jobview import TABLE_COLUMNS, elapsed_now, format_exit
from jobkit.cli.taskfacts import short_overrides, task_overrides
from jobkit.core.lifecycle import SUBMITTING, State
from jobkit.core.units import format_duration
from jobkit.registry.reader import RegistryReader
from jobkit.registry.record import JobRecord
from jobkit.registry.selection import newest_attempts

if TYPE_CHECKING:
    pass

STATE_ORDER = (SUBMITTING, *(s.value for s in State))


def backend_word(backend: str) -> str:
    """The scheduler's name in sentences (Backend.display_name), or the backend's name."""
    found = known_class(backend)
    return found.label() if found else backend


@dataclass
class SweepGroup:
    """A sweep's rows: the newest attempt of each task (`tasks`) and every row (`rows`)."""

    sweep_id: str
    rows: list[JobRecord]
    tasks: list[JobRecord] = field(init=False)

    def __post_init__(self) -> None:
        self.tasks = newest_attempts(self.rows)
        self.tasks.sort(key=lambda r: _task_number(r.task))

    @property
    def first(self) -> JobRecord:
        """The newest attempt of the first task (its name and backend are the sweep's)."""
        return self.tasks[0]

    def counts(self) -> dict[str, int]:
        """State -> how many tasks (their newest attempt), in STATE_ORDER."""
        found: dict[str, int] = {}
        for record in self.tasks:
            found[record.state] = found.get(record.state, 0) + 1
        order = {name: i for i, name in enumerate(STATE_ORDER)}
        return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))

    def summary(self) -> str:
        """`4 tasks: 1 RUNNING, 2 SUCCEEDED, 1 FAILED`."""
        count = len(self.tasks)
        states = ", ".join(f"{n} {state}" for state, n in self.counts().items())
        return f"{count} task{'s' if count != 1 else ''}: {states}"

    @property
    def array_job(self) -> str | None:
        """The scheduler's array id (batch backends), or None."""
        for record in self.rows:
            found = record.extra.get("array_job")
            if found:
                return str(found)
        from jobkit.registry.reader import scheduler_base_id

        firsts = [r.scheduler_id for r in self.rows if r.attempt == 1 and r.scheduler_id]
        bases = {scheduler_base_id(sid) for sid in firsts if sid != scheduler_base_id(sid)}
        return bases.pop() if len(bases) == 1 and len(firsts) == len(self.tasks) else None

    @property
    def is_final(self) -> bool:
        """True when every task's newest attempt has ended."""
        return all(r.is_final for r in self.tasks)

    def to_dict(self, sweep_files: dict[Path, dict[str, Any]]) -> dict[str, Any]:
        """JSON-ready: the sweep, its counts and its task rows (with their overrides)."""
        first = self.first
        return {
            "sweep_id": self.sweep_id,
            "name": first.name,
            "backend": first.backend,
            "array_job": self.array_job,
            "counts": self.counts(),
            "tasks": [
                {**r.to_dict(), "overrides": task_overrides(r, sweep_files)} for r in self.rows
            ],
        }


def _task_number(task: str | None) -> int:
    return int(task) if task is not None and task.isdigit() else -1


Item = JobRecord | SweepGroup


def group_listing(
    records: Sequence[JobRecord], sweep_rows: Mapping[str, Sequence[JobRecord]]
) -> list[Item]:
    """The listing's items in order: a job, or a sweep at the place of its first row.

    sweep_rows: every row of each sweep seen (the registry's), so counts cover tasks the
    listing's time window left out; the listing's (refreshed) rows replace their copies.
    """
    items: list[Item] = []
    where: dict[str, int] = {}
    fresh: dict[str, dict[str, JobRecord]] = {}
    for record in records:
        if record.sweep_id is None:
            items.append(record)
            continue
        fresh.setdefault(record.sweep_id, {})[record.jobkit_id] = record
        if record.sweep_id not in where:
            where[record.sweep_id] = len(items)
            items.append(SweepGroup(record.sweep_id, []))
    for sweep_id, index in where.items():
        mine = fresh[sweep_id]
        rows = [mine.pop(r.jobkit_id, r) for r in sweep_rows.get(sweep_id, ())]
        items[index] = SweepGroup(sweep_id, rows + list(mine.values()))
    return items


def attempt_mark(record: JobRecord) -> str:
    """` (attempt 2)` for a later attempt, '' for a first one."""
    return f" (attempt {record.attempt})" if record.attempt > 1 else ""


def sweep_row(group: SweepGroup, now: float) -> tuple[str, ...]:
    """The sweep's line, in the status table's columns (ELAPSED: its wall time)."""
    from jobkit.cli.sweeptime import sweep_wall_s

    first = group.first
    return (
        group.sweep_id,
        group.array_job or "-",
        first.name,
        first.backend,
        group.summary(),
        format_duration(sweep_wall_s(group.rows, now)),
        "-",
        "-",
    )


def task_row(
    record: JobRecord, now: float, sweep_files: dict[Path, dict[str, Any]]
) -> tuple[str, ...]:
    """One task under its sweep's line: the task, its overrides and attempt in NAME."""
    from jobkit.hang.stall import state_text

    overrides = short_overrides(task_overrides(record, sweep_files))
    return (
        f"  {record.jobkit_id}",
        record.scheduler_id or "-",
        f"task {record.task}: {overrides}{attempt_mark(record)}",
        "",
        state_text(record, now),
        format_duration(elapsed_now(record, now)),
        record.nodes or "-",
        format_exit(record),
    )


def job_row(record: JobRecord, now: float) -> tuple[str, ...]:
    """A job outside sweeps (a later attempt marked after its name)."""
    from jobkit.cli.jobview import table_rows

    row = table_rows([record], now)[0]
    if record.attempt > 1:
        row = (row[0], row[1], row[2] + attempt_mark(record), *row[3:])
    return row


def render_listing(
    items: Sequence[Item], now: float, *, expand: bool, all_attempts: bool = False
) -> str:
    """The status table: jobs, sweep lines, and (expand) each sweep's tasks under it."""
    from jobkit.core.display import table_cell
    from jobkit.doctor.cache import table_notes

    sweep_files: dict[Path, dict[str, Any]] = {}
    rows: list[tuple[str, ...]] = [TABLE_COLUMNS]
    shown: list[JobRecord] = []
    for item in items:
        if isinstance(item, JobRecord):
            rows.append(job_row(item, now))
            shown.append(item)
            continue
        rows.append(sweep_row(item, now))
        if expand:
            tasks = sorted(item.rows, key=_task_order) if all_attempts else item.tasks
            rows += [task_row(r, now, sweep_files) for r in tasks]
            shown += tasks
    rows = [rows[0], *(tuple(map(table_cell, row)) for row in rows[1:])]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines + table_notes(shown))


def _task_order(record: JobRecord) -> tuple[int, int, float]:
    return (_task_number(record.task), record.attempt, record.created_at)


def sweep_groups(
    refreshed: Sequence[JobRecord], sweeps: Mapping[str, Sequence[JobRecord]]
) -> list[SweepGroup]:
    """Each named sweep's group, its rows replaced by their refreshed copies."""
    fresh = {r.jobkit_id: r for r in refreshed}
    return [
        SweepGroup(sweep_id, [fresh.get(r.jobkit_id, r) for r in rows])
        for sweep_id, rows in sweeps.items()
    ]


def listing_text(
    store: RegistryReader,
    shown: Sequence[JobRecord],
    now: float,
    *,
    expand: bool,
    all_attempts: bool,
) -> str:
    """The status table of a listing holding sweeps or later attempts (one registry query
    per sweep for the tasks the listing's window left out)."""
    sweep_ids = dict.fromkeys(r.sweep_id for r in shown if r.sweep_id is not None)
    rows = {sweep_id: store.sweep(sweep_id) for sweep_id in sweep_ids}
    if not all_attempts:
        rows = {sweep_id: newest_attempts(found) for sweep_id, found in rows.items()}
    items = group_listing(shown, rows)
    return render_listing(items, now, expand=expand, all_attempts=all_attempts)
