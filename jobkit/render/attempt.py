"""Which attempt of a run a script is rendered for (docs/runs.md).

A run outlives its jobs: when the scheduler cannot requeue a job, jobkit submits the next
attempt as a new job that reuses the first attempt's run folder (its checkpoints are where
the trainer's resume looks) and keeps its JOBKIT_RUN_ID (the W&B run id). The template gets
`attempt` (None for a first attempt) and bakes those values into the script, quoted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Attempt:
    """Attempt `number` (2, 3, ...) of the run whose first attempt's run folder is `run_dir`;
    `run_id` is that folder's name (JOBKIT_RUN_ID, the same in every attempt)."""

    run_id: str
    run_dir: str
    number: int

    def __post_init__(self) -> None:
        if self.number < 1:
            raise ValueError(f"attempt number must be 1 or more, not {self.number}")
        for value in (self.run_id, self.run_dir):
            if not value or any(ch in value for ch in "\n\r\0"):
                raise ValueError(f"attempt: unusable run id or folder {value!r}")
