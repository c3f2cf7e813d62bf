"""What `Backend.preflight` answers (`jobkit check`, `jobkit submit`): the problems a scheduler
would find with a job before it queues, each about one spec key. Plain records shared by every
backend; each backend asks its scheduler in its own module (Slurm: backends/slurm/preflight.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    """One problem: the spec key it is about (`resources.time`, `scheduler.extra.0`) and what
    is wrong, in plain words with the limit that refuses it."""

    key: str
    message: str


@dataclass(frozen=True)
class Preflight:
    """A backend's answer: its problems, what it asked (`sbatch --test-only`, ...) and notes
    (what it could not check, what the scheduler predicts)."""

    findings: tuple[Finding, ...] = ()
    checked: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
