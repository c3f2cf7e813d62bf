"""A damaged registry file (issue 22, item 8): one line naming the file and what to do, a
non-zero exit, never a traceback, an internal error, or anything the file holds (a job's
script and spec hold its env.vars, which may be secrets)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from jobkit.backends.base import Observation
from jobkit.core.states import State
from jobkit.registry.store import Store
from tests.plugins.invoke import CliResult, Invoke

SECRET = "wandb-sekret-6c1f0e"
FLIP_TRIALS = 60


def _fill(home: Path) -> list[str]:
    """A registry of 6 jobs whose scripts and specs hold SECRET; their ids."""
    ids = []
    with Store(home) as store:
        for number in range(6):
            record = store.create_intent(
                backend="local",
                name=f"job{number}",
                spec={"name": f"job{number}", "env": {"vars": {"WANDB_API_KEY": SECRET}}},
                script=f"#!/bin/bash\nexport WANDB_API_KEY={SECRET}\n" + "# pad\n" * 200,
                workdir=Path("/tmp/work"),
            )
            store.mark_submitted(
                record.jobkit_id, scheduler_id=record.jobkit_id, argv=["bash"], log_paths={}
            )
            store.record_observations(
                {record.jobkit_id: Observation(State.SUCCEEDED, "exit 0", "exit-file")}
            )
            ids.append(record.jobkit_id)
    return ids


def _assert_refused(result: CliResult, path: Path) -> None:
    """Exit 1 and one `jobkit:` line naming the file, without the secret."""
    assert result.code == 1, result
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("jobkit: "), result.err
    assert str(path) in lines[0]
    assert SECRET not in result.out + result.err
    assert "internal error" not in result.err


@pytest.fixture
def filled(jobkit_home: Path) -> tuple[Path, bytes, list[str]]:
    ids = _fill(jobkit_home)
    # One file, no -wal: each test damages the registry as it is on disk.
    db = jobkit_home / "jobkit.db"
    assert not (jobkit_home / "jobkit.db-wal").exists()
    return db, db.read_bytes(), ids


@pytest.mark.parametrize("keep", [100, 1000, 4096, 1 / 3, 1 / 2, 0.9])
def test_a_truncated_registry_is_refused_in_one_line(
    filled: tuple[Path, bytes, list[str]], jobkit: Invoke, keep: float
) -> None:
    db, good, ids = filled
    size = int(len(good) * keep) if keep < 1 else int(keep)
    db.write_bytes(good[:size])
    for args in (("status", "--all"), ("status", ids[-1]), ("logs", ids[0])):
        result = jobkit(*args)
        _assert_refused(result, db)
        assert "is corrupt" in result.err and "move it aside" in result.err


def test_a_bad_header_is_refused_in_one_line(
    filled: tuple[Path, bytes, list[str]], jobkit: Invoke
) -> None:
    db, good, _ = filled
    db.write_bytes(b"not a registry!\0" + good[16:])
    result = jobkit("status", "--all")
    _assert_refused(result, db)
    assert "is corrupt (file is not a database): move it aside" in result.err


def test_byte_flips_never_show_what_the_registry_holds(
    filled: tuple[Path, bytes, list[str]], jobkit: Invoke, jobkit_home: Path
) -> None:
    """Random bytes flipped anywhere past the header (seeded): each command either works or
    says the registry is damaged in one line; the secret in scripts and specs never shows."""
    db, good, ids = filled
    rng = random.Random(22)
    outcomes = {"worked": 0, "refused": 0}
    for _ in range(FLIP_TRIALS):
        damaged = bytearray(good)
        for _ in range(rng.randint(1, 16)):
            damaged[rng.randrange(100, len(damaged))] ^= rng.randrange(1, 256)
        db.write_bytes(bytes(damaged))
        for suffix in ("-wal", "-shm"):
            (jobkit_home / f"jobkit.db{suffix}").unlink(missing_ok=True)
        for args in (("status", "--all"), ("status", ids[0]), ("why", ids[1])):
            result = jobkit(*args)
            assert SECRET not in result.out + result.err
            if result.code == 0:
                outcomes["worked"] += 1
            else:
                _assert_refused(result, db)
                outcomes["refused"] += 1
    assert outcomes["refused"] > 0, outcomes  # the flips did damage the file


def test_an_empty_registry_beside_job_folders_is_refused(
    filled: tuple[Path, bytes, list[str]], jobkit: Invoke
) -> None:
    """0 bytes (a crash on a full disk, a truncation) while jobs/ holds job folders: the
    records are lost, and jobkit says so instead of reading an empty registry."""
    db, _, _ = filled
    db.write_bytes(b"")
    result = jobkit("status", "--all")
    _assert_refused(result, db)
    assert "is empty (0 bytes) but" in result.err and "records are lost" in result.err
    assert db.read_bytes() == b""  # left as it was
    db.unlink()
    result = jobkit("status", "--all")
    _assert_refused(result, db)
    assert "is missing but" in result.err


def test_a_fresh_registry_may_be_empty(jobkit_home: Path, jobkit: Invoke) -> None:
    """An empty file with no job folders (a first run stopped before it wrote anything) is
    a new registry: it works."""
    jobkit_home.mkdir(parents=True, exist_ok=True)
    (jobkit_home / "jobkit.db").write_bytes(b"")
    result = jobkit("status", "--all")
    assert result.code == 0 and "no tracked jobs" in result.err
    shutil.rmtree(jobkit_home)
    assert jobkit("status", "--all").code == 0
