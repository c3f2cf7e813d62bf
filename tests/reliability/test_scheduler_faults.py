"""Scheduler faults on the real cluster: slurmctld or slurmdbd stopped, accounting switched
off, jobs purged from squeue. What jobkit records must stay true: nothing is called
submitted that was not, no state is guessed, everything recovers once Slurm is back.

Every outage goes through tests/cluster/ctl.sh (conftest `outage`), which starts the daemon
again and waits until it answers, whatever the test did.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from jobkit.registry.store import Store
from tests.plugins.cluster import SlurmCluster
from tests.plugins.invoke import CliResult
from tests.reliability.helpers import (
    assert_one_clean_line,
    executable,
    jobs_with_comment,
    path_with,
    real,
    run_jobkit,
    scancel,
    slurm,
    squeue_knows,
    wait_for,
    write_spec,
)

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

Invoke = Callable[..., CliResult]
FINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def slurm_spec(folder: Path, name: str, command: str, *, hold: bool = False) -> Path:
    """A tiny Slurm job: launcher srun (no torch), `bash -c COMMAND`."""
    spec: dict[str, Any] = {
        "name": name,
        "backend": "slurm",
        "launch": {"launcher": "srun"},
        "run": {"command": ["bash", "-c", command]},
    }
    if hold:
        spec["scheduler"] = {"extra": ["--hold"]}
    return write_spec(folder / f"{name}.yaml", spec)


def rows(home: Path) -> dict[str, tuple[Any, ...]]:
    """Every job row and its history length, read straight from the registry file."""
    with sqlite3.connect(home / "jobkit.db") as conn:
        jobs = conn.execute(
            "SELECT jobkit_id, state, raw_state, state_source, observed_at, exit_code,"
            " scheduler_id FROM jobs"
        ).fetchall()
        history = dict(
            conn.execute("SELECT jobkit_id, COUNT(*) FROM state_history GROUP BY jobkit_id")
        )
    return {row[0]: (*row[1:], history.get(row[0], 0)) for row in jobs}


def status_json(jobkit: Invoke, *ids: str) -> dict[str, dict[str, Any]]:
    """`jobkit status [IDS] --json` (exit 0 required), by jobkit id."""
    result = jobkit("status", *ids, "--json") if ids else jobkit("status", "--all", "--json")
    assert result.code == 0, result.err
    return {r["jobkit_id"]: r for r in json.loads(result.out)}


def submit(jobkit: Invoke, spec: Path) -> dict[str, Any]:
    """`jobkit submit SPEC --json` (exit 0 required)."""
    result = jobkit("submit", str(spec), "--json")
    assert result.code == 0, result.err
    record: dict[str, Any] = json.loads(result.out)
    return record


@pytest.fixture
def slurm_jobs() -> Iterator[list[str]]:
    """Slurm job ids cancelled when the test ends."""
    ids: list[str] = []
    yield ids
    scancel(ids)


def token_of(jobkit_id: str) -> str:
    with Store() as store:
        return store.get(jobkit_id).token


@pytest.mark.cluster_alone  # stops a daemon (tests/plugins/groups.py)
def test_submit_while_slurmctld_is_down(
    workdir: Path,
    jobkit_home: Path,
    jobkit: Invoke,
    outage: Callable[[str], Any],
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
    figure: Callable[[str, float], None],
) -> None:
    """sbatch cannot reach slurmctld: one clear line, exit 1, nothing recorded as submitted,
    no job appears once Slurm is back; the next submit works."""
    spec = slurm_spec(workdir, "ctld-down", "true", hold=True)
    with outage("slurmctld"):
        started = time.monotonic()
        done = run_jobkit("submit", str(spec), cwd=workdir)
        seconds = time.monotonic() - started
    assert_one_clean_line(done.stderr, done.returncode, allowed=(1,))
    assert "sbatch" in done.stderr and "Unable to contact slurm controller" in done.stderr
    assert done.stdout == ""
    (row,) = rows(jobkit_home).values()
    state, _raw, _source, _observed, _code, scheduler_id, _history = row
    assert state == "FAILED" and scheduler_id is None, row
    (jobkit_id,) = rows(jobkit_home)
    with Store() as store:
        assert store.get(jobkit_id).reason.startswith("submission refused: sbatch ")
    token = token_of(jobkit_id)
    # Slurm is back: it never got the job, and status changes nothing.
    assert jobs_with_comment(f"jobkit:{token}") == []
    assert status_json(jobkit)[jobkit_id]["state"] == "FAILED"
    again = submit(jobkit, spec)
    slurm_jobs.append(again["scheduler_id"])
    assert again["state"] == "QUEUED"
    assert jobs_with_comment(f"jobkit:{token_of(again['jobkit_id'])}") == [again["scheduler_id"]]
    tally("faults: slurmctld stopped during submit", 1)
    figure("faults: seconds until sbatch gave up without slurmctld", seconds)


@pytest.mark.cluster_alone  # stops a daemon (tests/plugins/groups.py)
def test_status_while_slurmctld_is_down(
    workdir: Path,
    jobkit_home: Path,
    jobkit: Invoke,
    outage: Callable[[str], Any],
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
) -> None:
    """squeue fails: a warning naming the failure and the age of what is shown, exit 3,
    registry untouched; after the restart the same command answers again."""
    held = submit(jobkit, slurm_spec(workdir, "held", "true", hold=True))
    slurm_jobs.append(held["scheduler_id"])
    assert status_json(jobkit)[held["jobkit_id"]]["state"] == "HELD"
    before = rows(jobkit_home)
    with outage("slurmctld"), ThreadPoolExecutor(2) as pool:
        # Both at once (two users' terminals): each waits for squeue to give up (~15 s).
        asked = [
            pool.submit(run_jobkit, "status", cwd=workdir),
            pool.submit(run_jobkit, "status", held["jobkit_id"], "--json", cwd=workdir),
        ]
        done, detail = (answer.result() for answer in asked)
        after = rows(jobkit_home)
    assert done.returncode == 3 and detail.returncode == 3
    for stderr in (done.stderr, detail.stderr):
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("jobkit: warning: squeue failed ("), stderr
        assert "; showing states from " in lines[0] and lines[0].endswith(" ago")
    assert held["jobkit_id"] in done.stdout and "HELD" in done.stdout
    assert json.loads(detail.stdout)[0]["state"] == "HELD"
    assert after == before, "a failed query must not change any row"
    # Back up: the same command answers, exit 0, nothing lost.
    recovered = run_jobkit("status", held["jobkit_id"], "--json", cwd=workdir)
    assert recovered.returncode == 0, recovered.stderr
    record = json.loads(recovered.stdout)[0]
    assert (record["state"], record["scheduler_id"]) == ("HELD", held["scheduler_id"])
    tally("faults: slurmctld stopped during status", 2)


@pytest.mark.cluster_alone  # stops a daemon (tests/plugins/groups.py)
@pytest.mark.timeout(1200)  # waits for a free node on a shared cluster
def test_finished_job_keeps_its_last_state_until_sacct_answers(
    workdir: Path,
    jobkit_home: Path,
    jobkit: Invoke,
    outage: Callable[[str], Any],
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
) -> None:
    """slurmdbd down while a job ends: squeue calls it FAILED but the exit code needs sacct,
    which fails; jobkit keeps RUNNING (its last observation) and warns. Once slurmdbd is
    back and the job has left squeue, sacct's answer (FAILED, exit 3) is recorded. (When the
    outage also lost the job's completion record, sacct says FAILED 0:0 for good: the exit
    code then comes from the exit_code file the job script left in its run folder.)"""
    record = submit(jobkit, slurm_spec(workdir, "dbd-down", "sleep 4; exit 3"))
    jobkit_id, sched = record["jobkit_id"], record["scheduler_id"]
    slurm_jobs.append(sched)

    def running() -> bool:
        return status_json(jobkit, jobkit_id)[jobkit_id]["state"] == "RUNNING"

    wait_for("the job to run", running, timeout=900, interval=1)
    with outage("slurmdbd"):
        wait_for("squeue to show the job ended", lambda: _squeue_state(sched) == "FAILED", 60)
        done = run_jobkit("status", jobkit_id, "--json", cwd=workdir)
        kept = rows(jobkit_home)[jobkit_id]
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("jobkit: warning: sacct failed ("), done.stderr
    assert kept[0] == "RUNNING" and kept[4] is None, kept  # no state or exit code guessed
    wait_for("slurmctld to forget the job", lambda: not squeue_knows(sched), timeout=120)

    def settled() -> bool:
        shown = status_json(jobkit, jobkit_id)[jobkit_id]
        return shown["state"] in FINAL and shown["exit_code"] is not None

    wait_for("sacct to report the job", settled, timeout=120, interval=2)
    final = status_json(jobkit, jobkit_id)[jobkit_id]
    assert (final["state"], final["exit_code"], final["state_source"]) == ("FAILED", 3, "sacct")
    history = [h["state"] for h in final["history"]]
    assert history[-2:] == ["RUNNING", "FAILED"], history
    tally("faults: slurmdbd stopped while a job ended", 1)
    tally("faults: jobs purged from squeue, answered by sacct", 1)


def _squeue_state(sched: str) -> str:
    done = slurm(["squeue", "--noheader", "--states=all", f"--jobs={sched}", "--format=%T"])
    return done.stdout.strip()


def config_without_accounting(cluster: SlurmCluster, folder: Path) -> Path:
    """The cluster's slurm.conf without its Accounting* lines: with it as SLURM_CONF, the
    client commands jobkit runs see accounting disabled (sacct says so) while the cluster
    itself, shared with other tests, keeps its accounting."""
    lines = cluster.slurm_conf.read_text().splitlines()
    target = folder / "slurm-no-accounting.conf"
    target.write_text("\n".join(x for x in lines if not x.startswith("Accounting")) + "\n")
    return target


@pytest.mark.timeout(1200)  # waits for free nodes on a shared cluster
def test_without_accounting_the_exit_code_file_decides(
    workdir: Path,
    tmp_path: Path,
    jobkit: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    slurm_cluster: SlurmCluster,
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
) -> None:
    """sacct refuses (accounting disabled): how a job ended comes from squeue while it holds
    the job, and from the exit_code file the job script leaves in its run folder. After the
    job leaves squeue, a job seen FAILED stays FAILED (not UNKNOWN), one with an exit_code
    file keeps that code, a job seen COMPLETED stays SUCCEEDED; nothing is guessed (a job
    that removed its run folder has no code)."""
    monkeypatch.setenv("SLURM_CONF", str(config_without_accounting(slurm_cluster, tmp_path)))
    refused = slurm(["sacct", "-n", "-j", "1"])
    assert "accounting storage is disabled" in refused.stderr.lower()
    coded = submit(jobkit, slurm_spec(workdir, "acct-file", "exit 3"))
    silent = submit(
        jobkit, slurm_spec(workdir, "acct-silent", 'rm -rf -- "$JOBKIT_RUN_DIR"; exit 5')
    )
    good = submit(jobkit, slurm_spec(workdir, "acct-ok", "true"))
    jobs = (coded, silent, good)
    slurm_jobs += [r["scheduler_id"] for r in jobs]
    ids = [r["jobkit_id"] for r in jobs]

    def all_ended() -> bool:
        shown = status_json(jobkit, *ids)  # while squeue still holds them
        return all(shown[i]["state"] in FINAL for i in ids)

    wait_for("squeue to show the three ended", all_ended, timeout=900, interval=1)
    seen = status_json(jobkit, *ids)
    assert (seen[ids[0]]["state"], seen[ids[0]]["exit_code"]) == ("FAILED", 3)
    assert seen[ids[0]]["state_source"] == "exit-file"
    assert (seen[ids[1]]["state"], seen[ids[1]]["exit_code"]) == ("FAILED", None)
    assert (seen[ids[2]]["state"], seen[ids[2]]["exit_code"]) == ("SUCCEEDED", 0)
    wait_for(
        "slurmctld to forget the jobs",
        lambda: not any(squeue_knows(r["scheduler_id"]) for r in jobs),
        timeout=120,
    )
    gone = status_json(jobkit, *ids)
    assert (gone[ids[0]]["state"], gone[ids[0]]["exit_code"]) == ("FAILED", 3)
    assert (gone[ids[1]]["state"], gone[ids[1]]["exit_code"]) == ("FAILED", None)
    assert (gone[ids[2]]["state"], gone[ids[2]]["exit_code"]) == ("SUCCEEDED", 0)
    tally("faults: jobs followed to their end without accounting", 3)


@pytest.mark.cluster_alone  # stops a daemon (tests/plugins/groups.py)
def test_real_accounting_switch(
    workdir: Path,
    jobkit_home: Path,
    slurm_cluster: SlurmCluster,
    tally: Callable[[str, int], None],
    figure: Callable[[str, float], None],
) -> None:
    """tests/cluster/ctl.sh accounting off (slurmctld restarted without accounting): sacct
    refuses exactly as with the client-side configuration above, and `jobkit status` on a
    finished job it cannot ask sacct about exits 0 without a warning; then back on."""
    with Store() as store:
        row = store.create_intent(backend="slurm", name="old", spec={}, script="", workdir=workdir)
        store.mark_submitted(row.jobkit_id, scheduler_id="1", argv=[], log_paths={})
    started = time.monotonic()
    try:
        slurm_cluster.ctl("accounting", "off", timeout=240)
        refused = slurm(["sacct", "-n", "-j", "1"])
        done = run_jobkit("status", "--all", "--json", cwd=workdir)
    finally:
        slurm_cluster.ctl("accounting", "on", timeout=240)
    figure("faults: seconds with accounting switched off", time.monotonic() - started)
    assert "accounting storage is disabled" in refused.stderr.lower()
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout)[0]["jobkit_id"] == row.jobkit_id
    assert slurm(["sacct", "-n", "-j", "1"]).returncode == 0
    tally("faults: accounting switched off and on with ctl.sh", 1)


def test_lost_reply_of_a_slow_sbatch_is_adopted_not_resubmitted(
    workdir: Path,
    jobkit_home: Path,
    jobkit: Invoke,
    tmp_path: Path,
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
) -> None:
    """sbatch creates the job, then hangs past jobkit's submit timeout (a wrapper on PATH
    runs the real sbatch and sleeps). jobkit says it does not know the outcome and keeps
    the row SUBMITTING; the next command finds the job by the token in its comment and
    adopts it. Exactly one Slurm job exists for the token."""
    bin_dir = tmp_path / "bin"
    log = tmp_path / "sbatch-ids"
    executable(
        bin_dir / "sbatch",
        f'#!/bin/bash\nout=$("{real("sbatch")}" "$@") || exit $?\n'
        f'echo "$out" >>"{log}"\necho "$out"\nexec sleep 30\n',
    )
    spec = slurm_spec(workdir, "slow-sbatch", "true", hold=True)
    # The real CLI with only its sbatch timeout lowered from 120 s to 3 s.
    bootstrap = (
        "import sys; from jobkit.backends.slurm.backend import SlurmBackend;"
        " SlurmBackend.submit_timeout_s = 3.0;"
        " from jobkit.cli import main; sys.argv[0] = 'jobkit'; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", bootstrap, "submit", str(spec)],
        cwd=workdir,
        env={**os.environ, "PATH": path_with(bin_dir)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    created = log.read_text().split()
    slurm_jobs.extend(created)
    assert len(created) == 1
    assert_one_clean_line(done.stderr, done.returncode, allowed=(1,))
    assert "timed out after 3 s" in done.stderr
    (jobkit_id,) = rows(jobkit_home)
    assert rows(jobkit_home)[jobkit_id][0] == "SUBMITTING"
    shown = status_json(jobkit)[jobkit_id]
    assert (shown["state"], shown["scheduler_id"]) == ("HELD", created[0])
    assert shown["extra"]["adopted"] is True
    assert jobs_with_comment(f"jobkit:{token_of(jobkit_id)}") == created
    assert len(rows(jobkit_home)) == 1
    tally("faults: sbatch timed out after creating the job (adopted)", 1)
