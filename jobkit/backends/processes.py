"""This machine's processes, read from /proc: identity, groups, descendants, stopping them.

A pid alone does not name a process for long (pids are reused), so a process is named by
its pid and its start time (field 22 of /proc/PID/stat, clock ticks since boot). Zombies
(exited, waiting to be reaped) count as gone: they run nothing and hold nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")


@dataclass(frozen=True)
class ProcInfo:
    """The fields of /proc/PID/stat jobkit needs."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start_time: str

    @property
    def alive(self) -> bool:
        """Running or sleeping, not a zombie or dead entry."""
        return self.state not in ("Z", "X", "x")


def proc_info(pid: int) -> ProcInfo | None:
    """What /proc says about `pid`, or None when there is no such process."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses.
    after = raw[raw.rfind(b")") + 2 :].split()
    return ProcInfo(
        pid=pid,
        state=after[0].decode(),
        ppid=int(after[1]),
        pgid=int(after[2]),
        sid=int(after[3]),
        start_time=after[19].decode(),
    )


def start_time(pid: int) -> str | None:
    """The start time of `pid` (to recognise it later), or None when it is gone."""
    info = proc_info(pid)
    return info.start_time if info else None


def is_same_process(pid: int, started: str | None) -> bool:
    """True when `pid` is alive and is still the process that started at `started`."""
    info = proc_info(pid)
    if info is None or not info.alive:
        return False
    return started is None or info.start_time == started


def all_processes() -> list[ProcInfo]:
    """Every process on this machine (one /proc scan)."""
    found = []
    for entry in os.listdir(_PROC):
        if entry.isdigit():
            info = proc_info(int(entry))
            if info is not None:
                found.append(info)
    return found


def group_members(pgid: int) -> list[ProcInfo]:
    """Live (non-zombie) processes of process group `pgid`."""
    return [p for p in all_processes() if p.pgid == pgid and p.alive]


def descendants(pid: int) -> list[ProcInfo]:
    """Live processes below `pid` in the parent tree (those that left its group included)."""
    procs = all_processes()
    children: dict[int, list[ProcInfo]] = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc)
    found: dict[int, ProcInfo] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child.pid != pid and child.pid not in found:
                found[child.pid] = child
                todo.append(child.pid)
    return [p for p in found.values() if p.alive]


def with_environment(name: str, value: str) -> list[ProcInfo]:
    """Live processes (of those this user may read) whose environment has name=value."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in os.listdir(_PROC):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = (_PROC / entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            info = proc_info(int(entry))
            if info is not None and info.alive:
                found.append(info)
    return found


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_processes(procs: Iterable[ProcInfo], sig: int) -> None:
    """Send `sig` to each of `procs` that is still the same process (start time checked)."""
    for proc in procs:
        if is_same_process(proc.pid, proc.start_time):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)


def _left(pgids: Iterable[int], known: Iterable[ProcInfo]) -> bool:
    wanted = set(pgids)
    if any(p.pgid in wanted and p.alive for p in all_processes()):
        return True
    return any(is_same_process(p.pid, p.start_time) for p in known)


def stop_groups(pgids: Iterable[int], known: Iterable[ProcInfo], grace_s: float) -> bool:
    """SIGTERM the process groups, wait up to `grace_s`, then SIGKILL what is left.

    `known` are processes found beforehand (e.g. descendants that started their own
    group or session): they get SIGKILL too if still there after the grace period.
    Returns True when nothing is left afterwards.
    """
    groups = sorted(set(pgids))
    procs = list(known)
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    delay = 0.02
    while time.monotonic() < deadline:
        if not _left(groups, procs):
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)
    signal_processes(procs, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if not _left(groups, procs):
            return True
        time.sleep(0.05)
    return False
