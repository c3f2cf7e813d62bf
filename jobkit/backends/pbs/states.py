"""PBS Pro and Torque job states (qstat `job_state`) to jobkit's."""

from __future__ import annotations

from jobkit.core.states import State

PBS_STATES: dict[str, State] = {
    "Q": State.QUEUED,  # queued, eligible to run
    "W": State.QUEUED,  # waiting for its start time (or a stage-in)
    "T": State.QUEUED,  # being moved to a new location
    "M": State.QUEUED,  # moved to another server (PBS Pro)
    "H": State.HELD,  # held
    "R": State.RUNNING,  # running
    "E": State.RUNNING,  # exiting after having run
    "B": State.RUNNING,  # array job: at least one subjob has started (PBS Pro)
    "S": State.SUSPENDED,  # suspended by the server
    "U": State.SUSPENDED,  # suspended: workstation busy (PBS Pro)
    "C": State.SUCCEEDED,  # completed (Torque); refined by the exit status
    "F": State.SUCCEEDED,  # finished (PBS Pro history); refined by the exit status
    "X": State.SUCCEEDED,  # subjob finished (PBS Pro); refined by the exit status
}
"""Every job_state letter of PBS Pro and Torque."""

FINISHED_LETTERS = frozenset({"C", "F", "X"})

PBS_PRO_EXIT_STATES: dict[int, State] = {
    -29: State.TIMEOUT,  # JOB_EXEC_KILL_WALLTIME
    -28: State.FAILED,  # JOB_EXEC_KILL_CPUT
    -27: State.OUT_OF_MEMORY,  # JOB_EXEC_KILL_MEM
    -26: State.OUT_OF_MEMORY,  # JOB_EXEC_KILL_VMEM
    -25: State.FAILED,  # JOB_EXEC_KILL_NCPUS_SUM
    -24: State.FAILED,  # JOB_EXEC_KILL_NCPUS_BURST
}
"""PBS's own negative exit statuses that name a resource limit."""

SUBSTATE_TERMINATED = 91
"""PBS Pro history substate of a job deleted with qdel."""

SIGNAL_BASE = 256
"""PBS reports a job killed by signal N as exit status 256 + N."""


def normalize_pbs_state(
    letter: str, exit_status: int | None = None, substate: int | None = None
) -> State:
    """jobkit's state for a PBS job_state letter, its exit status and (PBS Pro) substate.

    A finished job is SUCCEEDED with exit 0, CANCELLED when deleted (substate 91),
    TIMEOUT / OUT_OF_MEMORY for PBS's limit codes, FAILED otherwise. An unknown letter
    is UNKNOWN.
    """
    code = letter.strip().upper()
    state = PBS_STATES.get(code, State.UNKNOWN)
    if code not in FINISHED_LETTERS:
        return state
    if substate == SUBSTATE_TERMINATED:
        return State.CANCELLED
    if exit_status is None or exit_status == 0:
        return State.SUCCEEDED
    return PBS_PRO_EXIT_STATES.get(exit_status, State.FAILED)


def split_exit_status(exit_status: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) from a PBS exit status (256 + N means killed by signal N)."""
    if exit_status is None:
        return None, None
    if exit_status > SIGNAL_BASE:
        return None, exit_status - SIGNAL_BASE
    return exit_status, None
