"""Crashes: SIGKILL of `jobkit submit` around the registry commit, and of a process writing
checkpoints at 50 random moments. Nothing may be lost, resubmitted or half-written.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobkit.manager.reconcile import LOST_AFTER_S, reconcile_submissions
from jobkit.registry.store import Store
from tests.plugins.invoke import CliResult
from tests.reliability.helpers import (
    executable,
    jobs_with_comment,
    path_with,
    real,
    run_jobkit,
    scancel,
    write_spec,
)

Invoke = Callable[..., CliResult]
WRITER = Path(__file__).with_name("ckpt_writer.py")
KILLS = 50
KEEP = 2


# ---- kill -9 of jobkit submit -------------------------------------------------------------


def crashing_sbatch(folder: Path, log: Path, *, after: bool) -> Path:
    """A `sbatch` on PATH that SIGKILLs its caller (jobkit submit): after the real sbatch
    printed the job id (`after`), or before anything was submitted."""
    real_sbatch = real("sbatch")
    if after:
        body = (
            f'out=$("{real_sbatch}" "$@") || exit $?\n'
            f'echo "$out" >>"{log}"\necho "$out"\nkill -9 "$PPID"\n'
        )
    else:
        body = 'kill -9 "$PPID"\nsleep 5\n'
    executable(folder / "sbatch", "#!/bin/bash\n" + body)
    return folder


def held_spec(folder: Path, name: str) -> Path:
    return write_spec(
        folder / f"{name}.yaml",
        {
            "name": name,
            "backend": "slurm",
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"]},
        },
    )


@pytest.fixture
def slurm_jobs() -> Iterator[list[str]]:
    """Slurm job ids cancelled when the test ends."""
    ids: list[str] = []
    yield ids
    scancel(ids)


def submitting_rows() -> list[Any]:
    with Store() as store:
        return store.submitting()


@pytest.mark.slurm
def test_submit_killed_after_sbatch_is_adopted_by_the_next_command(
    workdir: Path,
    tmp_path: Path,
    jobkit: Invoke,
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
    slurm_cluster: object,
) -> None:
    """SIGKILL between sbatch's reply and the registry commit, three times; then one more
    kill before sbatch ran. Each next `jobkit submit` adopts the ones before it (one Slurm
    job each, none resubmitted) and submits its own; the fourth is never adopted and becomes FAILED
    "submission lost" once LOST_AFTER_S has passed."""
    log = tmp_path / "sbatch-ids"
    after = crashing_sbatch(tmp_path / "after", log, after=True)
    before = crashing_sbatch(tmp_path / "before", log, after=False)
    for i in range(3):
        done = run_jobkit(
            "submit",
            str(held_spec(workdir, f"crash{i}")),
            cwd=workdir,
            env={"PATH": path_with(after)},
        )
        assert done.returncode == -signal.SIGKILL, done
    created = log.read_text().split()
    slurm_jobs.extend(created)
    assert len(created) == 3
    done = run_jobkit(
        "submit", str(held_spec(workdir, "never")), cwd=workdir, env={"PATH": path_with(before)}
    )
    assert done.returncode == -signal.SIGKILL
    # each submit reconciles first: every crashed one was adopted by the next submit
    assert [r.name for r in submitting_rows()] == ["never"]
    with Store() as store:
        orphans = {r.name: r for r in store.list_jobs(recent_final_s=None)}

    result = jobkit("submit", str(held_spec(workdir, "next")), "--json")
    assert result.code == 0, result.err
    slurm_jobs.append(json.loads(result.out)["scheduler_id"])
    with Store() as store:
        for i in range(3):
            row = store.get(orphans[f"crash{i}"].jobkit_id)
            assert row.state == "HELD" or row.state == "QUEUED", row
            assert row.scheduler_id == created[i] and row.extra.get("adopted") is True
            assert jobs_with_comment(f"jobkit:{row.token}") == [created[i]]
        never = store.get(orphans["never"].jobkit_id)
        assert never.state == "SUBMITTING"  # too young to call lost
        assert jobs_with_comment(f"jobkit:{never.token}") == []
        later = reconcile_submissions(store, now=never.created_at + LOST_AFTER_S + 1)
        assert [r.jobkit_id for r in later.lost] == [never.jobkit_id]
        assert store.get(never.jobkit_id).reason.startswith("submission lost:")
        assert store.count() == 5
    tally("crashes: jobkit submit SIGKILLed after sbatch (adopted)", 3)
    tally("crashes: jobkit submit SIGKILLed before sbatch (lost after 300 s)", 1)


def test_submit_killed_after_the_local_launcher_started_is_adopted(
    workdir: Path, tmp_path: Path, tally: Callable[[str, int], None]
) -> None:
    """`jobkit submit` killed once the local launcher runs, before the registry knows it: the
    state that crash leaves (an intent whose submitter is gone, a running launcher) is made
    with jobkit's own submit steps, stopping where the kill would. The next command finds the
    launcher through its run folder (launcher.pid) and adopts it; the job is followed to
    its end like any other and never started twice."""
    from jobkit.backends.local import LocalBackend
    from jobkit.manager.submit import _prepare, plan_submission
    from jobkit.spec.load import load_spec

    venv = {"venv": sys.prefix} if sys.prefix != sys.base_prefix else {}
    spec_file = write_spec(
        workdir / "orphan.yaml",
        {
            "name": "orphan",
            "env": venv,
            "run": {"command": ["python3", "-c", "import time; time.sleep(3); print('trained')"]},
        },
    )
    plan = plan_submission(load_spec(spec_file).spec, workdir=workdir)
    with Store() as store:
        row = store.create_intent(
            backend="local",
            name="orphan",
            spec=plan.spec.model_dump(mode="json"),
            script=plan.script,
            workdir=plan.workdir,
            token="crashtoken",
            # The submitter: a pid above Linux's largest (2**22), so certainly gone.
            extra={"submitter": {"host": socket.gethostname(), "pid": 2**22 + 1, "start": "1"}},
        )
        LocalBackend().submit(_prepare(row, plan))  # the launcher runs; the kill comes here

    shown = run_jobkit("status", "--json", row.jobkit_id, cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    (record,) = json.loads(shown.stdout)
    assert record["extra"]["adopted"] is True and record["state"] == "RUNNING", record
    assert record["scheduler_id"] == row.jobkit_id and record["extra"]["pid"].isdigit()
    followed = run_jobkit("logs", row.jobkit_id, "--rank", "0", "-f", cwd=workdir)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.endswith("\ntrained\n"), followed.stdout  # after torchrun's lines
    (final,) = json.loads(run_jobkit("status", "--json", row.jobkit_id, cwd=workdir).stdout)
    assert (final["state"], final["exit_code"]) == ("SUCCEEDED", 0), final
    starts = Path(final["log_paths"]["out"]).read_text().count("jobkit: job ")
    assert starts == 1, "the job was started more than once"
    tally("crashes: jobkit submit killed after the local launcher started (adopted)", 1)


@pytest.mark.pbs
def test_pbs_submit_killed_after_qsub_is_never_called_failed(
    workdir: Path, tmp_path: Path, jobkit: Invoke, tally: Callable[[str, int], None]
) -> None:
    """qsub accepted the job, then `jobkit submit` was SIGKILLed before recording its id.
    Slurm's Torque wrappers show no submit arguments in `qstat -f`, so jobkit cannot find the
    job: after LOST_AFTER_S the row says its fate is unknown (UNKNOWN, with the reason), never
    FAILED. (Where qstat shows them, PBS Pro and Torque, it is adopted: tests/manager/
    test_pbs.py, from recorded PBS Pro output.)"""
    log = tmp_path / "qsub-ids"
    folder = tmp_path / "crashing-qsub"
    executable(
        folder / "qsub",
        f'#!/bin/bash\nout=$("{real("qsub")}" -h "$@") || exit $?\n'
        f'echo "$out" >>"{log}"\necho "$out"\nkill -9 "$PPID"\n',
    )
    spec = write_spec(
        workdir / "pbslost.yaml",
        {
            "name": "pbslost",
            "backend": "pbs",
            "scheduler": {"pbs_flavor": "torque"},
            "run": {"command": ["true"]},
        },
    )
    done = run_jobkit("submit", str(spec), cwd=workdir, env={"PATH": path_with(folder)})
    created = log.read_text().split()
    try:
        assert done.returncode == -signal.SIGKILL, done
        assert len(created) == 1  # qsub took it (held: -h), jobkit never heard
        (row,) = submitting_rows()
        with Store() as store:
            early = reconcile_submissions(store, now=row.created_at + 1)
            assert early.lost == [] and store.get(row.jobkit_id).state == "SUBMITTING"
            later = reconcile_submissions(store, now=row.created_at + LOST_AFTER_S + 1)
            (gave_up,) = later.lost
            assert gave_up.state == "UNKNOWN" and gave_up.scheduler_id is None, gave_up
            assert gave_up.reason is not None and gave_up.reason.startswith(
                "submission reply lost: the scheduler may have accepted it"
            )
            assert store.get(row.jobkit_id).state == "UNKNOWN"
            # Still looked for: the next reconcile asks qstat again, and keeps it UNKNOWN.
            again = reconcile_submissions(store, now=row.created_at + LOST_AFTER_S + 2)
            assert again.lost == [] and store.get(row.jobkit_id).state == "UNKNOWN"
    finally:
        scancel(created)
    shown = jobkit("status", "--json", row.jobkit_id)
    assert json.loads(shown.out)[0]["state"] == "UNKNOWN"
    tally("crashes: jobkit submit SIGKILLed after qsub (fate unknown, not FAILED)", 1)


# ---- SIGKILL while writing checkpoints -----------------------------------------------------


class Writer:
    """The ckpt_writer.py process, driven line by line."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the writer process died answering {line!r}"
        return answer.strip()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def last_reported(folder: Path) -> int | None:
    """The last step the writer finished saving (written after save_atomic returned)."""
    path = folder / "progress"
    if not path.exists():
        return None
    steps = path.read_text().split()
    return int(steps[-1]) if steps else None


