"""Issue 22 item 4 on the real Slurm: a non-zero sbatch exit is not proof that nothing was
submitted. An sbatch that submits for real and then says "Socket timed out on send/recv
operation" (exit 1) leaves the row SUBMITTING with one line saying the outcome is unknown;
the next `jobkit status` adopts the job under its real id (a sweep: each task under its own),
and `jobkit cancel` stops it. A certain refusal (a bad partition) still ends at once as
FAILED with the scheduler's line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.helpers import (
    assert_one_clean_line,
    executable,
    path_with,
    real,
    run_jobkit,
    scancel,
    slurm,
    write_spec,
)

pytestmark = pytest.mark.slurm
SOCKET = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"


def timing_out_sbatch(folder: Path, log: Path) -> Path:
    """An `sbatch` first on PATH that submits for real, logs the id, then fails as a lost
    reply does."""
    body = f'out=$("{real("sbatch")}" "$@") || exit $?\necho "$out" >>"{log}"\n'
    body += f'echo "{SOCKET}" >&2\nexit 1\n'
    executable(folder / "sbatch", "#!/bin/bash\n" + body)
    return folder


def held(folder: Path, name: str, **more: Any) -> Path:
    return write_spec(
        folder / f"{name}.yaml",
        {
            "name": name,
            "backend": "slurm",
            "resources": {"partition": "debug", "time": "00:02:00"},
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"]},
            **more,
        },
    )


def status(workdir: Path) -> dict[str, dict[str, Any]]:
    done = run_jobkit("status", "--all", "--json", cwd=workdir)
    assert done.returncode in (0, 3), done.stderr
    return {row["jobkit_id"]: row for row in json.loads(done.stdout)}


def slurm_state(job_id: str) -> str:
    done = slurm(["squeue", "-h", "--array", "--states=all", "-j", job_id, "--format=%T"])
    return done.stdout.strip()


@pytest.fixture
def slurm_jobs() -> Iterator[list[str]]:
    ids: list[str] = []
    yield ids
    scancel(ids)


def test_socket_timeout_after_acceptance_is_adopted_and_cancellable(
    workdir: Path, tmp_path: Path, slurm_jobs: list[str], tally: Callable[[str, int], None]
) -> None:
    log = tmp_path / "ids"
    fake = timing_out_sbatch(tmp_path / "bin", log)
    done = run_jobkit(
        "submit", str(held(workdir, "lostreply")), cwd=workdir, env={"PATH": path_with(fake)}
    )
    slurm_jobs.extend(log.read_text().split())
    (real_id,) = log.read_text().split()
    assert_one_clean_line(done.stderr, done.returncode, allowed=(1,))
    assert "whether slurm took the job is unknown" in done.stderr and SOCKET in done.stderr
    assert "it stays SUBMITTING until `jobkit status` settles it" in done.stderr
    assert done.stdout == ""
    (row,) = status(workdir).values()  # the first status adopts it
    assert (row["scheduler_id"], row["state"]) == (real_id, "HELD"), row
    assert row["extra"].get("adopted") is True
    cancelled = run_jobkit("cancel", row["jobkit_id"], cwd=workdir)
    assert cancelled.returncode == 0, cancelled.stderr
    assert slurm_state(real_id) == "CANCELLED"
    assert status(workdir)[row["jobkit_id"]]["state"] == "CANCELLED"
    tally("faults: sbatch 'Socket timed out' after acceptance (adopted)", 1)


def test_socket_timeout_of_a_sweep_adopts_each_task(
    workdir: Path, tmp_path: Path, slurm_jobs: list[str]
) -> None:
    log = tmp_path / "ids"
    fake = timing_out_sbatch(tmp_path / "bin", log)
    spec = held(workdir, "lostsweep", sweep={"grid": {"optim.lr": ["1", "2"]}})
    done = run_jobkit("submit", str(spec), cwd=workdir, env={"PATH": path_with(fake)})
    slurm_jobs.extend(log.read_text().split())
    (array,) = log.read_text().split()
    assert_one_clean_line(done.stderr, done.returncode, allowed=(1,))
    assert "whether slurm took the job is unknown" in done.stderr
    rows = sorted(status(workdir).values(), key=lambda r: r["task"])
    assert [(r["task"], r["scheduler_id"], r["state"]) for r in rows] == [
        ("0", f"{array}_0", "HELD"),
        ("1", f"{array}_1", "HELD"),
    ]


def test_a_bad_partition_is_still_refused_at_once(workdir: Path) -> None:
    spec = held(workdir, "badpart")
    done = run_jobkit(
        "submit",
        str(spec),
        "--no-check",
        "--set",
        "resources.partition=nosuchpartition",
        cwd=workdir,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("jobkit: sbatch --parsable"), done.stderr  # sbatch's own lines
    assert "Batch job submission failed: Invalid partition name specified" in done.stderr
    (row,) = status(workdir).values()
    assert (row["state"], row["scheduler_id"]) == ("FAILED", None)
    assert row["reason"].startswith("submission refused: sbatch")
