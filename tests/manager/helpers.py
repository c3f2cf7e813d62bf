"""Shared helpers for the manager's cluster tests: specs, waiting on states, PATH wrappers."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.plugins.invoke import CliResult as CliResult
from tests.plugins.invoke import Invoke as Invoke

JOBKIT_BIN = [sys.executable, "-m", "jobkit"]


def run_jobkit_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m jobkit ARGS` as its own process."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [*JOBKIT_BIN, *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def slurm_spec(folder: Path, name: str, command: str, *extra_lines: str) -> Path:
    """A tiny Slurm job: one node, launcher srun (no torch), running `command` in bash."""
    lines = [
        f"name: {name}",
        "backend: slurm",
        "launch:",
        "  launcher: srun",
        "run:",
        f"  command: {json.dumps(['bash', '-c', command])}",
        *extra_lines,
    ]
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def status_of(jobkit: Invoke, job: str) -> dict[str, Any]:
    """`jobkit status JOB --json` as a dict (exit 0 required)."""
    result = jobkit("status", job, "--json")
    assert result.code == 0, result.err
    data: list[dict[str, Any]] = json.loads(result.out)
    return data[0]


def wait_until(
    jobkit: Invoke,
    job: str,
    done: Callable[[dict[str, Any]], bool],
    *,
    timeout: float = 300,
    interval: float = 0.5,
) -> dict[str, Any]:
    """Poll `jobkit status JOB --json` until done(record) or fail after timeout.

    Exit 3 (a scheduler query failed; other tests on this machine may restart the Slurm
    daemons) is retried until the timeout.
    """
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while True:
        result = jobkit("status", job, "--json")
        if result.code == 3 and time.monotonic() < deadline:
            # a scheduler query failed (status said so and changed nothing): ask again
            time.sleep(interval)
            continue
        assert result.code == 0, result.err
        record: dict[str, Any] = json.loads(result.out)[0]
        if not seen or seen[-1] != record["state"]:
            seen.append(record["state"])
        if done(record):
            return record
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{job}: states seen {seen}; last record {record}\n{scheduler_snapshot()}"
            )
        time.sleep(interval)


def scheduler_snapshot() -> str:
    """What the test cluster's schedulers hold now: the queue and the nodes, for a failure
    message (a job that never settles is explained by what else holds the nodes)."""
    commands = (
        ["squeue", "-a", "-o", "%.10i %.12j %.9T %.10M %.10l %.6D %R"],
        ["sinfo", "-N", "-o", "%N %T %E"],
    )
    parts = []
    for argv in commands:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
            parts.append(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}")
        except (OSError, subprocess.TimeoutExpired) as err:
            parts.append(f"$ {' '.join(argv)}: {err}")
    return "\n".join(parts)


def is_settled(record: dict[str, Any]) -> bool:
    """Final, confirmed by the scheduler, and with an exit code."""
    finals = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
    return (
        record["state"] in finals
        and record["state_source"] != "cancel"
        and record["exit_code"] is not None
    )


def wrapper_dir(folder: Path, commands: list[str], log: Path) -> Path:
    """A folder of wrappers, one per command, that log each call to `log` then exec the real one.

    Prepend it to PATH to count scheduler invocations made by a jobkit process.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for name in commands:
        real = shutil.which(name)
        assert real, f"{name} is not installed"
        script = folder / name
        script.write_text(
            f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> "{log}"\nexec "{real}" "$@"\n',
            encoding="utf-8",
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def env_with_path(first: Path) -> dict[str, str]:
    """This environment with `first` prepended to PATH."""
    return {"PATH": f"{first}{os.pathsep}{os.environ.get('PATH', '')}"}


def calls(log: Path) -> list[str]:
    """The logged command lines (empty when nothing ran)."""
    return log.read_text().splitlines() if log.exists() else []


def scancel_quietly(ids: list[str]) -> None:
    """Clean-up: cancel leftover jobs, ignoring errors."""
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, check=False, timeout=60)


def squeue_knows(job_id: str) -> bool:
    """True while squeue still lists the job (before MinJobAge drops it)."""
    done = subprocess.run(
        ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%i"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    return bool(done.stdout.strip())
