"""What a notification says: the job, its state, elapsed time, the doctor's one line (or the
final loss), and the command to look further; as text and as environment facts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from jobkit.core.conventions import METRICS_FILE
from jobkit.registry.store import JobRecord


@dataclass(frozen=True)
class Message:
    """One event of one job, ready to send."""

    event: str
    record: JobRecord
    diagnosis: str | None
    final_loss: float | None = None
    stalled_for: str | None = None

    @property
    def subject(self) -> str:
        """`jobkit: train (jk12345) FAILED`."""
        return f"jobkit: {self.record.name} ({self.record.jobkit_id}) {self.state_word}"

    @property
    def state_word(self) -> str:
        if self.event == "stall":
            return f"STALLED ({self.stalled_for})" if self.stalled_for else "STALLED"
        return self.record.state

    @property
    def elapsed(self) -> str:
        from jobkit.core.units import format_clock

        seconds = self.record.elapsed_s
        return format_clock(seconds) if seconds is not None else "-"

    @property
    def look_further(self) -> str:
        """The command to look further."""
        failed = self.record.is_final and self.record.state != "SUCCEEDED"
        verb = "doctor" if failed or self.event == "stall" else "status"
        return f"jobkit {verb} {self.record.jobkit_id}"

    def text(self) -> str:
        """The message: a first line, then the facts, one a line."""
        record = self.record
        lines = [f"{self.subject} after {self.elapsed}"]
        where = f"{record.backend} job {record.scheduler_id or '-'}"
        if record.nodes:
            where += f" on {record.nodes}"
        lines.append(where)
        if record.exit_code is not None and record.is_final:
            lines.append(f"exit code {record.exit_code}")
        if self.diagnosis:
            lines.append(f"diagnosis: {self.diagnosis}")
        if self.final_loss is not None:
            lines.append(f"final loss: {self.final_loss:.4g}")
        lines.append(f"look further: {self.look_further}")
        return "\n".join(lines)

    def environment(self) -> dict[str, str]:
        """The facts as `command:` gets them."""
        record = self.record
        return {
            "JOBKIT_NOTIFY_EVENT": self.event,
            "JOBKIT_NOTIFY_JOB": record.jobkit_id,
            "JOBKIT_NOTIFY_SCHEDULER_ID": record.scheduler_id or "",
            "JOBKIT_NOTIFY_NAME": record.name,
            "JOBKIT_NOTIFY_STATE": self.state_word,
            "JOBKIT_NOTIFY_ELAPSED": self.elapsed,
            "JOBKIT_NOTIFY_EXIT_CODE": "" if record.exit_code is None else str(record.exit_code),
            "JOBKIT_NOTIFY_DIAGNOSIS": self.diagnosis or "",
            "JOBKIT_NOTIFY_TEXT": self.text(),
        }


def final_loss(record: JobRecord) -> float | None:
    """The last `loss` in the run's metrics.jsonl (the bundled trainer's), or None."""
    run_dir = record.log_paths.get("run_dir")
    if not run_dir:
        return None
    try:
        with open(Path(run_dir) / METRICS_FILE, "rb") as stream:
            stream.seek(0, 2)
            stream.seek(max(stream.tell() - 65536, 0))
            tail = stream.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        try:
            value = json.loads(line).get("loss")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, (int, float)):
            return float(value)
    return None
