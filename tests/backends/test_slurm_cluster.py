"""submit / status / cancel against the real Slurm cluster (tests/cluster/up.sh).

Jobs are tiny (`bash -c ...` through launcher srun, no torch) and take a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jobkit.registry.store import Store
from tests.manager.helpers import (
    JOBKIT_BIN,
    Invoke,
    calls,
    env_with_path,
    is_settled,
    run_jobkit_process,
    scancel_quietly,
    slurm_spec,
    squeue_knows,
    status_of,
    wait_until,
    wrapper_dir,
)
from tests.plugins.cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]


def _submit_ids(jobkit: Invoke, spec: Path, *args: str) -> tuple[str, str]:
    """Submit; (jobkit id, scheduler id), without polling the scheduler afterwards."""
    result = jobkit("submit", str(spec), "--json", *args)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["state"] == "QUEUED" and data["scheduler_id"].isdigit()
    return str(data["jobkit_id"]), str(data["scheduler_id"])


def _submit(jobkit: Invoke, spec: Path, *args: str) -> str:
    return _submit_ids(jobkit, spec, *args)[0]


def test_submit_runs_then_succeeds_with_exit_code(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "ok", "echo hello-from-ok; sleep 3")
    jobkit_id = _submit(jobkit, spec)
    running = wait_until(jobkit, jobkit_id, lambda r: r["state"] in ("RUNNING", "SUCCEEDED"))
    assert running["state"] == "RUNNING", "the job ran for 3 s: status must see it running"
    assert running["nodes"] in ("n1", "n2") and running["state_source"] == "squeue"
    final = wait_until(jobkit, jobkit_id, is_settled)
    assert (final["state"], final["exit_code"], final["signal"]) == ("SUCCEEDED", 0, None)
    assert final["elapsed_s"] >= 3
    history = [h["state"] for h in final["history"]]
    assert history[:2] == ["SUBMITTING", "QUEUED"] and "RUNNING" in history
    assert history[-1] == "SUCCEEDED"
    sched = final["scheduler_id"]
    out = workdir / "logs" / f"ok-{sched}.out"
    assert final["log_paths"] == {
        "out": str(out),
        "err": str(out.with_suffix(".err")),
        "run_dir": str(out.with_suffix("")),
    }
    assert "rank-0.out" in {p.name for p in out.with_suffix("").iterdir()}
    assert "hello-from-ok" in (out.with_suffix("") / "rank-0.out").read_text()
    # the script recorded is byte for byte what `jobkit render` prints
    rendered = jobkit("render", str(spec))
    assert final["script"] == rendered.out
    assert (Path(final["job_dir"]) / "job.sh").read_text() == rendered.out


def test_failing_job_is_failed_with_its_exit_code(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "bad", "echo about-to-fail; exit 3")
    jobkit_id = _submit(jobkit, spec)
    final = wait_until(jobkit, jobkit_id, is_settled)
    assert (final["state"], final["raw_state"], final["exit_code"]) == ("FAILED", "FAILED", 3)
    table = jobkit("status")
    assert table.code == 0
    header, row = table.out.splitlines()[:2]
    assert header.split() == [
        "ID",
        "SCHED",
        "ID",
        "NAME",
        "BACKEND",
        "STATE",
        "ELAPSED",
        "NODES",
        "EXIT",
    ]
    assert row.split()[:5] == [jobkit_id, final["scheduler_id"], "bad", "slurm", "FAILED"]
    assert row.split()[-1] == "3"


def test_submit_wait_streams_output_and_exits_with_the_job_code(workdir: Path) -> None:
    spec = slurm_spec(workdir, "waited", "echo streamed-line >&2; sleep 1; exit 4")
    done = run_jobkit_process("submit", str(spec), "--wait", cwd=workdir, timeout=300)
    assert done.returncode == 4, done.stderr
    assert done.stdout.startswith("submitted jk")
    assert "jobkit: job " in done.stdout  # the batch shell's own .out lines, streamed
    assert "[err] srun: error:" in done.stdout  # its .err, labelled
    assert "streamed-line" in done.stdout.splitlines()  # rank 0's own output (rank-0.out)
    lines = done.stderr.splitlines()
    assert lines[0].startswith("jobkit: rank 0's output is in "), lines  # where the output is
    changes = [line for line in lines if line.split()[1].startswith("jk")]  # state changes
    # polling backs off (up to 10 s) while the job waits, so a 1 s run may be missed
    assert changes[0].split()[2] in ("QUEUED", "RUNNING", "FAILED")
    assert changes[-1].split()[2:4] == ["FAILED", "on"]
    assert changes[-1].endswith(" exit code 4")


def test_cancel_running_job(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "sleeper", "sleep 120")
    jobkit_id, sched = _submit_ids(jobkit, spec)
    try:
        wait_until(jobkit, jobkit_id, lambda r: r["state"] == "RUNNING")
        result = jobkit("cancel", jobkit_id)
        assert result.code == 0, result.err
        assert result.out == f"cancelled {jobkit_id} (slurm job {sched})\n"
        with Store() as store:
            recorded = store.get(jobkit_id)
        assert (recorded.state, recorded.state_source) == ("CANCELLED", "cancel")
        final = wait_until(jobkit, jobkit_id, is_settled)
        assert final["state"] == "CANCELLED" and final["state_source"] in ("squeue", "sacct")
        assert final["raw_state"].startswith("CANCELLED")
        again = jobkit("cancel", jobkit_id)
        assert again.code == 0 and again.out == ""
        assert again.err == f"jobkit: {jobkit_id} already ended (CANCELLED); nothing to cancel\n"
    finally:
        scancel_quietly([sched])


def test_refusal_is_shown_verbatim_and_recorded_failed(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "refused", "true")
    # --no-check: sbatch's own refusal (jobkit check would stop the job first, tests/check)
    result = jobkit(
        "submit", str(spec), "--no-check", "--set", "resources.partition=nosuchpartition"
    )
    assert result.code == 1
    assert "sbatch: error: Batch job submission failed: Invalid partition name specified" in (
        result.err
    )
    assert result.err.startswith("jobkit: sbatch --parsable --comment=jobkit:")
    with Store() as store:
        (record,) = store.list_jobs(recent_final_s=None)
    assert record.state == "FAILED" and record.scheduler_id is None
    assert record.reason is not None and record.reason.startswith("submission refused: sbatch")
    assert "Invalid partition name specified" in record.reason


def test_dry_run_records_nothing(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "dry", "true")
    result = jobkit("submit", str(spec), "--dry-run")
    assert result.code == 0
    assert result.out == jobkit("render", str(spec)).out
    assert result.err == (
        f"# would run (in {workdir}): sbatch --parsable '--comment=jobkit:<token>'"
        " '<job-dir>/job.sh'\n"
    )
    with Store() as store:
        assert store.count() == 0
    assert not (workdir / "logs").exists()


def test_array_job_is_one_tracked_job_with_per_task_logs(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "arr", 'exit "$SLURM_ARRAY_TASK_ID"', "scheduler:", "  array: 0-2")
    jobkit_id = _submit(jobkit, spec)
    final = wait_until(jobkit, jobkit_id, is_settled)
    sched = final["scheduler_id"]
    assert final["state"] == "FAILED"  # tasks 1 and 2 exit non-zero
    assert final["raw_state"] == "array[COMPLETED=1,FAILED=2]"
    assert final["exit_code"] in (1, 2)
    assert final["log_paths"]["out"] == str(workdir / "logs" / f"arr-{sched}_{{task}}.out")
    with Store() as store:
        from jobkit.registry.ids import resolve_job_task

        record, task = resolve_job_task(store, f"{sched}_1")
        assert (record.jobkit_id, task) == (jobkit_id, "1")
        task_out = Path(record.log_paths_for(task)["out"])
    assert task_out == workdir / "logs" / f"arr-{sched}_1.out"
    assert task_out.exists()


def test_requeue_count_and_duplicates_from_sacct(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "rq", "sleep 60", "scheduler:", "  requeue: true")
    jobkit_id, sched = _submit_ids(jobkit, spec)
    try:
        wait_until(jobkit, jobkit_id, lambda r: r["state"] == "RUNNING")
        subprocess.run(["scontrol", "requeue", sched], check=True, timeout=30)
        queued = wait_until(jobkit, jobkit_id, lambda r: r["state"] in ("QUEUED", "HELD"))
        assert queued["requeues"] == 1
        assert jobkit("cancel", jobkit_id).code == 0
        final = wait_until(jobkit, jobkit_id, is_settled)
        assert final["state"] == "CANCELLED" and final["requeues"] == 1
    finally:
        scancel_quietly([sched])


def _held_spec(workdir: Path, name: str) -> Path:
    return slurm_spec(workdir, name, "true", "scheduler:", "  extra: [--hold]")


def test_status_makes_one_squeue_and_at_most_one_sacct(workdir: Path, tmp_path: Path) -> None:
    """1 job and 200 jobs: `jobkit status` runs one squeue and at most one sacct."""
    log = tmp_path / "calls.log"
    wrappers = wrapper_dir(tmp_path / "bin", ["squeue", "sacct", "scancel", "sbatch"], log)
    env = env_with_path(wrappers)
    spec = _held_spec(workdir, "held")
    submitted = run_jobkit_process("submit", str(spec), "--json", cwd=workdir, env=env)
    assert submitted.returncode == 0, submitted.stderr
    first = json.loads(submitted.stdout)
    ids = [first["scheduler_id"]]
    try:
        assert [c.split()[0] for c in calls(log)] == ["sbatch"]
        log.unlink()
        one = run_jobkit_process("status", cwd=workdir, env=env)
        assert one.returncode == 0, one.stderr
        assert [c.split()[0] for c in calls(log)] == ["squeue"]
        assert one.stdout.splitlines()[1].split()[4] == "HELD"  # PENDING (JobHeldUser)
        # 199 more held jobs through the library (one sbatch each)
        from jobkit.manager import submit as pipeline
        from jobkit.spec.load import load_spec

        plan = pipeline.plan_submission(load_spec(str(spec)).spec, workdir=workdir)
        with Store() as store, ThreadPoolExecutor(4) as pool:
            records = list(pool.map(lambda _: _submit_in_thread(plan), range(199)))
            assert store.count() == 200
        ids += [r for r in records]
        log.unlink()
        started = time.monotonic()
        many = run_jobkit_process("status", cwd=workdir, env=env)
        wall = time.monotonic() - started
        assert many.returncode == 0, many.stderr
        assert [c.split()[0] for c in calls(log)] == ["squeue"]
        assert len(many.stdout.splitlines()) == 201
        print(f"status of 200 pending jobs: {wall:.2f} s wall (one squeue)")
        log.unlink()
        cancel = run_jobkit_process("cancel", *ids, cwd=workdir, env=env)
        assert cancel.returncode == 0, cancel.stderr
        assert [c.split()[0] for c in calls(log)] == ["squeue", "scancel"]
        log.unlink()
        time.sleep(1)
        after = run_jobkit_process("status", "--json", cwd=workdir, env=env)
        assert after.returncode == 0, after.stderr
        names = [c.split()[0] for c in calls(log)]
        assert names in (["squeue"], ["squeue", "sacct"])
        states = {r["state"] for r in json.loads(after.stdout)}
        assert states == {"CANCELLED"}
    finally:
        scancel_quietly(ids)


def _submit_in_thread(plan):  # type: ignore[no-untyped-def]
    from jobkit.manager import submit as pipeline

    with Store() as store:
        return pipeline.submit(store, plan).scheduler_id


CONCURRENT = 50


def test_fifty_concurrent_cli_submits_lose_nothing(workdir: Path, tmp_path: Path) -> None:
    spec = _held_spec(workdir, "crowd")
    script = textwrap.dedent(
        f"""
        import subprocess, sys
        from concurrent.futures import ThreadPoolExecutor
        cmd = [sys.executable, "-m", "jobkit", "submit", {str(spec)!r}, "--backend", "slurm",
               "--json"]
        def one(_):
            p = subprocess.run(cmd, capture_output=True, text=True)
            return p.returncode, p.stdout, p.stderr
        with ThreadPoolExecutor({CONCURRENT}) as pool:
            results = list(pool.map(one, range({CONCURRENT})))
        import json
        print(json.dumps(results))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    results = json.loads(done.stdout)
    ids = [json.loads(out)["scheduler_id"] for code, out, _ in results if code == 0]
    try:
        for code, _out, err in results:
            assert code == 0, err
            assert "locked" not in err
        with Store() as store:
            records = store.list_jobs(recent_final_s=None)
        assert len(records) == CONCURRENT
        assert len({r.scheduler_id for r in records}) == CONCURRENT
        assert len({r.jobkit_id for r in records}) == CONCURRENT
        assert {r.state for r in records} == {"QUEUED"}
        assert sorted(r.scheduler_id for r in records) == sorted(ids)
    finally:
        scancel_quietly(ids)


