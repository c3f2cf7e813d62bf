"""Which rows a refresh changed (manager/attempts.changed_rows): the rows run resubmission
looks at. A refresh hands back unchanged records as they were, so they are passed over by
identity (a status of 10,000 jobs, issue 25); any other pairing is compared by id."""

from __future__ import annotations

from pathlib import Path

from jobkit.manager.attempts import changed_rows
from jobkit.registry.record import JobRecord, new_record


def _record(jobkit_id: str, state: str = "RUNNING") -> JobRecord:
    return new_record(
        jobkit_id=jobkit_id,
        backend="slurm",
        name=jobkit_id,
        state=state,
        state_source="squeue",
        created_at=1.0,
        workdir=Path("/w"),
        job_dir=Path("/w/j"),
        token="t",
        spec_json="{}",
        script="",
    )


def test_changed_rows_by_identity_in_the_same_order() -> None:
    before = [_record("a"), _record("b"), _record("c")]
    ended = before[1].with_columns({"state": "FAILED", "state_source": "sacct"})
    same_values = before[2].with_columns({"reason": "x"})  # a copy, state unchanged
    assert changed_rows(before, [before[0], ended, same_values]) == [ended]
    assert changed_rows(before, before) == []


def test_changed_rows_in_another_order_or_without_before() -> None:
    before = [_record("a"), _record("b")]
    ended = before[0].with_columns({"state": "SUCCEEDED"})
    assert changed_rows(before, [before[1], ended]) == [ended]
    assert changed_rows([], [ended]) == [ended]
    assert changed_rows(before, [ended]) == [ended]
