"""The `exit_code` file a job's script may leave in its run folder."""

from __future__ import annotations

from pathlib import Path

EXIT_FILE = "exit_code"


def read_exit_file(run_dir: str | Path | None) -> int | None:
    """The exit code written to `<run_dir>/exit_code`, or None (no folder, file or number)."""
    if not run_dir:
        return None
    try:
        text = (Path(run_dir) / EXIT_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.lstrip("-").isdigit() else None
