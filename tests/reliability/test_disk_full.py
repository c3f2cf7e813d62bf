"""Full disks and a deleted run folder, for real (issue 22, item 7).

Small tmpfs file systems (mounted here as root, unmounted in a `finally`) are filled with a
file until no byte is left: once as JOBKIT_HOME, once under a job's run folder, once as the
folder a program writes its checkpoint to. Real local jobs and real jobkit processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.helpers import run_jobkit, write_spec

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounts a tmpfs (needs root)"
)
FINAL_TIMEOUT_S = 60.0


@pytest.fixture
def tmpfs() -> Iterator[Callable[[str], Path]]:
    """tmpfs(size) -> a fresh mounted tmpfs; every one is unmounted at the end."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        point = Path(tempfile.mkdtemp(prefix="jobkit-full-"))
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], check=True
        )
        mounted.append(point)
        return point

    try:
        yield mount
    finally:
        for point in mounted:
            subprocess.run(["umount", "-l", str(point)], check=False)
            shutil.rmtree(point, ignore_errors=True)


def _fill(folder: Path) -> None:
    """Write until the file system has no byte left."""
    with open(folder / "filler", "wb", buffering=0) as handle:
        for chunk in (b"\0" * 65536, b"\0"):
            try:
                while handle.write(chunk):
                    pass
            except OSError:
                pass
    assert os.statvfs(folder).f_bavail == 0


