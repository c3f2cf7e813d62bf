"""PBS's answers read (pure functions, so tests feed them real or recorded output): qsub's
job id, Torque's `qstat -f` text, PBS Pro's `qstat -f -F json`, each job's Observation, and
the jobs grouped by flavor (Torque or PBS Pro, kept in a job's extra)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from jobkit.backends.base import Observation, SubmitRequest, TrackedJob
from jobkit.backends.pbs.states import normalize_pbs_state, split_exit_status
from jobkit.core import proc
from jobkit.core.errors import SchedulerError

FLAVORS = ("pro", "torque")


_QSUB_ID = re.compile(r"^\d+(?:\[\d*\])?(?:\.[A-Za-z0-9_.-]+)?$", re.ASCII)


_ATTR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def parse_qsub_output(argv: list[str], stdout: str, stderr: str) -> str:
    """The job id qsub printed: `123.server`, `123[].server`, or `123` (Slurm's wrappers)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if lines and _QSUB_ID.match(lines[-1]):
        return lines[-1]
    raise SchedulerError(argv, 0, stdout, stderr, reason="unexpected qsub output")


def job_number(job_id: str) -> str:
    """The leading number of a PBS id: `123.server` -> `123`, `45[].s` -> `45[]`."""
    return job_id.split(".", 1)[0]


def parse_hms(text: str | None) -> float | None:
    """Seconds from PBS's `HH:MM:SS` (hours may pass 24); None when not a time."""
    if not text:
        return None
    parts = str(text).strip().split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return float(seconds)


def hosts_of(exec_host: str | None) -> str | None:
    """`n1/0*2+n2/0*2` -> `n1,n2` (order kept, duplicates dropped)."""
    if not exec_host:
        return None
    hosts: list[str] = []
    for chunk in str(exec_host).split("+"):
        host = chunk.split("/", 1)[0].strip()
        if host and host not in hosts:
            hosts.append(host)
    return ",".join(hosts) or None


def parse_torque_text(stdout: str) -> dict[str, dict[str, str]]:
    """`qstat -f` text (Torque, Slurm's Torque wrappers, PBS Pro without -F) -> id -> attrs.

    Attribute lines are `key = value`; a longer value continues on lines indented by a
    tab, which are joined to it.
    """
    jobs: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    last_key: str | None = None
    for line in stdout.splitlines():
        if line.startswith("Job Id:"):
            current = {}
            jobs[line.split(":", 1)[1].strip()] = current
            last_key = None
            continue
        stripped = line.strip()
        if current is None or not stripped:
            continue
        key, sep, value = stripped.partition(" = ")
        if sep and _ATTR_NAME.match(key):
            current[key] = value.strip()
            last_key = key
        elif last_key is not None:
            current[last_key] += stripped
    return jobs


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def observe_torque(attrs: Mapping[str, str]) -> Observation:
    """One job's observation from its `qstat -f` text attributes."""
    letter = attrs.get("job_state", "")
    exit_status = _int(attrs.get("exit_status", attrs.get("Exit_status")))
    exit_code, signal = split_exit_status(exit_status)
    return Observation(
        state=normalize_pbs_state(letter, exit_status),
        raw_state=letter,
        source="qstat",
        exit_code=exit_code,
        signal=signal,
        reason=attrs.get("comment"),
        nodes=hosts_of(attrs.get("exec_host")),
        elapsed_s=parse_hms(attrs.get("resources_used.walltime")),
        requeues=_requeues(attrs.get("run_count")),
        max_rss=attrs.get("resources_used.mem"),
        cpu_time=attrs.get("resources_used.cput"),
    )


def parse_pro_json(stdout: str) -> dict[str, dict[str, Any]]:
    """`qstat -f -F json -x` (PBS Pro) -> id -> attributes. No `Jobs` key: no jobs."""
    text = stdout.strip()
    if not text:
        return {}
    data = json.loads(text)
    jobs = data.get("Jobs") or {}
    if not isinstance(jobs, dict):
        raise ValueError("qstat json: 'Jobs' is not an object")
    return {str(k): v for k, v in jobs.items() if isinstance(v, dict)}


def observe_pro(attrs: Mapping[str, Any]) -> Observation:
    """One job's observation from PBS Pro's json attributes."""
    letter = str(attrs.get("job_state", ""))
    exit_status = _int(attrs.get("Exit_status"))
    substate = _int(attrs.get("substate"))
    exit_code, signal = split_exit_status(exit_status)
    used = attrs.get("resources_used") or {}
    return Observation(
        state=normalize_pbs_state(letter, exit_status, substate),
        raw_state=letter if substate is None else f"{letter}/{substate}",
        source="qstat",
        exit_code=exit_code,
        signal=signal,
        reason=attrs.get("comment"),
        nodes=hosts_of(attrs.get("exec_host")),
        elapsed_s=parse_hms(used.get("walltime")),
        requeues=_requeues(attrs.get("run_count")),
        max_rss=used.get("mem"),
        cpu_time=used.get("cput"),
    )


def match_submissions(
    jobs: Mapping[str, Mapping[str, Any]], requests: Mapping[str, SubmitRequest]
) -> dict[str, str]:
    """token -> job id for the jobs whose submit arguments (`Submit_arguments`, Torque's
    `submit_args`) name a request's script (jobkit's job folder is unique to each job)."""
    wanted = {str(request.script_path): token for token, request in requests.items()}
    found: dict[str, str] = {}
    for job_id, attrs in jobs.items():
        submitted = str(attrs.get("Submit_arguments") or attrs.get("submit_args") or "")
        for word in submitted.split():
            if word in wanted:
                found[wanted[word]] = job_id
    return found


def _requeues(run_count: Any) -> int | None:
    count = _int(run_count)
    return max(count - 1, 0) if count is not None else None


def parse_or_fail(argv: list[str], done: proc.Completed, parse: Any) -> Any:
    try:
        return parse(done.stdout)
    except ValueError as err:
        raise SchedulerError(
            argv, done.returncode, done.stdout, done.stderr, reason=f"unreadable output: {err}"
        ) from None


def by_flavor(jobs: Iterable[TrackedJob]) -> dict[str, list[TrackedJob]]:
    groups: dict[str, list[TrackedJob]] = defaultdict(list)
    for job in jobs:
        flavor = job.extra.get("pbs_flavor", "pro")
        groups[flavor if flavor in FLAVORS else "pro"].append(job)
    return groups
