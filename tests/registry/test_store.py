"""The registry: where it lives, what a job row holds, history, filters, concurrency."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from jobkit.backends.base import Observation
from jobkit.core.states import State
from jobkit.registry.store import (
    SCHEMA_VERSION,
    SUBMITTING,
    RegistryError,
    Store,
    jobkit_home,
    new_jobkit_id,
    scheduler_base_id,
)


def _intent(store: Store, name: str = "train", backend: str = "slurm", **kw: object):  # type: ignore[no-untyped-def]
    return store.create_intent(
        backend=backend,
        name=name,
        spec={"name": name, "backend": backend},
        script="#!/bin/bash\necho hi\n",
        workdir=Path("/tmp/work"),
        **kw,  # type: ignore[arg-type]
    )


def test_home_resolution(tmp_path: Path) -> None:
    assert jobkit_home({"JOBKIT_HOME": str(tmp_path)}) == tmp_path
    assert jobkit_home({"XDG_STATE_HOME": "/x/state"}) == Path("/x/state/jobkit")
    assert jobkit_home({}) == Path.home() / ".local" / "state" / "jobkit"


def test_opens_in_wal_mode_with_schema_version(jobkit_home: Path) -> None:
    with Store() as store:
        assert store.path == jobkit_home.resolve() / "jobkit.db"
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_newer_schema_is_refused(jobkit_home: Path) -> None:
    Store().close()
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match="newer than this jobkit understands"):
        Store()


def test_a_schema_1_registry_is_migrated_with_its_jobs(jobkit_home: Path) -> None:
    """A registry written by a jobkit with schema 1 (spec and script in the jobs row)."""
    from jobkit.registry.rows import MIGRATIONS

    jobkit_home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    conn.executescript(MIGRATIONS[1])
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version (version) VALUES (1)")
    conn.execute(
        "INSERT INTO jobs (jobkit_id, backend, scheduler_id, name, spec_json, script,"
        " created_at, workdir, job_dir, token, state)"
        " VALUES ('jkold01', 'slurm', '42', 'old', '{\"name\": \"old\"}', '#!/bin/bash\n',"
        " 1.0, '/w', '/j', 'tok', 'QUEUED')"
    )
    conn.commit()
    conn.close()
    with Store() as store:
        old = store.get("jkold01")
        assert (old.spec_json, old.script, old.scheduler_id) == (
            '{"name": "old"}',
            "#!/bin/bash\n",
            "42",
        )
        assert [r.jobkit_id for r in store.find("42")] == ["jkold01"]
        new = _intent(store)
        assert store.get(new.jobkit_id).script == "#!/bin/bash\necho hi\n"
        assert [r.jobkit_id for r in store.list_jobs(recent_final_s=None)] == [
            new.jobkit_id,
            "jkold01",
        ]
    conn = sqlite3.connect(jobkit_home / "jobkit.db")
    assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    # The jobs rows no longer carry the texts: a state update does not rewrite them.
    assert conn.execute("SELECT DISTINCT spec_json || script FROM jobs").fetchall() == [("",)]
    conn.close()


def test_state_updates_leave_the_spec_and_script_alone(jobkit_home: Path) -> None:
    with Store() as store:
        job = _intent(store)
        store.mark_submitted(job.jobkit_id, scheduler_id="7", argv=["sbatch"], log_paths={})
        store.record_observations(
            {job.jobkit_id: Observation(state=State.RUNNING, raw_state="RUNNING", source="squeue")}
        )
        again = store.get(job.jobkit_id)
        assert (again.state, again.script, again.spec) == (
            State.RUNNING.value,
            job.script,
            job.spec,
        )


def test_with_columns_is_replace(jobkit_home: Path) -> None:
    with Store() as store:
        job = _intent(store)
        assert job.spec == {"name": "train", "backend": "slurm"}  # decoded and cached
        columns = {"state": "RUNNING", "nodes": "n1", "exit_code": None}
        assert job.with_columns(columns) == replace(job, **columns)
        assert job.state == SUBMITTING  # the original is untouched
        other = job.with_columns({"spec_json": '{"name": "other"}'})
        assert other.spec == {"name": "other"}  # not the cached spec of the old JSON
        with pytest.raises(TypeError, match="no field 'no_such'"):
            job.with_columns({"no_such": 1})


def test_ids_are_short_and_never_numeric() -> None:
    ids = {new_jobkit_id() for _ in range(2000)}
    assert len(ids) > 1990  # 36**5 possibilities; the registry retries a collision
    for jobkit_id in ids:
        assert len(jobkit_id) == 7 and jobkit_id.startswith("jk")
        assert not jobkit_id.isdigit()
        assert jobkit_id == jobkit_id.lower() and jobkit_id.isalnum()


def test_id_collision_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    with Store() as store:
        ids = iter(["jkaaaaa", "jkaaaaa", "jkaaaaa", "jkbbbbb"])
        monkeypatch.setattr("jobkit.registry.newids.new_jobkit_id", lambda: next(ids))
        assert _intent(store).jobkit_id == "jkaaaaa"
        assert _intent(store).jobkit_id == "jkbbbbb"


def test_intent_then_submitted_then_observed() -> None:
    with Store() as store:
        rec = _intent(store)
        assert rec.state == SUBMITTING and rec.scheduler_id is None
        assert rec.job_dir == store.jobs_dir / rec.jobkit_id and rec.job_dir.is_dir()
        assert not rec.needs_poll()
        rec = store.mark_submitted(
            rec.jobkit_id,
            scheduler_id="123;east",
            argv=["sbatch", "x"],
            log_paths={"out": "/l/a.out"},
            extra={"run_dir": "/l/a"},
        )
        assert (rec.state, rec.scheduler_id, rec.submit_argv) == (
            "QUEUED",
            "123;east",
            ["sbatch", "x"],
        )
        assert rec.extra["run_dir"] == "/l/a" and rec.needs_poll()
        running = Observation(State.RUNNING, "RUNNING", "squeue", nodes="n1", elapsed_s=4.0)
        store.record_observations({rec.jobkit_id: running})
        store.record_observations({rec.jobkit_id: running})  # no change: no history line
        done = Observation(State.FAILED, "FAILED", "sacct", exit_code=3, max_rss="12K")
        before = rec
        written = store.record_observations({rec.jobkit_id: done})
        rec = store.get(rec.jobkit_id)
        assert (rec.state, rec.exit_code, rec.nodes, rec.max_rss) == ("FAILED", 3, "n1", "12K")
        # What it returns is what a fresh read shows (refresh updates records from it).
        assert replace(before, **written[rec.jobkit_id]) == rec
        assert rec.final_at is not None and rec.is_final and not rec.needs_poll()
        states = [(h.state, h.raw_state, h.source) for h in store.history(rec.jobkit_id)]
        assert states == [
            ("SUBMITTING", None, "jobkit"),
            ("QUEUED", None, "submit"),
            ("RUNNING", "RUNNING", "squeue"),
            ("FAILED", "FAILED", "sacct"),
        ]


def test_requeue_counted_from_running_to_queued() -> None:
    with Store() as store:
        rec = _intent(store)
        store.mark_submitted(rec.jobkit_id, scheduler_id="7", argv=[], log_paths={})
        for raw, state in [("RUNNING", State.RUNNING), ("REQUEUED", State.QUEUED)]:
            store.record_observations({rec.jobkit_id: Observation(state, raw, "squeue")})
        assert store.get(rec.jobkit_id).requeues == 1
        obs = Observation(State.RUNNING, "RUNNING", "squeue", requeues=3)
        store.record_observations({rec.jobkit_id: obs})
        assert store.get(rec.jobkit_id).requeues == 3


def test_a_requeued_job_keeps_the_time_its_earlier_runs_took() -> None:
    """Issue 24: after `scontrol requeue` squeue shows `PENDING 0:00`; the run that ended
    stays in `extra` (as last seen), and sacct's exact sum replaces it once it answers."""
    with Store() as store:
        rec = _intent(store)
        store.mark_submitted(rec.jobkit_id, scheduler_id="7", argv=[], log_paths={})
        running = Observation(State.RUNNING, "RUNNING", "squeue", elapsed_s=95.0, requeues=0)
        store.record_observations({rec.jobkit_id: running})
        back = Observation(State.QUEUED, "PENDING", "squeue", elapsed_s=0.0, requeues=1)
        written = store.record_observations({rec.jobkit_id: back})
        rec = store.get(rec.jobkit_id)
        assert (rec.state, rec.elapsed_s, rec.requeues) == ("QUEUED", 0.0, 1)
        assert written[rec.jobkit_id]["extra"] == rec.extra
        assert (rec.extra["earlier_runs"], rec.extra["earlier_runs_s"]) == (1, 95.0)
        assert rec.extra["earlier_runs_from"] == "last seen"
        # The same answer again adds nothing; sacct's own sum wins.
        store.record_observations({rec.jobkit_id: back})
        assert store.get(rec.jobkit_id).extra["earlier_runs_s"] == 95.0
        exact = replace(back, earlier_runs_s=100.0, earlier_runs_from="sacct")
        store.record_observations({rec.jobkit_id: exact})
        rec = store.get(rec.jobkit_id)
        assert (rec.extra["earlier_runs_s"], rec.extra["earlier_runs_from"]) == (100.0, "sacct")
        # Its second run, requeued again at 30 s: 100 + 30, counted once.
        again = Observation(State.RUNNING, "RUNNING", "squeue", elapsed_s=30.0, requeues=1)
        store.record_observations({rec.jobkit_id: again})
        for _ in range(2):
            store.record_observations({rec.jobkit_id: replace(back, requeues=2)})
        rec = store.get(rec.jobkit_id)
        assert (rec.extra["earlier_runs"], rec.extra["earlier_runs_s"]) == (2, 130.0)


