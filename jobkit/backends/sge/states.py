"""Grid Engine job states (qstat's state letters, qacct's failed / exit_status) to jobkit's."""

from __future__ import annotations

from jobkit.core.states import State

QACCT_LIMIT_FAILED = 37
"""qacct's `failed` code when the qmaster stopped the job at a limit ("qmaster enforced h_rt,
h_cpu, or h_vmem limit"): with h_rt, the job's time limit."""
KILLED_BY_SIGNAL_BASE = 128
"""exit_status 128 + N: the job was killed by signal N."""


def normalize_qstat_state(letters: str) -> State:
    """jobkit's state for qstat's state letters (`qw`, `hqw`, `r`, `t`, `Rr`, `s`, `dr`, `Eqw`).

    The error state E keeps a job pending until someone clears it (qmod -cj): HELD, as it
    will not start by itself. d (being deleted) still runs until it has stopped.
    """
    if "E" in letters or "h" in letters:
        return State.HELD
    if "s" in letters or "S" in letters or "T" in letters:
        return State.SUSPENDED
    if "r" in letters or "t" in letters or "d" in letters:
        return State.RUNNING
    if "q" in letters or "w" in letters:
        return State.QUEUED
    return State.UNKNOWN


def normalize_qacct(failed: int | None, exit_status: int | None, deleted: bool) -> State:
    """A finished job's state from qacct: CANCELLED when jobkit cancelled it, TIMEOUT when the
    qmaster enforced a limit (h_rt), SUCCEEDED with exit 0 and no failure, FAILED otherwise."""
    if deleted:
        return State.CANCELLED
    if failed == QACCT_LIMIT_FAILED:
        return State.TIMEOUT
    if failed == 0 and exit_status == 0:
        return State.SUCCEEDED
    return State.FAILED
