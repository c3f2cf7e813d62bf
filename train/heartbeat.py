"""Each rank's heartbeat: `<run_dir>/heartbeat/rank-R.json` with its step, the time, its pid,
host and phase (setup, train, checkpoint, done). `jobkit status` calls a running job STALLED
when no rank's heartbeat moved for `monitor.stall_after`; `jobkit doctor` finds each rank's
process through it (docs/hangs.md).

Written atomically (a temp file, then os.replace), at phase changes and, while training, at
most once per HEARTBEAT_EVERY_S as the step advances: a step costs one clock read.
"""

from __future__ import annotations

import json
import os
import socket
import sys
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

    def tick(self, step: int) -> None:
        """After each step: rewrite the file when `every_s` has passed since the last write."""
        if time.monotonic() >= self._due:
            self.write(step, TRAIN)

    def write(self, step: int, phase: str) -> None:
        """Write the file now (a phase change); an OSError stops further writes."""
        if self.error is not None:
            return
        record = {**self._fixed, "step": step, "phase": phase, "time": time.time()}
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