LOST_WRITER = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from jobkit.registry.store import Store
    script, workdir, age, really_submit = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    from jobkit.manager.submit import submitter_identity
    with Store() as store:
        rec = store.create_intent(backend="slurm", name="lost", spec={}, script="",
                                  workdir=Path(workdir), now=time.time() - age,
                                  extra={"submitter": submitter_identity()})
    if really_submit == "yes":
        subprocess.run(["sbatch", "--parsable", f"--comment=jobkit:{rec.token}", "--hold",
                        script], check=True, cwd=workdir, capture_output=True)
    print(rec.jobkit_id)
    # exit without recording the answer: as if jobkit had crashed after sbatch
    """
)


def test_lost_reply_is_adopted_and_a_lost_submission_fails(
    workdir: Path, jobkit: Invoke, tmp_path: Path
) -> None:
    script = tmp_path / "held.sh"
    script.write_text("#!/bin/bash\ntrue\n")

    def crash(age: float, really_submit: bool) -> str:
        args = [str(script), str(workdir), str(age), "yes" if really_submit else "no"]
        done = subprocess.run(
            [sys.executable, "-c", LOST_WRITER, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return done.stdout.strip()

    adopted_id = crash(age=5, really_submit=True)
    lost_id = crash(age=400, really_submit=False)
    young_id = crash(age=5, really_submit=False)
    sched = None
    try:
        result = jobkit("status", "--json")
        assert result.code == 0, result.err
        shown = {r["jobkit_id"]: r for r in json.loads(result.out)}
        adopted = shown[adopted_id]
        sched = adopted["scheduler_id"]
        assert adopted["state"] == "HELD" and sched and sched.isdigit()
        assert adopted["extra"]["adopted"] is True
        with Store() as store:
            history = store.history(adopted_id)
            assert [h.source for h in history[:2]] == ["jobkit", "adopted"]
            lost = store.get(lost_id)
            assert lost.state == "FAILED"
            assert lost.reason == (
                "submission lost: jobkit stopped before the scheduler answered, and no job"
                " with its token was found"
            )
            assert store.get(young_id).state == "SUBMITTING"  # too young to call lost
    finally:
        scancel_quietly([sched] if sched else [])


def test_interrupted_submit_is_adopted(workdir: Path, jobkit: Invoke, tmp_path: Path) -> None:
    """Ctrl-C while sbatch has accepted the job but not yet answered: the row stays
    SUBMITTING, and the next command adopts the job through the token in its comment."""
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    real = shutil.which("sbatch")
    (slow / "sbatch").write_text(f'#!/bin/sh\n"{real}" "$@" || exit $?\nexec sleep 60\n')
    (slow / "sbatch").chmod(0o755)
    spec = _held_spec(workdir, "slowreply")
    proc = subprocess.Popen(
        [*JOBKIT_BIN, "submit", str(spec)],
        cwd=workdir,
        env={**os.environ, **env_with_path(slow)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sched = ""
    try:
        deadline = time.monotonic() + 60
        while not sched:
            assert time.monotonic() < deadline, "sbatch never submitted the job"
            time.sleep(0.2)
            sched = subprocess.run(
                ["squeue", "--noheader", "--name=slowreply", "--format=%i"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        with Store() as store:
            (row,) = store.list_jobs(recent_final_s=None)
        assert (row.state, row.scheduler_id) == ("SUBMITTING", None)
        shown = status_of(jobkit, row.jobkit_id)
        assert (shown["scheduler_id"], shown["state"]) == (sched, "HELD")
        assert shown["extra"]["adopted"] is True
        assert shown["log_paths"]["out"] == str(workdir / "logs" / f"slowreply-{sched}.out")
    finally:
        proc.kill()
        scancel_quietly([sched] if sched else [])


def _config_without_accounting(cluster: SlurmCluster, folder: Path) -> Path:
    """A copy of this cluster's slurm.conf without Accounting* lines (sacct then refuses)."""
    lines = cluster.slurm_conf.read_text().splitlines()
    kept = [line for line in lines if not line.startswith("Accounting")]
    target = folder / "slurm-no-accounting.conf"
    target.write_text("\n".join(kept) + "\n")
    return target


