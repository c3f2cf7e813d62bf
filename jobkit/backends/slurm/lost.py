"""Submissions whose sbatch reply was lost, found again by the token in their comment: one
squeue of this user's jobs, then sacct for the tokens squeue did not show (manager/reconcile.py
adopts what is found)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jobkit.core.errors import SchedulerError

if TYPE_CHECKING:
    from jobkit.backends.submission import SubmitRequest

COMMENT_PREFIX = "jobkit:"
"""What sbatch's --comment holds before the submission token (`jobkit:<token>`)."""


def find_lost(
    requests: Mapping[str, SubmitRequest | None], since: float, timeout: float
) -> dict[str, str]:
    """Scheduler ids of jobs whose comment carries one of these tokens.

    One squeue of this user's jobs; sacct (from `since`) only for tokens squeue
    did not show. Returns token -> scheduler id.
    """
    from jobkit.core import proc

    wanted = {f"{COMMENT_PREFIX}{t}": t for t in requests}
    found: dict[str, str] = {}
    argv = ["squeue", "--noheader", "--me", "--states=all", "--format=%F|%k"]
    for line in proc.run(argv, timeout=timeout).stdout.splitlines():
        job, _, comment = line.partition("|")
        if comment.strip() in wanted:
            found[wanted[comment.strip()]] = job.strip()
    if len(found) < len(wanted):
        found.update(_find_in_sacct(wanted, found, since, timeout))
    return found


def _find_in_sacct(
    wanted: Mapping[str, str], found: Mapping[str, str], since: float, timeout: float
) -> dict[str, str]:
    """Jobs that left squeue, by their comment or (where accounting does not store
    comments: AccountingStoreFlags without job_comment) the `--comment=` of their
    submit line."""
    from jobkit.backends.slurm.parse import ACCOUNTING_DISABLED
    from jobkit.core import proc

    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 60))
    argv = [
        "sacct",
        "--noheader",
        "--parsable2",
        "--allocations",
        f"--starttime={start}",
        "--format=JobIDRaw,JobID,Comment,SubmitLine",
    ]
    try:
        stdout = proc.run(argv, timeout=timeout).stdout
    except SchedulerError as err:
        if ACCOUNTING_DISABLED in (err.stderr + err.stdout).lower():
            return {}
        raise
    extra: dict[str, str] = {}
    for line in stdout.splitlines():
        fields = line.split("|", 3)  # the submit line (last) may hold `|`
        if len(fields) < 3:
            continue
        token = wanted.get(fields[2].strip()) or _token_in_submit_line(
            fields[3] if len(fields) > 3 else "", wanted
        )
        if token and token not in found:
            extra[token] = fields[1].split("_")[0].strip()
    return extra


def _token_in_submit_line(line: str, wanted: Mapping[str, str]) -> str | None:
    """The token of the `--comment=jobkit:<token>` argument in sacct's SubmitLine, if wanted."""
    for word in line.split():
        if word.startswith("--comment="):
            token = wanted.get(word.removeprefix("--comment=").strip("'\""))
            if token:
                return token
    return None
