"""The `exit_code` file a job's script may leave in its run folder."""

from __future__ import annotations

from pathlib import Path

from jobkit.core.conventions import EXIT_CODE_FILE as EXIT_FILE
from jobkit.core.conventions import FAILURE_FILE


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
