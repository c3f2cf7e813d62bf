"""`submit --wait`'s waiter (jobkit/manager/refresh.py Waiter) on a real local job: between
polls it looks at the run folder's exit_code file, and polls at once when it appears."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from jobkit.core.conventions import EXIT_CODE_FILE
from jobkit.core.states import State
from jobkit.manager.refresh import Waiter
from jobkit.registry.store import Store
from tests.plugins.invoke import Invoke


def test_the_exit_code_file_makes_the_waiter_poll_before_its_backoff_is_over(
    jobkit: Invoke, workdir: Path
) -> None:
    spec = workdir / "job.yaml"
    spec.write_text("name: short\nlaunch:\n  launcher: none\nrun:\n  command: sleep 2\n")
    submitted = jobkit("submit", str(spec), "--json")
    assert submitted.code == 0, submitted.err
    jobkit_id = json.loads(submitted.out)["jobkit_id"]
    seen: list[str] = []
    with Store() as store:
        # A backoff longer than the test: any poll after the first is the exit file's doing.
        waiter = Waiter(
            store,
            jobkit_id,
            on_change=lambda record: seen.append(record.state),
            on_failure=lambda failure: None,
            min_interval_s=3600,
            max_interval_s=3600,
        )
        first = waiter.check()
        assert first.state in (State.QUEUED.value, State.RUNNING.value), first
        run_dir = first.run_dir
        assert run_dir is not None
        exit_file = Path(run_dir) / EXIT_CODE_FILE
        assert waiter.check().state == first.state  # not due: no poll, no file yet
        # The file is the launcher's last act; the local backend calls a job over once its
        # launcher has gone too.
        deadline = time.monotonic() + 60
        while not exit_file.exists() or _alive(int(first.extra["pid"])):
            assert time.monotonic() < deadline, "the job never ended"
            time.sleep(0.1)
        ended = waiter.check()
        assert (ended.state, ended.exit_code) == (State.SUCCEEDED.value, 0), ended
        assert waiter.done()
    assert seen == [first.state, State.SUCCEEDED.value]


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
