"""What a scheduler says about a job, and the job as it asks: TrackedJob (a registry row as a
backend sees it), Observation (one job's state as reported), Allocation (the allocation this
process runs in). Plain records: the registry stores them, backends make them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jobkit.core.states import State


@dataclass(frozen=True)
class TrackedJob:
    """A registry row as a backend sees it when polling or cancelling."""

    jobkit_id: str
    scheduler_id: str
    job_dir: Path
    workdir: Path
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Observation:
    """One job's state as the scheduler reported it."""

    state: State
    raw_state: str
    source: str
    """Which query answered: 'squeue', 'sacct', 'qstat', 'pidfile', 'exit-file', 'submitit'."""
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    nodes: str | None = None
    elapsed_s: float | None = None
    requeues: int | None = None
    max_rss: str | None = None
    cpu_time: str | None = None
    earlier_runs_s: float | None = None
    """A requeued job's earlier runs, their elapsed summed, where the scheduler reports them
    (Slurm: sacct --duplicates); None where it does not (core/earlier_runs.py)."""
    earlier_runs_from: str | None = None
    """The query that summed them ('sacct'), where it is not `source`."""


@dataclass(frozen=True)
class Allocation:
    """The allocation this process runs in, as `jobkit run --here` uses it."""

    job_id: str
    """Its id as the job script names it (its JOBKIT_JOB_ID: the run folder's name)."""
    environ: dict[str, str]
    """The environment the job's script runs with there (a job step's own variables gone)."""
    nodes: str = ""
    """Its hosts as the scheduler lists them (`n[1-2]`), for `jobkit status`; "" if unknown."""
