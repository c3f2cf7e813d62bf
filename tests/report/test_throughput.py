"""Throughput from metrics.jsonl records (the real trainer's file is checked in
tests/e2e/test_report.py)."""

from __future__ import annotations

import json
from pathlib import Path

from jobkit.report.throughput import read_metrics, runs_of, steady, throughput


def _records(steps: list[int], speed: list[float]) -> list[dict[str, object]]:
    return [
        {"step": s, "samples_per_s": v, "tokens_per_s": v * 10}
        for s, v in zip(steps, speed, strict=True)
    ]


def test_the_first_record_of_each_run_is_warm_up() -> None:
    records = _records([10, 20, 30, 40, 20, 30, 40], [5, 100, 102, 104, 7, 98, 96])
    assert [len(r) for r in runs_of(records)] == [4, 3]  # requeued at step 20
    assert [r["samples_per_s"] for r in steady(records)] == [100, 102, 104, 98, 96]
    got = throughput(records)
    assert got is not None
    assert (got.samples_per_s, got.tokens_per_s, got.used, got.records) == (100, 1000, 5, 7)
    assert got.last_step == 40 and got.gpu_mem_peak_mb is None and got.note is None


def test_one_record_is_used_and_said() -> None:
    got = throughput(_records([10], [50]))
    assert got is not None and got.samples_per_s == 50
    assert got.note == "only 1 record(s): no warm-up left out"


def test_gpu_figures_the_trainer_logs(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [
        json.dumps({"step": 10 * i, "samples_per_s": 10.0, "gpu_util_pct": u, "gpu_mem_peak_mb": m})
        for i, (u, m) in enumerate([(10, 100), (90, 2000), (80, 1900), (85, 2100)], start=1)
    ]
    path.write_text("\n".join([*lines, '{"torn']) + "\n")
    records = read_metrics(path)
    assert len(records) == 4
    got = throughput(records)
    assert got is not None and got.gpu_util_pct == 85 and got.gpu_mem_peak_mb == 2100
