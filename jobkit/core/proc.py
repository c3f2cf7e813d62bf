"""The one place that runs scheduler commands (sbatch, squeue, sacct, qsub, qstat, ...).

Always an argument list, never a shell. A non-zero exit, a timeout or a missing
executable raises SchedulerError carrying argv, exit code, stdout and stderr verbatim.
Output is decoded as UTF-8 with replacement characters: a scheduler may print any bytes
(a Latin-1 job comment, a node name in another locale) and that must never stop jobkit.
Each command is logged at debug level; with `JOBKIT_PROC_LOG=FILE` in the environment
each one is also appended to FILE as a JSON line (for tests and benchmarks).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
    if check and done.returncode != 0:
        raise SchedulerError(args, done.returncode, done.stdout, done.stderr)
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