def test_jobs_that_left_squeue(
    workdir: Path,
    jobkit: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slurm_cluster: SlurmCluster,
) -> None:
    """Once squeue forgot a job (MinJobAge): sacct answers; without accounting, the fallbacks.

    Without accounting, `sacct` says "Slurm accounting storage is disabled" (a real sacct
    run with a slurm.conf lacking AccountingStorageType): the exit_code file the job script
    leaves in the run folder decides, and without one the job is UNKNOWN with a reason.
    """
    plain, plain_sched = _submit_ids(jobkit, slurm_spec(workdir, "gone", "exit 5"))
    with_file, file_sched = _submit_ids(jobkit, slurm_spec(workdir, "exitfile", "exit 6"))
    # Without its run folder, the script has nowhere to leave its exit code.
    removes = slurm_spec(workdir, "silent", 'rm -rf -- "$JOBKIT_RUN_DIR"; exit 7')
    without, silent_sched = _submit_ids(jobkit, removes)
    deadline = time.monotonic() + 300 + slurm_cluster.min_job_age_s
    while any(squeue_knows(s) for s in (plain_sched, file_sched, silent_sched)):
        assert time.monotonic() < deadline, "the jobs did not run and leave squeue in time"
        time.sleep(1)
    final = status_of(jobkit, plain)
    assert (final["state"], final["exit_code"], final["state_source"]) == ("FAILED", 5, "sacct")

    assert slurm_cluster.sacct_works
    monkeypatch.setenv("SLURM_CONF", str(_config_without_accounting(slurm_cluster, tmp_path)))
    refused = subprocess.run(
        ["sacct", "-j", file_sched], capture_output=True, text=True, check=False
    )
    assert "accounting storage is disabled" in refused.stderr.lower()
    first = status_of(jobkit, with_file)
    assert (first["state"], first["exit_code"], first["state_source"]) == (
        "FAILED",
        6,
        "exit-file",
    )
    second = status_of(jobkit, without)
    assert second["state"] == "UNKNOWN" and second["exit_code"] is None
    assert second["reason"] == (
        "left the queue; Slurm accounting is disabled, so how it ended is unknown"
    )


def test_failed_squeue_changes_nothing_and_exits_3(
    workdir: Path, jobkit: Invoke, tmp_path: Path
) -> None:
    spec = _held_spec(workdir, "stale")
    jobkit_id, sched = _submit_ids(jobkit, spec)
    try:
        empty_path = tmp_path / "empty-bin"
        empty_path.mkdir()
        python_dir = str(Path(sys.executable).parent)
        done = run_jobkit_process("status", cwd=workdir, env={"PATH": f"{empty_path}:{python_dir}"})
        assert done.returncode == 3
        assert done.stderr.startswith("jobkit: warning: squeue failed (squeue --noheader")
        assert "command not found: squeue" in done.stderr
        assert "; showing states from " in done.stderr and done.stderr.endswith(" ago\n")
        assert jobkit_id in done.stdout and "QUEUED" in done.stdout
        with Store() as store:
            assert store.get(jobkit_id).state == "QUEUED"
    finally:
        scancel_quietly([sched])
