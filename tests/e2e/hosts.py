"""Looking for a job's processes on the "hosts" n1 and n2, over ssh, as an admin would."""

from __future__ import annotations

import os
import shlex
import subprocess
import uuid


def unique_marker(prefix: str) -> str:
    """A run name that appears on the command line of every process the trainer runs in."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _self_excluding(marker: str) -> str:
    """A pgrep pattern for the trainer's `--set name=MARKER`: it matches neither the command
    searching for it nor `jobkit submit --set run.train.overrides.name=MARKER`."""
    return f"set [n]ame={marker}"


def remote_pgrep(host: str, marker: str) -> list[str]:
    """`pgrep -af` over ssh on HOST: the trainer processes (torchrun, workers) of MARKER."""
    command = shlex.join(["pgrep", "-af", _self_excluding(marker)])
    done = subprocess.run(
        ["ssh", "-o", "BatchMode=yes", host, command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), f"ssh {host} {command}: {done.returncode} {done.stderr}"
    return [line for line in done.stdout.splitlines() if line.strip()]


def local_pgrep(marker: str) -> dict[int, str]:
    """pid -> command line of the trainer processes (torchrun, workers) of MARKER here."""
    done = subprocess.run(
        ["pgrep", "-af", _self_excluding(marker)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    found = {}
    for line in done.stdout.splitlines():
        pid, _, command = line.partition(" ")
        found[int(pid)] = command
    return found


def environ_of(pid: int) -> dict[str, str]:
    """The environment a process started with ({} once it is gone)."""
    try:
        raw = open(f"/proc/{pid}/environ", "rb").read()  # noqa: SIM115
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}


def workers(marker: str) -> dict[int, dict[str, str]]:
    """The trainer's worker processes (not torchrun) of the run MARKER: pid -> environment."""
    found = {}
    for pid, command in local_pgrep(marker).items():
        if " -m train " in f" {command} " and "torchrun" not in command:
            env = environ_of(pid)
            if "RANK" in env:
                found[pid] = env
    return found


def kill_leftovers(marker: str) -> list[int]:
    """SIGKILL what is left of the run MARKER (test clean-up); the pids it killed."""
    killed = []
    for pid in local_pgrep(marker):
        try:
            os.kill(pid, 9)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed
