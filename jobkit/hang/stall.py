"""Reading the trainer's heartbeats (`<run_dir>/heartbeat/rank-R.json`) and deciding whether a
running job is STALLED: no rank advanced for `monitor.stall_after` (docs/hangs.md).

Stdlib only and cheap: `jobkit status` calls it for RUNNING jobs alone, one small file per rank.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobkit.core import units
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
    total: int | None = None
    """train.steps (the trainer's; None from an older trainer or another program)."""
    first_step: int | None = None
    first_time: float | None = None
    """The step and time this run's training started at: the rate counts from there."""

    @property
    def steps_per_s(self) -> float | None:
        """This run's training rate up to this beat; None before a step was taken."""
        if self.first_step is None or self.first_time is None:
            return None
        steps, seconds = self.step - self.first_step, self.time - self.first_time
        return steps / seconds if steps > 0 and seconds > 0 else None

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
            total=_int_or_none(data.get("total")),
            first_step=_int_or_none(data.get("first_step")),
            first_time=float(data["first_time"]) if data.get("first_time") is not None else None,
        )


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


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

    @property
    def total(self) -> int | None:
        """train.steps, when the ranks' heartbeats say it."""
        totals = [beat.total for beat in self.beats if beat.total]
        return max(totals) if totals else None

    def eta_s(self) -> float | None:
        """Seconds until the last step at the rate of the furthest rank so far (this run's
        training only), counted from now; None without a total or a rate."""
        total = self.total
        lead = max(self.beats, key=lambda beat: beat.step)
        rate = lead.steps_per_s
        if total is None or rate is None:
            return None
        return max((total - lead.step) / rate - (self.now - lead.time), 0.0)

    def progress_label(self) -> str | None:
        """`step 1,200/5,000 (24%) ETA 1:32:00` (the ETA once a step was timed); None
        without a total."""
        total = self.total
        if total is None:
            return None
        step = min(self.last_step, total)
        text = f"step {step:,}/{total:,} ({100 * step // max(total, 1)}%)"
        eta = self.eta_s()
        return text if eta is None else f"{text} ETA {units.format_clock(eta)}"

    def progress_dict(self) -> dict[str, Any] | None:
        """`status --json`'s `progress`: step, total, percent, steps/s and ETA seconds."""
        total = self.total
        if total is None:
            return None
        eta = self.eta_s()
        lead = max(self.beats, key=lambda beat: beat.step)
        rate = lead.steps_per_s
        return {
            "step": self.last_step,
            "total": total,
            "percent": round(100 * min(self.last_step, total) / max(total, 1), 1),
            "steps_per_s": round(rate, 3) if rate is not None else None,
            "eta_s": round(eta) if eta is not None else None,
        }

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
    """The STATE shown by `jobkit status`: `RUNNING (STALLED 12m)`, `RUNNING step
    1,200/5,000 (24%) ETA 1:32:00`, or the state itself. Only a RUNNING row reads files (its
    ranks' heartbeats); every other row costs nothing."""
    progress = job_progress(record, now)
    if progress is None:
        return record.state
    if progress.stalled:
        return f"{record.state} ({progress.label()})"
    label = progress.progress_label()
    return f"{record.state} {label}" if label else record.state


def with_stall(data: dict[str, Any], record: JobRecord, now: float) -> dict[str, Any]:
    """`jobkit status --json`'s record with `"stalled": {...}` added when the job is STALLED
    and `"progress": {...}` when its heartbeats say how far it is."""
    progress = job_progress(record, now)
    if progress is None:
        return data
    if progress.stalled:
        data["stalled"] = progress.to_dict()
    found = progress.progress_dict()
    if found is not None:
        data["progress"] = found
    return data


def format_age(seconds: float) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h` (core/units.format_age, fine)."""
    return units.format_age(seconds, fine=True)