@pytest.mark.timeout(900)
def test_sigkill_while_writing_checkpoints(
    tmp_path: Path, tally: Callable[[str, int], None]
) -> None:
    """50 SIGKILLs at random moments of a save/prune loop (train/resume/checkpoint.py). After each:
    every checkpoint file loads with the right content, the newest valid one is at least
    the last step reported saved, temp files are never taken for checkpoints, keep-last-N
    left the newest one; the next writer resumes from it."""
    folder = tmp_path / "checkpoints"
    rng = random.Random(20240508)
    writer = Writer()
    mid_write = 0
    steps_written = 0
    try:
        for kill in range(KILLS):
            pid = int(writer.ask(f"start {folder} {KEEP}"))
            time.sleep(rng.uniform(0.02, 0.5))
            os.kill(pid, signal.SIGKILL)  # the writer never ends by itself
            status = int(writer.ask(f"reap {pid}"))
            assert status & 0x7F == signal.SIGKILL, f"kill {kill}: the writer ended by itself"
            seen = json.loads(writer.ask(f"check {folder}"))
            reported = last_reported(folder)
            if seen["temps"]:
                mid_write += 1
            for entry in seen["files"]:
                assert entry["ok"], f"kill {kill}: {entry['name']} is not a whole checkpoint"
            assert seen["skipped"] == [], f"kill {kill}: skipped {seen['skipped']}"
            assert all(".tmp-" not in f["name"] for f in seen["files"])
            if reported is not None:
                assert seen["latest"] is not None and seen["latest_ok"], f"kill {kill}: {seen}"
                assert reported <= seen["latest"] <= reported + 1, (kill, reported, seen)
                assert len(seen["files"]) <= KEEP + 1, seen
                steps_written = max(steps_written, seen["latest"] + 1)
        # A torn file under a final name (not jobkit's doing: e.g. a copy cut short) is
        # skipped and the checkpoint before it used.
        newest = json.loads(writer.ask(f"check {folder}"))["latest"]
        torn = folder / f"step-{newest + 1:08d}.pt"
        torn.write_bytes(b"PK\x03\x04 cut short")
        seen = json.loads(writer.ask(f"check {folder}"))
        assert seen["skipped"] == [torn.name] and seen["latest"] == newest
    finally:
        writer.close()
    assert steps_written > KILLS / 2, "too few checkpoints were written to mean anything"
    assert mid_write > 0, "no kill landed while a checkpoint was being written"
    tally("crashes: SIGKILL during checkpoint writing", KILLS)
    tally("crashes: ... of them while a temp file was being written", mid_write)
    tally("crashes: checkpoints written in all (steps)", steps_written)
