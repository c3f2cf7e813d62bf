"""A sweep's rows (issue 25): written in one transaction, the spec and script stored once.

A sweep's script holds every task's words, so a copy per task was N x N (a 1,000-task sweep
stored 137 MB). The first task's row holds the texts, the others name it; every reader hands
back whole records, sharing one copy.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jobkit.core.lifecycle import SUBMITTING
from jobkit.registry.db import RegistryError
from jobkit.registry.rows import shared_texts
from jobkit.registry.store import Store, TaskIntent, TaskSubmitted

SPEC = {"name": "sw", "backend": "slurm", "sweep": {"grid": {"lr": [1, 2, 3]}}}
SCRIPT = "#!/bin/bash\ncase $T in 0) w=1;; 1) w=2;; 2) w=3;; esac\n"


def _sweep(store: Store, count: int = 3, *, shared_dir: bool = True) -> tuple[str, list[str]]:
    sweep_id = store.new_id()
    records = store.create_sweep_intents(
        backend="slurm",
        name="sw",
        spec=SPEC,
        script=SCRIPT,
        workdir=Path("/tmp/work"),
        sweep_id=sweep_id,
        tasks=[
            TaskIntent(task=str(i), token=f"tok{i}", extra={"overrides": [["lr", i + 1]]})
            for i in range(count)
        ],
        job_dir=store.jobs_dir / sweep_id if shared_dir else None,
    )
    assert [r.task for r in records] == [str(i) for i in range(count)]
    return sweep_id, [r.jobkit_id for r in records]


def test_the_first_task_holds_the_texts_and_every_record_has_them() -> None:
    with Store() as store:
        sweep_id, ids = _sweep(store)
        with sqlite3.connect(store.path) as conn:
            stored = dict(
                (row[0], (row[1], row[2]))
                for row in conn.execute("SELECT jobkit_id, spec_json, script FROM job_texts")
            )
        assert stored[ids[0]][1] == SCRIPT
        assert stored[ids[1]] == stored[ids[2]] == (shared_texts(ids[0]), "")
        for found in (store.sweep(sweep_id), store.records_of(ids), store.list_jobs()):
            assert {r.script for r in found} == {SCRIPT}
            assert all(r.spec == SPEC for r in found)
            assert len({id(r.script) for r in found}) == 1  # one copy, shared
        one = store.get(ids[2])
        assert (one.script, one.spec, one.state, one.token) == (SCRIPT, SPEC, SUBMITTING, "tok2")
        assert one.run_id == ids[2] and one.attempt == 1 and one.sweep_id == sweep_id
        assert one.extra == {"overrides": [["lr", 3]]}
        assert sweep_id not in ids and len(set(ids)) == 3
        assert (store.jobs_dir / sweep_id).is_dir()


def test_tasks_of_a_launcher_sweep_get_their_own_folders() -> None:
    with Store() as store:
        _, ids = _sweep(store, shared_dir=False)
        assert [store.get(i).job_dir for i in ids] == [store.jobs_dir / i for i in ids]
        assert all((store.jobs_dir / i).is_dir() for i in ids)


def test_marking_the_tasks_submitted_matches_mark_submitted() -> None:
    with Store() as store:
        _, ids = _sweep(store)
        answers = [
            TaskSubmitted(
                i,
                scheduler_id=f"77_{n}",
                argv=["sbatch", "x"],
                log_paths={"out": f"/l/{n}.out", "run_dir": f"/r/{n}"},
                extra={"array_job": "77", "run_dir": f"/r/{n}"},
            )
            for n, i in enumerate(ids)
        ]
        marked = store.mark_tasks_submitted(answers[1:], now=50.0)
        single = store.mark_submitted(
            ids[0],
            scheduler_id="77_0",
            argv=["sbatch", "x"],
            log_paths={"out": "/l/0.out", "run_dir": "/r/0"},
            extra={"array_job": "77", "run_dir": "/r/0"},
            now=50.0,
        )
        for record in (single, *marked):
            assert record.state == "QUEUED" and record.submitted_at == 50.0
            assert record.extra["array_job"] == "77" and "run_dir" not in record.extra
            assert record.extra["overrides"]  # kept from the intent
            assert record.script == SCRIPT
            assert [c.state for c in store.history(record.jobkit_id)] == [SUBMITTING, "QUEUED"]
        assert [r.scheduler_id for r in marked] == ["77_1", "77_2"]


def test_a_task_unknown_to_the_registry_marks_none() -> None:
    with Store() as store:
        _, ids = _sweep(store)
        answers = [TaskSubmitted(i, f"9_{n}", ["sbatch"], {}) for n, i in enumerate(ids)]
        with pytest.raises(RegistryError, match="jkzzzzz"):
            store.mark_tasks_submitted([*answers, TaskSubmitted("jkzzzzz", "9_9", [], {})])
        assert {store.get(i).state for i in ids} == {SUBMITTING}  # one transaction


def test_all_failed_at_once() -> None:
    with Store() as store:
        _, ids = _sweep(store)
        store.mark_all_failed(ids, "submission refused: no")
        for i in ids:
            record = store.get(i)
            assert (record.state, record.reason) == ("FAILED", "submission refused: no")
            assert record.final_at is not None
