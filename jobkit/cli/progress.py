"""The live progress line of `jobkit submit --wait` and `jobkit watch`: how far a running
training job is (`jobkit: jk3f9a2 step 1,200/5,000 (24%) ETA 1:32:00`, from its ranks'
heartbeats: jobkit/hang/stall.py).

On a terminal (stderr a TTY) it is one line rewritten in place, cleared before any other
line is printed; otherwise a plain line at most every PLAIN_EVERY_S, when it changed (a log
file or CI output gets a line a minute, not a line per poll)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

from jobkit.registry.record import JobRecord

PLAIN_EVERY_S = 60.0
"""How often a plain (not a terminal) progress line is printed at most."""
LOOK_EVERY_S = 1.0
"""How often the heartbeats are read at most (one small file per rank)."""


def progress_text(records: Sequence[JobRecord], now: float) -> tuple[str, bool] | None:
    """`jk3f9a2 step 1,200/5,000 (24%) ETA 1:32:00` for each running job whose heartbeats
    say how far it is (`; ` between jobs), and whether an ETA is known; None when no job
    says how far it is."""
    from jobkit.hang.stall import job_progress

    parts = []
    timed = False
    for record in records:
        progress = job_progress(record, now)
        label = progress.progress_label() if progress is not None else None
        if progress is not None and progress.stalled:
            label = f"{label or ''} {progress.label()}".strip()
        if label and progress is not None:
            parts.append(f"{record.jobkit_id} {label}")
            timed = timed or progress.eta_s() is not None
    return ("; ".join(parts), timed) if parts else None


class ProgressLine:
    """One progress line on `stream` (stderr): in place on a terminal, periodic otherwise."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._shown = False
        self._last_text: str | None = None
        self._last_plain = -PLAIN_EVERY_S
        self._next_look = 0.0

    def update(self, records: Sequence[JobRecord]) -> None:
        """Read the running jobs' progress (at most every LOOK_EVERY_S) and show it."""
        mono = time.monotonic()
        if mono < self._next_look:
            return
        self._next_look = mono + LOOK_EVERY_S
        found = progress_text(records, time.time())
        if found is None:
            self.clear()
            return
        text, timed = found
        line = f"jobkit: {text}"
        if self.live:
            self.stream.write(f"\r\033[K{line}")
            self.stream.flush()
            self._shown = True
        elif timed and text != self._last_text and mono - self._last_plain >= PLAIN_EVERY_S:
            # Plain output: once the rate is known, then at most once a minute.
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last_plain = mono
            self._last_text = text

    def clear(self) -> None:
        """Erase the line in place (before another line is printed, and at the end)."""
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown = False
