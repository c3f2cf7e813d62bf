"""What Grid Engine jobs used, from the `qacct -j` records the poll already reads: cpu,
ru_maxrss and ru_wallclock of the job's master task (one host)."""

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


def usage_from_runs(runs: Sequence[FinishedRun]) -> Usage | None:
    """One job's Usage from its qacct records (the latest run; arrays: none, say so)."""
    if not runs:
        return None
    run = runs[-1]
    return Usage(
        source="qacct",
        elapsed_s=run.wallclock_s,
        nodes=(run.host,) if run.host else (),
        cpu_s=seconds(run.cpu),
        max_rss_mb=maxrss_mb(run.max_rss),
        notes=(f"{len(runs)} qacct records (requeued?): figures of the last",)
        if len(runs) > 1
        else (),
    )
