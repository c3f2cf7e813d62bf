"""Joining a run's attempts (jobkit/plot/join.py) and reading its files (read.py).

The records are shaped as the bundled trainer writes them (train/loop/loop.py `_report`: step,
loss, time...); the real trainer writing them across restarts is tests/plot/test_cli_plot.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from jobkit.plot.join import join, split_attempts
from jobkit.plot.read import Resume, read_metrics, read_resumes

T0 = 1_800_000_000.0


def rec(step: int, at: float, loss: float | None = 1.0) -> dict[str, Any]:
    """One record as the trainer writes it (`at`: seconds after T0)."""
    return {"step": step, "loss": loss, "lr": 0.1, "time": T0 + at}


def steps(records: list[dict[str, Any]]) -> list[int]:
    return [int(r["step"]) for r in records]


def test_a_run_that_never_restarted_is_one_attempt() -> None:
    records = [rec(s, s) for s in (10, 20, 30)]
    joined = join(records)
    assert joined.records == records
    assert [(a.first, a.count, a.resumed_from) for a in joined.attempts] == [(0, 3, None)]
    assert joined.restarts == []
    assert joined.metrics() == ["loss", "lr"]


def test_a_crash_repeats_steps_and_the_latest_attempt_wins() -> None:
    first = [rec(s, s) for s in range(1, 16)]  # checkpoint at 10, killed during step 16
    second = [rec(s, 100 + s, loss=2.0) for s in range(11, 31)]
    joined = join(first + second, [Resume(10, T0 + 99)])
    assert steps(joined.records) == list(range(1, 31))
    assert joined.records[:10] == first[:10] and joined.records[10:] == second
    (restart,) = joined.restarts
    assert (restart.first, restart.count, restart.resumed_from) == (15, 20, 10)
    assert (restart.first_step, restart.started_at) == (11, T0 + 99)


def test_a_clean_stop_repeats_nothing_and_the_log_marks_the_restart() -> None:
    """Preemption: a checkpoint at the last step, so only rank-0.log's line shows it."""
    first = [rec(s, s) for s in range(2, 13, 2)]
    second = [rec(s, 50 + s) for s in range(14, 31, 2)]
    joined = join(first + second, [Resume(12, T0 + 60)])
    assert joined.records == first + second
    (restart,) = joined.restarts
    assert (restart.first, restart.resumed_from, restart.first_step) == (6, 12, 14)


def test_without_the_log_a_clean_stop_is_not_guessed() -> None:
    records = [rec(s, s) for s in range(2, 13, 2)] + [rec(s, 50 + s) for s in range(14, 31, 2)]
    assert join(records).restarts == []


def test_a_restart_without_a_checkpoint_starts_again_from_step_one() -> None:
    first = [rec(s, s) for s in (1, 2, 3)]
    second = [rec(s, 10 + s, loss=0.5) for s in (1, 2, 3, 4)]
    joined = join(first + second)
    assert joined.records == second
    assert [(a.resumed_from, a.first_step) for a in joined.restarts] == [(None, 1)]


def test_steps_an_attempt_threw_away_are_left_out() -> None:
    """Attempt 1 reached 15, attempt 2 resumed from 10 and died at 13, attempt 3 resumed
    from 10 again: 14 and 15 of attempt 1 belong to no model that lived on."""
    one = [rec(s, s) for s in range(1, 16)]
    two = [rec(s, 100 + s, loss=2.0) for s in (11, 12, 13)]
    three = [rec(s, 200 + s, loss=3.0) for s in (11, 12)]
    resumes = [Resume(10, T0 + 100), Resume(10, T0 + 200)]
    joined = join(one + two + three, resumes)
    assert joined.records == one[:10] + three
    assert [(a.first, a.count, a.resumed_from) for a in joined.attempts] == [
        (0, 15, None),
        (15, 3, 10),
        (18, 2, 10),
    ]


def test_a_restart_that_logged_nothing_yet_is_kept() -> None:
    records = [rec(s, s) for s in (2, 4, 6)]
    attempts = split_attempts(records, [Resume(6, T0 + 100)])
    assert [(a.first, a.count, a.resumed_from) for a in attempts] == [(0, 3, None), (3, 0, 6)]
    assert join(records, [Resume(6, T0 + 100)]).records == records


def test_metrics_file_skips_bad_lines_but_not_a_line_being_written(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\nnot json\n[1]\n\n{"step": 2, "loss": null}\n{"st')
    file = read_metrics(path)
    assert file.records == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": None}]
    assert file.skipped_lines == [2, 3]
    path.write_text('{"step": 1}\n{"step": "x"}\n')
    assert read_metrics(path).skipped_lines == [2]


def test_resume_lines_of_the_rank0_log(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    log.write_text(
        "2026-01-02T03:04:05 rank 0: step 10/30 loss 3.1\n"
        "2026-01-02T03:04:09 rank 0: resumed from step 10 (/x/checkpoints/step-00000010.pt)\n"
        "2026-01-02T03:05:00 rank 1: resumed from step 10 (/x)\n"
    )
    at = time.mktime((2026, 1, 2, 3, 4, 9, 0, 0, -1))
    assert read_resumes(log) == [Resume(10, at)]
    assert read_resumes(tmp_path / "absent.log") == []


def test_an_evaluation_record_joins_its_steps_record(tmp_path: Path) -> None:
    """The trainer writes an evaluation as its own record (`"split": "val"`) after the
    step's; read, it is part of that step's record, so the step does not look repeated (a
    restart). One at a step without a training record stays a record of its own."""
    path = tmp_path / "metrics.jsonl"
    lines = [
        rec(5, 5),
        {"step": 5, "epoch": 0, "split": "val", "val_loss": 0.9, "time": T0 + 6},
        {"step": 8, "epoch": 1, "split": "val", "val_loss": 0.7, "time": T0 + 8},
        rec(10, 10),
        rec(9, 20),  # a restart from step 8
        {"step": 9, "epoch": 1, "split": "val", "val_loss": 0.8, "time": T0 + 21},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    records = read_metrics(path).records
    assert [(r["step"], r.get("loss"), r.get("val_loss")) for r in records] == [
        (5, 1.0, 0.9),
        (8, None, 0.7),
        (10, 1.0, None),
        (9, 1.0, 0.8),
    ]
    assert records[0]["time"] == T0 + 5 and "split" not in records[0]
    joined = join(records)
    assert [a.first_step for a in joined.attempts] == [5, 9]
    assert "val_loss" in joined.metrics()
    assert [(r["step"], r.get("val_loss")) for r in joined.records] == [
        (5, 0.9),
        (8, 0.7),
        (9, 0.8),
    ]
