"""What PBS jobs used: the `resources_used` attributes of the same `qstat -f` the poll runs
(Torque text, PBS Pro json). PBS keeps job totals only (all hosts together), no steps."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobkit.backends.base import TrackedJob
from jobkit.backends.pbs.parse import (
    by_flavor,
    hosts_of,
    job_number,
    parse_hms,
    parse_or_fail,
    parse_pro_json,
    parse_torque_text,
)
from jobkit.core import proc
from jobkit.core.usage import Usage

_SIZE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[kmgtp]?)(?:b|w)?\s*$", re.IGNORECASE)
_SIZE_MB = {"": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20, "p": 1 << 30}
NOT_REPORTED = (
    "qstat -f shows no resources_used for this job (Slurm's Torque wrappers never report them;"
    " Torque and PBS Pro do while they still list the job)"
)


def size_mb(text: Any) -> float | None:
    """Megabytes from PBS's `524288kb`, `2gb`, `1024` (bytes); None if unreadable."""
    match = _SIZE.match(str(text)) if text is not None else None
    if not match:
        return None
    return float(match["n"]) * _SIZE_MB[match["unit"].lower()]


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def usage_from_attrs(attrs: Mapping[str, Any]) -> Usage:
    """One job's Usage from its qstat attributes: Torque text (`resources_used.cput` keys)
    or PBS Pro json (a `resources_used` object)."""
    used = attrs.get("resources_used")
    if not isinstance(used, Mapping):
        prefix = "resources_used."
        used = {k[len(prefix) :]: v for k, v in attrs.items() if k.startswith(prefix)}
    wanted = attrs.get("Resource_List")
    if not isinstance(wanted, Mapping):
        prefix = "Resource_List."
        wanted = {k[len(prefix) :]: v for k, v in attrs.items() if k.startswith(prefix)}
    nodes = hosts_of(attrs.get("exec_host"))
    return Usage(
        source="qstat -f",
        state=str(attrs.get("job_state") or "") or None,
        elapsed_s=parse_hms(used.get("walltime")),
        time_limit_s=parse_hms(wanted.get("walltime")),
        nodes=tuple(nodes.split(",")) if nodes else (),
        cpus=_int(used.get("ncpus")) or _int(wanted.get("ncpus")),
        cpu_s=parse_hms(used.get("cput")),
        max_rss_mb=size_mb(used.get("mem")),
        notes=() if used else (NOT_REPORTED,),
    )


def query_usage(
    jobs: Sequence[TrackedJob], qstat: Callable[[list[str]], proc.Completed]
) -> dict[str, Usage]:
    """One `qstat -f` per flavor in use (the poll's query) for all the jobs, keyed by
    scheduler_id; jobs qstat no longer lists are left out."""
    result: dict[str, Usage] = {}
    for flavor, group in by_flavor(jobs).items():
        ids = [j.scheduler_id for j in group]
        if flavor == "pro":
            argv = ["qstat", "-f", "-F", "json", "-x", *ids]
            raw = parse_or_fail(argv, qstat(argv), parse_pro_json)
        else:
            argv = ["qstat", "-f", *ids]
            raw = parse_or_fail(argv, qstat(argv), parse_torque_text)
        found = {job_number(key): usage_from_attrs(attrs) for key, attrs in raw.items()}
        for job in group:
            usage = found.get(job_number(job.scheduler_id))
            if usage is not None:
                result[job.scheduler_id] = usage
    return result
