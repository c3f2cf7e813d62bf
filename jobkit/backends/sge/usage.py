"""What Grid Engine jobs used, from the `qacct -j` records the poll already reads: cpu,
ru_maxrss and ru_wallclock. A parallel job has one record per host (the master's and each
slave host's, all with the same start_time): the last run's records together are the job."""

from __future__ import annotations

import re
from collections.abc import Sequence

from jobkit.backends.sge.parse import FinishedRun
from jobkit.core.usage import Usage

_QACCT_SIZE = re.compile(r"^\s*(?P<n>[0-9.]+)\s*(?P<unit>[KMGT]?)B\s*$")
_DECIMAL = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_SECONDS = re.compile(r"^\s*([0-9.]+)s?\s*$")


def maxrss_mb(text: str | None) -> float | None:
    """ru_maxrss in MB. getrusage gives kilobytes and qacct prints that number as if it were
    bytes with decimal prefixes: `208.008KB` is 208008 KB (a 200 MB process, checked on the
    real cluster against maxvmem)."""
    match = _QACCT_SIZE.match(text or "")
    if not match:
        return None
    return float(match["n"]) * _DECIMAL[match["unit"]] / 1024


def seconds(text: str | None) -> float | None:
    """qacct's `4.057s` -> 4.057."""
    match = _SECONDS.match(text or "")
    return float(match[1]) if match else None


def last_run(runs: Sequence[FinishedRun]) -> list[FinishedRun]:
    """The records of the job's last run: every host's record that was still running when
    the last one started (the hosts of a parallel job start within a second or two of each
    other; an earlier run had ended before a requeued one began). Records without times are
    taken as one run."""
    from jobkit.backends.waiting import parse_ctime

    starts = [parse_ctime(run.start_time) for run in runs]
    ends = [parse_ctime(run.end_time) for run in runs]
    known = [start for start in starts if start is not None]
    if not known:
        return list(runs)
    latest = max(known)
    return [run for run, end in zip(runs, ends, strict=True) if end is None or end >= latest]


def usage_from_runs(runs: Sequence[FinishedRun]) -> Usage | None:
    """One job's Usage from its qacct records: the last run's record of every host (a
    parallel job: CPU summed over its hosts, the largest host's peak memory, the longest
    wall clock); earlier runs (a requeue: another start_time) are left out, and said so."""
    if not runs:
        return None
    last = last_run(runs)
    earlier = len(runs) - len(last)
    cpus = [seconds(run.cpu) for run in last]
    rss = [mb for mb in (maxrss_mb(run.max_rss) for run in last) if mb is not None]
    walls = [run.wallclock_s for run in last if run.wallclock_s is not None]
    hosts = tuple(dict.fromkeys(run.host for run in last if run.host))
    notes: list[str] = []
    if earlier:
        notes.append(f"{earlier} qacct record(s) of earlier runs (requeued): figures of the last")
    if len(hosts) > 1:
        notes.append(
            f"{len(hosts)} hosts (one qacct record each): CPU time summed, memory the largest"
            " host's peak"
        )
    return Usage(
        source="qacct",
        elapsed_s=max(walls) if walls else None,
        nodes=hosts,
        cpu_s=sum(c for c in cpus if c is not None) if any(c is not None for c in cpus) else None,
        max_rss_mb=max(rss) if rss else None,
        notes=tuple(notes),
    )
