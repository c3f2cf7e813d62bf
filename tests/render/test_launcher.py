"""The local/ssh launcher's behaviour, by running it: exit codes, the first failure stopping
the others, signals, the grace period, the files it leaves (docs/design.md).

Most tests replace torchrun by a small script (tests/render/fakes.py has ssh); two run the
real torchrun of this venv on this machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobkit.render.engine import render
from tests.render.fakes import FROM_PATH, install_fakes, records
from tests.render.helpers import spec_from

# A torchrun stand-in driven by the node rank (static rendezvous passes --node-rank) and
# by $FAKE_DIR/torchrun.conf (ssh does not carry the environment): FAIL_RANK exits 7 after a
# moment; the others run RUN_S seconds, and on SIGTERM note it and exit 75 (or, with
# IGNORE_TERM=1, ignore it).
TORCHRUN = """#!/bin/bash
if [[ -r "$FAKE_DIR/torchrun.conf" ]]; then source "$FAKE_DIR/torchrun.conf"; fi
rank=0
while (( $# )); do
  if [[ "$1" == --node-rank ]]; then rank=$2; fi
  shift
done
echo "node $rank up"
if [[ "$rank" == "${FAIL_RANK:-none}" ]]; then sleep 0.5; echo "node $rank failing"; exit 7; fi
if [[ -n "${IGNORE_TERM:-}" ]]; then
  trap '' TERM
  sleep 30 & wait $!
fi
trap 'echo "node $rank got TERM"; exit 75' TERM
sleep "${RUN_S:-30}" & wait $!
"""


def _spec(backend: str, **launch: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "launcher",
        "backend": backend,
        "launch": {"rdzv": "static", **launch},
        "run": {"command": ["prog"]},
    }
    if backend == "ssh":
        data["resources"] = {"nodes": 3}
        data["ssh"] = {"hosts": ["h0", "h1", "h2"]}
    return data


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    fakes = install_fakes(tmp_path / "bin")
    (fakes / "torchrun").write_text(TORCHRUN)
    return fakes


def _start(
    data: dict[str, Any], tmp_path: Path, bin_dir: Path, **env: str
) -> subprocess.Popen[str]:
    script = tmp_path / "launch.sh"
    script.write_text(render(spec_from(data), interpreter=FROM_PATH))
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    (tmp_path / "fake").mkdir(exist_ok=True)
    conf = {k: env.pop(k) for k in ("FAIL_RANK", "RUN_S", "IGNORE_TERM") if k in env}
    (tmp_path / "fake" / "torchrun.conf").write_text(
        "".join(f"{key}={value}\n" for key, value in conf.items())
    )
    full_env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "FAKE_DIR": str(tmp_path / "fake"),
        "JOBKIT_JOB_ID": "local-1-77",
        **env,
    }
    return subprocess.Popen(
        ["bash", str(script)],
        cwd=workdir,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # as jobkit submit starts it: its own session and group
    )


def _run_dir(tmp_path: Path) -> Path:
    return tmp_path / "work" / "logs" / "launcher-local-1-77"


def _wait_for(path: Path, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}")


def test_success_leaves_exit_code_pid_and_no_pgid_files(tmp_path: Path, bin_dir: Path) -> None:
    proc = _start(_spec("ssh"), tmp_path, bin_dir, RUN_S="0.2")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    run_dir = _run_dir(tmp_path)
    assert (run_dir / "exit_code").read_text().splitlines() == ["0", "local-1-77"]
    assert (run_dir / "launcher.pid").read_text() == f"{proc.pid}\n"
    for i in range(3):
        assert f"node {i} up" in (run_dir / f"node-{i}.out").read_text()
        assert not Path(f"/tmp/jobkit-local-1-77-node-{i}.pgid").exists()
    assert "finished with exit code 0" in out


def test_first_failure_stops_the_others(tmp_path: Path, bin_dir: Path) -> None:
    started = time.monotonic()
    proc = _start(_spec("ssh"), tmp_path, bin_dir, FAIL_RANK="1")
    out, _ = proc.communicate(timeout=60)
    assert time.monotonic() - started < 20, "the other hosts were not stopped"
    assert proc.returncode == 7, out
    run_dir = _run_dir(tmp_path)
    assert (run_dir / "exit_code").read_text().splitlines()[0] == "7"
    assert "node 1 failing" in (run_dir / "node-1.out").read_text()
    for i in (0, 2):
        assert f"node {i} got TERM" in (run_dir / f"node-{i}.out").read_text()
    assert "host 1 failed: stopping the others" in out


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_the_launcher_group_stops_every_host(
    tmp_path: Path, bin_dir: Path, signum: int, code: int
) -> None:
    proc = _start(_spec("ssh"), tmp_path, bin_dir)
    run_dir = _run_dir(tmp_path)
    for i in range(3):
        _wait_for(run_dir / f"node-{i}.out", f"node {i} up")
    os.killpg(proc.pid, signum)  # what jobkit cancel or Ctrl-C does
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == code, out
    assert (run_dir / "exit_code").read_text().splitlines()[0] == f"{code}"
    for i in range(3):
        assert f"node {i} got TERM" in (run_dir / f"node-{i}.out").read_text()


def test_hosts_ignoring_sigterm_are_killed_after_the_grace_period(
    tmp_path: Path, bin_dir: Path
) -> None:
    proc = _start(_spec("local"), tmp_path, bin_dir, IGNORE_TERM="1", JOBKIT_STOP_GRACE_S="1")
    run_dir = _run_dir(tmp_path)
    _wait_for(run_dir / "node-0.out", "node 0 up")
    pgid = int(Path("/tmp/jobkit-local-1-77-node-0.pgid").read_text())
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert time.monotonic() - started < 15, out
    assert proc.returncode == 143, out
    assert "killing host 0" in out
    # Nothing is left of torchrun's process group (SIGKILL takes effect at once, but a killed
    # orphan stays a zombie until PID 1 reaps it: zombies do not count).
    deadline = time.monotonic() + 5
    while _live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _live_members(pgid) == []


def _live_members(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are not zombies (from /proc/PID/stat)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def test_missing_torchrun_is_a_failure_with_its_code(tmp_path: Path, bin_dir: Path) -> None:
    (bin_dir / "torchrun").unlink()
    empty_path = f"{bin_dir}:/usr/bin:/bin"
    proc = _start(_spec("local"), tmp_path, bin_dir, PATH=empty_path)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 127, out
    assert (_run_dir(tmp_path) / "exit_code").read_text().splitlines()[0] == "127"


def test_ssh_gets_the_ssh_settings_and_only_bash_s(tmp_path: Path, bin_dir: Path) -> None:
    data = _spec("ssh")
    data["ssh"].update(
        user="it's me", port=2200, identity_file="~/keys/id", options=["ConnectTimeout=5"]
    )
    proc = _start(data, tmp_path, bin_dir, RUN_S="0.1")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    launches = [c.argv for c in records(tmp_path / "fake", "ssh")]
    assert sorted(argv[-3] for argv in launches) == ["h0", "h1", "h2"]
    home = str(tmp_path)
    for argv in launches:
        assert argv == [
            "-o", "BatchMode=yes", "-o", "ServerAliveInterval=30", "-p", "2200",
            "-i", f"{home}/keys/id", "-l", "it's me", "-o", "ConnectTimeout=5",
            "--", argv[-3], "bash", "-s",
        ]  # fmt: skip


def _real_torchrun_env(tmp_path: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return {"PATH": f"{venv_bin}:{os.environ['PATH']}", "HOME": str(tmp_path)}


@pytest.mark.parametrize("rdzv", ["c10d", "static"])
def test_real_torchrun_runs_the_program_on_this_machine(tmp_path: Path, rdzv: str) -> None:
    """The torchrun flags the template writes are the ones torch's torchrun takes."""
    program = tmp_path / "work" / "show env.py"
    program.parent.mkdir()
    program.write_text(
        "import os\n"
        "keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_PORT', 'JOBKIT_RUN_DIR']\n"
        "print(' '.join(f'{k}={os.environ[k]}' for k in keys), flush=True)\n"
    )
    data = {
        "name": "real",
        "backend": "local",
        "launch": {"nproc_per_node": 2, "rdzv": rdzv},
        "run": {"command": [sys.executable, str(program)]},
    }
    script = tmp_path / "launch.sh"
    script.write_text(render(spec_from(data), interpreter=FROM_PATH))
    env = {**_real_torchrun_env(tmp_path), "JOBKIT_JOB_ID": f"local-1-{os.getpid()}"}
    done = subprocess.run(
        ["bash", str(script)],
        cwd=program.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    run_dir = program.parent / "logs" / f"real-local-1-{os.getpid()}"
    node_out = (run_dir / "node-0.out").read_text()
    assert done.returncode == 0, done.stdout + done.stderr + node_out
    port = 15000 + os.getpid() % 15000
    for rank in (0, 1):
        line = f"RANK={rank} WORLD_SIZE=2 LOCAL_RANK={rank}"
        assert line in node_out
    assert f"JOBKIT_RUN_DIR={run_dir}" in node_out
    if rdzv == "static":
        assert f"MASTER_PORT={port}" in node_out
    assert (run_dir / "exit_code").read_text().splitlines()[0] == "0"
