"""State tables: every raw Slurm and PBS state maps to a jobkit state; unknown -> UNKNOWN."""

from __future__ import annotations

import pytest

from jobkit.backends.pbs.states import PBS_STATES, normalize_pbs_state, split_exit_status
from jobkit.backends.slurm.states import (
    SLURM_COMPACT_STATES,
    SLURM_STATES,
    normalize_slurm_state,
)
from jobkit.core.states import State

SLURM_EXPECTED = {
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


@pytest.mark.parametrize(("raw", "expected"), sorted(SLURM_EXPECTED.items()))
def test_every_slurm_state(raw: str, expected: State) -> None:
    assert normalize_slurm_state(raw) is expected


def test_slurm_table_is_exactly_the_documented_states() -> None:
    assert SLURM_STATES == SLURM_EXPECTED


@pytest.mark.parametrize(("code", "word"), sorted(SLURM_COMPACT_STATES.items()))
def test_every_compact_slurm_code(code: str, word: str) -> None:
    assert normalize_slurm_state(code) is SLURM_EXPECTED[word]


@pytest.mark.parametrize(
    ("raw", "exit_code", "expected"),
    [
        ("CANCELLED by 0", None, State.CANCELLED),
        ("CANCELLED by 1234", 0, State.CANCELLED),
        ("CANCELLED+", None, State.CANCELLED),
        ("COMPLETED", 0, State.SUCCEEDED),
        ("COMPLETED", 2, State.FAILED),
        ("completed", None, State.SUCCEEDED),
        ("  RUNNING ", None, State.RUNNING),
        ("FAILED", 0, State.FAILED),
        ("NO_SUCH_STATE", None, State.UNKNOWN),
        ("", None, State.UNKNOWN),
        ("PENDING_SOMETHING_NEW", None, State.UNKNOWN),
    ],
)
def test_slurm_state_details(raw: str, exit_code: int | None, expected: State) -> None:
    assert normalize_slurm_state(raw, exit_code) is expected


PBS_EXPECTED = {
    "Q": State.QUEUED,
    "W": State.QUEUED,
    "T": State.QUEUED,
    "M": State.QUEUED,
    "H": State.HELD,
    "R": State.RUNNING,
    "E": State.RUNNING,
    "B": State.RUNNING,
    "S": State.SUSPENDED,
    "U": State.SUSPENDED,
    "C": State.SUCCEEDED,
    "F": State.SUCCEEDED,
    "X": State.SUCCEEDED,
}


@pytest.mark.parametrize(("letter", "expected"), sorted(PBS_EXPECTED.items()))
def test_every_pbs_state(letter: str, expected: State) -> None:
    assert normalize_pbs_state(letter) is expected


def test_pbs_table_is_exactly_the_documented_letters() -> None:
    assert PBS_STATES == PBS_EXPECTED


@pytest.mark.parametrize(
    ("letter", "exit_status", "substate", "expected"),
    [
        ("F", 0, 92, State.SUCCEEDED),
        ("F", 3, 92, State.FAILED),
        ("C", 1, None, State.FAILED),
        ("X", 0, None, State.SUCCEEDED),
        ("F", -29, 93, State.TIMEOUT),
        ("F", -27, 93, State.OUT_OF_MEMORY),
        ("F", -26, 93, State.OUT_OF_MEMORY),
        ("F", -25, 93, State.FAILED),
        ("F", -1, 93, State.FAILED),
        ("F", 271, 91, State.CANCELLED),
        ("F", None, 91, State.CANCELLED),
        ("F", 265, 92, State.FAILED),
        ("R", 3, None, State.RUNNING),
        ("Z", None, None, State.UNKNOWN),
        ("", None, None, State.UNKNOWN),
    ],
)
def test_pbs_state_details(
    letter: str, exit_status: int | None, substate: int | None, expected: State
) -> None:
    assert normalize_pbs_state(letter, exit_status, substate) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [(None, (None, None)), (0, (0, None)), (3, (3, None)), (271, (None, 15)), (-29, (-29, None))],
)
def test_pbs_exit_status_split(status: int | None, expected: tuple[int | None, int | None]) -> None:
    assert split_exit_status(status) == expected


def test_final_states() -> None:
    finals = {s for s in State if s.is_final}
    assert finals == {
        State.SUCCEEDED,
        State.FAILED,
        State.CANCELLED,
        State.TIMEOUT,
        State.NODE_FAIL,
        State.OUT_OF_MEMORY,
    }