def test_a_requeue_restarts_the_elapsed_a_scheduler_does_not_give() -> None:
    """A backend that says nothing of the new run's time (None) after a requeue: the ended
    run's elapsed is not kept as this run's (it would count twice)."""
    with Store() as store:
        rec = _intent(store, backend="pbs")
        store.mark_submitted(rec.jobkit_id, scheduler_id="7", argv=[], log_paths={})
        store.record_observations(
            {rec.jobkit_id: Observation(State.RUNNING, "R", "qstat", elapsed_s=40.0)}
        )
        store.record_observations({rec.jobkit_id: Observation(State.QUEUED, "Q", "qstat")})
        rec = store.get(rec.jobkit_id)
        assert (rec.requeues, rec.elapsed_s, rec.extra["earlier_runs_s"]) == (1, None, 40.0)


def test_cancel_is_kept_until_the_scheduler_confirms() -> None:
    with Store() as store:
        rec = _intent(store)
        store.mark_submitted(rec.jobkit_id, scheduler_id="8", argv=[], log_paths={})
        store.mark_cancelled([rec.jobkit_id])
        rec = store.get(rec.jobkit_id)
        assert rec.state == "CANCELLED" and rec.state_source == "cancel" and rec.needs_poll()
        lagging = Observation(State.RUNNING, "COMPLETING", "squeue")
        store.record_observations({rec.jobkit_id: lagging})
        assert store.get(rec.jobkit_id).state == "CANCELLED"
        confirmed = Observation(State.CANCELLED, "CANCELLED by 0", "sacct", exit_code=0, signal=15)
        store.record_observations({rec.jobkit_id: confirmed})
        rec = store.get(rec.jobkit_id)
        assert (rec.state_source, rec.signal) == ("sacct", 15) and not rec.needs_poll()


