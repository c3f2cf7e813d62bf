"""What the trainer says: rank-0 console lines, a log file per rank, metrics as JSON lines."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO


class RunLog:
    """Every rank writes `rank-R.log`; rank 0 also prints to stdout and writes metrics.jsonl."""

    def __init__(
        self, rank: int, log_dir: Path, metrics: bool = True, console: TextIO | None = None
    ) -> None:
        self.rank = rank
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

    def _stamp(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S")

    def info(self, message: str, *, all_ranks: bool = False, console: str | None = None) -> None:
        """A line in this rank's log; on the console from rank 0 (or every rank if asked).

        `console` replaces the message on the console (a long dump stays in the file only).
        """
        for line in message.splitlines() or [""]:
            self._file.write(f"{self._stamp()} rank {self.rank}: {line}\n")
        if console is not None:
            message = console
        if self.is_main or all_ranks:
            prefix = "" if self.is_main else f"[rank {self.rank}] "
            for line in message.splitlines() or [""]:
                print(prefix + line, file=self.console, flush=True)

    def warning(self, message: str) -> None:
        """`warning: ...` in this rank's log and on the console (rank 0)."""
        self.info(f"warning: {message}")

    def metrics(self, record: dict[str, Any]) -> None:
        """One JSON line in metrics.jsonl (rank 0 only); NaN and infinities become null."""
        if self._metrics is not None:
            clean = {
                key: None if isinstance(value, float) and not math.isfinite(value) else value
                for key, value in record.items()
            }
            self._metrics.write(json.dumps(clean, allow_nan=False) + "\n")

    def close(self) -> None:
        """Flush and close the files."""
        self._file.close()
        if self._metrics is not None:
            self._metrics.close()
