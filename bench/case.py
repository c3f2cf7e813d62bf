"""What every case gets (Context) and gives back (CaseResult)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.measure import Stats

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Context:
    """Settings shared by the cases of one bench run."""

    repo: Path
    python: Path
    """The project's venv python (jobkit and torch installed)."""
    quick: bool
    rounds: int
    """Kept rounds per interleaved measurement (at least 5 unless --quick)."""
    warmup: int
    work: Path
    """A scratch folder for this run (removed at the end unless --keep)."""
    partition: str | None
    """The Slurm partition to use, or None when no Slurm answers."""
    say: Callable[[str], None]
    """Progress lines (stderr)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Case-specific settings from the command line (sizes, pool_ran)."""
    deadline: float | None = None
    """--budget-s as a time.monotonic() value: a case that honours it (the GPU case) starts
    no round that would end after it, and notes how many rounds it kept."""
    smoke: bool = False
    """--smoke (implies quick): the fewest runs and steps that still go through every path of
    a case, for the test suite's smoke tests (tests/bench); its figures mean nothing."""

    @property
    def bin_dir(self) -> Path:
        """The venv's bin folder (jobkit, torchrun)."""
        return self.python.parent

    @property
    def jobkit(self) -> Path:
        """The jobkit console script."""
        return self.bin_dir / "jobkit"

    def scratch(self, name: str) -> Path:
        """A fresh folder under the run's scratch folder."""
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.work))
        return path

    def env(self, **extra: str) -> dict[str, str]:
        """This environment with the venv first on PATH, plus `extra`."""
        env = dict(os.environ)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env.pop("PYTHONPATH", None)
        env.update(extra)
        return env


@dataclass(frozen=True)
class Target:
    """A goal from the issue and whether this run met it."""

    name: str
    goal: str
    value: float | None
    unit: str
    met: bool | None
    """None when it could not be judged (e.g. a part was not available)."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "goal": self.goal,
            "value": self.value,
            "unit": self.unit,
            "met": self.met,
            "note": self.note,
        }


@dataclass
class CaseResult:
    """One case's outcome: statistics, ratios, targets, facts and notes."""

    name: str
    title: str
    status: str = "ok"
    """ok | skipped | not available | failed"""
    reason: str = ""
    stats: list[Stats] = field(default_factory=list)
    ratios: dict[str, float | None] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 1),
            "stats": [s.to_dict() for s in self.stats],
            "ratios": self.ratios,
            "targets": [t.to_dict() for t in self.targets],
            "facts": self.facts,
            "notes": self.notes,
        }


def target(name: str, goal: str, value: float | None, unit: str, ok: bool | None) -> Target:
    """Shorthand for a Target."""
    return Target(name, goal, value, unit, ok)


def default_python() -> Path:
    """The project's venv python: ./.venv/bin/python, else the running interpreter."""
    venv = REPO / ".venv" / "bin" / "python"
    return venv if venv.exists() else Path(sys.executable)


def remove_tree(path: Path) -> None:
    """Remove a scratch folder, ignoring what is already gone."""
    shutil.rmtree(path, ignore_errors=True)