def test_mark_failed_records_reason() -> None:
    with Store() as store:
        rec = store.mark_failed(_intent(store).jobkit_id, "submission refused: nope")
        assert (rec.state, rec.reason) == ("FAILED", "submission refused: nope")
        assert store.history(rec.jobkit_id)[-1].reason == "submission refused: nope"


def test_list_filters_and_order() -> None:
    now = time.time()
    with Store() as store:
        old_done = _intent(store, "old", now=now - 3 * 86400)
        store.mark_failed(old_done.jobkit_id, "x", now=now - 3 * 86400)
        old_live = _intent(store, "old-live", now=now - 2 * 86400)
        store.mark_submitted(old_live.jobkit_id, scheduler_id="1", argv=[], log_paths={})
        recent = _intent(store, "fresh-a", backend="pbs", now=now - 60)
        newest = _intent(store, "fresh-b", now=now - 10)
        default = [r.name for r in store.list_jobs(now=now)]
        assert default == ["fresh-b", "fresh-a", "old-live"]
        assert len(store.list_jobs(recent_final_s=None)) == 4
        assert [r.name for r in store.list_jobs(name_glob="fresh-*", now=now)] == [
            "fresh-b",
            "fresh-a",
        ]
        assert [r.name for r in store.list_jobs(backend="pbs", now=now)] == ["fresh-a"]
        since = store.list_jobs(since=now - 3600, recent_final_s=None)
        assert [r.jobkit_id for r in since] == [newest.jobkit_id, recent.jobkit_id]
        assert [r.name for r in store.list_jobs(states=["QUEUED"], now=now)] == ["old-live"]
        assert store.newest() is not None and store.newest().jobkit_id == newest.jobkit_id  # type: ignore[union-attr]


