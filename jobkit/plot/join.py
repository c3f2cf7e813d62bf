"""A run's attempts (first start, each restart or requeue) joined into one curve; pure.

Every attempt appends to the same metrics.jsonl. A new attempt starts where the steps go
back (it resumed from an older checkpoint and repeats steps), or where rank-0.log says
`resumed from step N` and the records after it are all past N (a clean stop saved a
checkpoint at its last step: nothing repeats). The joined curve is the history of the model
that trained last: of each attempt, the records up to the step the next attempt resumed
from (a repeated step keeps the latest attempt's record; steps the next attempt threw away
are left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobkit.plot.read import Resume

X_FIELDS = ("step", "time")
"""Fields of a record that are not a metric."""


@dataclass(frozen=True)
class Attempt:
    """One run of the trainer in the run folder."""

    first: int
    """Index in the file's records of this attempt's first record (its count: none)."""
    count: int
    resumed_from: int | None
    """The checkpoint step it resumed from (rank-0.log), None for the first attempt or
    when the log does not say."""
    started_at: float | None
    """The resume line's time, else its first record's `time`."""
    first_step: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "first_step": self.first_step,
            "records": self.count,
            "resumed_from": self.resumed_from,
            "started_at": self.started_at,
        }


@dataclass(frozen=True)
class JoinedRun:
    """The joined records (one per step, ascending) and the attempts they came from."""

    records: list[dict[str, Any]]
    attempts: list[Attempt]

    @property
    def restarts(self) -> list[Attempt]:
        """Every attempt after the first: where the chart marks a restart or requeue."""
        return self.attempts[1:]

    def metrics(self) -> list[str]:
        """The numeric fields of the records (other than step and time), sorted."""
        names: set[str] = set()
        for record in self.records:
            for key, value in record.items():
                if key not in X_FIELDS and _number(value):
                    names.add(key)
        return sorted(names)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _time(record: dict[str, Any]) -> float | None:
    value = record.get("time")
    return float(value) if isinstance(value, int | float) and _number(value) else None


def _before(record: dict[str, Any], at: float) -> bool:
    """Whether a record was written before `at` (a record without `time`: not known)."""
    written = _time(record)
    return written is not None and written < at


def split_attempts(records: Sequence[dict[str, Any]], resumes: Sequence[Resume]) -> list[Attempt]:
    """The attempts of a file's records (in file order), with rank-0.log's resume lines."""
    if not records:
        return []
    steps = [int(r["step"]) for r in records]
    starts: dict[int, Resume | None] = {0: None}
    for i in range(1, len(steps)):
        if steps[i] <= steps[i - 1]:
            starts[i] = None
    empty: list[tuple[int, Resume]] = []
    end = len(steps)
    for resume in reversed(resumes):
        first = end
        while first > 0 and steps[first - 1] > resume.step:
            if first < end and steps[first - 1] >= steps[first]:
                break
            first -= 1
        while first < end and _before(records[first], resume.at):
            first += 1  # records from before the resume line: this attempt logged none
        if first == end:
            empty.append((first, resume))
        else:
            starts[first] = resume
        end = first
    attempts: list[Attempt] = []
    bounds = sorted(starts)
    for n, first in enumerate(bounds):
        stop = bounds[n + 1] if n + 1 < len(bounds) else len(steps)
        attempts.append(_attempt(records, first, stop, starts[first]))
    for first, resume in empty:
        at = next((i for i, a in enumerate(attempts) if a.first > first), len(attempts))
        attempts.insert(at, _attempt(records, first, first, resume))
    return attempts


def _attempt(
    records: Sequence[dict[str, Any]], first: int, stop: int, resume: Resume | None
) -> Attempt:
    head = records[first] if first < stop else None
    started = resume.at if resume else (_time(head) if head else None)
    return Attempt(
        first=first,
        count=stop - first,
        resumed_from=resume.step if resume else None,
        started_at=started,
        first_step=int(head["step"]) if head else None,
    )


def join(records: Sequence[dict[str, Any]], resumes: Sequence[Resume] = ()) -> JoinedRun:
    """The run's curve: each attempt's records up to where the next attempt resumed."""
    attempts = split_attempts(records, resumes)
    kept: dict[int, dict[str, Any]] = {}
    limit: float = float("inf")
    for attempt in reversed(attempts):
        for record in records[attempt.first : attempt.first + attempt.count]:
            step = int(record["step"])
            if step <= limit and step not in kept:
                kept[step] = record
        if attempt.resumed_from is not None:
            limit = min(limit, attempt.resumed_from)
        elif attempt.first_step is not None:
            limit = min(limit, attempt.first_step - 1)
    return JoinedRun([kept[step] for step in sorted(kept)], attempts)
