"""The one place that runs scheduler commands (sbatch, squeue, sacct, qsub, qstat, ...).

Always an argument list, never a shell. A non-zero exit, a timeout or a missing
executable raises SchedulerError carrying argv, exit code, stdout and stderr verbatim.
Output is decoded as UTF-8 with replacement characters: a scheduler may print any bytes
(a Latin-1 job comment, a node name in another locale) and that must never stop jobkit.
Each command is logged at debug level; with `JOBKIT_PROC_LOG=FILE` in the environment
each one is also appended to FILE as a JSON line (for tests and benchmarks).
`run_parallel` runs several commands at once (the same check on every host, a stack dump
per node) under one deadline, and kills a straggler with everything it started.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from jobkit.core.errors import SchedulerError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
PROC_LOG_ENV = "JOBKIT_PROC_LOG"


class SchedulerTimeout(SchedulerError):
    """The command did not finish in time: it may or may not have done its work."""


@dataclass(frozen=True)
class Completed:
    """A finished command."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


class Route(Protocol):
    """Where scheduler commands go instead of this machine (jobkit/remote: a cluster's
    login node over ssh), set for a block with `routed`."""

    def answer(self, argv: list[str]) -> Completed | None:
        """An answer already fetched for argv (one batched round trip), or None."""

    def wrap(self, argv: list[str], env: Mapping[str, str] | None, cwd: str | None) -> list[str]:
        """The local command that runs argv there, in cwd, with env added."""

    def settle(self, done: Completed) -> None:
        """Raise the route's own error when the route itself failed (not the command)."""


_ROUTE: ContextVar[Route | None] = ContextVar("jobkit_proc_route", default=None)


@contextmanager
def routed(route: Route) -> Iterator[None]:
    """Every `run` in this block goes through `route` (docs/remote.md)."""
    token = _ROUTE.set(route)
    try:
        yield
    finally:
        _ROUTE.reset(token)


def run(
    argv: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    check: bool = True,
) -> Completed:
    """Run argv and return its output; SchedulerError on failure (SchedulerTimeout on timeout).

    env: variables added to (not replacing) this process's environment.
    check=False returns a non-zero exit instead of raising (timeouts and a missing
    executable still raise).
    """
    args = [str(a) for a in argv]
    asked = args  # what a routed command's error shows (not the ssh around it)
    route = _ROUTE.get()
    if route is not None:
        answered = route.answer(args)
        if answered is not None:
            if check and answered.returncode != 0:
                raise SchedulerError(args, answered.returncode, answered.stdout, answered.stderr)
            return answered
        args = route.wrap(args, env, None if cwd is None else str(cwd))
        env, cwd = None, None
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    log.debug("running %s", shlex.join(args))
    start = time.monotonic()
    try:
        done = subprocess.run(
            args,
            input=input,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            env=full_env,
            cwd=cwd,
            check=False,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        _record(args, None, time.monotonic() - start)
        raise SchedulerError(
            args,
            None,
            "",
            "",
            reason=f"command not found: {args[0]} (is it installed and on PATH?)",
        ) from None
    except subprocess.TimeoutExpired as err:
        _record(args, None, time.monotonic() - start)
        raise SchedulerTimeout(
            args,
            None,
            _text(err.stdout),
            _text(err.stderr),
            reason=f"timed out after {timeout:g} s",
        ) from None
    except OSError as err:
        _record(args, None, time.monotonic() - start)
        raise SchedulerError(args, None, "", "", reason=f"cannot run: {err}") from None
    seconds = time.monotonic() - start
    _record(args, done.returncode, seconds)
    log.debug("%s: exit %d in %.3f s", args[0], done.returncode, seconds)
    result = Completed(args, done.returncode, done.stdout, done.stderr, seconds)
    if route is not None:
        route.settle(result)
    if check and done.returncode != 0:
        raise SchedulerError(asked, done.returncode, done.stdout, done.stderr)
    return result


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode(errors="replace")


def _record(argv: list[str], returncode: int | None, seconds: float) -> None:
    path = os.environ.get(PROC_LOG_ENV)
    if not path:
        return
    line = json.dumps({"argv": argv, "rc": returncode, "seconds": round(seconds, 4)})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@dataclass(frozen=True)
class Outcome:
    """One command of run_parallel: how it ended and what it printed (decoded with
    replacement characters, as `run` does)."""

    argv: list[str]
    returncode: int | None
    """None when it could not start; negative when killed (-9 after the deadline)."""
    stdout: str
    stderr: str
    timed_out: bool = False
    """It was still running at the deadline: killed with its process group."""
    error: str | None = None
    """Why it could not start (`cannot run: ...`), else None."""


def run_parallel(
    commands: Sequence[Sequence[str]], *, timeout: float, input: str | None = None
) -> list[Outcome]:
    """Run every command at once and wait for all of them for at most `timeout` seconds;
    one Outcome per command, in order. Each runs in a process group of its own, so that a
    straggler is killed with what it started (an ssh's children, a py-spy under sudo); an
    interrupted wait (Ctrl-C) kills every group still running. `input` goes to each stdin.
    Nothing raises for one command: the caller decides what a failure means.
    """
    deadline = time.monotonic() + timeout
    outcomes: list[Outcome | None] = [None] * len(commands)
    started: list[tuple[int, list[str], subprocess.Popen[bytes]]] = []
    try:
        for index, command in enumerate(commands):
            args = [str(a) for a in command]
            log.debug("running %s", shlex.join(args))
            try:
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as err:
                outcomes[index] = Outcome(args, None, "", "", error=f"cannot run: {err}")
                continue
            started.append((index, args, proc))
        data = None if input is None else input.encode("utf-8")
        waiters = [
            threading.Thread(
                target=_wait_one, args=(proc, args, data, deadline, outcomes, index), daemon=True
            )
            for index, args, proc in started
        ]
        for waiter in waiters:
            waiter.start()
        for waiter in waiters:
            waiter.join()
    finally:
        for _, _, proc in started:
            if proc.poll() is None:
                _kill_group(proc)
    done = [outcome for outcome in outcomes if outcome is not None]
    if len(done) != len(commands):  # a waiter thread died: never a silent gap
        raise RuntimeError("run_parallel: a command's outcome is missing")
    return done


def _wait_one(
    proc: subprocess.Popen[bytes],
    args: list[str],
    data: bytes | None,
    deadline: float,
    outcomes: list[Outcome | None],
    index: int,
) -> None:
    """Collect one command's output until the deadline (killing its group after it)."""
    start = time.monotonic()
    timed_out = False
    try:
        out, err = proc.communicate(data, timeout=max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    _record(args, None if timed_out else proc.returncode, time.monotonic() - start)
    outcomes[index] = Outcome(args, proc.returncode, _text(out), _text(err), timed_out=timed_out)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group the command leads (it may have exited already)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
