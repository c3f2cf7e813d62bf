"""`jobkit why` against the real schedulers: Slurm (dependency, begin time, hold, a job over
its partition's MaxTime, a start estimate, a requeue), Slurm's Torque wrappers and Grid
Engine. Jobs are tiny (`bash -c sleep`); the cluster is shared, so waits are generous."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.manager.helpers import Invoke, slurm_spec, wait_until
from tests.plugins.cluster import run_quietly, scancel_quietly

ESTIMATE = "scheduler's estimate, may move"


def _submit(jobkit: Invoke, spec: Path, *args: str) -> tuple[str, str]:
    result = jobkit("submit", str(spec), "--json", *args)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    return str(data["jobkit_id"]), str(data["scheduler_id"])


def _why(jobkit: Invoke, *ids: str) -> list[dict[str, Any]]:
    result = jobkit("why", *ids, "--json")
    assert result.code == 0, result.err
    data: list[dict[str, Any]] = json.loads(result.out)
    return data


def _wait_why(jobkit: Invoke, job: str, done: Any, timeout: float = 120) -> dict[str, Any]:
    """Ask `jobkit why JOB --json` until done(answer)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = _why(jobkit, job)[0]
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(1.0)


def _calls(log: Path, name: str) -> int:
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if json.loads(line)["argv"][0] == name)


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_pending_jobs_say_why_with_one_squeue_and_one_sacct(
    workdir: Path, jobkit: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running job A; B depends on it, C begins in an hour, D is held, E asks for both
    nodes exclusively (behind A): each says why, with the fix and (E) an estimate."""
    run = slurm_spec(workdir, "whyrun", "sleep 150", "resources:", "  time: '00:03:00'")
    a_id, a_sched = _submit(jobkit, run)
    wait_until(jobkit, a_id, lambda r: r["state"] == "RUNNING", timeout=300)
    b_id, b_sched = _submit(
        jobkit, run, "--set", "name=whydep", "--set", f"scheduler.dependency=afterok:{a_sched}"
    )
    c_id, c_sched = _submit(
        jobkit, run, "--set", "name=whybegin", "--set", "scheduler.extra=['--begin=now+1hour']"
    )
    d_id, d_sched = _submit(jobkit, run, "--set", "name=whyheld")
    # `scontrol hold` by root (an admin) gives JobHeldAdmin; uhold is the user's own hold
    assert run_quietly(["scontrol", "uhold", d_sched]).returncode == 0
    e_id, _ = _submit(
        jobkit, run, "--set", "name=whybig", "--set", "resources.nodes=2",
        "--set", "resources.exclusive=true", "--set", "resources.time='00:01:00'",
    )  # fmt: skip
    log = tmp_path / "proc.jsonl"
    monkeypatch.setenv("JOBKIT_PROC_LOG", str(log))
    a, b, c, d, e = _why(jobkit, a_id, b_id, c_id, d_id, e_id)
    monkeypatch.delenv("JOBKIT_PROC_LOG")
    assert (_calls(log, "squeue"), _calls(log, "sacct")) == (1, 1), log.read_text()

    assert (a["state"], a["waiting"], a["reasons"]) == ("RUNNING", False, [])
    assert [t["event"] for t in a["timeline"]][-1] == "started"

    (dep,) = b["reasons"]
    assert (b["state"], dep["code"], dep["never_starts"]) == ("QUEUED", "Dependency", False)
    assert dep["meaning"].endswith(f": afterok:{a_sched}(unfulfilled)")
    assert f"scontrol update jobid={b_sched} dependency=" in dep["fix"]
    assert [t["event"] for t in b["timeline"]] == ["submitted"]

    (begin,) = c["reasons"]
    assert begin["code"] == "BeginTime"
    assert f"scontrol update jobid={c_sched} starttime=now" in begin["fix"]
    eligible = [t["at"] for t in c["timeline"] if t["event"] == "eligible"]
    assert len(eligible) == 1 and abs(eligible[0] - (time.time() + 3600)) < 300
    assert begin["start_estimate"] == eligible[0] and begin["start_estimate_note"] == ESTIMATE

    (held,) = d["reasons"]
    assert (d["state"], held["code"], held["fix"]) == (
        "HELD",
        "JobHeldUser",
        f"`scontrol release {d_sched}`",
    )
    # With preemption configured (tests/cluster: partition_prio), Slurm no longer tries a job
    # at submission: until its first scheduling pass the reason is "None", explained so.
    assert e["reasons"][0]["code"] in ("Resources", "Priority", "None")
    if e["reasons"][0]["code"] == "None":
        assert "has given no reason yet" in e["reasons"][0]["meaning"]
        e = _wait_why(
            jobkit, e_id, lambda r: r["reasons"] and r["reasons"][0]["code"] != "None", timeout=60
        )
        assert e["reasons"][0]["code"] in ("Resources", "Priority"), e

    big = _wait_why(
        jobkit, e_id, lambda r: r["reasons"] and r["reasons"][0]["start_estimate"], timeout=240
    )  # backfill plans it after A (bf_interval 5); other tests' jobs may be ahead of it
    queue = run_quietly(["squeue", "--start"]).stdout
    assert big["reasons"] and big["reasons"][0]["start_estimate"], (big, queue)

    text = jobkit("why", d_id, c_id).out
    assert "why       its owner held it (sbatch --hold or `scontrol hold`)  [JobHeldUser]" in text
    assert f"fix       `scontrol release {d_sched}`" in text
    assert f"; {ESTIMATE})" in text and "(to come)" in text
    status = jobkit("status", d_id).out
    assert "  why         its owner held it" in status and f"scontrol release {d_sched}" in status
    assert json.loads(jobkit("status", d_id, "--json").out)[0]["why"].startswith("its owner")
    jobkit("cancel", a_id, b_id, c_id, d_id, e_id)


@pytest.fixture
def short_partition() -> Iterator[str]:
    """A partition of this test's own with MaxTime=1 (minute) on the cluster's nodes; only
    this test's job uses it, and it is deleted afterwards."""
    name = f"jkwhy{os.getpid()}"
    made = run_quietly(["scontrol", "create", f"PartitionName={name}", "Nodes=n1,n2", "MaxTime=1"])
    assert made.returncode == 0, made.stderr
    yield name
    for _ in range(10):
        if run_quietly(["scontrol", "delete", f"PartitionName={name}"]).returncode == 0:
            break
        time.sleep(1)  # its cancelled job still holds it for a moment


@pytest.mark.slurm
def test_a_job_over_the_partitions_max_time_will_never_start(
    workdir: Path, jobkit: Invoke, short_partition: str
) -> None:
    spec = slurm_spec(workdir, "toolong", "true", "resources:", f"  partition: {short_partition}")
    # --no-check: submit's check would refuse a time over MaxTime (tests/check)
    job, sched = _submit(jobkit, spec, "--no-check", "--set", "resources.time='00:05:00'")
    try:
        # Slurm says PartitionConfig for its first pass, then PartitionTimeLimit
        answer = _wait_why(
            jobkit, job, lambda r: r["reasons"] and r["reasons"][0]["code"] == "PartitionTimeLimit"
        )
        (reason,) = answer["reasons"]
        assert (reason["code"], reason["never_starts"]) == ("PartitionTimeLimit", True)
        assert f"scontrol show partition {short_partition}" in reason["fix"]
        assert "--set resources.time=" in reason["fix"]
        text = jobkit("why", job).out
        assert "  !!        THIS JOB WILL NEVER START as it is" in text
        assert "starts" not in text  # no estimate is offered for a job that cannot start
    finally:
        scancel_quietly(sched)


@pytest.mark.slurm
@pytest.mark.slow
def test_a_requeued_job_shows_the_requeue_in_its_timeline(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "requeued", "sleep 120", "scheduler:", "  requeue: true")
    job, sched = _submit(jobkit, spec)
    try:
        wait_until(jobkit, job, lambda r: r["state"] == "RUNNING", timeout=300)
        assert run_quietly(["scontrol", "requeue", sched]).returncode == 0
        answer = _wait_why(
            jobkit, job, lambda r: any(t["event"] == "requeued" for t in r["timeline"])
        )
        events = [(t["event"], t["detail"]) for t in answer["timeline"]]
        assert ("requeued", "run 2 queued") in events, events
        assert ("ended", "REQUEUED, exit 0:0") in events, events
        assert answer["state"] == "QUEUED" and answer["reasons"][0]["code"] == "BeginTime"
    finally:
        scancel_quietly(sched)


@pytest.mark.pbs
def test_torque_wrapper_job_waits_without_a_comment(
    workdir: Path, jobkit: Invoke, pbs_cluster: object
) -> None:
    """Slurm's qstat wrapper prints no comment: jobkit says PBS gave no reason."""
    spec = workdir / "pbs.yaml"
    spec.write_text(
        "name: whypbs\nbackend: pbs\nresources: {time: '00:02:00'}\n"
        "scheduler: {pbs_flavor: torque, extra: ['-h']}\n"
        "run: {command: [bash, -c, 'sleep 5']}\n"
    )
    job, sched = _submit(jobkit, spec)
    try:
        (answer,) = _why(jobkit, job)
        assert (answer["state"], answer["raw_state"], answer["waiting"]) == ("QUEUED", "Q", True)
        assert answer["reasons"] == [] and "PBS gives no reason" in answer["notes"][0]
        assert [t["event"] for t in answer["timeline"]] == ["submitted"]
    finally:
        run_quietly(["qdel", sched])


@pytest.mark.sge
def test_grid_engine_held_job_says_qrls(workdir: Path, jobkit: Invoke, sge_cluster: Any) -> None:
    spec = workdir / "sge.yaml"
    spec.write_text(
        "name: whysge\nbackend: sge\nresources: {time: '00:02:00'}\n"
        "scheduler: {extra: ['-h']}\nrun: {command: [bash, -c, 'sleep 5']}\n"
    )
    job, sched = _submit(jobkit, spec)
    try:
        answer = _wait_why(jobkit, job, lambda r: r["reasons"], timeout=30)
        assert (answer["state"], answer["raw_state"]) == ("HELD", "hqw")
        held = answer["reasons"][0]
        assert (held["code"], held["fix"]) == ("Job is in hold state", f"`qrls {sched}`")
        assert [t["event"] for t in answer["timeline"]] == ["submitted"]
        assert "starts    Grid Engine makes no start estimates" in jobkit("why", job).out
    finally:
        subprocess.run(["qdel", sched], capture_output=True, check=False)


def test_local_jobs_never_wait_and_bad_ids_are_one_line(workdir: Path, jobkit: Invoke) -> None:
    spec = workdir / "local.yaml"
    spec.write_text("name: l\nbackend: local\nrun: {command: [bash, -c, 'sleep 1']}\n")
    job, _ = _submit(jobkit, spec)
    (answer,) = _why(jobkit, job)
    assert answer["waiting"] is False and answer["reasons"] == []
    assert answer["notes"] == ["the local backend starts a job at once: it never waits in a queue"]
    missing = jobkit("why", "nosuchjob")
    assert (missing.code, missing.err) == (2, "jobkit: no tracked job 'nosuchjob'\n")
    bare = jobkit("why")
    assert (bare.code, bare.err) == (2, "jobkit: give one or more job IDs (or --last)\n")
