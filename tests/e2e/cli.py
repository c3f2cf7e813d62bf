"""Drive the installed `jobkit` command as a user would, each call its own process.

Every test gets its own JOBKIT_HOME and log folder (a tmp dir) and submits from the
repository root, so the examples' relative paths (examples/own_ddp.py) mean what they mean
for a user who cloned the repository. The examples name no venv: jobs run with .venv's
Python (env.python auto), or the absolute env.venv that common_sets adds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv"
JOBKIT = VENV / "bin" / "jobkit"

_SUBMITTED = re.compile(r"^submitted (?P<jobkit>\S+) \((?P<backend>\S+) job (?P<sched>[^)]+)\):")


@dataclass(frozen=True)
class Submission:
    """What `jobkit submit` printed and how long it took."""

    jobkit_id: str
    scheduler_id: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def explain(self) -> str:
        """Both streams, for assertion messages."""
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


@dataclass(frozen=True)
class Jobkit:
    """The jobkit CLI with one JOBKIT_HOME; jobs log into `logs_dir`."""

    home: Path
    logs_dir: Path

    @property
    def env(self) -> dict[str, str]:
        """The environment of every call: ours, with this test's JOBKIT_HOME."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_"))}
        env["JOBKIT_HOME"] = str(self.home)
        return env

    def common_sets(self, venv: bool = True) -> list[str]:
        """`--set` options every e2e job gets: this test's log folder and (unless told
        otherwise) the virtualenv as an absolute path."""
        sets = ["--set", f"logs.dir={self.logs_dir}"]
        return [*sets, "--set", f"env.venv={VENV}"] if venv else sets

    def run(
        self, *args: str, timeout: float = 120.0, cwd: Path = REPO
    ) -> subprocess.CompletedProcess[str]:
        """`jobkit ARGS` to its end; output captured."""
        return subprocess.run(
            [str(JOBKIT), *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def submit(
        self,
        spec: str,
        *options: str,
        timeout: float = 480.0,
        venv: bool = True,
        cwd: Path = REPO,
    ) -> Submission:
        """`jobkit submit SPEC --wait OPTIONS` (plus the common sets) to the job's end, from
        the repository root unless `cwd` says otherwise."""
        started = time.monotonic()
        sets = self.common_sets(venv)
        done = self.run("submit", spec, *sets, *options, "--wait", timeout=timeout, cwd=cwd)
        return _submission(done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def start(self, spec: str, *options: str, output: Path) -> subprocess.Popen[str]:
        """`jobkit submit SPEC --wait OPTIONS` in the background, its output into `output`."""
        with output.open("w") as sink:
            return subprocess.Popen(
                [str(JOBKIT), "submit", spec, *self.common_sets(), *options, "--wait"],
                cwd=REPO,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def submitted(self, output: Path, timeout: float = 120.0) -> tuple[str, str]:
        """(jobkit id, scheduler id) from the `submitted ...` line a background submit wrote."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = output.read_text() if output.exists() else ""
            for line in text.splitlines():
                match = _SUBMITTED.match(line)
                if match:
                    return match["jobkit"], match["sched"]
            time.sleep(0.5)
        raise AssertionError(f"no 'submitted' line after {timeout} s:\n{text}")

    def status(self, job: str) -> dict[str, Any]:
        """`jobkit status --json JOB`: the detail record of one job."""
        done = self.run("status", "--json", job)
        assert done.returncode == 0, f"jobkit status failed: {done.stderr}"
        data = json.loads(done.stdout)
        records = data if isinstance(data, list) else [data]
        assert len(records) == 1, done.stdout
        return dict(records[0])

    def logs(self, job: str, *options: str) -> str:
        """`jobkit logs JOB OPTIONS` (exit 0 required)."""
        done = self.run("logs", job, *options)
        assert done.returncode == 0, f"jobkit logs {job} {options} failed: {done.stderr}"
        return done.stdout

    def wait_state(
        self, job: str, wanted: set[str], timeout: float, poll_s: float = 2.0
    ) -> dict[str, Any]:
        """Poll `jobkit status --json JOB` until its state is one of `wanted`."""
        deadline = time.monotonic() + timeout
        record = self.status(job)
        while record["state"] not in wanted:
            assert time.monotonic() < deadline, (
                f"{job} still {record['state']} after {timeout} s, wanted {sorted(wanted)}"
            )
            time.sleep(poll_s)
            record = self.status(job)
        return record


def _submission(code: int, stdout: str, stderr: str, seconds: float) -> Submission:
    for line in stdout.splitlines():
        match = _SUBMITTED.match(line)
        if match:
            return Submission(match["jobkit"], match["sched"], code, stdout, stderr, seconds)
    raise AssertionError(f"jobkit submit printed no 'submitted' line (exit {code}):\n{stderr}")


def trainer_sets(**overrides: object) -> list[str]:
    """`--set run.train.overrides.KEY=VALUE` for each trainer override (`__` means `.`)."""
    words: list[str] = []
    for key, value in overrides.items():
        words += ["--set", f"run.train.overrides.{key.replace('__', '.')}={value}"]
    return words