def _jobkit(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_jobkit(*args, cwd=cwd, env={"JOBKIT_HOME": str(home)}, timeout=120)


def _submit(home: Path, cwd: Path, name: str, command: list[str], **spec: Any) -> str:
    write_spec(
        cwd / f"{name}.yaml",
        {"name": name, "backend": "local", "run": {"command": command}, **spec},
    )
    done = _jobkit(home, cwd, "submit", f"{name}.yaml", "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["jobkit_id"])


def _record(home: Path, cwd: Path, jobkit_id: str) -> dict[str, Any]:
    done = _jobkit(home, cwd, "status", jobkit_id, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return data[0] if isinstance(data, list) else data


def _final(home: Path, cwd: Path, jobkit_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + FINAL_TIMEOUT_S
    while True:
        record = _record(home, cwd, jobkit_id)
        if record["state"] not in ("SUBMITTING", "QUEUED", "RUNNING"):
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.3)


def _doctor(home: Path, cwd: Path, jobkit_id: str) -> dict[str, Any]:
    done = _jobkit(home, cwd, "doctor", jobkit_id, "--json")
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    return data[0] if isinstance(data, list) else data


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_full_jobkit_home_still_shows_and_cancels(
    tmpfs: Callable[[str], Path], tmp_path: Path, tally: Any
) -> None:
    """JOBKIT_HOME on a full disk: status, why, doctor, logs and report show what the
    registry last recorded, with one warning line; cancel stops the job and says the record
    was not saved; submit refuses in one line and starts nothing."""
    home = tmpfs("4m") / "home"
    work = tmp_path / "work"
    work.mkdir()
    running = _submit(home, work, "sleeper", ["sleep", "300"])
    ended = _submit(home, work, "quick", ["true"])
    _final(home, work, ended)
    pid = int(_record(home, work, running)["extra"]["pid"])
    try:
        _fill(home.parent)
        warning = f"jobkit: warning: the job registry {home / 'jobkit.db'} cannot be written"
        for args in (
            ("status",),
            ("status", "--all"),
            ("status", running),
            ("why", running),
            ("doctor", running),
            ("logs", ended),
            ("report", ended),
        ):
            done = _jobkit(home, work, *args)
            assert done.returncode == 0, (args, done.stderr)
            warnings = [line for line in done.stderr.splitlines() if line.startswith(warning)]
            assert len(warnings) == 1, (args, done.stderr)
            assert "no space left on its disk" in warnings[0]
            assert "internal error" not in done.stderr
        table = _jobkit(home, work, "status").stdout
        assert running in table and "RUNNING" in table
        refused = _jobkit(home, work, "submit", "quick.yaml")
        assert refused.returncode == 1
        assert refused.stderr.splitlines() == [
            f"jobkit: the job registry {home / 'jobkit.db'} cannot be written: no space left on"
            " its disk (SQLITE_IOERR_SHMSIZE)"
        ]
        cancel = _jobkit(home, work, "cancel", running)
        assert cancel.returncode == 0, cancel.stderr
        assert f"cancelled {running}" in cancel.stdout
        assert cancel.stderr.startswith(warning), cancel.stderr
        deadline = time.monotonic() + 30
        while _alive(pid):
            assert time.monotonic() < deadline, "the launcher still runs after cancel"
            time.sleep(0.2)
    finally:
        if _alive(pid):
            os.killpg(os.getpgid(pid), 9)
    (home.parent / "filler").unlink()
    # Space again: the cancel is recorded from what the launcher left (exit 143: SIGTERM).
    assert _final(home, work, running)["state"] == "CANCELLED"
    tally("disk full: verbs run with a full JOBKIT_HOME", 10)


def test_a_full_run_folder_disk_is_named(
    tmpfs: Callable[[str], Path], tmp_path: Path, jobkit_home: Path
) -> None:
    """logs.dir on a full disk: the launcher cannot write; status says "No space left on
    device" (not "launcher vanished") and doctor's class is disk_full."""
    logs = tmpfs("64k") / "logs"
    logs.mkdir()
    _fill(logs.parent)
    work = tmp_path / "work"
    work.mkdir()
    jobkit_id = _submit(jobkit_home, work, "full", ["sleep", "1"], logs={"dir": str(logs)})
    record = _final(jobkit_home, work, jobkit_id)
    assert record["state"] == "FAILED"
    assert record["reason"].startswith("launcher ended without an exit code: No space left on")
    found = _doctor(jobkit_home, work, jobkit_id)
    assert found["class"] == "disk_full", found
    assert "logs.dir" in found["fix"]


def test_a_checkpoint_written_to_a_full_disk_is_disk_full(
    tmpfs: Callable[[str], Path], tmp_path: Path, jobkit_home: Path
) -> None:
    """torch.save onto a full disk says neither ENOSPC nor "No space left": doctor still
    names the class (torch's own words, `unexpected pos`)."""
    checkpoints = tmpfs("64k")
    _fill(checkpoints)
    work = tmp_path / "work"
    work.mkdir()
    save = f"import torch; torch.save(torch.zeros(100000), {str(checkpoints / 'step-1.pt')!r})"
    jobkit_id = _submit(jobkit_home, work, "ckpt", [sys.executable, "-c", save])
    assert _final(jobkit_home, work, jobkit_id)["state"] == "FAILED"
    found = _doctor(jobkit_home, work, jobkit_id)
    assert found["class"] == "disk_full", found


def test_a_deleted_run_folder_reads_as_gone(tmp_path: Path, jobkit_home: Path) -> None:
    """The run folder removed while the job runs: the launcher cannot leave its exit code;
    status says the folder is gone, doctor's class is run_folder_missing."""
    work = tmp_path / "work"
    work.mkdir()
    jobkit_id = _submit(jobkit_home, work, "gone", ["sleep", "2"])
    run_dir = Path(_record(jobkit_home, work, jobkit_id)["log_paths"]["run_dir"])
    deadline = time.monotonic() + 30
    while not (run_dir / "launcher.pid").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    shutil.rmtree(run_dir)
    record = _final(jobkit_home, work, jobkit_id)
    assert record["state"] == "FAILED"
    assert record["reason"].startswith(f"run folder {run_dir} is gone"), record["reason"]
    found = _doctor(jobkit_home, work, jobkit_id)
    assert found["class"] == "run_folder_missing", found
    assert "logs.dir" in found["fix"]


def test_a_registry_held_open_when_its_disk_fills(
    tmpfs: Callable[[str], Path], tmp_path: Path
) -> None:
    """Another jobkit holds the registry open (its -wal and -shm exist, reads still work)
    when the disk fills: the first write fails (SQLITE_FULL) and status and cancel go on
    from a copy taken through the open connection."""
    from jobkit.registry.store import Store

    home = tmpfs("4m") / "home"
    work = tmp_path / "work"
    work.mkdir()
    running = _submit(home, work, "sleeper", ["sleep", "300"])
    pid = int(_record(home, work, running)["extra"]["pid"])
    holder = Store(home)
    try:
        assert (home / "jobkit.db-shm").exists()
        _fill(home.parent)
        warning = "cannot be written: no space left on its disk (SQLITE_FULL): showing what"
        status = _jobkit(home, work, "status")
        assert status.returncode == 0 and "RUNNING" in status.stdout, status.stderr
        assert warning in status.stderr
        cancel = _jobkit(home, work, "cancel", running)
        assert cancel.returncode == 0 and warning in cancel.stderr, cancel.stderr
        deadline = time.monotonic() + 30
        while _alive(pid):
            assert time.monotonic() < deadline, "the launcher still runs after cancel"
            time.sleep(0.2)
    finally:
        holder.close()
        if _alive(pid):
            os.killpg(os.getpgid(pid), 9)


@pytest.mark.sge
def test_a_full_jobkit_home_still_cancels_a_grid_engine_job(
    tmpfs: Callable[[str], Path], tmp_path: Path, sge_cluster: object
) -> None:
    """Grid Engine's cancel notes `cancelled` in the job's folder before qdel: with that
    folder on a full disk the note is lost, but the qdel still runs (the real Grid Engine)."""
    home = tmpfs("4m") / "home"
    work = tmp_path / "work"
    work.mkdir()
    held = _submit(
        home,
        work,
        "geheld",
        ["sleep", "300"],
        backend="sge",
        scheduler={"extra": ["-h"]},
    )
    number = str(_record(home, work, held)["scheduler_id"])
    try:
        _fill(home.parent)
        cancel = _jobkit(home, work, "cancel", held)
        assert cancel.returncode == 0, cancel.stderr
        assert f"cancelled {held}" in cancel.stdout
        assert "cannot be written" in cancel.stderr
        deadline = time.monotonic() + 30
        while number in subprocess.run(["qstat"], capture_output=True, text=True).stdout.split():
            assert time.monotonic() < deadline, "the Grid Engine job is still queued"
            time.sleep(0.5)
    finally:
        subprocess.run(["qdel", number], capture_output=True, check=False)
