"""Runs, attempts, sweeps and the bad-node list in the registry (migration 3, issue 16)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from jobkit.registry.store import SCHEMA_VERSION, Store


def _intent(store: Store, name: str = "train", **kw: object):  # type: ignore[no-untyped-def]
    return store.create_intent(
        backend="slurm",
        name=name,
        spec={"name": name, "backend": "slurm"},
        script="#!/bin/bash\necho hi\n",
        workdir=Path("/tmp/work"),
        **kw,  # type: ignore[arg-type]
    )


def test_a_first_attempt_is_its_own_run_and_later_attempts_share_it() -> None:
    with Store() as store:
        first = _intent(store)
        assert (first.run_id, first.attempt, first.run_key) == (first.jobkit_id, 1, first.jobkit_id)
        second = _intent(store, run_id=first.jobkit_id, attempt=2)
        third = _intent(store, run_id=first.jobkit_id, attempt=3)
        other = _intent(store)
        assert [r.jobkit_id for r in store.attempts(first.jobkit_id)] == [
            first.jobkit_id,
            second.jobkit_id,
            third.jobkit_id,
        ]
        assert [r.attempt for r in store.attempts(first.jobkit_id)] == [1, 2, 3]
        assert [r.jobkit_id for r in store.attempts(other.jobkit_id)] == [other.jobkit_id]
        assert second.to_dict()["run_id"] == first.jobkit_id


def test_a_sweep_is_found_by_its_id_in_task_order(tmp_path: Path) -> None:
    with Store() as store:
        sweep_id = store.new_id()
        shared = store.jobs_dir / sweep_id
        tasks = [_intent(store, sweep_id=sweep_id, task=str(i), job_dir=shared) for i in (10, 2, 0)]
        retry = _intent(
            store, sweep_id=sweep_id, task="2", run_id=tasks[1].jobkit_id, attempt=2, job_dir=shared
        )
        found = store.find(sweep_id)
        assert [(r.task, r.attempt) for r in found] == [("0", 1), ("2", 1), ("2", 2), ("10", 1)]
        assert retry.jobkit_id in {r.jobkit_id for r in found}
        assert {r.job_dir for r in found} == {shared}
        assert shared.is_dir()
        # A task is still found by its own id alone.
        assert [r.jobkit_id for r in store.find(tasks[0].jobkit_id)] == [tasks[0].jobkit_id]
        assert store.new_id() not in {sweep_id, *(r.jobkit_id for r in found)}


def test_bad_nodes_expire_keep_the_later_end_and_clear() -> None:
    with Store() as store:
        store.add_bad_nodes(
            "slurm", None, ["n2"], reason="NODE_FAIL", jobkit_id="jkaaaaa", until=200.0, now=100.0
        )
        store.add_bad_nodes("slurm", "c2", ["n1"], reason="by hand", jobkit_id=None, until=150.0)
        listed = store.bad_nodes(now=120.0)
        assert [(b.backend, b.cluster, b.node, b.until) for b in listed] == [
            ("slurm", "", "n2", 200.0),
            ("slurm", "c2", "n1", 150.0),
        ]
        # Seen bad again with an earlier end: the later end is kept, the newer reason shown.
        store.add_bad_nodes(
            "slurm", "", ["n2"], reason="preflight", jobkit_id="jkbbbbb", until=180.0, now=130.0
        )
        (n2,) = [b for b in store.bad_nodes(now=130.0) if b.node == "n2"]
        assert (n2.until, n2.reason, n2.jobkit_id, n2.added_at) == (
            200.0,
            "preflight",
            "jkbbbbb",
            130.0,
        )
        assert [b.node for b in store.bad_nodes(now=160.0)] == ["n2"]
        assert len(store.bad_nodes(now=160.0, include_expired=True)) == 2
        assert store.clear_bad_nodes(nodes=["n2"]) == 1
        assert store.clear_bad_nodes() == 1
        assert store.bad_nodes(include_expired=True) == []


def test_a_schema_2_registry_gains_runs_with_its_jobs_as_their_own_runs(jobkit_home: Path) -> None:
    from jobkit.registry.rows import MIGRATIONS

    jobkit_home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    conn.executescript(MIGRATIONS[1])
    conn.executescript(MIGRATIONS[2])
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.executemany("INSERT INTO schema_version (version) VALUES (?)", [(1,), (2,)])
    conn.execute(
        "INSERT INTO jobs (jobkit_id, backend, scheduler_id, name, spec_json, script,"
        " created_at, workdir, job_dir, token, state)"
        " VALUES ('jkold02', 'slurm', '42', 'old', '', '', 1.0, '/w', '/j', 'tok', 'QUEUED')"
    )
    conn.execute(
        "INSERT INTO job_texts (jobkit_id, spec_json, script) VALUES ('jkold02', '{}', 'x')"
    )
    conn.commit()
    conn.close()
    with Store() as store:
        old = store.get("jkold02")
        assert (old.run_id, old.run_key, old.attempt, old.sweep_id, old.task) == (
            None,
            "jkold02",
            1,
            None,
            None,
        )
        assert [r.jobkit_id for r in store.attempts("jkold02")] == ["jkold02"]
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_a_sweep_id_where_one_job_is_needed_names_its_tasks() -> None:
    import pytest

    from jobkit.registry.ids import SweepNamedError, resolve_job

    with Store() as store:
        sweep_id = store.new_id()
        tasks = [_intent(store, sweep_id=sweep_id, task=str(i)) for i in range(2)]
        with pytest.raises(SweepNamedError) as caught:
            resolve_job(store, sweep_id)
        assert str(caught.value) == (
            f"'{sweep_id}' is a sweep of 2 jobs: name one task (task 0 {tasks[0].jobkit_id},"
            f" task 1 {tasks[1].jobkit_id}); `jobkit status {sweep_id}` lists them"
        )