def test_find_by_prefix_and_scheduler_id() -> None:
    with Store() as store:
        a = _intent(store)
        store.mark_submitted(a.jobkit_id, scheduler_id="4242;east", argv=[], log_paths={})
        b = _intent(store, backend="pbs")
        store.mark_submitted(b.jobkit_id, scheduler_id="77.server", argv=[], log_paths={})
        assert [r.jobkit_id for r in store.find(a.jobkit_id)] == [a.jobkit_id]
        assert a.jobkit_id in [r.jobkit_id for r in store.find(a.jobkit_id[:5])]
        assert [r.jobkit_id for r in store.find(a.jobkit_id[:6].upper())] == [a.jobkit_id]
        assert [r.jobkit_id for r in store.find("4242")] == [a.jobkit_id]
        assert [r.jobkit_id for r in store.find("4242;east")] == [a.jobkit_id]
        assert [r.jobkit_id for r in store.find("4242_3")] == [a.jobkit_id]
        assert [r.jobkit_id for r in store.find("77")] == [b.jobkit_id]
        assert store.find("424") == []
        both = {a.jobkit_id, b.jobkit_id}  # "jk" and "j": every job (ambiguous, not unknown)
        assert (
            {r.jobkit_id for r in store.find("jk")}
            == both
            == {r.jobkit_id for r in store.find("j")}
        )


@pytest.mark.parametrize(
    ("text", "base"),
    [("123", "123"), ("123_4", "123"), ("123;c", "123"), ("9.srv.x", "9"), ("5[2].s", "5")],
)
def test_scheduler_base_id(text: str, base: str) -> None:
    assert scheduler_base_id(text) == base


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from jobkit.backends.base import Observation
    from jobkit.core.states import State
    from jobkit.registry.store import Store

    worker, shared, go = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.005)
    store = Store()
    for k in range(200):
        if k % 2 == 0:
            store.create_intent(backend="slurm", name=f"w{worker}-{k}", spec={}, script="",
                                workdir=Path("/tmp"))
        else:
            obs = Observation(State.RUNNING, f"w{worker}-{k}", "squeue")
            store.record_observations({shared: obs})
    store.close()
    """
)


def test_eight_processes_times_two_hundred_updates(tmp_path: Path, jobkit_home: Path) -> None:
    with Store() as store:
        shared = _intent(store, "shared")
        store.mark_submitted(shared.jobkit_id, scheduler_id="1", argv=[], log_paths={})
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(i), shared.jobkit_id, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    time.sleep(0.5)  # let every worker import and wait at the start line
    go.touch()
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in out + err
    with Store() as store:
        assert store.count() == 1 + 8 * 100
        history = store.history(shared.jobkit_id)
        assert len(history) == 2 + 8 * 100  # intent, submitted, one per observation
        raws = {h.raw_state for h in history[2:]}
        assert raws == {f"w{w}-{k}" for w in range(8) for k in range(1, 200, 2)}
