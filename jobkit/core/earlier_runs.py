"""The time a requeued job already ran: its earlier runs' elapsed, kept in the record's
`extra` (no column: docs/manager.md) and added to what the scheduler reports now.

A scheduler that requeues a job (Slurm's `scontrol requeue`, preemption with requeue) starts
its clock again: squeue shows a requeued job `PENDING 0:00` and sacct's latest line counts
the latest run only. So when an observation shows the requeue count going up, the registry
adds the ended run's elapsed as last seen (a lower bound: it ended between two polls), and
where the scheduler reports the earlier runs itself (Slurm: `sacct --duplicates`), its exact
sum replaces that estimate.

    extra = {"earlier_runs": 1, "earlier_runs_s": 412.0, "earlier_runs_from": "sacct"}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from jobkit.core.lifecycle import JobProgress

__all__ = [
    "COUNT_KEY",
    "FROM_KEY",
    "LAST_SEEN",
    "SECONDS_KEY",
    "EarlierRuns",
    "earlier_runs",
    "earlier_runs_after",
    "needs_exact",
]

COUNT_KEY = "earlier_runs"
"""How many earlier runs `SECONDS_KEY` adds up (the requeue count it was taken at)."""
SECONDS_KEY = "earlier_runs_s"
FROM_KEY = "earlier_runs_from"
"""Who said: the scheduler's query ('sacct'), or LAST_SEEN (jobkit's last observation)."""
LAST_SEEN = "last seen"


class _Observed(Protocol):
    """What of an observation (backends.base.Observation) this module reads."""

    @property
    def requeues(self) -> int | None: ...
    @property
    def earlier_runs_s(self) -> float | None: ...
    @property
    def source(self) -> str: ...
    @property
    def earlier_runs_from(self) -> str | None: ...


class EarlierRuns:
    """A record's earlier runs as `extra` holds them (zero runs when it holds none)."""

    __slots__ = ("count", "seconds", "source")

    def __init__(self, count: int, seconds: float, source: str | None) -> None:
        self.count = count
        self.seconds = seconds
        self.source = source

    def values(self) -> dict[str, Any]:
        """The `extra` keys to merge."""
        return {COUNT_KEY: self.count, SECONDS_KEY: self.seconds, FROM_KEY: self.source}

    @property
    def exact(self) -> bool:
        """True when the scheduler's own figures, not jobkit's last observation."""
        return self.source not in (None, LAST_SEEN)


def earlier_runs(extra: Mapping[str, Any]) -> EarlierRuns:
    """What `extra` holds (a registry written before this: no earlier runs)."""
    try:
        count = int(extra.get(COUNT_KEY) or 0)
        seconds = float(extra.get(SECONDS_KEY) or 0.0)
    except (TypeError, ValueError):
        return EarlierRuns(0, 0.0, None)
    source = extra.get(FROM_KEY)
    return EarlierRuns(count, seconds, str(source) if source else None)


def earlier_runs_after(
    old: JobProgress, new: JobProgress, obs: _Observed, known: EarlierRuns
) -> EarlierRuns | None:
    """The earlier runs once `obs` is taken in (old -> new); None when they did not change.

    The scheduler's exact sum wins for the requeue count it comes with; else a requeue count
    that went up adds the ended run's elapsed as last seen (`old.elapsed_s`: a job seen
    QUEUED after a requeue holds its 0:00, so nothing is counted twice).
    """
    if obs.earlier_runs_s is not None and obs.requeues is not None:
        if obs.requeues < known.count:
            return None
        source = obs.earlier_runs_from or obs.source
        found = EarlierRuns(obs.requeues, float(obs.earlier_runs_s), source)
        same = (found.count, found.seconds, found.source) == (
            known.count,
            known.seconds,
            known.source,
        )
        return None if same else found
    if new.requeues <= max(old.requeues, known.count):
        return None
    ended = old.elapsed_s if old.requeues >= known.count and old.elapsed_s else 0.0
    return EarlierRuns(new.requeues, known.seconds + ended, LAST_SEEN)


def needs_exact(requeues: int | None, extra: Mapping[str, str]) -> bool:
    """True when a backend that can sum the earlier runs itself should be asked: the job was
    requeued and the registry does not hold the scheduler's figure for that many runs yet
    (`extra` as a backend sees it: TrackedJob.extra, values as text)."""
    if not requeues:
        return False
    known = earlier_runs(extra)
    return known.count < requeues or not known.exact
