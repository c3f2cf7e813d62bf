"""What a job used, as a backend's accounting reports it: the records `Backend.usage`
returns and `jobkit report` reads (docs/report.md). Plain values, stdlib only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NodeShare:
    """One node's part of a step, where the scheduler says it (else absent)."""

    cpu_s: float | None = None
    """CPU seconds (user + system) the step's processes used on this node."""
    rss_mb: float | None = None
    """Peak resident memory of the step's processes on this node."""


@dataclass(frozen=True)
class StepUsage:
    """One step of a job (Slurm: `batch`, `extern`, `0`, ...; elsewhere the whole job)."""

    name: str
    nodes: tuple[str, ...]
    cpus: int | None
    """CPUs allocated to the step, all its nodes together."""
    tasks: int | None
    elapsed_s: float | None
    cpu_s: float | None
    """CPU seconds of all its tasks (exact: what the processes' rusage said)."""
    max_task_rss_mb: float | None = None
    """The largest task's peak resident memory (Slurm's MaxRSS: one task, not a node)."""
    per_node: dict[str, NodeShare] = field(default_factory=dict)
    """Nodes whose share the scheduler reported; a node left out is not known."""
    note: str | None = None


@dataclass(frozen=True)
class Usage:
    """What one job used, from one batched accounting query."""

    source: str
    """The query that answered: 'sacct', 'qstat -f', 'qacct'."""
    state: str | None = None
    elapsed_s: float | None = None
    time_limit_s: float | None = None
    nodes: tuple[str, ...] = ()
    cpus: int | None = None
    """CPUs of the allocation, all nodes together."""
    cpu_s: float | None = None
    """CPU seconds of the whole job where only a total is known (PBS, Grid Engine)."""
    max_rss_mb: float | None = None
    """Peak resident memory where only one figure is known (PBS, Grid Engine)."""
    steps: tuple[StepUsage, ...] = ()
    notes: tuple[str, ...] = ()
    """What the scheduler could not say (shown to the user as they are)."""
    requeued_run: bool = False
    """The figures are of a run that was requeued: the job waits again, and accounting has
    no line for its next run yet (that run's time is among the record's earlier runs)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "source": self.source,
            "state": self.state,
            "elapsed_s": self.elapsed_s,
            "time_limit_s": self.time_limit_s,
            "nodes": list(self.nodes),
            "cpus": self.cpus,
            "cpu_s": self.cpu_s,
            "max_rss_mb": self.max_rss_mb,
            "requeued_run": self.requeued_run,
            "steps": [
                {
                    "name": s.name,
                    "nodes": list(s.nodes),
                    "cpus": s.cpus,
                    "tasks": s.tasks,
                    "elapsed_s": s.elapsed_s,
                    "cpu_s": s.cpu_s,
                    "max_task_rss_mb": s.max_task_rss_mb,
                    "per_node": {n: vars(share) for n, share in s.per_node.items()},
                    "note": s.note,
                }
                for s in self.steps
            ],
            "notes": list(self.notes),
        }
