"""Real local jobs end to end: `jobkit submit` renders templates/ssh, runs torchrun here;
`jobkit logs -f` follows them, `jobkit status` tracks them, `jobkit cancel` stops them."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from jobkit.backends import processes
from tests.backends.cli import Jobkit

# Each process prints 4 lines, one every 0.3 s, then exits with EXIT.
PRINTER = (
    "import os, sys, time\n"
    "for i in range(4):\n"
    "    os.write(1, f\"rank {os.environ['RANK']} line {i}\\n\".encode())  # one write a line\n"
    "    time.sleep(0.3)\n"
    "sys.exit(int(os.environ.get('EXIT', '0')))\n"
)


@pytest.fixture
def jobkit(tmp_path: Path) -> Jobkit:
    workdir = tmp_path / "work dir"  # a space: paths must survive quoting
    workdir.mkdir()
    (workdir / "printer.py").write_text(PRINTER)
    return Jobkit(workdir=workdir, home=tmp_path / "home")


def prefixed(label: str, path: Path) -> str:
    """The file as `jobkit logs --all-ranks` prints it."""
    return "".join(f"[{label}] {line}\n" for line in path.read_text().splitlines())


def assert_rank_lines(node_file: Path) -> None:
    """Both workers' lines are in the node file, in order (torchrun's own messages, written
    by other processes to the same file, may sit between them, even inside a line)."""
    text = node_file.read_text()
    for rank in (0, 1):
        positions = [text.find(f"rank {rank} line {i}\n") for i in range(4)]
        assert -1 not in positions and positions == sorted(positions), text


def write_spec(jobkit: Jobkit, name: str, command: list[str], exit_code: int = 0) -> str:
    spec = {
        "name": name,
        "backend": "local",
        "launch": {"nproc_per_node": 2},
        "env": {"vars": {"EXIT": exit_code}},
        "run": {"command": command},
    }
    path = jobkit.workdir / f"{name}.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path.name


def test_a_job_is_followed_to_its_end_and_logs_exits_like_the_job(jobkit: Jobkit) -> None:
    job = jobkit.submit(write_spec(jobkit, "printer", ["python3", "printer.py"]))
    follower = jobkit.run("logs", job["jobkit_id"], "-f", timeout=120)
    assert follower.returncode == 0, follower.stderr
    # The job's own lines and rank 0's program output (the node file: both workers' lines,
    # as one torchrun starts them), merged as they come; the note says where they are.
    lines = follower.stdout.splitlines()
    assert any(line.startswith(f"jobkit: job {job['jobkit_id']} (printer)") for line in lines)
    assert lines[-1] == "jobkit: finished with exit code 0"
    for rank in (0, 1):
        positions = [follower.stdout.find(f"rank {rank} line {i}\n") for i in range(4)]
        assert -1 not in positions and positions == sorted(positions), follower.stdout
    node_file = Path(job["log_paths"]["run_dir"]) / "node-0.out"
    assert f"jobkit: rank 0's output is in {node_file}" in follower.stderr
    state = jobkit.status(job["jobkit_id"])
    assert (state["state"], state["exit_code"]) == ("SUCCEEDED", 0)
    # The launcher's start and end and its host: ELAPSED and NODES in status.
    assert state["nodes"] == socket.gethostname()
    assert state["elapsed_s"] is not None and 1.0 < state["elapsed_s"] < 120, state
    row = next(
        line
        for line in jobkit.run("status").stdout.splitlines()
        if line.startswith(job["jobkit_id"])
    )
    assert row.split()[5:7] == [f"0:{int(state['elapsed_s']):02d}", socket.gethostname()], row
    # Per-rank output: one torchrun per node, so the node file, prefixed.
    merged = jobkit.run("logs", job["jobkit_id"], "--all-ranks")
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout == prefixed("node 0", node_file)
    assert_rank_lines(node_file)
    one = jobkit.run("logs", job["jobkit_id"], "--rank", "1", "--tail", "2")
    assert "node-0.out holds every rank on host 0" in one.stderr
    assert len(one.stdout.splitlines()) == 2
    by_prefix = jobkit.run("logs", job["jobkit_id"][:5], "--stderr")
    assert by_prefix.returncode == 0, by_prefix.stderr


def test_following_a_failing_job_exits_with_its_code(jobkit: Jobkit) -> None:
    job = jobkit.submit(write_spec(jobkit, "fails", ["python3", "printer.py"], exit_code=3))
    follower = jobkit.run("logs", job["jobkit_id"], "-f", "--all-ranks", timeout=120)
    state = jobkit.status(job["jobkit_id"])
    assert state["state"] == "FAILED"
    # torchrun reports 1 for a failed worker; logs -f exits with the job's code.
    assert follower.returncode == state["exit_code"] != 0, (state, follower.stderr)
    assert f"ended FAILED (exit {state['exit_code']})" in follower.stderr
    node_file = Path(job["log_paths"]["run_dir"]) / "node-0.out"
    assert follower.stdout == prefixed("node 0", node_file)
    assert_rank_lines(node_file)


def test_cancel_stops_every_process_and_the_follower_returns(jobkit: Jobkit) -> None:
    sleeper = ["python3", "-c", "import os, time; os.write(1, b'up\\n'); time.sleep(600)"]
    job = jobkit.submit(write_spec(jobkit, "sleeper", sleeper))
    job_id = job["jobkit_id"]
    follower = jobkit.start("logs", job_id, "-f", "--all-ranks")
    node_out = Path(job["log_paths"]["run_dir"]) / "node-0.out"
    deadline = time.monotonic() + 60
    while node_out.read_text().splitlines().count("up") < 2 if node_out.exists() else True:
        assert time.monotonic() < deadline, jobkit.run("logs", job_id, "--all-ranks").stdout
        time.sleep(0.1)
    running = processes.with_environment("JOBKIT_JOB_ID", job_id)
    assert len(running) >= 4  # launcher, its runner, torchrun, 2 workers
    done = jobkit.run("cancel", job_id)
    assert done.returncode == 0, done.stderr
    assert processes.with_environment("JOBKIT_JOB_ID", job_id) == []
    assert processes.group_members(int(job["extra"]["pgid"])) == []
    out, err = follower.communicate(timeout=60)
    assert out == prefixed("node 0", node_out)
    assert out.splitlines().count("[node 0] up") == 2
    state = jobkit.status(job_id)
    assert state["state"] == "CANCELLED"
    # The launcher's code: 143 (its SIGTERM) or torchrun's own when that stopped first.
    assert state["exit_code"] in (1, 143)
    assert follower.returncode == state["exit_code"], err
    assert "ended CANCELLED" in err


def test_a_missing_venv_is_refused_before_anything_starts(jobkit: Jobkit) -> None:
    (jobkit.workdir / "novenv.yaml").write_text(
        "name: novenv\nenv:\n  venv: no/such venv\nrun:\n  command: 'true'\n"
    )
    done = jobkit.run("submit", "novenv.yaml")
    assert done.returncode == 2
    activate = jobkit.workdir / "no" / "such venv" / "bin" / "activate"
    assert done.stderr == (
        f"jobkit: novenv.yaml:3: env.venv: {activate} not found on {socket.gethostname()}\n"
    )
    assert json.loads(jobkit.run("status", "--all", "--json").stdout) == []
    assert not (jobkit.workdir / "logs").exists()


def test_resources_time_stops_the_job_at_its_limit_as_timeout(
    jobkit: Jobkit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher keeps resources.time (no scheduler here): at the limit SIGTERM to each
    host's process group, SIGKILL after the grace to what ignored it; the job ends TIMEOUT."""
    monkeypatch.setenv("JOBKIT_STOP_GRACE_S", "2")
    stubborn = [
        "python3",
        "-c",
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " os.write(1, b'up\\n'); time.sleep(600)",
    ]
    path = jobkit.workdir / "limited.yaml"
    spec = {
        "name": "limited",
        "backend": "local",
        "resources": {"time": "00:00:03"},
        "launch": {"nproc_per_node": 2},
        "run": {"command": stubborn},
    }
    path.write_text(json.dumps(spec))
    started = time.monotonic()
    job = jobkit.submit(path.name)
    job_id = job["jobkit_id"]
    deadline = started + 60
    while (state := jobkit.status(job_id))["state"] not in ("TIMEOUT", "FAILED", "CANCELLED"):
        assert time.monotonic() < deadline, state
        time.sleep(0.3)
    took = time.monotonic() - started
    assert state["state"] == "TIMEOUT", state
    assert state["reason"] == "stopped by the launcher at its time limit (resources.time)"
    assert state["exit_code"] == 143
    assert 3 <= took < 20, took  # the limit, then the 2 s grace: not torchrun's own 30 s
    assert processes.with_environment("JOBKIT_JOB_ID", job_id) == []
    assert processes.group_members(int(job["extra"]["pgid"])) == []
    out = Path(job["log_paths"]["out"]).read_text()
    assert "jobkit: time limit 00:00:03" in out
    err = Path(job["log_paths"]["err"]).read_text()
    assert "jobkit: time limit (resources.time) reached: stopping every host" in err


