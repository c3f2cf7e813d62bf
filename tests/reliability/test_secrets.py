"""Another user of the machine reads no secret of a job (issue 22, item 3).

A real job with an API key in `env.vars` is submitted under umask 022 (the usual default)
on the local, ssh and Slurm backends. While it runs, user `nobody` (through `runuser`)
lists every process's command line and environment, and tries to read the registry, the
job's script, its logs and its run folder: the key must appear nowhere. The job itself
writes the key into its run folder, so the test also proves the key did reach the program
(and that what the program writes is private too). The folders live in a world-readable
place (not pytest's 0700 tmp_path, which would hide everything anyway).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.helpers import JOBKIT, write_spec

SECRET = "wandb-sekret-" + os.urandom(6).hex()
RUNNING_TIMEOUT_S = 120.0

pytestmark = pytest.mark.skipif(
    shutil.which("runuser") is None or os.geteuid() != 0,
    reason="needs root and runuser (user nobody reads as another user)",
)


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A 0755 folder under /tmp: what `nobody` cannot read there is kept from it by jobkit."""
    folder = Path(tempfile.mkdtemp(prefix="jobkit-secrets-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _jobkit(*args: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """`python -m jobkit ARGS` under umask 022, with the registry in `folder`/home."""
    env = {**os.environ, "JOBKIT_HOME": str(folder / "home")}
    return subprocess.run(
        [*JOBKIT, *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        preexec_fn=lambda: os.umask(0o022),  # no threads in this process
    )


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "nobody", "--", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _status(jobkit_id: str, folder: Path) -> dict[str, Any]:
    done = _jobkit("status", jobkit_id, "--json", folder=folder)
    assert done.returncode in (0, 3), done.stderr
    data = json.loads(done.stdout)
    return data[0] if isinstance(data, list) else data


def _wait_until_seen(jobkit_id: str, folder: Path) -> dict[str, Any]:
    """Poll until the program has written the key it received into its run folder."""
    deadline = time.monotonic() + RUNNING_TIMEOUT_S
    while True:
        record = _status(jobkit_id, folder)
        run_dir = Path(record["log_paths"]["run_dir"])
        seen = run_dir / "seen"
        if seen.is_file() and SECRET in seen.read_text():
            return record
        assert record["state"] in ("SUBMITTING", "QUEUED", "RUNNING"), record
        assert time.monotonic() < deadline, f"the job never ran: {record}"
        time.sleep(0.5)


def _submit(folder: Path, backend: str) -> str:
    spec: dict[str, Any] = {
        "name": f"secret-{backend}",
        "backend": backend,
        "env": {"vars": {"WANDB_API_KEY": SECRET}},
        "run": {
            "command": [
                "bash",
                "-c",
                'printenv WANDB_API_KEY >"$JOBKIT_RUN_DIR/seen"; sleep 120',
            ]
        },
    }
    if backend == "ssh":
        spec["ssh"] = {"hosts": ["n1"]}
    if backend == "slurm":
        spec["resources"] = {"partition": "debug", "time": "00:05:00"}
    # The spec file is the user's own to keep private (docs/reliability.md, "Threat model").
    write_spec(folder / "job.yaml", spec).chmod(0o600)
    done = _jobkit("submit", "job.yaml", "--json", folder=folder)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["jobkit_id"])


def _check_nobody_reads_nothing(folder: Path, record: dict[str, Any]) -> list[str]:
    """What `nobody` tried; asserts that none of it showed the key."""
    home = folder / "home"
    script = Path(record["job_dir"]) / "job.sh"
    run_dir = Path(record["log_paths"]["run_dir"])
    # The key is really there for its owner: the checks below are not vacuous.
    assert SECRET in script.read_text()
    assert SECRET.encode() in (home / "jobkit.db").read_bytes() + _wal(home)
    tried = []
    processes = _as_nobody("ps", "-ww", "-eo", "args")  # -ww: never cut
    assert processes.returncode == 0 and "jobkit" in processes.stdout
    assert SECRET not in processes.stdout, "a command line shows the key"
    tried.append("ps -eo args")
    environ = _as_nobody("sh", "-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null")
    assert SECRET not in environ.stdout
    tried.append("/proc/*/environ, /proc/*/cmdline")
    grep = _as_nobody("grep", "-r", "-a", "-l", SECRET, str(folder))
    assert grep.stdout == "", f"nobody reads the key in {grep.stdout}"
    tried.append(f"grep -r {folder}")
    targets = [home / "jobkit.db", script, run_dir / "seen", *_files(run_dir)]
    targets += [Path(p) for k, p in record["log_paths"].items() if k in ("out", "err")]
    for target in targets:
        read = _as_nobody("cat", str(target))
        assert read.returncode != 0 and SECRET not in read.stdout, target
        tried.append(f"cat {target}")
    return tried


def _wal(home: Path) -> bytes:
    wal = home / "jobkit.db-wal"
    return wal.read_bytes() if wal.exists() else b""


def _files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def _check_modes(folder: Path, record: dict[str, Any]) -> None:
    """0700 folders, 0600 files (0700 for the script), although the umask was 022."""
    home = folder / "home"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "jobs").stat().st_mode) == 0o700
    for name in ("jobkit.db", "jobkit.db-wal", "jobkit.db-shm"):
        if (home / name).exists():
            assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((Path(record["job_dir"]) / "job.sh").stat().st_mode) == 0o700
    run_dir = Path(record["log_paths"]["run_dir"])
    for path in [run_dir, *run_dir.rglob("*"), run_dir.parent]:
        if path.is_symlink():
            continue
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def _cancel(jobkit_id: str, folder: Path) -> None:
    done = _jobkit("cancel", jobkit_id, folder=folder)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "backend",
    [
        "local",
        pytest.param("ssh", marks=pytest.mark.ssh),
        pytest.param("slurm", marks=pytest.mark.slurm),
    ],
)
def test_another_user_reads_no_secret_of_a_job(
    backend: str, open_folder: Path, request: pytest.FixtureRequest, tally: Any
) -> None:
    if backend == "ssh":
        request.getfixturevalue("ssh_hosts")
    if backend == "slurm":
        request.getfixturevalue("slurm_cluster")
    jobkit_id = _submit(open_folder, backend)
    try:
        record = _wait_until_seen(jobkit_id, open_folder)
        tried = _check_nobody_reads_nothing(open_folder, record)
        _check_modes(open_folder, record)
    finally:
        _cancel(jobkit_id, open_folder)
    tally(f"secrets: reads tried as nobody on a running {backend} job", len(tried))
