"""A sweep task's overrides and a run's attempts in words: what the status table (sweepview)
and the detail view (jobview) both show."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jobkit.registry.record import JobRecord


def short_key(key: str, keys: Iterable[str]) -> str:
    """A dotted override key by its last part (`optim.lr` -> `lr`) unless another key of
    the set ends the same way."""
    tail = key.rsplit(".", 1)[-1]
    clash = sum(1 for other in keys if other.rsplit(".", 1)[-1] == tail)
    return tail if clash <= 1 else key


def short_overrides(overrides: Mapping[str, Any] | None) -> str:
    """`lr=0.001 d_model=64` ('-' for none)."""
    if not overrides:
        return "-"
    keys = list(overrides)
    return " ".join(f"{short_key(k, keys)}={_value(v)}" for k, v in overrides.items())


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def task_overrides(record: JobRecord, sweep_files: dict[Path, dict[str, Any]]) -> dict[str, Any]:
    """A task's overrides: kept in the row's extra at submission, else its sweep's
    sweep.json (read once per folder into `sweep_files`)."""
    from jobkit.manager.sweep import overrides_of, read_sweep_file

    found = overrides_of(record.extra.get("overrides"))
    if found is not None:
        return found
    if record.task is None:
        return {}
    for folder in _sweep_folders(record):
        if folder not in sweep_files:
            sweep_files[folder] = read_sweep_file(folder)
        mapping = sweep_files[folder]
        if record.task in mapping:
            return dict(mapping[record.task])
    return {}


def _sweep_folders(record: JobRecord) -> list[Path]:
    folders = [record.job_dir]
    if record.sweep_id and record.job_dir.name != record.sweep_id:
        folders.append(record.job_dir.parent / record.sweep_id)
    return folders


def attempts_line(attempts: Sequence[JobRecord]) -> str:
    """`1 jkA 123 PREEMPTED, 2 jkB 130 RUNNING`."""
    return ", ".join(
        f"{r.attempt} {r.jobkit_id} {r.scheduler_id or '-'} {r.state}" for r in attempts
    )


def sweep_fact(record: JobRecord) -> str | None:
    """`jkSWEEP task 2 (lr=0.001 d_model=64)` for a sweep's task, else None."""
    if record.sweep_id is None:
        return None
    overrides = short_overrides(task_overrides(record, {}))
    return f"{record.sweep_id} task {record.task} ({overrides})"
