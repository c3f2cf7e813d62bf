"""Each rank's heartbeat: `<run_dir>/heartbeat/rank-R.json` with its step, the time, its pid,
host and phase (setup, train, checkpoint, done). `jobkit status` calls a running job STALLED
when no rank's heartbeat moved for `monitor.stall_after`; `jobkit doctor` finds each rank's
process through it (docs/hangs.md).

Written atomically (a temp file, then os.replace), at phase changes and, while training, at
most once per HEARTBEAT_EVERY_S as the step advances: a step costs one clock read. `time` is
when the rank last advanced (its last step or eval batch), not when the file was written:
steps faster than HEARTBEAT_EVERY_S are noted without a write, and a small background thread
writes the last noted step once the interval has passed, so a rank that hangs right after a
burst of fast steps shows the step it reached and the age of that step (docs/hangs.md).
`total` (train.steps) and the first step and time of this run's training give `jobkit
status` its `step 1,200/5,000 (24%) ETA 1:32:00`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jobkit.core.conventions import HEARTBEAT_DIR, HEARTBEAT_EVERY_S, heartbeat_file

SETUP, TRAIN, CHECKPOINT, DONE = "setup", "train", "checkpoint", "done"


def _node_index(environ: Mapping[str, str]) -> int | None:
    """This host's number in the job: jobkit's (torchrun) or Slurm's (srun tasks)."""
    for name in ("JOBKIT_NODE_INDEX", "SLURM_NODEID"):
        text = environ.get(name, "").strip()
        if text.isdigit():
            return int(text)
    return None


class Heartbeat:
    """One rank's heartbeat file; never raises (a full disk must not stop training)."""

    def __init__(
        self,
        run_dir: Path,
        rank: int,
        environ: Mapping[str, str] | None = None,
        every_s: float = HEARTBEAT_EVERY_S,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        folder = run_dir / HEARTBEAT_DIR
        self.path = folder / heartbeat_file(rank)
        self._temp = folder / f".{self.path.name}.{os.getpid()}.tmp"
        self.every_s = every_s
        self.error: str | None = None
        self._warn = warn
        host = socket.gethostname()
        self._fixed: dict[str, Any] = {
            "rank": rank,
            "pid": os.getpid(),
            "host": host,
            "node": env.get("SLURMD_NODENAME") or host,
            "node_index": _node_index(env),
            "python": sys.executable,
        }
        self._due = 0.0
        self._lock = threading.Lock()
        self._noted: tuple[int, float] | None = None
        """The last step ticked and when (monotonic), not yet written."""
        self._run: dict[str, Any] = {}
        """This run's total steps, first step and its time (for progress and ETA)."""
        self._flushed: tuple[int, float] | None = None
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None

    def start_training(self, step: int, total: int) -> None:
        """Training (re)starts at `step` of `total`: written now, and the rate counts from
        here (a resumed run's earlier steps are not in its ETA)."""
        self._run = {"total": total, "first_step": step, "first_time": time.time()}
        self.write(step, TRAIN)

    def tick(self, step: int) -> None:
        """After each step (or eval batch): the step noted with one clock read; the file is
        rewritten when `every_s` has passed since the last write, else by the flusher."""
        now = time.monotonic()
        if now >= self._due:
            self.write(step, TRAIN)
        else:
            self._noted = (step, now)
            if self._flusher is None:
                self._start_flusher()

    def write(
        self,
        step: int,
        phase: str,
        *,
        at: float | None = None,
        noted: tuple[int, float] | None = None,
    ) -> None:
        """Write the file now (a phase change); an OSError stops further writes. `at` and
        `noted` are the flusher's: when the step was reached (time.time()), and the note it
        writes, skipped when the training thread wrote or noted a newer step meanwhile."""
        if self.error is not None:
            return
        with self._lock:
            if noted is None:
                self._noted = None  # the training thread: its own note is now written
            elif self._noted is not noted:
                return
            else:
                self._flushed = noted
            record = {
                **self._fixed,
                **self._run,
                "step": step,
                "phase": phase,
                "time": time.time() if at is None else at,
            }
            try:
                if self._due == 0.0:  # the first write makes the folder
                    self._temp.parent.mkdir(parents=True, exist_ok=True)
                self._temp.write_text(json.dumps(record), encoding="utf-8")
                os.replace(self._temp, self.path)
            except OSError as err:
                self.error = f"heartbeat {self.path} not written (no more tries): {err}"
                if self._warn is not None:
                    self._warn(self.error)
            self._due = time.monotonic() + self.every_s
        if phase == DONE:
            self._stop.set()

    def _start_flusher(self) -> None:
        """A daemon thread writing a noted step that no later tick wrote (the rank stopped
        advancing within `every_s` of its last write)."""
        self._flusher = threading.Thread(
            target=self._flush_loop, name="jobkit-heartbeat", daemon=True
        )
        self._flusher.start()

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.flush()

    def flush(self) -> None:
        """Write the last noted step, dated when it was reached, if no write has since."""
        noted = self._noted
        if noted is None or noted is self._flushed or self.error is not None:
            return
        step, reached = noted
        self.write(step, TRAIN, at=time.time() - (time.monotonic() - reached), noted=noted)
