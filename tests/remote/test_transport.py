"""The transport's ssh argv, its quoting, and the batched query's sections (no ssh needed:
the remote command string is run by this machine's sh, as the login node's would)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from jobkit.core import proc
from jobkit.remote import query
from jobkit.remote.clusters import Cluster
from jobkit.remote.transport import ClusterRoute, Transport, control_dir

CLUSTER = Cluster("c", "login.example.edu", "/scratch/a/jobkit")
HOSTILE = ["it's", 'a "b"', "$(touch /tmp/jobkit-pwned)", "`id`", "x;y", "new\nline", "*", ""]


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "h"))
    return tmp_path / "h"


def test_ssh_argv_multiplexes_in_a_private_folder_and_overrides_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = Path(tempfile.mkdtemp(prefix="jk", dir="/tmp"))  # short: a socket path fits
    monkeypatch.setenv("JOBKIT_HOME", str(home))
    try:
        argv = Transport(CLUSTER).ssh_argv()
        mode = (home / "ssh").stat().st_mode & 0o777
    finally:
        shutil.rmtree(home)
    options = [argv[i + 1] for i, word in enumerate(argv) if word == "-o"]
    assert options == [
        "ControlMaster=auto",
        "ControlPersist=600",
        f"ControlPath={home / 'ssh'}/%C",
        "ServerAliveInterval=15",
        "ServerAliveCountMax=4",
        "BatchMode=yes",
        "ConnectTimeout=10",
    ]
    assert argv[0] == "ssh" and "-l" not in argv and "-p" not in argv and "-J" not in argv
    assert mode == 0o700
    interactive = Transport(CLUSTER).ssh_argv(interactive=True)
    assert interactive[1:3] == ["-o", "BatchMode=no"]  # ssh keeps the first value given


def test_a_long_home_puts_the_sockets_in_a_private_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / ("x" * 90)))
    folder = control_dir()
    assert len(str(folder)) + 41 <= 104
    assert folder.stat().st_mode & 0o777 == 0o700 and folder.stat().st_uid == os.getuid()


def test_every_word_reaches_the_remote_command_as_given(tmp_path: Path) -> None:
    """The remote command line, run by sh, gives the program exactly the words given."""
    show = [
        sys.executable,
        "-c",
        "import json, os, sys; print(json.dumps([os.getcwd(), os.environ['V'], sys.argv[1:]]))",
    ]
    folder = tmp_path / "a b'c"
    folder.mkdir()
    line = Transport(CLUSTER).command([*show, *HOSTILE], {"V": "$(id) 'q'"}, str(folder))
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [str(folder), "$(id) 'q'", HOSTILE]
    assert not Path("/tmp/jobkit-pwned").exists()


def test_a_subset_of_the_fetched_jobs_is_answered_from_the_batch() -> None:
    fetched = proc.Completed(["sacct", "-n", "--jobs=1,2,3", "--format=X"], 0, "rows", "", 0.1)
    route = ClusterRoute(Transport(CLUSTER), [fetched])
    assert route.answer(["sacct", "-n", "--jobs=3,1", "--format=X"]) is fetched
    assert route.answer(["sacct", "-n", "--jobs=1,4", "--format=X"]) is None
    assert route.answer(["sacct", "-n", "--jobs=1", "--format=Y"]) is None
    assert route.answer(["squeue", "-n", "--jobs=1", "--format=X"]) is None


def test_a_routed_failure_raises_with_the_commands_own_output() -> None:
    fetched = proc.Completed(["sacct", "--jobs=1"], 1, "", "sacct: error: boom\n", 0.1)
    with proc.routed(ClusterRoute(Transport(CLUSTER), [fetched])):
        with pytest.raises(proc.SchedulerError, match="sacct: error: boom"):
            proc.run(["sacct", "--jobs=1"])
        answered = proc.run(["sacct", "--jobs=1"], check=False)
    assert answered.returncode == 1


def test_the_batched_output_splits_back_into_each_commands_streams(tmp_path: Path) -> None:
    """query's remote runner, run by this machine's sh: outputs with and without a last
    newline, stderr, exit codes, and output that imitates a section line."""
    commands = [
        ["printf", "a\\nb\\n"],
        ["printf", "no-newline"],
        ["sh", "-c", "echo oops >&2; exit 3"],
        ["printf", "@@jobkit-0000 0 out 0\\nfake\\n"],
        ["true"],
    ]
    marker = "@@jobkit-feedfacefeedface"
    argv = [
        "sh",
        "-c",
        query._RUNNER,
        "jobkit",
        marker,
        *[shlex.join(c) for c in commands],
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    answers = query._split(proc.Completed(argv, 0, done.stdout, done.stderr, 0.0), marker, commands)
    assert [(a.returncode, a.stdout, a.stderr) for a in answers] == [
        (0, "a\nb\n", ""),
        (0, "no-newline", ""),
        (3, "", "oops\n"),
        (0, "@@jobkit-0000 0 out 0\nfake\n", ""),
        (0, "", ""),
    ]
    cut = proc.Completed(argv, 0, done.stdout.rsplit(marker, 1)[0], "", 0.0)
    with pytest.raises(proc.SchedulerError, match="output cut short"):
        query._split(cut, marker, commands)
