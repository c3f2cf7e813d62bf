"""Heartbeats as the trainer writes them (train/reporting/heartbeat.py, no torch needed) read
back by jobkit/hang/stall.py: when a running job counts as STALLED, and what `status` shows."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jobkit.core.conventions import HEARTBEAT_DIR
from jobkit.hang.stall import (
    format_age,
    job_progress,
    progress_of,
    read_beats,
    state_text,
    with_stall,
)
from jobkit.registry.record import JobRecord, new_record
from train.reporting.heartbeat import CHECKPOINT, DONE, TRAIN, Heartbeat


def beat(run_dir: Path, rank: int, step: int, phase: str = TRAIN) -> float:
    """Rank `rank`'s heartbeat at `step`, written by the trainer's writer; returns its time."""
    env = {"SLURMD_NODENAME": f"n{rank + 1}", "JOBKIT_NODE_INDEX": str(rank)}
    Heartbeat(run_dir, rank, env).write(step, phase)
    return float(json.loads((run_dir / HEARTBEAT_DIR / f"rank-{rank}.json").read_text())["time"])


def running(run_dir: Path, stall_after: int = 60, **values: object) -> JobRecord:
    spec = {"name": "x", "monitor": {"stall_after": stall_after}}
    fields = {
        "jobkit_id": "jk1",
        "backend": "local",
        "name": "x",
        "state": "RUNNING",
        "log_paths": {"run_dir": str(run_dir)},
        "spec_json": json.dumps(spec),
        **values,
    }
    return new_record(**fields)


def test_the_trainer_writes_an_atomic_rate_limited_heartbeat(tmp_path: Path) -> None:
    heart = Heartbeat(tmp_path, 3, {"SLURMD_NODENAME": "n2", "SLURM_NODEID": "1"}, every_s=60)
    heart.tick(1)  # the first tick writes
    path = tmp_path / HEARTBEAT_DIR / "rank-3.json"
    first = json.loads(path.read_text())
    assert (first["rank"], first["step"], first["phase"], first["node"]) == (3, 1, "train", "n2")
    assert first["node_index"] == 1 and first["pid"] > 0 and first["python"]
    heart.tick(2)  # within every_s: no write
    assert json.loads(path.read_text())["step"] == 1
    heart.write(2, CHECKPOINT)  # a phase change always writes
    assert json.loads(path.read_text())["phase"] == "checkpoint"
    assert [p.name for p in path.parent.iterdir()] == ["rank-3.json"]  # no temp file left


def test_fast_steps_then_a_hang_show_the_step_reached_and_its_age(tmp_path: Path) -> None:
    """The user's words: "last noted step 0 for both ranks while the log shows step 10/400".
    Ten fast steps (well within the once-a-second write limit), then the rank hangs: the
    file must say step 10, dated when step 10 was reached, not the first beat's step 0."""
    heart = Heartbeat(tmp_path, 0, {}, every_s=0.3)
    heart.start_training(0, 400)
    for step in range(1, 11):
        heart.tick(step)
    reached = time.time()
    path = tmp_path / HEARTBEAT_DIR / "rank-0.json"
    deadline = time.monotonic() + 10
    while json.loads(path.read_text())["step"] != 10:  # the flusher writes within ~2 intervals
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.05)
    written = json.loads(path.read_text())
    assert abs(written["time"] - reached) < 0.25, (written["time"], reached)
    assert (written["total"], written["first_step"]) == (400, 0)
    found = progress_of(read_beats(tmp_path), reached + 30, 20)
    assert found is not None and found.stalled and found.last_step == 10
    assert found.label() == "STALLED 30s"
    time.sleep(0.7)  # no newer step: the flusher leaves the file alone
    assert json.loads(path.read_text()) == written
    heart.write(10, DONE)


def test_an_unwritable_run_folder_warns_once_and_never_raises(tmp_path: Path) -> None:
    (tmp_path / HEARTBEAT_DIR).write_text("a file where the folder should be")
    warnings: list[str] = []
    heart = Heartbeat(tmp_path, 0, {}, warn=warnings.append)
    heart.write(0, TRAIN)
    heart.write(1, TRAIN)
    assert len(warnings) == 1 and "not written" in warnings[0], warnings


def test_stalled_when_no_rank_advanced_for_the_threshold(tmp_path: Path) -> None:
    beat(tmp_path, 0, 40)
    newest = beat(tmp_path, 1, 41)
    beats = read_beats(tmp_path)
    assert [(b.rank, b.step, b.node) for b in beats] == [(0, 40, "n1"), (1, 41, "n2")]
    fresh = progress_of(beats, newest + 59, 60)
    assert fresh is not None and not fresh.stalled
    late = progress_of(beats, newest + 725, 60)
    assert late is not None and late.stalled and late.label() == "STALLED 12m"
    assert late.last_step == 41 and late.to_dict()["since_progress_s"] == 725.0


def test_one_rank_moving_is_progress(tmp_path: Path) -> None:
    """The newest heartbeat counts: a stuck rank shows in doctor, not as a stalled job."""
    old = beat(tmp_path, 0, 5)
    found = progress_of(read_beats(tmp_path), old + 100, 60)
    assert found is not None and found.stalled
    recent = beat(tmp_path, 1, 90)
    found = progress_of(read_beats(tmp_path), recent + 1, 60)
    assert found is not None and not found.stalled


