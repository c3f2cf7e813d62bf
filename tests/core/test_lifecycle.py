"""The lifecycle rules on plain values: what an observation decides, the grace periods at
their boundaries, cancels, requeues, exit-code waits and UNKNOWN answers."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from jobkit.backends.base import Observation
from jobkit.core import lifecycle
from jobkit.core.lifecycle import (
    CANCEL_GRACE_S,
    EXIT_CODE_GRACE_S,
    FINAL_EXIT_WAIT_S,
    MISSING_GRACE_S,
    SUBMITTING,
    VANISHED_GRACE_S,
    Progress,
    State,
    StateSource,
    apply_observation,
    forgets_a_known_end,
    is_missing,
    needs_poll,
    settled,
    source_of,
)

T0 = 1_000_000.0


def _obs(state: State, raw: str | None = None, source: str = "squeue", **kw: object) -> Observation:
    return Observation(state, raw if raw is not None else state.value, source, **kw)  # type: ignore[arg-type]


RUNNING = Progress(
    "RUNNING",
    "RUNNING",
    "squeue",
    observed_at=T0,
    nodes="n1",
    elapsed_s=10.0,
    max_rss="1G",
    cpu_time="0:10",
)


# -- state sources --------------------------------------------------------------------------


def test_state_sources_are_the_stored_text() -> None:
    assert [s.value for s in StateSource] == [
        "jobkit",
        "submit",
        "adopted",
        "cancel",
        "pidfile",
        "exit-file",
    ]
    assert source_of("exit-file") is StateSource.EXIT_FILE
    assert source_of("slurm") == "slurm" and not isinstance(source_of("slurm"), StateSource)
    # A backend's own query words stay text (Backend.accounting_sources says which are
    # accounting).
    assert source_of("sacct") == "sacct" and not isinstance(source_of("sacct"), StateSource)
    assert source_of(None) is None
    assert f"[{StateSource.CANCEL}]" == "[cancel]"
    assert json.dumps({"s": StateSource.EXIT_FILE}) == '{"s": "exit-file"}'
    assert StateSource.CANCEL == "cancel" and "cancel" in {StateSource.CANCEL}


# -- applying an observation -----------------------------------------------------------------


def test_an_observation_replaces_the_state_and_keeps_known_values() -> None:
    new = apply_observation(RUNNING, _obs(State.RUNNING, reason=None, elapsed_s=20.0), T0 + 5)
    assert new == replace(RUNNING, observed_at=T0 + 5, elapsed_s=20.0)
    assert new is not None and new.state_source == "squeue"
    assert not lifecycle.is_history_change(RUNNING, new)


def test_an_end_sets_final_at_once_and_keeps_it() -> None:
    ended = apply_observation(RUNNING, _obs(State.FAILED, source="sacct", exit_code=3), T0 + 10)
    assert ended is not None
    assert (ended.state, ended.final_at, ended.exit_code, ended.nodes) == (
        "FAILED",
        T0 + 10,
        3,
        "n1",
    )
    assert ended.state_source == "sacct"
    assert lifecycle.is_history_change(RUNNING, ended)
    again = apply_observation(ended, _obs(State.FAILED, source="sacct", signal=9), T0 + 99)
    assert again is not None
    assert (again.final_at, again.exit_code, again.signal) == (T0 + 10, 3, 9)


def test_a_changed_raw_state_alone_is_a_history_line() -> None:
    new = apply_observation(RUNNING, _obs(State.RUNNING, "COMPLETING"), T0 + 1)
    assert new is not None and new.state == "RUNNING"
    assert lifecycle.is_history_change(RUNNING, new)


def test_requeue_after_running_counts_one() -> None:
    queued = apply_observation(RUNNING, _obs(State.QUEUED, "PENDING"), T0 + 1)
    assert queued is not None and queued.requeues == 1
    held = apply_observation(RUNNING, _obs(State.HELD, "REQUEUE_HOLD"), T0 + 1)
    assert held is not None and held.requeues == 1
    # the scheduler's own count wins, and never lowers what is known
    counted = apply_observation(RUNNING, _obs(State.QUEUED, requeues=3), T0 + 1)
    assert counted is not None and counted.requeues == 3
    lower = apply_observation(replace(RUNNING, requeues=5), _obs(State.RUNNING, requeues=2), T0)
    assert lower is not None and lower.requeues == 5
    # queued again while queued is no requeue
    still = apply_observation(replace(RUNNING, state="QUEUED"), _obs(State.QUEUED), T0 + 1)
    assert still is not None and still.requeues == 0


def test_a_requeue_after_a_final_state_clears_final_at() -> None:
    ended = Progress("FAILED", "FAILED", "sacct", observed_at=T0, final_at=T0, exit_code=1)
    back = apply_observation(ended, _obs(State.QUEUED, "PENDING", requeues=1), T0 + 30)
    assert back is not None
    assert (back.state, back.final_at, back.requeues, back.exit_code) == ("QUEUED", None, 1, 1)
    assert needs_poll(back, submitted=True, now=T0 + 10 * EXIT_CODE_GRACE_S)
    again = apply_observation(back, _obs(State.SUCCEEDED, "COMPLETED", exit_code=0), T0 + 60)
    assert again is not None and (again.final_at, again.exit_code) == (T0 + 60, 0)


# -- cancel ----------------------------------------------------------------------------------


CANCELLED = lifecycle.cancelled(T0)


def test_cancel_records_an_unconfirmed_cancelled() -> None:
    assert (CANCELLED.state, CANCELLED.state_source, CANCELLED.reason) == (
        "CANCELLED",
        StateSource.CANCEL,
        "cancelled by jobkit",
    )
    assert (CANCELLED.observed_at, CANCELLED.final_at) == (T0, T0)
    assert needs_poll(CANCELLED, submitted=True, now=T0 + 10 * EXIT_CODE_GRACE_S)
    assert not settled(replace(CANCELLED, exit_code=0), T0 + 10 * FINAL_EXIT_WAIT_S)


@pytest.mark.parametrize("late", [0.0, CANCEL_GRACE_S - 0.001])
def test_a_late_running_within_the_cancel_grace_is_ignored(late: float) -> None:
    assert apply_observation(CANCELLED, _obs(State.RUNNING), T0 + late) is None
    assert apply_observation(CANCELLED, _obs(State.QUEUED), T0 + late) is None


def test_running_after_the_cancel_grace_is_taken() -> None:
    new = apply_observation(CANCELLED, _obs(State.RUNNING), T0 + CANCEL_GRACE_S)
    assert new is not None
    assert (new.state, new.state_source, new.final_at) == ("RUNNING", "squeue", None)


@pytest.mark.parametrize("said", [State.FAILED, State.UNKNOWN, State.CANCELLED])
def test_an_end_after_a_cancel_confirms_cancelled(said: State) -> None:
    new = apply_observation(CANCELLED, _obs(said, source="sacct", signal=15), T0 + 1)
    assert new is not None
    assert (new.state, new.state_source, new.signal) == ("CANCELLED", "sacct", 15)
    assert new.final_at == T0  # the end was when the cancel was recorded
    assert not needs_poll(replace(new, exit_code=0), submitted=True, now=T0 + 2)


def test_success_before_the_cancel_reached_it_stands() -> None:
    new = apply_observation(CANCELLED, _obs(State.SUCCEEDED, "COMPLETED", exit_code=0), T0 + 1)
    assert new is not None and (new.state, new.exit_code) == ("SUCCEEDED", 0)


# -- polling and waiting ---------------------------------------------------------------------


def test_needs_poll() -> None:
    queued = Progress("QUEUED", state_source=StateSource.SUBMIT)
    assert needs_poll(queued, submitted=True, now=T0)
    assert not needs_poll(queued, submitted=False, now=T0)  # no scheduler id yet
    assert not needs_poll(Progress(SUBMITTING), submitted=True, now=T0)
    done = Progress("SUCCEEDED", state_source="sacct", final_at=T0, exit_code=0)
    assert not needs_poll(done, submitted=True, now=T0)


def test_exit_code_grace_boundary() -> None:
    no_code = Progress("FAILED", state_source="squeue", final_at=T0)
    assert needs_poll(no_code, submitted=True, now=T0 + EXIT_CODE_GRACE_S - 0.001)
    assert not needs_poll(no_code, submitted=True, now=T0 + EXIT_CODE_GRACE_S)


def test_settled_waits_for_an_exit_code_up_to_the_boundary() -> None:
    no_code = Progress("FAILED", state_source="squeue", final_at=T0)
    assert not settled(no_code, T0 + FINAL_EXIT_WAIT_S - 0.001)
    assert settled(no_code, T0 + FINAL_EXIT_WAIT_S)
    assert settled(replace(no_code, exit_code=2), T0)
    assert not settled(RUNNING, T0 + 10 * FINAL_EXIT_WAIT_S)


# -- missing, vanished and UNKNOWN -----------------------------------------------------------


@pytest.mark.parametrize("source", [None, *lifecycle.JOBKIT_SOURCES])
def test_a_job_never_reported_is_missing_after_the_missing_grace(source: object) -> None:
    job = Progress("QUEUED", state_source=source, observed_at=T0)  # type: ignore[arg-type]
    assert not is_missing(job, since=T0, at=T0 + MISSING_GRACE_S - 0.001)
    assert is_missing(job, since=T0, at=T0 + MISSING_GRACE_S)


def test_a_job_reported_then_gone_is_missing_after_the_vanished_grace() -> None:
    seen = replace(RUNNING, observed_at=T0 + 100)
    assert not is_missing(seen, since=T0, at=T0 + 100 + VANISHED_GRACE_S - 0.001)
    assert is_missing(seen, since=T0, at=T0 + 100 + VANISHED_GRACE_S)
    # a backend-name source (an earlier missing answer) is a scheduler's word too
    other = Progress("HELD", state_source="slurm", observed_at=None)
    assert not is_missing(other, since=T0, at=T0 + VANISHED_GRACE_S - 1)
    assert is_missing(other, since=T0, at=T0 + VANISHED_GRACE_S)


def test_final_and_unknown_jobs_are_never_missing() -> None:
    late = T0 + 100 * VANISHED_GRACE_S
    assert not is_missing(Progress("SUCCEEDED", state_source="sacct"), since=T0, at=late)
    assert not is_missing(Progress("UNKNOWN", state_source="slurm"), since=T0, at=late)


def test_an_unknown_answer_never_erases_a_known_end() -> None:
    ended = Progress("FAILED", "FAILED", "squeue", final_at=T0, exit_code=1)
    unknown = _obs(State.UNKNOWN, "", "slurm", reason=lifecycle.MISSING_REASON)
    assert forgets_a_known_end(ended, unknown)
    assert not forgets_a_known_end(RUNNING, unknown)
    assert not forgets_a_known_end(ended, _obs(State.QUEUED))
    # after a cancel, UNKNOWN confirms the cancel instead
    assert not forgets_a_known_end(CANCELLED, unknown)
    # a running job told UNKNOWN becomes UNKNOWN, keeping what was known
    new = apply_observation(RUNNING, unknown, T0 + 1)
    assert new is not None
    assert (new.state, new.state_source, new.nodes, new.final_at) == (
        "UNKNOWN",
        "slurm",
        "n1",
        None,
    )
