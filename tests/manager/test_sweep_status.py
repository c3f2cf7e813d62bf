"""`jobkit status`, `cancel`, `report` of sweeps and of runs with several attempts, on
registry rows (no scheduler is asked: every row here has ended, so nothing is polled), and
the pure parts of the sweep view."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jobkit.backends.base import Observation
from jobkit.cli.sweepview import SweepGroup
from jobkit.cli.taskfacts import short_overrides
from jobkit.core.states import State
from jobkit.manager.sweep import overrides_pairs
from jobkit.registry.record import JobRecord, new_record
from jobkit.registry.selection import newest_attempts
from jobkit.registry.store import Store
from tests.plugins.invoke import Invoke

GRID = [
    {"optim.lr": "1e-3", "model.args.d_model": 64},
    {"optim.lr": "1e-3", "model.args.d_model": 128},
    {"optim.lr": "3e-4", "model.args.d_model": 64},
    {"optim.lr": "3e-4", "model.args.d_model": 128},
]


def _row(store: Store, *, sweep_id: str | None = None, task: str | None = None, **kw: Any) -> str:
    extra = {"overrides": overrides_pairs(GRID[int(task)])} if task is not None else {}
    record = store.create_intent(
        backend="slurm",
        name=kw.pop("name", "grid"),
        spec={"name": "grid", "backend": "slurm"},
        script="#!/bin/bash\n",
        workdir=Path("/tmp/work"),
        extra=extra,
        sweep_id=sweep_id,
        task=task,
        **kw,
    )
    return record.jobkit_id


def _end(store: Store, jobkit_id: str, scheduler_id: str, state: State, code: int = 0) -> None:
    store.mark_submitted(jobkit_id, scheduler_id=scheduler_id, argv=["sbatch"], log_paths={})
    raw = {State.SUCCEEDED: "COMPLETED", State.FAILED: "FAILED"}.get(state, state.value)
    obs = Observation(state=state, raw_state=raw, source="sacct", exit_code=code)
    store.record_observations({jobkit_id: obs})


def _sweep(store: Store) -> tuple[str, list[str]]:
    """A 4-task sweep, array 500: tasks 0 and 1 SUCCEEDED, 2 FAILED, 3 PREEMPTED then
    retried as attempt 2 (SUCCEEDED)."""
    sweep_id = store.new_id()
    ids = [_row(store, sweep_id=sweep_id, task=str(i)) for i in range(4)]
    for i, state in enumerate([State.SUCCEEDED, State.SUCCEEDED, State.FAILED, State.PREEMPTED]):
        _end(store, ids[i], f"500_{i}", state, 0 if state is State.SUCCEEDED else 1)
    retry = _row(store, sweep_id=sweep_id, task="3", run_id=ids[3], attempt=2)
    _end(store, retry, "501", State.SUCCEEDED)
    return sweep_id, [*ids, retry]


def test_a_sweep_is_one_line_counting_each_tasks_newest_attempt(jobkit: Invoke) -> None:
    with Store() as store:
        sweep_id, ids = _sweep(store)
        plain = _row(store, name="plain")
        _end(store, plain, "600", State.SUCCEEDED)
    result = jobkit("status")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    sweep_lines = [line for line in lines if line.startswith(sweep_id)]
    assert len(sweep_lines) == 1
    assert "4 tasks: 3 SUCCEEDED, 1 FAILED" in sweep_lines[0]
    assert any(line.startswith(plain) for line in lines)
    assert not any(i in result.out for i in ids)  # tasks only with --expand


def test_expand_lists_tasks_with_short_overrides_and_attempt(jobkit: Invoke) -> None:
    with Store() as store:
        sweep_id, ids = _sweep(store)
    result = jobkit("status", "--expand")
    assert result.code == 0, result.err
    by_id = {line.split()[0]: line for line in result.out.splitlines() if line.strip()}
    assert "task 0: lr=1e-3 d_model=64" in by_id[ids[0]]
    assert "task 2: lr=3e-4 d_model=64" in by_id[ids[2]] and "FAILED" in by_id[ids[2]]
    assert "task 3: lr=3e-4 d_model=128 (attempt 2)" in by_id[ids[4]]
    assert ids[3] not in by_id  # the superseded attempt
    assert "500_2" in by_id[ids[2]]
    assert "4 tasks: 3 SUCCEEDED, 1 FAILED" in by_id[sweep_id]


def test_status_of_a_sweep_id_shows_its_tasks_and_all_shows_every_attempt(
    jobkit: Invoke,
) -> None:
    with Store() as store:
        sweep_id, ids = _sweep(store)
    shown = jobkit("status", sweep_id)
    assert shown.code == 0, shown.err
    assert re.search(rf"^{sweep_id}\s+500\s+grid\s+slurm\s+4 tasks: 3 SUCCEEDED", shown.out, re.M)
    assert ids[4] in shown.out and ids[3] not in shown.out
    every = jobkit("status", sweep_id, "--all")
    assert ids[3] in every.out and "PREEMPTED" in every.out


def test_status_json_of_a_sweep_carries_tasks_and_overrides(jobkit: Invoke) -> None:
    with Store() as store:
        sweep_id, ids = _sweep(store)
    data = json.loads(jobkit("status", sweep_id, "--json").out)
    assert data[0]["sweep_id"] == sweep_id
    assert data[0]["counts"] == {"SUCCEEDED": 3, "FAILED": 1}
    tasks = {t["jobkit_id"]: t for t in data[0]["tasks"]}
    assert tasks[ids[1]]["overrides"] == GRID[1]
    assert (tasks[ids[4]]["run_id"], tasks[ids[4]]["attempt"]) == (ids[3], 2)
    listing = json.loads(jobkit("status", "--json").out)
    assert {r["jobkit_id"] for r in listing} == {ids[0], ids[1], ids[2], ids[4]}
    assert all(r["sweep_id"] == sweep_id for r in listing)


def test_one_job_view_lists_the_runs_attempts(jobkit: Invoke) -> None:
    with Store() as store:
        sweep_id, ids = _sweep(store)
    result = jobkit("status", ids[4])
    assert result.code == 0, result.err
    assert f"attempts    1 {ids[3]} 500_3 PREEMPTED, 2 {ids[4]} 501 SUCCEEDED" in result.out
    assert f"sweep       {sweep_id} task 3 (lr=3e-4 d_model=128)" in result.out
    data = json.loads(jobkit("status", ids[4], "--json").out)[0]
    assert [a["attempt"] for a in data["attempts"]] == [1, 2]
    assert data["overrides"] == GRID[3]


def test_a_plain_run_shows_its_newest_attempt_marked(jobkit: Invoke) -> None:
    with Store() as store:
        first = _row(store, name="long")
        _end(store, first, "700", State.PREEMPTED, 1)
        second = _row(store, name="long", run_id=first, attempt=2)
        _end(store, second, "701", State.SUCCEEDED)
    out = jobkit("status").out
    assert second in out and "long (attempt 2)" in out and first not in out
    assert first in jobkit("status", "--all").out


def test_cancel_of_an_ended_sweep_cancels_nothing(jobkit: Invoke) -> None:
    with Store() as store:
        sweep_id, _ = _sweep(store)
    result = jobkit("cancel", sweep_id)
    assert result.code == 0, result.err
    assert result.out == ""
    assert f"sweep {sweep_id}: every task already ended" in result.err


def test_report_of_a_sweep_sorts_tasks_by_final_loss(jobkit: Invoke, tmp_path: Path) -> None:
    losses = [2.5, 1.5, 3.0, 2.0]
    with Store() as store:
        sweep_id = store.new_id()
        for i, loss in enumerate(losses):
            jid = _row(store, sweep_id=sweep_id, task=str(i))
            run_dir = tmp_path / f"run-{i}"
            run_dir.mkdir()
            lines = [
                {"step": 10, "loss": loss + 1, "time": 100.0},
                {"step": 20, "loss": loss, "time": 110.0},
            ]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
            store.mark_submitted(
                jid, scheduler_id=f"800_{i}", argv=[], log_paths={"run_dir": str(run_dir)}
            )
            store.record_observations(
                {jid: Observation(State.SUCCEEDED, "COMPLETED", "sacct", exit_code=0)}
            )
    result = jobkit("report", sweep_id)
    assert result.code == 0, result.err
    rows = [line for line in result.out.splitlines() if line[:1].isdigit()]
    assert [row.split()[0] for row in rows] == ["1", "3", "0", "2"]
    assert "1.5000" in rows[0] and "1.00" in rows[0] and "lr=1e-3 d_model=128" in rows[0]
    data = json.loads(jobkit("report", sweep_id, "--json").out)[0]
    assert data["sorted_by"] == "final_loss"
    assert [t["final_loss"] for t in data["tasks"]] == sorted(losses)


def _rec(task: str, attempt: int, state: str, run_id: str | None = None) -> JobRecord:
    jid = f"jk{task}{attempt}xyz"
    return new_record(
        jobkit_id=jid,
        backend="slurm",
        name="g",
        state=state,
        created_at=float(attempt),
        workdir=Path("/w"),
        job_dir=Path("/w"),
        token=jid,
        spec_json="{}",
        script="",
        sweep_id="jkswp00",
        task=task,
        attempt=attempt,
        run_id=run_id or jid,
    )


def test_group_counts_newest_attempts_in_state_order() -> None:
    rows = [
        _rec("0", 1, "SUCCEEDED"),
        _rec("1", 1, "PREEMPTED"),
        _rec("1", 2, "RUNNING", run_id="jk11xyz"),
        _rec("2", 1, "FAILED"),
        _rec("3", 1, "RUNNING"),
    ]
    group = SweepGroup("jkswp00", rows)
    assert group.summary() == "4 tasks: 2 RUNNING, 1 SUCCEEDED, 1 FAILED"
    assert [r.jobkit_id for r in newest_attempts(rows)] == [
        "jk01xyz",
        "jk12xyz",
        "jk21xyz",
        "jk31xyz",
    ]


def test_short_overrides_keep_a_key_whose_last_part_is_shared() -> None:
    assert short_overrides({"optim.lr": 0.001, "model.args.d_model": 64}) == "lr=0.001 d_model=64"
    assert short_overrides({"a.x": 1, "b.x": True}) == "a.x=1 b.x=true"
    assert short_overrides({}) == "-"
