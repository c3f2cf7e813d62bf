"""Reading the trainer's heartbeats (`<run_dir>/heartbeat/rank-R.json`) and deciding whether a
running job is STALLED: no rank advanced for `monitor.stall_after` (docs/hangs.md).

Stdlib only and cheap: `jobkit status` calls it for RUNNING jobs alone, one small file per rank.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobkit.core.conventions import HEARTBEAT_DIR
from jobkit.core.lifecycle import State
from jobkit.registry.record import JobRecord

DEFAULT_STALL_AFTER_S = 600.0
"""monitor.stall_after's default (jobkit/spec/sections.py), for records without the key."""
START_SLACK_S = 5.0
"""A heartbeat older than the run's start by more than this is a previous run's (requeue)."""
WAITING_PHASES = frozenset({"checkpoint", "done"})
"""A rank in one of these phases is not stuck: a save in progress, or training finished."""


@dataclass(frozen=True)
class RankBeat:
    """One rank's heartbeat: where it runs and how far it got."""

    rank: int
    step: int
    time: float
    phase: str
    pid: int | None
    host: str
    node: str
    node_index: int | None
    python: str | None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RankBeat:
        """From the file's JSON; KeyError/TypeError/ValueError when it is not a heartbeat."""
        index = data.get("node_index")
        pid = data.get("pid")
        return cls(
            rank=int(data["rank"]),
            step=int(data["step"]),
            time=float(data["time"]),
            phase=str(data.get("phase") or "train"),
            pid=int(pid) if pid is not None else None,
            host=str(data.get("host") or ""),
            node=str(data.get("node") or data.get("host") or ""),
            node_index=int(index) if index is not None else None,
            python=str(data["python"]) if data.get("python") else None,
        )


def read_beats(run_dir: str | Path) -> list[RankBeat]:
    """Every rank's heartbeat in the run folder, by rank; unreadable files are skipped."""
    folder = Path(run_dir) / HEARTBEAT_DIR
    try:
        names = [p for p in folder.iterdir() if p.name.endswith(".json")]
    except OSError:
        return []
    beats: dict[int, RankBeat] = {}
    for path in names:
        try:
            beat = RankBeat.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        beats[beat.rank] = beat
    return [beats[rank] for rank in sorted(beats)]


def stall_after_s(record: JobRecord) -> float:
    """The job's `monitor.stall_after` in seconds (the default for older records)."""
    monitor = record.spec.get("monitor") if record.spec_json else None
    value = monitor.get("stall_after") if isinstance(monitor, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_STALL_AFTER_S


def run_started_at(record: JobRecord) -> float | None:
    """When the job's current run started, from its last observation (None: unknown)."""
    if record.observed_at is None or record.elapsed_s is None:
        return None
    return record.observed_at - record.elapsed_s


@dataclass(frozen=True)
class Progress:
    """How far a running job's ranks got and whether it counts as stalled."""

    threshold_s: float
    since_progress_s: float
    """Seconds since the newest heartbeat of any rank."""
    last_step: int
    beats: tuple[RankBeat, ...]
    now: float

    @property
    def waiting(self) -> str | None:
        """The phase that excuses the silence ("checkpoint": a save runs), or None."""
        phases = {beat.phase for beat in self.beats}
        if "checkpoint" in phases:
            return "checkpoint"
        if phases and phases <= WAITING_PHASES:
            return "done"
        return None

    @property
    def stalled(self) -> bool:
        """No rank advanced for the threshold, and no save or end explains it."""
        return self.since_progress_s >= self.threshold_s and self.waiting is None

    def label(self) -> str:
        """`STALLED 12m` (for the STATE column)."""
        return f"STALLED {format_age(self.since_progress_s)}"

    def to_dict(self) -> dict[str, Any]:
        """JSON: seconds since the last progress, the last step, each rank's age and step."""
        return {
            "since_progress_s": round(self.since_progress_s, 1),
            "threshold_s": self.threshold_s,
            "last_step": self.last_step,
            "ranks": [
                {
                    "rank": beat.rank,
                    "step": beat.step,
                    "age_s": round(self.now - beat.time, 1),
                    "phase": beat.phase,
                    "node": beat.node,
                    "pid": beat.pid,
                }
                for beat in self.beats
            ],
        }


def progress_of(
    beats: list[RankBeat], now: float, threshold_s: float, started_at: float | None = None
) -> Progress | None:
    """The job's progress from its ranks' heartbeats (those of this run only); None when no
    rank wrote one yet (the program is not the bundled trainer, or it is still starting)."""
    if started_at is not None:
        beats = [beat for beat in beats if beat.time >= started_at - START_SLACK_S]
    if not beats:
        return None
    newest = max(beat.time for beat in beats)
    return Progress(
        threshold_s=threshold_s,
        since_progress_s=max(now - newest, 0.0),
        last_step=max(beat.step for beat in beats),
        beats=tuple(beats),
        now=now,
    )


def job_progress(
    record: JobRecord, now: float, threshold_s: float | None = None
) -> Progress | None:
    """A RUNNING job's progress (None for any other state or without heartbeats)."""
    if record.state != State.RUNNING.value or not record.run_dir or record.is_array:
        return None
    limit = stall_after_s(record) if threshold_s is None else threshold_s
    return progress_of(read_beats(record.run_dir), now, limit, run_started_at(record))


def job_stall(record: JobRecord, now: float) -> Progress | None:
    """The job's progress when it is STALLED, else None."""
    found = job_progress(record, now)
    return found if found is not None and found.stalled else None


def state_text(record: JobRecord, now: float) -> str:
    """The STATE shown by `jobkit status`: `RUNNING (STALLED 12m)` or the state itself."""
    stall = job_stall(record, now)
    return f"{record.state} ({stall.label()})" if stall else record.state


def with_stall(data: dict[str, Any], record: JobRecord, now: float) -> dict[str, Any]:
    """`jobkit status --json`'s record with `"stalled": {...}` added when the job is STALLED."""
    stall = job_stall(record, now)
    if stall is not None:
        data["stalled"] = stall.to_dict()
    return data


def format_age(seconds: float) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`."""
    total = int(max(seconds, 0.0))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m"
    if total < 86400:
        return f"{total // 3600}h{total % 3600 // 60:02d}m"
    return f"{total // 86400}d{total % 86400 // 3600:02d}h"
