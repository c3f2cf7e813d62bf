"""Running and timing commands; CPU time of a live process from /proc."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class BenchError(Exception):
    """A command the benchmark depends on failed; the message says which and why."""


@dataclass(frozen=True)
class Timed:
    """A finished command and its wall time."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    """User + system CPU of the command and everything it waited for."""


def run_timed(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600.0,
    check: bool = True,
    capture: bool = True,
) -> Timed:
    """Run argv (a list, never a shell) and time it from spawn to exit.

    capture=False sends stdout to /dev/null (what a terminal user would not wait on).
    """
    args = [str(a) for a in argv]
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            args,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(args)}: timed out after {timeout:g} s") from None
    except FileNotFoundError:
        raise BenchError(f"{args[0]}: not found") from None
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if check and done.returncode != 0:
        tail = (done.stderr or "").strip().splitlines()[-3:]
        raise BenchError(f"{' '.join(args)}: exit {done.returncode}: {' | '.join(tail)}")
    return Timed(args, done.returncode, done.stdout or "", done.stderr or "", wall, cpu)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of its waited-for children, in seconds.

    Read from /proc/PID/stat (fields 14-17: utime, stime, cutime, cstime), so commands a
    follower runs (squeue) count once it has reaped them.
    """
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime + cutime + cstime) / CLOCK_TICKS


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(v, 2) for v in os.getloadavg()]
