"""The jobs a user named, as the registry has them: a sweep's id stands for its tasks, a
run's earlier attempts give way to its newest (every verb that takes ids selects this way)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.registry.reader import RegistryReader
from jobkit.registry.record import JobRecord

if TYPE_CHECKING:
    from jobkit.registry.store import Store


def newest_attempts(records: Sequence[JobRecord]) -> list[JobRecord]:
    """The records without those a later attempt of the same run supersedes (order kept).
    Rows of single-attempt runs pass with one comparison each."""
    later: dict[str, int] = {}
    for record in records:
        if record.attempt > 1:
            key = record.run_key
            later[key] = max(later.get(key, 1), record.attempt)
    if not later:
        return list(records)
    return [r for r in records if r.attempt >= later.get(r.run_key, r.attempt)]


def named_sweeps(
    store: RegistryReader, texts: Sequence[str]
) -> tuple[dict[str, list[JobRecord]], list[str]]:
    """The sweep ids among what a user typed (sweep id -> its rows), and the other texts."""
    sweeps: dict[str, list[JobRecord]] = {}
    others: list[str] = []
    for text in texts:
        rows = store.sweep(text.strip())
        if rows:
            sweeps[text.strip()] = rows
        else:
            others.append(text)
    return sweeps, others


def named_jobs(store: Store, ids: Sequence[str], last: bool) -> list[JobRecord]:
    """The jobs named, in order, once each: a sweep's id (or --last after a sweep) stands for
    its tasks' newest attempts."""
    from jobkit.registry.ids import resolve_jobs, with_last

    texts = with_last(store, ids, last)
    sweeps, _ = named_sweeps(store, texts)
    records: list[JobRecord] = []
    for text in texts:
        found = newest_attempts(sweeps[text.strip()]) if text.strip() in sweeps else None
        for record in found if found is not None else resolve_jobs(store, [text]):
            if all(r.jobkit_id != record.jobkit_id for r in records):
                records.append(record)
    return records
