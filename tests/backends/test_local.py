"""The local backend with real detached processes: state, exit codes, cancel, pid reuse."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from jobkit.backends import processes
from jobkit.backends.base import Observation, SubmitRequest, Submitted
from jobkit.backends.local import LocalBackend
from jobkit.core.errors import SchedulerError
from jobkit.core.states import State
from jobkit.logs.follow import FollowTiming, LogSource, follow
from tests.backends.requests import make_request, tracked

# A stand-in for the launcher of templates/ssh with the same file contract: it writes its
# exit code to $RUN_DIR/exit_code, and on TERM stops its child and writes 143.
MINI_LAUNCHER = """\
set -u
run_dir="$PWD/logs/job-$JOBKIT_JOB_ID"
mkdir -p "$run_dir"
trap 'kill -TERM $child 2>/dev/null; wait $child; echo 143 > "$run_dir/exit_code"; exit 143' TERM
(
  for i in $(seq 1 {lines}); do echo "line $i"; sleep {delay}; done
  echo "a warning" >&2
  exit {code}
) &
child=$!
wait $child
code=$?
echo $code > "$run_dir/exit_code"
exit $code
"""


def mini_launcher(lines: int = 3, delay: float = 0.05, code: int = 0) -> str:
    return MINI_LAUNCHER.format(lines=lines, delay=delay, code=code)


def wait_final(backend: LocalBackend, request: SubmitRequest, sub: Submitted) -> Observation:
    job = tracked(request, sub.scheduler_id, sub.extra)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        obs = backend.poll([job])[sub.scheduler_id]
        if obs.state.is_final:
            return obs
        time.sleep(0.05)
    raise AssertionError("the job did not finish in 30 s")


def test_a_job_runs_then_succeeds_with_its_output_in_the_job_files(tmp_path: Path) -> None:
    backend = LocalBackend()
    request = make_request(tmp_path, mini_launcher(lines=5, delay=0.2))
    sub = backend.submit(request)
    assert sub.scheduler_id == request.jobkit_id
    assert sub.argv == ["bash", str(request.script_path)]
    job = tracked(request, sub.scheduler_id, sub.extra)
    first = backend.poll([job])[sub.scheduler_id]
    assert first.state is State.RUNNING
    assert first.source == "pidfile"
    obs = wait_final(backend, request, sub)
    assert (obs.state, obs.exit_code, obs.source) == (State.SUCCEEDED, 0, "exit-file")
    out = request.workdir / "logs" / f"job-{request.jobkit_id}.out"
    assert sub.log_paths == {
        "out": str(out),
        "err": str(out.with_suffix(".err")),
        "run_dir": str(out.with_suffix("")),
    }
    assert out.read_text() == "".join(f"line {i}\n" for i in range(1, 6))
    assert Path(sub.log_paths["err"]).read_text() == "a warning\n"


def test_a_failing_job_is_failed_with_its_exit_code(tmp_path: Path) -> None:
    backend = LocalBackend()
    request = make_request(tmp_path, mini_launcher(code=3))
    obs = wait_final(backend, request, backend.submit(request))
    assert (obs.state, obs.exit_code, obs.raw_state) == (State.FAILED, 3, "exit 3")


def test_a_launcher_that_dies_without_an_exit_code_is_failed_never_succeeded(
    tmp_path: Path,
) -> None:
    backend = LocalBackend()
    request = make_request(tmp_path, "sleep 0.2; kill -KILL $$\n")
    obs = wait_final(backend, request, backend.submit(request))
    assert obs.state is State.FAILED
    assert obs.reason == "launcher vanished"


def test_a_recycled_pid_is_not_taken_for_the_launcher(tmp_path: Path) -> None:
    """A pid now used by another process (different start time) does not mean RUNNING."""
    backend = LocalBackend()
    request = make_request(tmp_path, "exit 0\n")
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        real_start = processes.start_time(stranger.pid)
        assert real_start is not None
        extra = {
            "pid": str(stranger.pid),
            "pgid": str(stranger.pid),
            "start_time": str(int(real_start) - 100),  # what the launcher's start time was
            "run_dir": str(tmp_path / "empty-run-dir"),
        }
        (tmp_path / "empty-run-dir").mkdir()  # there, without an exit code
        job = tracked(request, request.jobkit_id, extra)
        obs = backend.poll([job])[request.jobkit_id]
        assert (obs.state, obs.reason) == (State.FAILED, "launcher vanished")
        # With the right start time the same pid is the launcher, still running.
        job = tracked(request, request.jobkit_id, {**extra, "start_time": real_start})
        assert backend.poll([job])[request.jobkit_id].state is State.RUNNING
        # Cancelling the job with the wrong start time leaves the stranger alone.
        backend.cancel([tracked(request, request.jobkit_id, extra)])
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_cancel_leaves_no_process_behind(tmp_path: Path) -> None:
    """The job starts a child in its group, one in its own session and one that ignores
    SIGTERM: after cancel none of them is alive."""
    script = """\
