"""The notes a job's script may leave in its run folder: exit_code, failure, preempted."""

from __future__ import annotations

import re
from pathlib import Path

from jobkit.core.conventions import EXIT_CODE_FILE as EXIT_FILE
from jobkit.core.conventions import FAILURE_FILE, PREEMPTED_FILE


def read_exit_file(run_dir: str | Path | None, job_id: str | None = None) -> int | None:
    """The exit code written to `<run_dir>/exit_code`, or None (no folder, file or number).

    The script writes the code on the first line and its scheduler job id on the second. A
    run's attempts share the folder: given `job_id`, a file another job wrote is not this
    job's and reads as None (a file without a second line, from an older jobkit, counts).
    """
    if not run_dir:
        return None
    try:
        text = (Path(run_dir) / EXIT_FILE).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    if not first.lstrip("-").isdigit():
        return None
    owner = lines[1].strip() if len(lines) > 1 else ""
    if job_id and owner and not same_job(owner, job_id):
        return None
    return int(first)


def same_job(one: str, other: str) -> bool:
    """Whether two scheduler ids name the same job: the same leading job number (`123`,
    `123.server`, `123_4`, `123[4]`, `123.4`), else the same text."""
    ours, theirs = _JOB_NUMBER.match(one.strip()), _JOB_NUMBER.match(other.strip())
    if ours and theirs:
        return ours.group() == theirs.group()
    return one.strip() == other.strip()


_JOB_NUMBER = re.compile(r"\d+")


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
