"""Finding a Grid Engine submission whose qsub reply was lost (jobkit killed, a timeout).

The submission token travels as the job's account string, `qsub -A jobkit.<token>`: qacct
keeps it with every record (its `account` field), so a job that started, ran and ended
before any jobkit command looked is still found, task by task; `qstat -j` shows it
(`account:`) while the job is known there. Why the account string: it is Grid Engine's free
text for accounting only (default `sge`), which changes nothing about where or how a job
runs, and qacct shows it; the job name (-N) is what users read in qstat, what `-hold_jid`
matches and what names Grid Engine's own output files, and qacct keeps neither the script
nor a comment. Grid Engine refuses `:` in it ("Colon (':') not allowed in objectname"),
hence the dot.

A user's own account is never replaced: when the script (`resources.account`, a `-A` in
`scheduler.extra` or a site template) or an sge_request defaults file gives one, qsub gets
no `-A`; such a job is then found only while qstat knows it (by its script file), and one
that ended unseen stays of unknown fate (docs/reliability.md).
"""

from __future__ import annotations

import getpass
import os
import shlex
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from jobkit.backends.base import SubmitRequest
from jobkit.backends.commands import GRID_ENGINE
from jobkit.backends.sge.observe import parse_live
from jobkit.core import proc

ACCOUNT_PREFIX = "jobkit."
"""An account string `jobkit.<token>` carries a submission token (no `:`: Grid Engine
refuses it there)."""
DIRECTIVE = "#$"


def account_args(request: SubmitRequest, environ: Mapping[str, str] | None = None) -> list[str]:
    """`-A jobkit.<token>` for qsub, or nothing when the user's own account applies."""
    if user_sets_account(request.script, request.workdir, environ):
        return []
    return ["-A", f"{ACCOUNT_PREFIX}{request.token}"]


def user_sets_account(script: str, workdir: Path, environ: Mapping[str, str] | None = None) -> bool:
    """True when an account comes from the script's `#$` lines or an sge_request defaults
    file (the cell's, ~/.sge_request, the submission folder's): a `-A` on qsub's command
    line would silently replace it."""
    lines = [line[len(DIRECTIVE) :] for line in script.splitlines() if line.startswith(DIRECTIVE)]
    return _names_account(lines) or any(
        _names_account(_read_lines(path)) for path in defaults_files(workdir, environ)
    )


def defaults_files(workdir: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The sge_request files qsub reads its default options from, as sge_request(5) lists
    them."""
    env = os.environ if environ is None else environ
    files = [Path.home() / ".sge_request", workdir / ".sge_request"]
    root = env.get("SGE_ROOT")
    if root:
        files.insert(0, Path(root) / env.get("SGE_CELL", "default") / "common" / "sge_request")
    return files


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def _names_account(lines: Iterable[str]) -> bool:
    for line in lines:
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        if "-A" in words:
            return True
    return False


def wanted_accounts(tokens: Iterable[str]) -> dict[str, str]:
    """account string -> token, for the tokens looked for."""
    return {f"{ACCOUNT_PREFIX}{token}": token for token in tokens}


def qacct_since_argv(since: float) -> list[str]:
    """`qacct -b START -j`: every record of jobs started since `since` (a minute earlier:
    clocks), START in the qmaster's local time as qacct reads it."""
    start = time.strftime("%Y%m%d%H%M", time.localtime(max(since - 60, 0)))
    return ["qacct", "-b", start, "-j"]


def find_live(
    accounts: Mapping[str, str], scripts: Mapping[str, str], timeout: float
) -> dict[str, str]:
    """token -> job number of this user's jobs in qstat whose `account` or `script_file`
    (qstat -j) is one of these."""
    argv = ["qstat", "-xml", "-u", getpass.getuser()]
    numbers = {
        row.number
        for row in parse_live(argv, proc.run(GRID_ENGINE.argv(argv), timeout=timeout).stdout)
    }
    if not numbers:
        return {}
    detail = proc.run(
        GRID_ENGINE.argv(["qstat", "-j", ",".join(sorted(numbers))]),
        timeout=timeout,
    )
    found: dict[str, str] = {}
    number = None
    for line in detail.stdout.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "job_number":
            number = value
        elif number and key in ("account", "script_file"):
            token = (accounts if key == "account" else scripts).get(value)
            if token is not None:
                found.setdefault(token, number)
    return found
