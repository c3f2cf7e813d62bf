"""Parsers of Grid Engine's output: qsub -terse, qstat -xml and qacct -j. Pure functions."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from jobkit.core.arrays import array_includes
from jobkit.core.errors import SchedulerError

_TERSE_ID = re.compile(r"^(?P<job>\d+)(?:\.(?P<tasks>\d+(?:-\d+(?::\d+)?)?))?$", re.ASCII)


def parse_qsub_terse(argv: list[str], stdout: str, stderr: str) -> str:
    """The job number from `qsub -terse` ("123", or "123.1-3:1" for an array)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    match = _TERSE_ID.match(lines[-1]) if lines else None
    if match is None:
        raise SchedulerError(
            argv, 0, stdout, stderr, reason="qsub -terse printed no job id (expected a number)"
        )
    return match["job"]


def job_number(scheduler_id: str) -> str:
    """'123' of '123' or '123.4' (an array task)."""
    return scheduler_id.split(".", 1)[0]


def job_task(scheduler_id: str) -> str | None:
    """'4' of '123.4' (one array task); None for a job or a whole array."""
    return scheduler_id.partition(".")[2] or None


def tasks_include(tasks: str | None, task: str) -> bool:
    """True when qstat's <tasks> of a row (`4`, `3,4`, `5-10:1`, `1-9:2`) names `task`."""
    return array_includes(tasks, task)


@dataclass(frozen=True)
class LiveJob:
    """One row of qstat -xml: a job, or some tasks of an array job."""

    number: str
    letters: str
    queue: str | None
    slots: int | None
    tasks: str | None
    started_at: float | None = None
    """JAT_start_time (a running job or task), epoch seconds."""


def _local_time(text: str | None) -> float | None:
    """qstat -xml's `2026-11-26T08:13:38` (the qmaster's local time) as epoch seconds."""
    import time

    try:
        return time.mktime(time.strptime((text or "").strip()[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def parse_qstat_xml(text: str) -> list[LiveJob]:
    """Every <job_list> of `qstat -xml` (running ones under queue_info, pending under job_info)."""
    text = text.strip()
    if not text:
        return []
    root = ElementTree.fromstring(text)
    rows = []
    for item in root.iter("job_list"):
        number = (item.findtext("JB_job_number") or "").strip()
        if not number:
            continue
        slots = (item.findtext("slots") or "").strip()
        rows.append(
            LiveJob(
                number=number,
                letters=(item.findtext("state") or "").strip(),
                queue=(item.findtext("queue_name") or "").strip() or None,
                slots=int(slots) if slots.isdigit() else None,
                tasks=(item.findtext("tasks") or "").strip() or None,
                started_at=_local_time(item.findtext("JAT_start_time")),
            )
        )
    return rows


@dataclass(frozen=True)
class FinishedRun:
    """One qacct record (one job, or one array task; PE slave tasks are left out)."""

    number: str
    task: str | None
    host: str | None
    failed: int | None
    failed_text: str
    exit_status: int | None
    wallclock_s: float | None
    max_rss: str | None
    """ru_maxrss as qacct prints it (`4.504KB`): resident memory, not maxvmem (virtual)."""
    cpu: str | None
    deleted: bool
    start_time: str | None = None
    end_time: str | None = None
    """qacct's start_time and end_time as printed (ctime, local time): the hosts of one run
    of a parallel job (a record each) overlap in time; a requeued job's runs do not."""
    account: str | None = None
    """The job's account string (`qsub -A`): jobkit's submission token when jobkit chose it
    (sge/adoption.py)."""


_SEPARATOR = re.compile(r"^={10,}\s*$")
_LEADING_INT = re.compile(r"^\s*(-?\d+)")
_SECONDS = re.compile(r"^\s*([0-9.]+)s?\s*$")


def _int(text: str | None) -> int | None:
    match = _LEADING_INT.match(text or "")
    return int(match[1]) if match else None


def parse_qacct(text: str) -> list[FinishedRun]:
    """Records of `qacct -j`: blocks of `key value` lines between ===== separators.

    PE slave-task records (pe_taskid other than NONE) belong to their job's master record
    and are skipped. `deleted` is qacct's own word that qdel stopped the job.
    """
    blocks: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if _SEPARATOR.match(line):
            current = {}
            blocks.append(current)
            continue
        if current is None or not line.strip():
            continue
        key, _, value = line.strip().partition(" ")
        current[key] = value.strip()
    runs = []
    for block in blocks:
        number = block.get("jobnumber", "")
        if not number or block.get("pe_taskid", "NONE") not in ("NONE", ""):
            continue
        task = block.get("taskid")
        wall = _SECONDS.match(block.get("ru_wallclock", ""))
        failed_text = block.get("failed", "")
        runs.append(
            FinishedRun(
                number=number,
                task=None if task in (None, "undefined") else task,
                host=block.get("hostname"),
                failed=_int(failed_text),
                failed_text=failed_text,
                exit_status=_int(block.get("exit_status")),
                wallclock_s=float(wall[1]) if wall else None,
                max_rss=block.get("ru_maxrss"),
                cpu=block.get("cpu"),
                deleted=block.get("deleted_by", "NONE") not in ("NONE", "")
                or "qdel" in failed_text.lower(),
                start_time=block.get("start_time") or None,
                end_time=block.get("end_time") or None,
                account=block.get("account") or None,
            )
        )
    return runs
