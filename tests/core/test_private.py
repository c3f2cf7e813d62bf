"""Private files and folders whatever the umask (jobkit/core/private.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit.core import private
from jobkit.registry.store import Store


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_make_dir_creates_every_missing_folder_0700_and_leaves_existing_ones(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "project"
    shared.mkdir(mode=0o755)
    private.make_dir(shared / "a" / "b" / "logs")
    assert [_mode(shared / p) for p in ("a", "a/b", "a/b/logs")] == [0o700] * 3
    assert _mode(shared) == 0o755  # the user's own folder keeps its mode


def test_write_file_is_private_from_the_start_and_tightens_an_old_file(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("old")
    script.chmod(0o755)
    private.write_file(script, "export KEY=v\n", private.SCRIPT_MODE)
    assert (_mode(script), script.read_text()) == (0o700, "export KEY=v\n")
    note = tmp_path / "cancelled"
    private.write_file(note, "x")
    assert _mode(note) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_tighten_leaves_another_users_file_alone(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.write_text("x")
    theirs.chmod(0o644)
    os.chown(theirs, 65534, 65534)
    private.tighten(theirs, private.FILE_MODE)
    assert _mode(theirs) == 0o644


def test_a_registry_an_older_jobkit_left_readable_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Store(home):
        pass
    for path, mode in ((home / "jobkit.db", 0o644), (home / "jobs", 0o755)):
        path.chmod(mode)
    (home / "jobkit.db-wal").write_bytes(b"")
    (home / "jobkit.db-wal").chmod(0o644)
    with Store(home):
        assert _mode(home / "jobkit.db") == 0o600
        assert _mode(home / "jobs") == 0o700
        assert _mode(home / "jobkit.db-wal") == 0o600


def test_a_new_registry_is_private_under_umask_022(tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    with Store(home) as store:
        record = store.create_intent(
            backend="local", name="n", spec={}, script="", workdir=tmp_path
        )
        assert _mode(home) == 0o700 and _mode(home / "jobs") == 0o700
        assert _mode(record.job_dir) == 0o700
        for name in ("jobkit.db", "jobkit.db-wal", "jobkit.db-shm"):
            assert _mode(home / name) == 0o600, name
