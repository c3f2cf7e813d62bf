"""The row mapping follows JobRecord; the run folder is stored once; old rows still read."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from pathlib import Path

from jobkit.core.lifecycle import StateSource
from jobkit.registry.record import JobRecord
from jobkit.registry.rows import COLUMNS
from jobkit.registry.store import Store

PATHS = {"out": "/w/logs/a-7.out", "err": "/w/logs/a-7.err", "run_dir": "/w/logs/a-7"}


def _submitted(store: Store, extra: dict[str, str]) -> JobRecord:
    rec = store.create_intent(
        backend="slurm", name="a", spec={"name": "a"}, script="#!/bin/bash\n", workdir=Path("/w")
    )
    return store.mark_submitted(
        rec.jobkit_id, scheduler_id="7", argv=["sbatch", "x"], log_paths=PATHS, extra=extra
    )


def test_every_record_field_is_a_column_of_jobs_and_job_rows(jobkit_home: Path) -> None:
    Store().close()
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    for table in ("jobs", "job_rows"):
        names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        assert set(COLUMNS) <= set(names), table
    conn.close()
    assert tuple(f.name for f in fields(JobRecord)) == COLUMNS


def test_a_record_reads_back_as_written(jobkit_home: Path) -> None:
    with Store() as store:
        rec = _submitted(store, {"array": "0-3"})
        again = store.get(rec.jobkit_id)
    assert again == rec
    assert (again.workdir, again.log_paths, again.submit_argv) == (
        Path("/w"),
        PATHS,
        ["sbatch", "x"],
    )
    assert again.state_source is StateSource.SUBMIT
    assert again.to_dict()["state_source"] == "submit"
    assert "token" not in again.to_dict() and "script" not in again.to_dict()


def test_the_run_folder_is_stored_once_and_handed_to_the_backend(jobkit_home: Path) -> None:
    with Store() as store:
        rec = _submitted(store, {"run_dir": PATHS["run_dir"], "array": "0-3"})
    assert rec.extra == {"array": "0-3"}
    assert rec.log_paths["run_dir"] == rec.run_dir == PATHS["run_dir"]
    assert rec.tracked().extra == {"array": "0-3", "run_dir": PATHS["run_dir"]}
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    stored = conn.execute("SELECT extra FROM jobs").fetchone()[0]
    conn.close()
    assert "run_dir" not in json.loads(stored)


def test_a_run_folder_other_than_the_log_paths_one_is_kept(jobkit_home: Path) -> None:
    with Store() as store:
        rec = _submitted(store, {"run_dir": "/elsewhere"})
    assert rec.tracked().extra["run_dir"] == "/elsewhere"


def test_an_older_row_with_the_run_folder_in_extra_still_reads(jobkit_home: Path) -> None:
    """Rows written before the run folder was stored once hold it in extra too."""
    with Store() as store:
        rec = _submitted(store, {})
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    old_extra = json.dumps({"run_dir": PATHS["run_dir"], "submitter": {"pid": 1}})
    conn.execute("UPDATE jobs SET extra = ?, log_paths = '{}'", (old_extra,))
    conn.commit()
    conn.close()
    with Store() as store:
        old = store.get(rec.jobkit_id)
    assert old.run_dir == PATHS["run_dir"]
    assert old.tracked().extra["run_dir"] == PATHS["run_dir"]
