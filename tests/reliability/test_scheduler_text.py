"""A scheduler may print any bytes: jobkit decodes them with replacement characters, never
fails on them (issue 22 item 5, docs/reliability.md "Scheduler output that is not UTF-8").

The real case: another job of the same user carries a Latin-1 comment (`caf\\xe9`), which
squeue prints as it is, in the very answer jobkit reads to adopt a lost submission. Before,
`jobkit status` ended with exit 70 "internal error: UnicodeDecodeError" while that job
was queued, and no orphaned row was ever settled.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit.core import proc
from jobkit.core.errors import SchedulerError
from jobkit.registry.store import Store
from tests.reliability.helpers import (
    executable,
    path_with,
    real,
    run_jobkit,
    scancel,
    wait_for,
    write_spec,
)

LATIN1 = b"caf\xe9 cr\xe8me"
"""Not UTF-8: \\xe9 followed by a space is an invalid sequence."""


def test_proc_decodes_any_bytes_with_replacement() -> None:
    code = "import sys; sys.stdout.buffer.write(b'caf\\xe9\\n'); sys.stderr.buffer.write(b'\\xff')"
    done = proc.run([sys.executable, "-c", code])
    assert done.stdout == "caf\N{REPLACEMENT CHARACTER}\n"
    assert done.stderr == "\N{REPLACEMENT CHARACTER}"


def test_proc_error_carries_replaced_bytes() -> None:
    code = "import sys; sys.stderr.buffer.write(b'qstat: caf\\xe9'); sys.exit(2)"
    with pytest.raises(SchedulerError) as err:
        proc.run([sys.executable, "-c", code])
    assert err.value.stderr == "qstat: caf\N{REPLACEMENT CHARACTER}"


def test_proc_timeout_with_partial_non_utf8_output() -> None:
    code = (
        "import sys, time; sys.stdout.buffer.write(b'12\\xe9'); sys.stdout.flush(); time.sleep(30)"
    )
    with pytest.raises(proc.SchedulerTimeout) as err:
        proc.run([sys.executable, "-c", code], timeout=1)
    assert "timed out after 1 s" in err.value.show()


@pytest.fixture
def latin1_job() -> Iterator[str]:
    """A held Slurm job of this user (not jobkit's) whose comment is Latin-1; cancelled at
    the end whatever happens (it would trip other tools reading squeue as UTF-8)."""
    done = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--hold",
            b"--comment=" + LATIN1,
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    job = done.stdout.decode().strip()
    try:
        yield job
    finally:
        scancel([job])


@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_status_settles_rows_while_a_latin1_comment_is_queued(
    workdir: Path, tmp_path: Path, slurm_cluster: object, latin1_job: str
) -> None:
    """With the Latin-1 job in squeue: a jobkit job runs to SUCCEEDED and a submission whose
    `jobkit submit` was SIGKILLed after sbatch answered is adopted (the one squeue of the
    user's comments that carries the Latin-1 bytes); `status` always exits 0."""
    comments = subprocess.run(
        ["squeue", "--noheader", "--me", "--format=%i|%k"], capture_output=True, check=True
    ).stdout
    assert f"{latin1_job}|".encode() + LATIN1 in comments  # squeue prints the bytes as they are
    ids = tmp_path / "sbatch-ids"
    crashing = executable(
        tmp_path / "crash" / "sbatch",
        f'#!/bin/bash\nout=$("{real("sbatch")}" "$@") || exit $?\n'
        f'echo "$out" >>"{ids}"\necho "$out"\nkill -9 "$PPID"\n',
    ).parent
    orphan = write_spec(
        workdir / "orphan.yaml",
        {
            "name": "orphan",
            "backend": "slurm",
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"]},
        },
    )
    quick = write_spec(
        workdir / "quick.yaml",
        {"name": "quick", "backend": "slurm", "launch": {"launcher": "srun"},
         "run": {"command": ["true"]}},
    )  # fmt: skip
    created: list[str] = []
    try:
        killed = run_jobkit("submit", str(orphan), cwd=workdir, env={"PATH": path_with(crashing)})
        assert killed.returncode == -signal.SIGKILL, killed
        created += ids.read_text().split()
        submitted = run_jobkit("submit", "--json", str(quick), cwd=workdir)
        assert submitted.returncode == 0, submitted.stderr
        quick_id = json.loads(submitted.stdout)["jobkit_id"]
        created.append(json.loads(submitted.stdout)["scheduler_id"])

        def settled() -> bool:
            shown = run_jobkit("status", "--all", "--json", cwd=workdir)
            assert shown.returncode == 0, shown.stderr  # before: exit 70 UnicodeDecodeError
            assert "internal error" not in shown.stderr
            rows = {r["name"]: r for r in json.loads(shown.stdout)}
            return rows["quick"]["state"] == "SUCCEEDED" and rows["orphan"]["state"] == "HELD"

        wait_for("the quick job to succeed and the orphan to be adopted", settled, 240)
        with Store() as store:
            rows = {r.name: r for r in store.list_jobs(recent_final_s=None)}
        assert rows["orphan"].scheduler_id == created[0] and rows["orphan"].extra["adopted"]
        assert rows["quick"].jobkit_id == quick_id and rows["quick"].exit_code == 0
        table = run_jobkit("status", "--all", cwd=workdir)
        assert table.returncode == 0 and table.stderr == "", table.stderr
    finally:
        scancel(created)
