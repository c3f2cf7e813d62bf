"""Reading a run's metrics.jsonl and the restarts its rank-0 log notes.

The bundled trainer (train/reporting/runlog.py) appends one JSON object per logged step to
metrics.jsonl (rank 0): `step`, `time` (epoch seconds) and the values (loss, lr, grad_norm,
samples_per_s, tokens_per_s, loss_scale, epoch). An evaluation adds a record of its own,
marked `"split": "val"` (val_loss, val_acc, val_ppl, val_samples): read here, it joins the
step's record just before it, so each step stays one record. A requeued or restarted run
appends to the same file, and its rank-0.log gains a `resumed from step N (checkpoint)` line.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_RESUMED = re.compile(
    r"^(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) rank 0: resumed from step (?P<step>\d+)\b",
    re.MULTILINE,
)
RANK0_LOG = "rank-0.log"
"""The trainer's rank-0 log (train/reporting/runlog.py), next to metrics.jsonl."""


@dataclass(frozen=True)
class MetricsFile:
    """The records of one metrics.jsonl, in file order, and the lines that were not one."""

    path: Path
    records: list[dict[str, Any]]
    skipped_lines: list[int] = field(default_factory=list)
    """1-based numbers of lines that are not a JSON object with a numeric `step`; a last line
    still being written is left out silently."""


@dataclass(frozen=True)
class Resume:
    """One `resumed from step N` line of rank-0.log: a restart or requeue of the run."""

    step: int
    at: float
    """When (epoch seconds, to the second: the log's stamp is in local time)."""


def read_metrics(path: Path) -> MetricsFile:
    """The records of `path` (OSError when it cannot be read)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    unfinished = not text.endswith("\n")
    records: list[dict[str, Any]] = []
    skipped: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _record(line)
        if record is not None:
            _append(records, record)
        elif not (unfinished and number == len(lines)):
            skipped.append(number)
    return MetricsFile(path, records, skipped)


def _record(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    step = value.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    return value


def _append(records: list[dict[str, Any]], record: dict[str, Any]) -> None:
    """Add `record`; an evaluation's joins the record of the same step just before it."""
    last = records[-1] if records else None
    if (
        record.get("split") == "val"
        and last is not None
        and "split" not in last
        and last["step"] == record["step"]
    ):
        records[-1] = {**{k: v for k, v in record.items() if k != "split"}, **last}
    else:
        records.append(record)


def read_resumes(log_path: Path) -> list[Resume]:
    """Every `resumed from step N` of a rank-0 log, in order; [] without the file."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [Resume(int(match["step"]), _epoch(match["stamp"])) for match in _RESUMED.finditer(text)]


def _epoch(stamp: str) -> float:
    """The trainer's `%Y-%m-%dT%H:%M:%S` stamp (local time) as epoch seconds."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
