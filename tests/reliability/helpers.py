"""Shared helpers of the reliability suite: the hostile-string corpus, jobkit processes,
Slurm queries used as ground truth, small spec builders."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).with_name("data")
CANARY = "{canary}"
JOBKIT = [sys.executable, "-m", "jobkit"]


@dataclass(frozen=True)
class Hostile:
    """One corpus string, its canary placeholder already replaced by a real path."""

    id: str
    value: str
    why: str


def hostile_strings(canary_dir: Path) -> list[Hostile]:
    """The corpus (data/hostile_strings.json); `{canary}` becomes `canary_dir/<id>`."""
    raw = json.loads((DATA / "hostile_strings.json").read_text(encoding="utf-8"))
    return [
        Hostile(
            item["id"], item["value"].replace(CANARY, str(canary_dir / item["id"])), item["why"]
        )
        for item in raw
    ]


def canaries(canary_dir: Path) -> list[str]:
    """Files a smuggled command created (must stay empty)."""
    return sorted(p.name for p in canary_dir.iterdir()) if canary_dir.exists() else []


def write_spec(path: Path, data: dict[str, Any]) -> Path:
    """Write a job spec as YAML (any string survives the round trip)."""
    text = yaml.dump(data, Dumper=_DUMPER, allow_unicode=False, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's emitter where PyYAML has it: the same text for every string of the corpus, six
times faster (the injection walk writes some 12,000 specs)."""


def run_jobkit(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m jobkit ARGS` as a process of its own."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [*JOBKIT, *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_one_clean_line(err: str, code: int, *, allowed: Sequence[int] = (1, 2)) -> None:
    """A refusal: a known exit code and one `jobkit: ...` line, never a traceback. A spec
    with several errors gets one line per error (every schema error at once), each naming
    where it is (`jobkit: FILE[:LINE]: ...`, `jobkit: --set K=V: ...`)."""
    assert code in allowed, f"exit {code}: {err!r}"
    lines = err.splitlines()
    assert lines, f"expected one line on stderr, got none: {err!r}"
    assert all(line.startswith("jobkit: ") for line in lines), err
    if len(lines) > 1:
        assert all(_SPEC_ERROR_LINE.match(line) for line in lines), (
            f"expected one line on stderr (or one FILE[:LINE]: line per spec error), got"
            f" {len(lines)}: {err!r}"
        )
    assert "Traceback" not in err and "internal error" not in err, err


_SPEC_ERROR_LINE = re.compile(r"^jobkit: .+: \S")


def executable(path: Path, text: str) -> Path:
    """Write an executable script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def path_with(first: Path) -> str:
    """PATH with `first` in front."""
    return f"{first}{os.pathsep}{os.environ.get('PATH', '')}"


def real(command: str) -> str:
    """The absolute path of a command on PATH (fails the test when missing)."""
    found = shutil.which(command)
    assert found, f"{command} is not installed"
    return found


# ---- Slurm as the ground truth ----------------------------------------------------------


def slurm(argv: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client command, capturing text."""
    return subprocess.run(
        list(argv), capture_output=True, text=True, errors="replace", timeout=timeout, check=False
    )


def scancel(ids: Sequence[str]) -> None:
    """Clean-up: cancel jobs, ignoring errors."""
    wanted = [i for i in ids if i]
    for start in range(0, len(wanted), 200):
        slurm(["scancel", *wanted[start : start + 200]])


def jobs_with_comment(comment: str) -> list[str]:
    """Ids of this user's jobs (any state squeue still shows) whose comment is `comment`."""
    done = slurm(["squeue", "--noheader", "--me", "--states=all", "--format=%i|%k"])
    assert done.returncode == 0, done.stderr
    return [
        line.split("|", 1)[0].strip()
        for line in done.stdout.splitlines()
        if line.partition("|")[2].strip() == comment
    ]


def sacct_jobs_with_comment(comment: str, since: float) -> list[str]:
    """Ids of jobs sacct knows (since `since`) whose comment is `comment`."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 60))
    done = slurm(
        [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--starttime={start}",
            "--format=JobIDRaw,Comment",
        ]
    )
    assert done.returncode == 0, done.stderr
    return [
        line.split("|", 1)[0]
        for line in done.stdout.splitlines()
        if line.partition("|")[2].strip() == comment
    ]


def squeue_knows(job_id: str) -> bool:
    """True while slurmctld still holds the job (squeue lists it)."""
    done = slurm(["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%i"])
    return bool(done.stdout.strip())


_SHOW_LINE_KEYS = ("StdOut", "StdErr", "WorkDir", "Command", "Comment")


def scontrol_show(job_id: str) -> dict[str, str]:
    """Fields of `scontrol show job ID` that may hold spaces, read one line at a time.

    StdOut, StdErr, WorkDir, Command and Comment stand alone on their line; MailUser is
    followed by MailType; JobName ends its line's first field pair.
    """
    done = slurm(["scontrol", "show", "job", job_id])
    assert done.returncode == 0, done.stderr
    fields: dict[str, str] = {}
    for line in done.stdout.split("\n"):  # not splitlines(): values may hold U+2028
        text = line.lstrip(" ")
        for key in _SHOW_LINE_KEYS:
            if text.startswith(key + "="):
                fields[key] = text[len(key) + 1 :]
        if text.startswith("Comment=") and text.endswith(" "):
            fields["Comment"] = fields["Comment"][:-1]  # scontrol pads this line with a space
        mail = re.match(r"^MailUser=(?P<user>.*) MailType=(?P<type>\S*)$", text)
        if mail:
            fields["MailUser"] = mail["user"]
            fields["MailType"] = mail["type"]
        name = re.match(r"^JobId=\S+ JobName=(?P<name>.*)$", text)
        if name:
            fields["JobName"] = name["name"]
        state = re.search(r"\bJobState=(\S+)", text)
        if state:
            fields["JobState"] = state[1]
    return fields


def wait_for(
    what: str, check: Callable[[], bool], timeout: float = 120, interval: float = 0.5
) -> None:
    """Poll check() until it is true; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
