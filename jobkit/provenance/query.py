"""One outside command the job side of provenance asks (conda, the module system, podman):
run with a time limit and no standard input; a command that cannot run comes back as its
error, never raised, so a missing tool only leaves a note in the record."""

from __future__ import annotations

import subprocess


def run_query(
    argv: list[str], timeout_s: float
) -> subprocess.CompletedProcess[str] | OSError | subprocess.TimeoutExpired:
    """The finished command (text, undecodable bytes replaced), or why it did not run."""
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return err
