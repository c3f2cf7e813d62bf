"""The protocol every backend implements, and the records passed across it.

Backends never touch the registry: the CLI records intent, calls `submit`, records the
result; `poll` answers for many jobs in one batched scheduler query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jobkit.core.states import State

if TYPE_CHECKING:  # the schema pulls in pydantic (~0.1 s): not needed to poll or cancel
    from jobkit.spec.schema import JobSpec


@dataclass(frozen=True)
class SubmitRequest:
    """Everything a backend needs to launch one job."""

    jobkit_id: str
    spec: JobSpec
    script: str
    """The rendered script, byte for byte what `jobkit render` prints (empty for submitit)."""
    script_path: Path
    """Where the CLI wrote `script` (inside job_dir)."""
    job_dir: Path
    """jobkit's own folder for this job (under JOBKIT_HOME): script, pid and exit-code files."""
    workdir: Path
    """The submission directory; relative paths in the spec are relative to it."""
    token: str
    """A unique submission token (put in the job's comment so a lost reply can be adopted)."""


@dataclass(frozen=True)
class Submitted:
    """What a successful submission returned."""

    scheduler_id: str
    argv: list[str]
    log_paths: dict[str, str] = field(default_factory=dict)
    """Absolute paths: 'out', 'err' (may equal 'out'), 'run_dir' (per-rank logs, checkpoints)."""
    extra: dict[str, str] = field(default_factory=dict)
    """Backend-specific facts to keep (pgid, host list, submitit folder...)."""


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


class Backend(Protocol):
    """A scheduler or launcher jobkit can submit to."""

    name: str

    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """The exact command `submit` will run (shown by --dry-run / --show-command)."""
        ...

    def submit(self, request: SubmitRequest) -> Submitted:
        """Launch the job; raise SchedulerError with the scheduler's stderr on refusal."""
        ...

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """States of many jobs in one batched query, keyed by scheduler_id.

        Jobs the scheduler does not know are left out. Raise SchedulerError when the
        scheduler cannot answer: the caller then changes no job's state.
        """
        ...

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """Stop these jobs (and every process they started)."""
        ...
