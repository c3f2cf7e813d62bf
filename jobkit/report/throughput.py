"""Trainer throughput from a run folder's metrics.jsonl (train/loop/loop.py writes one record
per log interval): the median of the steady part, and what the trainer says of its GPUs."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WARMUP_FRACTION = 0.1
"""Each run's first records (at least one, this share of them) are warm-up: left out."""


@dataclass(frozen=True)
class Throughput:
    """What metrics.jsonl says about speed."""

    records: int
    used: int
    """Records in the steady part (the median's sample)."""
    last_step: int | None
    samples_per_s: float | None
    tokens_per_s: float | None
    gpu_util_pct: float | None
    """Median GPU utilisation the trainer logged (None: no GPU, or not logged)."""
    gpu_mem_peak_mb: float | None
    """Largest peak GPU memory (torch's max_memory_allocated) the trainer logged."""
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(vars(self))


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of metrics.jsonl, in order (a torn or foreign line is skipped)."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                records.append(value)
    return records


def runs_of(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split where the step does not grow: a requeued run appends from its checkpoint."""
    runs: list[list[dict[str, Any]]] = []
    last = None
    for record in records:
        step = record.get("step")
        if not runs or (isinstance(step, int) and isinstance(last, int) and step <= last):
            runs.append([])
        runs[-1].append(record)
        last = step
    return runs


def steady(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run without its first records (max(1, 10%)); all of them when that leaves none."""
    kept = []
    for run in runs_of(records):
        drop = max(1, int(len(run) * WARMUP_FRACTION))
        kept += run[drop:]
    return kept or records


def _numbers(records: list[dict[str, Any]], key: str) -> list[float]:
    return [
        float(r[key])
        for r in records
        if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
    ]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def throughput(records: list[dict[str, Any]]) -> Throughput | None:
    """Medians over the steady part; None without any record."""
    records = [r for r in records if r.get("split") != "val"]  # evaluations: not a step's speed
    if not records:
        return None
    part = steady(records)
    note = None
    if part is records:
        note = f"only {len(records)} record(s): no warm-up left out"
    steps = [int(s) for s in _numbers(records, "step")]
    peaks = _numbers(records, "gpu_mem_peak_mb")
    return Throughput(
        records=len(records),
        used=len(part),
        last_step=steps[-1] if steps else None,
        samples_per_s=_median(_numbers(part, "samples_per_s")),
        tokens_per_s=_median(_numbers(part, "tokens_per_s")),
        gpu_util_pct=_median(_numbers(part, "gpu_util_pct")),
        gpu_mem_peak_mb=max(peaks) if peaks else None,
        note=note,
    )
