"""Drive the installed `jobkit` command as a user would, each call its own process.

Every test gets its own JOBKIT_HOME and log folder (a tmp dir) and submits from the
repository root, so the examples' relative paths (examples/own_ddp.py) mean what they mean
for a user who cloned the repository. The examples name no venv: jobs run with .venv's
Python (env.python auto), or the absolute env.venv that common_sets adds.

Polling is the exception (issue 25: each CLI process costs ~0.4 CPU-s on the loaded 2-core
CI machine): between two CLI calls, a poll loop runs the same command in this process
(`Jobkit.run_here`: the console script's own `jobkit.cli.run`, as tests/plugins/invoke.py
does, without the Python start-up), and asks a real `jobkit` process only to confirm what
that one saw (`poll_cli`); what a wait returns is always a CLI process's answer. What
`jobkit status` does after a refresh (resubmit a run, settle a broken chain) may then be
done by an in-process poll, its one-time lines on stderr said there: a wait whose test reads
such a line polls with the CLI alone (test_chains.py, `note`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv"
JOBKIT = VENV / "bin" / "jobkit"

_SUBMITTED = re.compile(r"^submitted (?P<jobkit>\S+) \((?P<backend>\S+) job (?P<sched>[^)]+)\):")
_CLEARED = ("SLURM_", "PBS_")
"""Variables a CLI call does not inherit (a test run inside a job must not leak its own)."""

CLI_EVERY_S = 30.0
"""A poll loop asks a `jobkit` process at least this often, whatever the in-process look saw:
were the two ever to differ, the wait would still end as it did with the CLI alone."""

T = TypeVar("T")


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
        env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED)}
        env["JOBKIT_HOME"] = str(self.home)
        return env

    @contextlib.contextmanager
    def _as_a_call(self, cwd: Path) -> Iterator[None]:
        """For the block, this process as `run` starts a CLI call: os.environ as `env` (only
        the keys that differ are touched: a thread's subprocess meanwhile sees them too) and
        `cwd` the working folder; both put back."""
        saved = {k: v for k, v in os.environ.items() if k.startswith(_CLEARED)}
        saved_home = os.environ.get("JOBKIT_HOME")
        try:
            for key in saved:
                del os.environ[key]
            os.environ["JOBKIT_HOME"] = str(self.home)
            with contextlib.chdir(cwd):
                yield
        finally:
            os.environ.update(saved)
            if saved_home is None:
                os.environ.pop("JOBKIT_HOME", None)
            else:
                os.environ["JOBKIT_HOME"] = saved_home

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

    def run_here(self, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str] | None:
        """`jobkit ARGS` in this process: the console script's own `jobkit.cli.run` (umask,
        registry and error handling included), in the environment and folder of `run`,
        output captured; without the CLI's ~0.4 CPU-s of Python start-up and imports. None
        when it raised: the caller asks the CLI instead. For polls (poll_cli), never for
        what a test checks."""
        from jobkit.cli import EXIT_INTERRUPTED
        from jobkit.cli import run as jobkit_run

        out, err = io.StringIO(), io.StringIO()
        try:
            with (
                self._as_a_call(cwd),
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(err),
            ):
                code = jobkit_run(list(args))
        except Exception:
            return None
        if code == EXIT_INTERRUPTED:  # Ctrl-C: jobkit's run took it for its own
            raise KeyboardInterrupt
        return subprocess.CompletedProcess(["jobkit", *args], code, out.getvalue(), err.getvalue())

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

    def status_here(self, job: str) -> dict[str, Any] | None:
        """`jobkit status --json JOB` in this process (run_here): the record, or None when
        that call failed or did not give one record (the caller asks the CLI then)."""
        done = self.run_here("status", "--json", job)
        if done is None or done.returncode != 0:
            return None
        try:
            data = json.loads(done.stdout)
        except ValueError:
            return None
        records = data if isinstance(data, list) else [data]
        return dict(records[0]) if len(records) == 1 else None

    def logs(self, job: str, *options: str) -> str:
        """`jobkit logs JOB OPTIONS` (exit 0 required)."""
        done = self.run("logs", job, *options)
        assert done.returncode == 0, f"jobkit logs {job} {options} failed: {done.stderr}"
        return done.stdout

    def wait_state(
        self, job: str, wanted: set[str], timeout: float, poll_s: float = 2.0
    ) -> dict[str, Any]:
        """Poll `jobkit status --json JOB` until its state is one of `wanted` (wait_status)."""
        return self.wait_status(
            job,
            lambda record: record["state"] in wanted,
            timeout,
            f"a state in {sorted(wanted)}",
            poll_s=poll_s,
        )

    def wait_status(
        self,
        job: str,
        ready: Callable[[dict[str, Any]], bool],
        timeout: float,
        what: str,
        poll_s: float = 0.5,
    ) -> dict[str, Any]:
        """Poll `jobkit status --json JOB` until `ready(record)`; that record, a CLI call's
        (in between, the same status runs in this process: poll_cli)."""
        deadline = time.monotonic() + timeout

        def settled(record: dict[str, Any]) -> bool:
            if ready(record):
                return True
            assert time.monotonic() < deadline, (
                f"{job} still {record['state']} after {timeout} s, waiting for {what}"
            )
            return False

        return poll_cli(
            lambda: self.status(job),
            lambda: self.status_here(job),
            worth_asking=ready,
            settled=settled,
            deadline=deadline,
            poll_s=poll_s,
        )


def poll_cli(
    cli: Callable[[], T],
    here: Callable[[], T | None],
    *,
    worth_asking: Callable[[T], bool],
    settled: Callable[[T], bool],
    deadline: float,
    poll_s: float,
) -> T:
    """Poll until `settled` holds for an answer of `cli()` (a `jobkit` process); that answer.
    `settled` may fail the wait (AssertionError), e.g. at the deadline. Each poll first asks
    `here()`, the same command in this process (Jobkit.run_here); the CLI is asked only when
    that answer is `worth_asking` (it would settle the wait or fail it), when it failed
    (None), when CLI_EVERY_S passed since the CLI was last asked, and at the deadline."""
    asked = time.monotonic()
    while True:
        now = time.monotonic()
        due = now >= deadline or now - asked >= CLI_EVERY_S
        if due or (seen := here()) is None or worth_asking(seen):
            answer = cli()
            asked = time.monotonic()
            if settled(answer):
                return answer
        time.sleep(poll_s)


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
