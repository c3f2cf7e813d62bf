"""The notes a job's script may leave in its run folder: exit_code, failure, preempted."""

from __future__ import annotations

from pathlib import Path

from jobkit.core.conventions import EXIT_CODE_FILE as EXIT_FILE
from jobkit.core.conventions import FAILURE_FILE, PREEMPTED_FILE


def read_exit_file(run_dir: str | Path | None) -> int | None:
    """The exit code written to `<run_dir>/exit_code`, or None (no folder, file or number)."""
    if not run_dir:
        return None
    try:
        text = (Path(run_dir) / EXIT_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.lstrip("-").isdigit() else None


_FAILURE_MAX_CHARS = 500


def read_failure_note(run_dir: str | Path | None) -> str | None:
    """The first line of `<run_dir>/failure` (at most 500 characters), or None."""
    if not run_dir:
        return None
    try:
        with open(Path(run_dir) / FAILURE_FILE, encoding="utf-8", errors="replace") as stream:
            line = stream.readline(_FAILURE_MAX_CHARS).strip()
    except OSError:
        return None
    return line or None


_NOTES_MAX_BYTES = 65536


def read_preempted_note(
    run_dir: str | Path | None, job_id: str, restarts: int | None = None
) -> str | None:
    """What `<run_dir>/preempted` says of job `job_id` (`PreemptTime=...`), or None.

    The script appends one line `JOB_ID RESTART_COUNT PreemptTime=...` per preempted job (a
    run's attempts share the folder); a line of another job, or of another run of this one
    (`restarts`, when known: a requeued job), does not count.
    """
    if not run_dir:
        return None
    try:
        with open(Path(run_dir) / PREEMPTED_FILE, "rb") as stream:
            text = stream.read(_NOTES_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    found = None
    for line in text.splitlines():
        words = line.split(maxsplit=2)
        ours = len(words) == 3 and words[0] == job_id
        if ours and (restarts is None or words[1] == str(restarts)):
            found = words[2].strip()
    return found
