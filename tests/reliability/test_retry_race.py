"""Issue 22 item 2: four `jobkit retry ID` processes at once start exactly one next attempt
(local and the real Slurm). The others exit 1 with one line naming the attempt the winner
started; the run has two attempts, not five, and one job ran for attempt 2."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store
from tests.reliability.helpers import JOBKIT, run_jobkit, scancel, write_spec

RETRIES = 4


def cancelled_job(spec: Path) -> JobRecord:
    """Submit the spec and cancel it at once (an ended job, cheaply); its row."""
    done = run_jobkit("submit", str(spec), "--json", cwd=spec.parent)
    assert done.returncode == 0, done.stderr
    with Store() as store:
        (record,) = store.list_jobs(recent_final_s=None)
    done = run_jobkit("cancel", record.jobkit_id, cwd=spec.parent)
    assert done.returncode == 0, done.stderr
    with Store() as store:
        record = store.get(record.jobkit_id)
    assert record.state == "CANCELLED", record
    return record


def retry_at_once(record: JobRecord, cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    """RETRIES real `jobkit retry ID` processes started together."""
    procs = [
        subprocess.Popen(
            [*JOBKIT, "retry", record.jobkit_id],
            cwd=cwd,
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(RETRIES)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def check_one_winner(
    record: JobRecord, results: list[subprocess.CompletedProcess[str]]
) -> JobRecord:
    """Exactly one exit 0; the others exit 1 naming its attempt; two attempts in the run."""
    winners = [r for r in results if r.returncode == 0]
    losers = [r for r in results if r.returncode != 0]
    assert len(winners) == 1, [(r.returncode, r.stdout, r.stderr) for r in results]
    with Store() as store:
        attempts = store.attempts(record.run_key)
    assert [a.attempt for a in attempts] == [1, 2], attempts
    new = attempts[1]
    assert f"resubmitted as attempt 2: {new.jobkit_id}" in winners[0].stdout, winners[0].stdout
    label = re.escape(f"jobkit: {record.jobkit_id} ({record.scheduler_id or '-'})")
    for loser in losers:
        assert loser.returncode == 1 and loser.stdout == "", loser
        assert re.fullmatch(
            rf"{label} was already retried: attempt 2 is {new.jobkit_id} \(\S+\), [A-Z_]+\n",
            loser.stderr,
        ), loser.stderr
    return new


def test_four_concurrent_local_retries_start_one_attempt(
    tmp_path: Path, tally: Callable[[str, int], None]
) -> None:
    spec = write_spec(
        tmp_path / "sleeps.yaml",
        {"name": "sleeps", "backend": "local", "run": {"command": ["sleep", "300"]}},
    )
    record = cancelled_job(spec)
    new = check_one_winner(record, retry_at_once(record, tmp_path))
    assert new.run_dir == record.run_dir
    done = run_jobkit("cancel", new.jobkit_id, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tally("concurrency: jobkit retry x4 at once (local)", RETRIES)


@pytest.mark.slurm
def test_four_concurrent_slurm_retries_start_one_attempt(
    tmp_path: Path, tally: Callable[[str, int], None], slurm_cluster: object
) -> None:
    spec = write_spec(
        tmp_path / "held.yaml",
        {
            "name": "held",
            "backend": "slurm",
            "resources": {"partition": "debug", "time": "00:02:00"},
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"]},
        },
    )
    record = cancelled_job(spec)
    try:
        new = check_one_winner(record, retry_at_once(record, tmp_path))
        assert new.scheduler_id and new.scheduler_id != record.scheduler_id
    finally:  # every attempt's job, however many a failure left
        with Store() as store:
            scancel([a.scheduler_id or "" for a in store.attempts(record.run_key)])
    tally("concurrency: jobkit retry x4 at once (Slurm)", RETRIES)