@pytest.mark.parametrize(("phase", "waiting"), [(CHECKPOINT, "checkpoint"), (DONE, "done")])
def test_a_long_checkpoint_save_or_the_end_is_not_a_hang(
    tmp_path: Path, phase: str, waiting: str
) -> None:
    at = beat(tmp_path, 0, 50, phase)
    if phase == CHECKPOINT:
        beat(tmp_path, 1, 50, TRAIN)  # rank 1 waits for rank 0's save
    else:
        beat(tmp_path, 1, 50, DONE)
    found = progress_of(read_beats(tmp_path), at + 3600, 60)
    assert found is not None and found.waiting == waiting and not found.stalled


def test_a_previous_runs_heartbeats_are_ignored(tmp_path: Path) -> None:
    """A requeued job keeps its run folder: files older than this run's start do not count."""
    at = beat(tmp_path, 0, 100)
    assert progress_of(read_beats(tmp_path), at + 500, 60, started_at=at + 300) is None
    assert progress_of(read_beats(tmp_path), at + 500, 60, started_at=at + 2) is not None


def test_unreadable_heartbeats_are_skipped(tmp_path: Path) -> None:
    beat(tmp_path, 0, 7)
    (tmp_path / HEARTBEAT_DIR / "rank-1.json").write_text('{"rank": 1, "st')  # torn write
    (tmp_path / HEARTBEAT_DIR / "rank-2.json").write_text('{"rank": 2}')  # not a heartbeat
    assert [b.rank for b in read_beats(tmp_path)] == [0]
    assert read_beats(tmp_path / "missing") == []


def test_status_shows_a_stalled_running_job(tmp_path: Path) -> None:
    at = beat(tmp_path, 0, 12)
    beat(tmp_path, 1, 12)
    record = running(tmp_path, stall_after=300)
    assert state_text(record, at + 299) == "RUNNING"
    assert state_text(record, at + 725) == "RUNNING (STALLED 12m)"
    data = with_stall(record.to_dict(), record, at + 725)
    ranks = data["stalled"]["ranks"]
    assert data["stalled"]["last_step"] == 12 and data["stalled"]["threshold_s"] == 300.0
    assert [(r["rank"], r["age_s"] >= 725) for r in ranks] == [(0, True), (1, True)]
    assert "stalled" not in with_stall(record.to_dict(), record, at + 10)


def test_status_shows_step_total_percent_and_eta_of_a_training_job(tmp_path: Path) -> None:
    """The user's words: users expect `RUNNING step 1,200/5,000 (24%) ETA 1:32:00` in status,
    from the trainer's heartbeats (the step, train.steps, when this run's training began)."""
    now = time.time()
    reached = now - 2.0  # step 1,200 was reached 2 s ago
    seconds_per_step = (5520 + 2) / 3800  # 3,800 steps left take 1:32:00 from now
    folder = tmp_path / HEARTBEAT_DIR
    folder.mkdir()
    for rank in (0, 1):
        beat_json = {
            "rank": rank,
            "pid": 1,
            "node": f"n{rank + 1}",
            "step": 1200 - rank,
            "phase": "train",
            "time": reached,
            "total": 5000,
            "first_step": 0,
            "first_time": reached - 1200 * seconds_per_step,
        }
        (folder / f"rank-{rank}.json").write_text(json.dumps(beat_json))
    record = running(tmp_path, stall_after=600)
    assert state_text(record, now) == "RUNNING step 1,200/5,000 (24%) ETA 1:32:00"
    data = with_stall(record.to_dict(), record, now)
    assert data["progress"] == {
        "step": 1200,
        "total": 5000,
        "percent": 24.0,
        "steps_per_s": round(1 / seconds_per_step, 3),
        "eta_s": 5520,
    }
    assert "stalled" not in data
    assert state_text(record, now + 3600) == "RUNNING (STALLED 1h00m)"  # stalled wins


def test_the_trainer_writes_what_progress_needs(tmp_path: Path) -> None:
    """A resumed run (from step 1,000) counts its rate from its own start."""
    heart = Heartbeat(tmp_path, 0, {}, every_s=0.0)
    heart.start_training(1000, 5000)
    time.sleep(0.05)
    heart.tick(1010)
    (found,) = read_beats(tmp_path)
    assert (found.step, found.total, found.first_step) == (1010, 5000, 1000)
    assert found.steps_per_s is not None and 10 / 0.5 < found.steps_per_s < 10 / 0.04
    heart.write(1010, DONE)


def test_only_running_jobs_are_looked_at(tmp_path: Path) -> None:
    at = beat(tmp_path, 0, 12)
    for state in ("QUEUED", "SUCCEEDED", "FAILED"):
        record = running(tmp_path, state=state)
        assert job_progress(record, at + 9999) is None
        assert state_text(record, at + 9999) == state


def test_an_older_record_gets_the_default_threshold(tmp_path: Path) -> None:
    at = beat(tmp_path, 0, 3)
    record = running(tmp_path, spec_json=json.dumps({"name": "x"}))
    found = job_progress(record, at + 1)
    assert found is not None and found.threshold_s == 600.0


def test_this_runs_start_comes_from_the_last_observation(tmp_path: Path) -> None:
    at = beat(tmp_path, 0, 3)
    now = time.time()
    record = running(tmp_path, observed_at=now, elapsed_s=now - at - 100)  # started after it
    assert job_progress(record, now) is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59.9, "59s"), (60, "1m"), (3700, "1h01m"), (90000, "1d01h")]
)
def test_ages(seconds: float, text: str) -> None:
    assert format_age(seconds) == text
