"""status / cancel / submit options that need no cluster: filters, formats, exact messages."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from jobkit.backends.base import Observation
from jobkit.backends.registry import BUILTIN, backend_class
from jobkit.cli.jobview import format_exit, render_table
from jobkit.cli.status import parse_since, parse_states
from jobkit.core.errors import UsageError
from jobkit.core.states import State
from jobkit.core.units import format_duration
from jobkit.manager.refresh import exit_status_for
from jobkit.registry.store import JobRecord, Store
from tests.manager.helpers import JOBKIT_BIN, Invoke


def _finished(store: Store, name: str, state: State, *, age_s: float = 60, **obs: object) -> str:
    """A job that ended `age_s` ago (final, so status does not poll it)."""
    now = time.time()
    rec = store.create_intent(
        backend="slurm", name=name, spec={}, script="", workdir=Path("/w"), now=now - age_s - 5
    )
    store.mark_submitted(
        rec.jobkit_id, scheduler_id=str(1000 + store.count()), argv=[], log_paths={}
    )
    observation = Observation(state, state.value, "sacct", **obs)  # type: ignore[arg-type]
    store.record_observations({rec.jobkit_id: observation}, now=now - age_s)
    return rec.jobkit_id


@pytest.fixture
def populated() -> dict[str, str]:
    with Store() as store:
        return {
            "ok": _finished(store, "train-a", State.SUCCEEDED, exit_code=0, elapsed_s=65.0),
            "bad": _finished(store, "train-b", State.FAILED, exit_code=3, nodes="n[1-2]"),
            "old": _finished(store, "eval", State.SUCCEEDED, age_s=3 * 86400, exit_code=0),
        }


def test_empty_registry(jobkit: Invoke) -> None:
    result = jobkit("status")
    assert (result.code, result.out) == (0, "")
    assert result.err == "jobkit: no tracked jobs to show (use --all for older ones)\n"


def test_default_hides_jobs_ended_over_a_day_ago(jobkit: Invoke, populated: dict[str, str]) -> None:
    shown = [line.split()[0] for line in jobkit("status").out.splitlines()[1:]]
    assert shown == [populated["bad"], populated["ok"]]
    every = [line.split()[0] for line in jobkit("status", "--all").out.splitlines()[1:]]
    assert every == [populated["bad"], populated["ok"], populated["old"]]


def test_filters(jobkit: Invoke, populated: dict[str, str]) -> None:
    def ids(*args: str) -> list[str]:
        result = jobkit("status", "--json", *args)
        assert result.code == 0, result.err
        return [r["jobkit_id"] for r in json.loads(result.out)]

    assert ids("--name", "train-*") == [populated["bad"], populated["ok"]]
    assert ids("--state", "failed") == [populated["bad"]]
    assert ids("--state", "SUCCEEDED,FAILED", "--all") == [
        populated["bad"],
        populated["ok"],
        populated["old"],
    ]
    assert ids("--since", "1h") == [populated["bad"], populated["ok"]]
    assert ids("--since", "4d") == [populated["bad"], populated["ok"], populated["old"]]
    assert ids("--backend", "pbs") == []


def test_last_is_the_newest_job(jobkit: Invoke, populated: dict[str, str]) -> None:
    result = jobkit("status", "--last", "--json")
    (detail,) = json.loads(result.out)
    assert detail["jobkit_id"] == populated["bad"]  # the most recently created
    assert [h["state"] for h in detail["history"]] == ["SUBMITTING", "QUEUED", "FAILED"]
    assert detail["spec"] == {} and detail["script"] == ""


def test_detail_view(jobkit: Invoke, populated: dict[str, str]) -> None:
    result = jobkit("status", populated["bad"])
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].startswith(f"{populated['bad']}  train-b  (slurm 10")
    assert lines[1].startswith("  state       FAILED (raw FAILED, from sacct 1m ago")
    assert "  nodes       n[1-2]" in lines
    assert "  exit code   3" in lines
    assert lines[-1].endswith("FAILED        [sacct]")


def test_table_columns(populated: dict[str, str]) -> None:
    with Store() as store:
        records = [store.get(populated["ok"]), store.get(populated["bad"])]
    table = render_table(records, time.time()).splitlines()
    assert table[0].split() == [
        "ID",
        "SCHED",
        "ID",
        "NAME",
        "BACKEND",
        "STATE",
        "ELAPSED",
        "NODES",
        "EXIT",
    ]
    assert table[1].split()[2:] == ["train-a", "slurm", "SUCCEEDED", "1:05", "-", "0"]
    assert table[2].split()[2:] == ["train-b", "slurm", "FAILED", "-", "n[1-2]", "3"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--state", "DONE"),
            "jobkit: --state 'DONE': not a state (one of QUEUED, HELD, RUNNING, SUSPENDED,"
            " SUCCEEDED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY,"
            " UNKNOWN, SUBMITTING)\n",
        ),
        (
            ("--since", "yesterday"),
            "jobkit: --since 'yesterday': give an age like 2h, 30m, 1d or an ISO time like"
            " 2024-05-01T12:00\n",
        ),
        (("--watch", "0"), "jobkit: --watch 0: must be a positive number of seconds\n"),
    ],
)
def test_bad_options(jobkit: Invoke, args: tuple[str, ...], message: str) -> None:
    result = jobkit("status", *args)
    assert (result.code, result.err) == (2, message)


def test_cancel_usage(jobkit: Invoke) -> None:
    result = jobkit("cancel")
    assert (result.code, result.err) == (2, "jobkit: give one or more job ids, or --last\n")


def test_cancel_of_a_job_still_being_submitted(jobkit: Invoke) -> None:
    with Store() as store:
        rec = store.create_intent(backend="slurm", name="x", spec={}, script="", workdir=Path("/w"))
    result = jobkit("cancel", rec.jobkit_id)
    assert result.code == 1
    assert result.err == (
        f"jobkit: {rec.jobkit_id} is still being submitted; try again in a moment\n"
    )


def test_watch_repeats_plain_tables_without_a_tty(workdir: Path, populated: dict[str, str]) -> None:
    """Each refresh is a plain frame (`--- ` header, then the table), not a redrawn screen.
    Interrupted once three headers are out (so two frames are whole), however slow the
    machine; a frame the interrupt cut short may lack its rows."""
    proc = subprocess.Popen(
        [*JOBKIT_BIN, "status", "--watch", "0.2"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while sum(line.startswith("--- ") for line in seen) < 3:
        assert time.monotonic() < deadline, seen
        line = proc.stdout.readline()
        assert line, (seen, proc.stderr.read() if proc.stderr else "")
        seen.append(line)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    out = "".join(seen) + rest
    frames = out.split("--- ")[1:]
    assert len(frames) >= 3
    assert all(populated["bad"] in frame for frame in frames[:-1]), out


def test_dry_run_local(jobkit: Invoke, workdir: Path) -> None:
    spec = workdir / "job.yaml"
    spec.write_text("name: dry\nrun:\n  command: echo hi\n")
    result = jobkit("submit", str(spec), "--dry-run", "--json")
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert plan["backend"] == "local" and plan["name"] == "dry"
    assert plan["script"] == jobkit("render", str(spec)).out
    with Store() as store:
        assert store.count() == 0


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1w", 604800)]
)
def test_parse_since_ages(text: str, seconds: int) -> None:
    assert parse_since(text, 10_000_000.0) == 10_000_000.0 - seconds


def test_parse_since_iso() -> None:
    assert parse_since("2024-05-01T12:00:00+00:00", 0) == 1714564800.0


def test_parse_states() -> None:
    assert parse_states(["running,queued", "Held"]) == ["RUNNING", "QUEUED", "HELD"]
    with pytest.raises(UsageError):
        parse_states(["nope"])


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (5, "0:05"), (65, "1:05"), (3725, "1:02:05"), (90061, "1-01:01:01")],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


def _record(state: str, exit_code: int | None = None, signal: int | None = None) -> JobRecord:
    with Store() as store:
        rec = store.create_intent(backend="slurm", name="x", spec={}, script="", workdir=Path("/w"))
        store.mark_submitted(rec.jobkit_id, scheduler_id="1", argv=[], log_paths={})
        obs = Observation(State(state), state, "sacct", exit_code=exit_code, signal=signal)
        store.record_observations({rec.jobkit_id: obs})
        return store.get(rec.jobkit_id)


@pytest.mark.parametrize(
    ("state", "exit_code", "sig", "status", "shown"),
    [
        ("SUCCEEDED", 0, None, 0, "0"),
        ("FAILED", 3, None, 3, "3"),
        ("FAILED", None, None, 1, "-"),
        ("CANCELLED", 0, 15, 143, "sig 15"),
        ("CANCELLED", None, None, 1, "-"),
        ("TIMEOUT", 0, None, 1, "-"),  # sacct 0:0 is not the program's code
        ("OUT_OF_MEMORY", 0, 9, 137, "sig 9"),
        ("FAILED", 300, None, 1, "300"),
    ],
)
def test_wait_exit_status(
    state: str, exit_code: int | None, sig: int | None, status: int, shown: str
) -> None:
    record = _record(state, exit_code, sig)
    assert exit_status_for(record) == status
    assert format_exit(record) == shown


def test_unavailable_backend_is_a_warning_not_a_crash(
    jobkit: Invoke, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    with Store() as store:
        rec = store.create_intent(backend="slurm", name="x", spec={}, script="", workdir=Path("/w"))
        store.mark_submitted(rec.jobkit_id, scheduler_id="5", argv=[], log_paths={})
    monkeypatch.setitem(BUILTIN, "slurm", "jobkit.backends.no_such_module:Nothing")
    backend_class.cache_clear()
    request.addfinalizer(backend_class.cache_clear)
    result = jobkit("status")
    assert result.code == 3
    assert result.err.startswith(
        "jobkit: warning: backend slurm failed (backend slurm is unavailable: No module named"
        " 'jobkit.backends.no_such_module'); showing states from 0s ago"
    )
    assert rec.jobkit_id in result.out and "QUEUED" in result.out


def test_timeout_and_cancelled_rows_show_no_exit_0(jobkit: Invoke) -> None:
    """The user's words: "TIMEOUT and CANCELLED rows show EXIT 0". sacct reports `0:0` for a
    job Slurm ended at its time limit and for a cancelled one: not the program's exit code."""
    with Store() as store:
        ended = {
            state: _finished(store, state.value.lower(), state, exit_code=0, signal=sig)
            for state, sig in ((State.TIMEOUT, None), (State.CANCELLED, None))
        }
        killed = _finished(store, "killed", State.CANCELLED, exit_code=0, signal=15)
        records = [store.get(job) for job in (*ended.values(), killed)]
    assert [format_exit(r) for r in records] == ["-", "-", "sig 15"]
    table = jobkit("status").out
    for job in ended.values():
        row = next(line for line in table.splitlines() if line.startswith(f"{job} "))
        assert row.split()[-1] == "-", row
    detail = jobkit("status", ended[State.TIMEOUT]).out
    assert "\n  exit code   -\n" in detail, detail
