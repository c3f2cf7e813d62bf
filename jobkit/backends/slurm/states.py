"""Slurm's job states (squeue %T / sacct State, long and compact forms) to jobkit's."""

from __future__ import annotations

from jobkit.core.states import State

SLURM_STATES: dict[str, State] = {
    "PENDING": State.QUEUED,
    "CONFIGURING": State.QUEUED,
    "POWER_UP_NODE": State.QUEUED,
    "REQUEUED": State.QUEUED,
    "REQUEUE_FED": State.QUEUED,
    "REQUEUE_HOLD": State.HELD,
    "RESV_DEL_HOLD": State.HELD,
    "SPECIAL_EXIT": State.HELD,
    "RUNNING": State.RUNNING,
    "COMPLETING": State.RUNNING,
    "RESIZING": State.RUNNING,
    "SIGNALING": State.RUNNING,
    "STAGE_OUT": State.RUNNING,
    "SUSPENDED": State.SUSPENDED,
    "STOPPED": State.SUSPENDED,
    "COMPLETED": State.SUCCEEDED,
    "FAILED": State.FAILED,
    "BOOT_FAIL": State.FAILED,
    "LAUNCH_FAILED": State.FAILED,
    "CANCELLED": State.CANCELLED,
    "REVOKED": State.CANCELLED,
    "DEADLINE": State.TIMEOUT,
    "TIMEOUT": State.TIMEOUT,
    "PREEMPTED": State.PREEMPTED,
    "NODE_FAIL": State.NODE_FAIL,
    "OUT_OF_MEMORY": State.OUT_OF_MEMORY,
}
"""Every long state name Slurm 22.05 to 24.x prints."""

SLURM_COMPACT_STATES: dict[str, str] = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "RQ": "REQUEUED",
    "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD",
    "RD": "RESV_DEL_HOLD",
    "SE": "SPECIAL_EXIT",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "RS": "RESIZING",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "CD": "COMPLETED",
    "F": "FAILED",
    "BF": "BOOT_FAIL",
    "CA": "CANCELLED",
    "RV": "REVOKED",
    "DL": "DEADLINE",
    "TO": "TIMEOUT",
    "PR": "PREEMPTED",
    "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY",
}
"""squeue's %t compact codes."""


def slurm_state_word(raw: str) -> str:
    """The state word of a raw Slurm state: `CANCELLED by 0` -> CANCELLED, `CA` -> CANCELLED."""
    words = raw.strip().split()
    word = words[0].rstrip("+").upper() if words else ""
    return SLURM_COMPACT_STATES.get(word, word)


HOLD_REASONS = ("JobHeldUser", "JobHeldAdmin")
"""Pending reasons that mean the job is held (scontrol hold, sbatch --hold)."""


def normalize_slurm_state(
    raw: str, exit_code: int | None = None, reason: str | None = None
) -> State:
    """jobkit's state for a raw Slurm state; COMPLETED with a non-zero exit is FAILED.

    A pending job held by its user or an admin (reason JobHeldUser / JobHeldAdmin) is
    HELD. An unrecognised state is UNKNOWN, never an error.
    """
    state = SLURM_STATES.get(slurm_state_word(raw), State.UNKNOWN)
    if state is State.SUCCEEDED and exit_code:
        return State.FAILED
    if state is State.QUEUED and reason in HOLD_REASONS:
        return State.HELD
    return state
