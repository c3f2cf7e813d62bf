"""What the trainer says: rank-0 console lines, a log file per rank, metrics as JSON lines.

The level (JOBKIT_LOG_LEVEL, which jobkit's `env.log_level` sets; default INFO) decides what
reaches the console: DEBUG adds `debug:` lines (in the log file too), WARNING leaves only
warnings on the console, ERROR nothing. The rank's log file always keeps every INFO and
WARNING line: `jobkit doctor` and `plot` read it.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}
"""The levels JOBKIT_LOG_LEVEL takes (Python logging's numbers)."""


def level_from_env() -> int:
    """JOBKIT_LOG_LEVEL's number; INFO when unset or unknown."""
    return LEVELS.get(os.environ.get("JOBKIT_LOG_LEVEL", "INFO").strip().upper(), LEVELS["INFO"])


class RunLog:
    """Every rank writes `rank-R.log`; rank 0 also prints to stdout and writes metrics.jsonl."""

    def __init__(
        self,
        rank: int,
        log_dir: Path,
        metrics: bool = True,
        console: TextIO | None = None,
        level: int | None = None,
    ) -> None:
        self.rank = rank
        self.level = level_from_env() if level is None else level
        self.is_main = rank == 0
        self.console = console or sys.stdout
        log_dir.mkdir(parents=True, exist_ok=True)
        self.path = log_dir / f"rank-{rank}.log"
        self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.metrics_path = log_dir / "metrics.jsonl" if metrics and self.is_main else None
        self._metrics = (
            open(self.metrics_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
            if self.metrics_path
            else None
        )
        self.sinks: list[Any] = []
        """Dashboards (train/reporting/dashboards.py): each metrics record also goes to their
        `log`."""

    def _stamp(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S")

    def info(
        self,
        message: str,
        *,
        all_ranks: bool = False,
        console: str | None = None,
        level: int = LEVELS["INFO"],
    ) -> None:
        """A line in this rank's log; on the console from rank 0 (or every rank if asked)
        when `level` is at least the log's level.

        `console` replaces the message on the console (a long dump stays in the file only).
        """
        for line in message.splitlines() or [""]:
            self._file.write(f"{self._stamp()} rank {self.rank}: {line}\n")
        if console is not None:
            message = console
        if (self.is_main or all_ranks) and level >= self.level:
            prefix = "" if self.is_main else f"[rank {self.rank}] "
            for line in message.splitlines() or [""]:
                print(prefix + line, file=self.console, flush=True)

    def warning(self, message: str) -> None:
        """`warning: ...` in this rank's log and on the console (rank 0)."""
        self.info(f"warning: {message}", level=LEVELS["WARNING"])

    def debug(self, message: str, *, all_ranks: bool = False) -> None:
        """`debug: ...` in this rank's log and on the console (rank 0), at level DEBUG only."""
        if self.level <= LEVELS["DEBUG"]:
            self.info(f"debug: {message}", all_ranks=all_ranks, level=LEVELS["DEBUG"])

    def metrics(self, record: dict[str, Any]) -> None:
        """One JSON line in metrics.jsonl (rank 0 only); NaN and infinities become null."""
        if self._metrics is not None:
            clean = {
                key: None if isinstance(value, float) and not math.isfinite(value) else value
                for key, value in record.items()
            }
            self._metrics.write(json.dumps(clean, allow_nan=False) + "\n")
        for sink in self.sinks:
            sink.log(record)

    def close(self) -> None:
        """Flush and close the files (and the dashboards)."""
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            sink.close()
        self._file.close()
        if self._metrics is not None:
            self._metrics.close()
