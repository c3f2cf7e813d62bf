"""Normalised job states shared by every backend."""

from __future__ import annotations

from enum import Enum


class State(str, Enum):
    """A job's state, the same words for every scheduler; the raw state is kept beside it."""

    QUEUED = "QUEUED"
    HELD = "HELD"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    UNKNOWN = "UNKNOWN"

    @property
    def is_final(self) -> bool:
        """True once the job will not run again (a requeued job is not final)."""
        return self in FINAL_STATES


FINAL_STATES = frozenset(
    {
        State.SUCCEEDED,
        State.FAILED,
        State.CANCELLED,
        State.TIMEOUT,
        State.NODE_FAIL,
        State.OUT_OF_MEMORY,
    }
)