set -u
run_dir="$PWD/logs/job-$JOBKIT_JOB_ID"
mkdir -p "$run_dir"
sleep 300 &
setsid sh -c 'echo $$ > "$0/escaped"; exec sleep 301' "$run_dir" &
python3 -c 'import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").close()
time.sleep(302)' "$run_dir/ignoring" &
# "started" only once the escape and the SIGTERM-ignoring child are in place: a loaded
# machine may not have run setsid yet when the echo comes.
while [ ! -s "$run_dir/escaped" ] || [ ! -e "$run_dir/ignoring" ]; do sleep 0.02; done
echo started
wait
"""
    backend = LocalBackend(grace_s=1.0)
    request = make_request(tmp_path, script)
    sub = backend.submit(request)
    out = Path(sub.log_paths["out"])
    deadline = time.monotonic() + 60
    while "started" not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    pid, pgid = int(sub.extra["pid"]), int(sub.extra["pgid"])
    tree = processes.descendants(pid)
    assert len(tree) >= 3
    assert any(p.pgid != pgid for p in tree)  # one escaped the group
    job = tracked(request, sub.scheduler_id, sub.extra)
    backend.cancel([job])
    assert processes.group_members(pgid) == []
    assert not any(processes.is_same_process(p.pid, p.start_time) for p in tree)
    # The same seen by ps: nothing alive in the group or among the job's processes
    # (zombies, left for PID 1 to reap, do not count).
    table = subprocess.run(
        ["ps", "-eo", "pid=,pgid=,stat="], capture_output=True, text=True, check=True
    ).stdout
    ours = {str(pid), *(str(p.pid) for p in tree)}
    alive = [
        row
        for row in (line.split() for line in table.splitlines())
        if (row[1] == str(pgid) or row[0] in ours) and not row[2].startswith("Z")
    ]
    assert alive == []
    assert not processes.is_same_process(pid, sub.extra["start_time"])
    # Killed before it could write its exit code: cancelled, not failed.
    obs = backend.poll([job])[sub.scheduler_id]
    assert obs.state is State.CANCELLED


def test_cancel_lets_the_launcher_trap_write_its_exit_code(tmp_path: Path) -> None:
    backend = LocalBackend(grace_s=10.0)
    request = make_request(tmp_path, mini_launcher(lines=1000, delay=0.1))
    sub = backend.submit(request)
    time.sleep(0.3)
    job = tracked(request, sub.scheduler_id, sub.extra)
    started = time.monotonic()
    backend.cancel([job])
    assert time.monotonic() - started < 5  # the trap ended it; no SIGKILL wait
    obs = backend.poll([job])[sub.scheduler_id]
    assert (obs.state, obs.exit_code) == (State.CANCELLED, 143)
    assert processes.group_members(int(sub.extra["pgid"])) == []


def test_cancel_of_a_finished_job_changes_nothing(tmp_path: Path) -> None:
    backend = LocalBackend()
    request = make_request(tmp_path, mini_launcher(lines=1))
    sub = backend.submit(request)
    assert wait_final(backend, request, sub).state is State.SUCCEEDED
    backend.cancel([tracked(request, sub.scheduler_id, sub.extra)])
    assert wait_final(backend, request, sub).state is State.SUCCEEDED


def test_a_local_job_is_followed_to_its_end(tmp_path: Path) -> None:
    backend = LocalBackend()
    request = make_request(tmp_path, mini_launcher(lines=20, delay=0.05))
    sub = backend.submit(request)
    job = tracked(request, sub.scheduler_id, sub.extra)

    def done() -> bool:
        return backend.poll([job])[sub.scheduler_id].state.is_final

    timing = FollowTiming(done_interval_s=0.2)
    lines = [
        line.text for line in follow([LogSource(Path(sub.log_paths["out"]))], done, timing=timing)
    ]
    assert lines == [f"line {i}" for i in range(1, 21)]


def test_the_launcher_does_not_ignore_sigint(tmp_path: Path) -> None:
    """Started detached but with default signal handling (bash `&` would ignore SIGINT)."""
    backend = LocalBackend()
    request = make_request(tmp_path, "grep SigIgn /proc/$$/status; sleep 5\n")
    sub = backend.submit(request)
    out = Path(sub.log_paths["out"])
    deadline = time.monotonic() + 10
    while not out.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    ignored = int(out.read_text().split()[1], 16)
    assert not ignored & (1 << (2 - 1))  # bit for SIGINT (2)
    backend.cancel([tracked(request, sub.scheduler_id, sub.extra)])
    assert os.path.exists(request.job_dir / "cancelled")


def test_a_job_launched_on_another_machine_is_neither_judged_nor_touched(tmp_path: Path) -> None:
    """A registry shared between machines: a pid from elsewhere means nothing here."""
    backend = LocalBackend()
    request = make_request(tmp_path, "exit 0\n")
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        extra = {
            "host": "some-other-login-node",
            "pid": str(stranger.pid),
            "pgid": str(stranger.pid),
            "start_time": processes.start_time(stranger.pid) or "",
            "run_dir": str(tmp_path / "run"),
        }
        job = tracked(request, request.jobkit_id, extra)
        obs = backend.poll([job])[request.jobkit_id]
        assert (obs.state, obs.reason) == (
            State.UNKNOWN,
            "its launcher runs on some-other-login-node: ask there",
        )
        with pytest.raises(SchedulerError, match="on some-other-login-node; cancel there"):
            backend.cancel([job])
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
