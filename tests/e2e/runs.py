"""Reading what the bundled trainer left in a run folder: logs, metrics, checkpoints."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

_FINAL_LOSS = re.compile(r"final loss (?P<loss>\S+)$", re.MULTILINE)
_RESUMED = re.compile(r"resumed from step (?P<step>\d+)")
_CHECKPOINT = re.compile(r"^step-(?P<step>\d+)\.pt$")


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of metrics.jsonl (rank 0), in order; [] before the first one."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:  # a line being written
                break
    return records


def last_step(run_dir: Path) -> int:
    """The newest step in metrics.jsonl (0 before the first record)."""
    records = metrics(run_dir)
    return int(records[-1]["step"]) if records else 0


def rank_log(run_dir: Path, rank: int) -> str:
    """The trainer's own log of one rank (rank-R.log)."""
    return (run_dir / f"rank-{rank}.log").read_text()


def final_loss(run_dir: Path) -> float:
    """The `final loss X` rank 0 logged last (full precision: repr of the float)."""
    found = _FINAL_LOSS.findall(rank_log(run_dir, 0))
    assert found, f"no 'final loss' in {run_dir / 'rank-0.log'}"
    return float(found[-1])


def resumed_steps(run_dir: Path, rank: int = 0) -> list[int]:
    """Every step this rank resumed from, in order (one per restart or requeue)."""
    return [int(step) for step in _RESUMED.findall(rank_log(run_dir, rank))]


def checkpoint_steps(run_dir: Path) -> list[int]:
    """Steps of the complete checkpoints in run_dir/checkpoints, ascending."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    steps = []
    for path in folder.iterdir():
        match = _CHECKPOINT.match(path.name)
        if match:
            steps.append(int(match["step"]))
    return sorted(steps)


def assert_loss_fell(run_dir: Path, by: float = 0.2) -> tuple[float, float]:
    """The first and last logged losses; the last lower than the first by `by` at least."""
    records = metrics(run_dir)
    assert len(records) >= 2, f"fewer than 2 metric records in {run_dir}"
    first, last = float(records[0]["loss"]), float(records[-1]["loss"])
    assert last < first - by, f"loss did not fall: {first} -> {last} ({run_dir})"
    return first, last


def wait_for(predicate: Any, timeout: float, what: str, poll_s: float = 0.5) -> None:
    """Poll `predicate()` until it is true; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(poll_s)
