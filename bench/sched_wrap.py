"""A folder of wrappers for scheduler commands: each logs its argv, then execs the real one.

Put the folder first on PATH and every squeue / sacct / sbatch ... that jobkit runs is
counted, independently of jobkit's own logging, and its exact argv can be replayed.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

COMMANDS = ("squeue", "sacct", "sbatch", "scancel", "scontrol", "sinfo", "qstat", "qsub")
SEP = "\x1f"
"""Separates the words of one logged call (no argv word holds it)."""


@dataclass(frozen=True)
class Call:
    """One logged scheduler command."""

    command: str
    argv: list[str]
    """The full argv, the real executable first."""


def make_wrappers(folder: Path, log: Path) -> Path:
    """Write the wrappers into `folder` (for the commands found on PATH); returns folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        real = shutil.which(name)
        if real is None:
            continue
        script = folder / name
        exe, target = shlex.quote(real), shlex.quote(str(log))
        script.write_text(
            "#!/bin/sh\n"
            f"# jobkit bench: log this call to {log}, then run the real {name}.\n"
            f"{{ printf '%s' {exe}; for a in \"$@\"; do printf '\\037%s' \"$a\"; done;"
            f" printf '\\n'; }} >> {target}\n"
            f'exec {exe} "$@"\n'
        )
        script.chmod(0o755)
    return folder


def read_calls(log: Path) -> list[Call]:
    """The calls logged so far, in order."""
    try:
        text = log.read_text()
    except FileNotFoundError:
        return []
    calls = []
    for line in text.splitlines():
        words = line.split(SEP)
        calls.append(Call(Path(words[0]).name, words))
    return calls


def count(calls: list[Call]) -> dict[str, int]:
    """Calls per command name."""
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.command] = counts.get(call.command, 0) + 1
    return counts
