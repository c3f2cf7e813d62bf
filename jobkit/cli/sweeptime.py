"""A sweep's ELAPSED on its `jobkit status` line: the array's wall time, from its first task's
start to its last task's end (now while a task runs), not its longest task nor a sum.

A task's span is its end less its elapsed time (the scheduler's, or the launcher's). Its end:
now while it runs; else when its run folder's `exit_code` file was written (the script or
launcher writes it as the task ends, docs/design.md), else when jobkit first saw it final
(`final_at`, later than the true end by up to one poll). An attempt that a later attempt of
the same run superseded shares that run folder, so its end is its `final_at`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from jobkit.cli.jobview import elapsed_now
from jobkit.core.conventions import EXIT_CODE_FILE
from jobkit.core.lifecycle import State
from jobkit.registry.record import JobRecord


def sweep_wall_s(rows: Sequence[JobRecord], now: float) -> float | None:
    """Seconds from the earliest task start to the latest task end (None: no task ran)."""
    newest: dict[str, int] = {}
    for record in rows:
        newest[record.run_key] = max(newest.get(record.run_key, 0), record.attempt)
    spans = [
        span
        for span in (_span(r, now, superseded=r.attempt < newest[r.run_key]) for r in rows)
        if span is not None
    ]
    if not spans:
        return None
    return max(0.0, max(end for _, end in spans) - min(start for start, _ in spans))


def _span(record: JobRecord, now: float, *, superseded: bool) -> tuple[float, float] | None:
    """(start, end) of one task's run, or None when it has not run (or cannot be timed)."""
    elapsed = elapsed_now(record, now)
    if elapsed is None:
        return None
    if record.state == State.RUNNING.value:
        end: float | None = now
    else:
        end = None if superseded else _exit_file_time(record)
        end = end if end is not None else record.final_at or record.observed_at
    return None if end is None else (end - elapsed, end)


def _exit_file_time(record: JobRecord) -> float | None:
    """When the task's `exit_code` file was written (its run folder's; a `{task}` path filled
    in), or None."""
    run_dir = record.run_dir
    if not run_dir:
        return None
    if record.task is not None:
        run_dir = run_dir.replace("{task}", record.task)
    try:
        return os.stat(Path(run_dir) / EXIT_CODE_FILE).st_mtime
    except OSError:
        return None