def test_what_the_program_leaves_running_is_stopped_and_named_when_the_host_ends(
    jobkit: Jobkit,
) -> None:
    """A process the program started in a session of its own (as torchrun starts its workers)
    and that ignores SIGTERM does not outlive the job: once the host's program has ended the
    host finds it by the job's environment, says so, and kills it; the job keeps its code."""
    orphan = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    leaver = [
        "python3",
        "-c",
        "import subprocess, sys;"
        f" subprocess.Popen([sys.executable, '-c', {orphan!r}], start_new_session=True)",
    ]
    path = jobkit.workdir / "leaver.yaml"
    spec = {
        "name": "leaver",
        "backend": "local",
        "launch": {"launcher": "none"},
        "run": {"command": leaver},
    }
    path.write_text(json.dumps(spec))
    job = jobkit.submit(path.name)
    job_id = job["jobkit_id"]
    deadline = time.monotonic() + 60
    while (state := jobkit.status(job_id))["state"] in ("PENDING", "RUNNING"):
        assert time.monotonic() < deadline, state
        time.sleep(0.3)
    assert state["state"] == "SUCCEEDED", state
    assert processes.with_environment("JOBKIT_JOB_ID", job_id) == []
    node_out = (Path(job["log_paths"]["run_dir"]) / "node-0.out").read_text()
    line = "jobkit: host 0: stopping 1 process(es) its launcher left running (pid "
    assert line in node_out, node_out
    assert "still running after SIGKILL" not in node_out
