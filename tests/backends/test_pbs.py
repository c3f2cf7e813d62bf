"""The PBS backend: PBS Pro json (RECORDED sample: PBS Pro cannot run here) and Torque text
captured live from Slurm's Torque wrappers, plus qsub -> completion through jobkit.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from jobkit.backends.base import SubmitRequest, TrackedJob
from jobkit.backends.pbs.backend import _match_ids
from jobkit.backends.pbs.parse import (
    hosts_of,
    match_submissions,
    observe_pro,
    observe_torque,
    parse_hms,
    parse_pro_json,
    parse_qsub_output,
    parse_torque_text,
)
from jobkit.core.errors import SchedulerError
from jobkit.core.states import State
from tests.manager.helpers import (
    Invoke,
    calls,
    env_with_path,
    is_settled,
    run_jobkit_process,
    wait_until,
    wrapper_dir,
)

DATA = Path(__file__).parent / "data"


def _request(job_dir: str) -> SubmitRequest:
    from jobkit.spec.schema import JobSpec

    spec = JobSpec.model_validate({"name": "train-big", "backend": "pbs", "run": {"command": "x"}})
    folder = Path(job_dir)
    return SubmitRequest("jk", spec, "", folder / "job.sh", folder, Path("/w"), "tok")


def test_lost_qsub_reply_is_adopted_from_the_submit_arguments() -> None:
    """RECORDED, not live (PBS Pro cannot run here; Slurm's Torque wrappers show no submit
    arguments, see tests/reliability/test_crashes.py): the job whose Submit_arguments name the
    script in jobkit's job folder is the lost submission."""
    jobs = parse_pro_json((DATA / "pbspro_qstat_f_F_json_x.json").read_text())
    found = match_submissions(
        jobs,
        {
            "tok-a": _request("/home/alice/.local/state/jobkit/jobs/jk1a2b3"),
            "tok-b": _request("/home/alice/.local/state/jobkit/jobs/jk1a2b"),  # a prefix only
        },
    )
    assert found == {"tok-a": "1001.pbs01"}
    torque = parse_torque_text(
        # Torque text wraps a long value mid-word on a tab-indented line.
        "Job Id: 77.head\n    Job_Name = x\n"
        "    submit_args = -q batch /home/bob/.local/state/jobkit/jo\n"
        "\tbs/jkzz9/job.sh\n"
    )
    assert match_submissions(
        torque, {"t": _request("/home/bob/.local/state/jobkit/jobs/jkzz9")}
    ) == {"t": "77.head"}


def test_pbs_pro_json_recorded_sample() -> None:
    """RECORDED, not live: PBS Pro's `qstat -f -F json -x` (see data/README.md)."""
    jobs = parse_pro_json((DATA / "pbspro_qstat_f_F_json_x.json").read_text())
    seen = {job_id: observe_pro(attrs) for job_id, attrs in jobs.items()}
    summary = {
        job_id: (o.state, o.raw_state, o.exit_code, o.signal, o.requeues)
        for job_id, o in seen.items()
    }
    assert summary == {
        "1001.pbs01": (State.RUNNING, "R/42", None, None, 0),
        "1002.pbs01": (State.QUEUED, "Q/10", None, None, None),
        "1003.pbs01": (State.HELD, "H/20", None, None, None),
        "1004.pbs01": (State.SUCCEEDED, "F/92", 0, None, 0),
        "1005.pbs01": (State.FAILED, "F/92", 3, None, 0),
        "1006.pbs01": (State.TIMEOUT, "F/93", -29, None, 0),
        "1007.pbs01": (State.CANCELLED, "F/91", None, 15, 0),
        "1008[].pbs01": (State.RUNNING, "B/70", None, None, None),
        "1009.pbs01": (State.OUT_OF_MEMORY, "F/93", -27, None, 1),
    }
    running = seen["1001.pbs01"]
    assert running.nodes == "node01,node02"
    assert running.elapsed_s == 12 * 60 + 34
    assert (running.max_rss, running.cpu_time) == ("31457280kb", "01:38:51")
    assert seen["1002.pbs01"].reason == (
        "Not Running: Insufficient amount of resource: ngpus (R: 8 A: 4 T: 16)"
    )


def test_pbs_pro_json_without_jobs_key_is_empty() -> None:
    empty = '{"timestamp":1716201600,"pbs_version":"2022.1.3","pbs_server":"pbs01"}'
    assert parse_pro_json(empty) == {}
    assert parse_pro_json("") == {}


def test_ids_match_with_or_without_server_suffix(tmp_path: Path) -> None:
    jobs = parse_pro_json((DATA / "pbspro_qstat_f_F_json_x.json").read_text())
    seen = {job_id: observe_pro(attrs) for job_id, attrs in jobs.items()}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "exit_code").write_text("9\n")

    def tracked(sched: str, run: Path | None = None) -> TrackedJob:
        extra = {"run_dir": str(run)} if run else {}
        return TrackedJob("jk0", sched, tmp_path, tmp_path, extra)

    answer = _match_ids(
        [tracked("1004"), tracked("1005.pbs01"), tracked("77.pbs01", run_dir), tracked("78")],
        seen,
    )
    assert answer["1004"].state is State.SUCCEEDED
    assert answer["1005.pbs01"].exit_code == 3
    assert (answer["77.pbs01"].state, answer["77.pbs01"].exit_code) == (State.FAILED, 9)
    assert answer["77.pbs01"].source == "exit-file"
    assert "78" not in answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [("00:05:03", 303.0), ("100:00:00", 360000.0), ("42", 42.0), ("", None), ("x", None)],
)
def test_parse_hms(text: str, expected: float | None) -> None:
    assert parse_hms(text) == expected


def test_hosts_and_qsub_output() -> None:
    assert hosts_of("n1/0*2+n2/0*2+n1/1") == "n1,n2"
    assert hosts_of(None) is None
    assert parse_qsub_output(["qsub"], "1234.pbs01\n", "") == "1234.pbs01"
    assert parse_qsub_output(["qsub"], "55\n", "") == "55"
    assert parse_qsub_output(["qsub"], "56[].srv\n", "") == "56[].srv"
    with pytest.raises(SchedulerError, match="unexpected qsub output"):
        parse_qsub_output(["qsub", "x"], "qsub: job rejected\n", "")


def test_torque_text_continuation_lines() -> None:
    """Real Torque wraps long values onto tab-indented lines; they join the value."""
    text = (
        "Job Id: 12.torque01\n"
        "    Job_Name = long\n"
        "    job_state = C\n"
        "    exit_status = 2\n"
        "    Variable_List = PBS_O_HOME=/root,PBS_O_WORKDIR=/home/\n"
        "\talice/runs,PBS_O_QUEUE=batch\n"
        "    resources_used.walltime = 00:00:07\n"
    )
    (attrs,) = parse_torque_text(text).values()
    assert (
        attrs["Variable_List"]
        == "PBS_O_HOME=/root,PBS_O_WORKDIR=/home/alice/runs,PBS_O_QUEUE=batch"
    )
    obs = observe_torque(attrs)
    assert (obs.state, obs.exit_code, obs.elapsed_s) == (State.FAILED, 2, 7.0)


# ---- live, through Slurm's Torque wrappers ------------------------------------------------


def _pbs_spec(folder: Path, name: str, command: str) -> Path:
    """A Torque-flavoured job; the template starts torchrun, taken from this venv."""
    import sys

    venv = Path(sys.executable).parent.parent
    path = folder / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: {name}
            backend: pbs
            scheduler:
              pbs_flavor: torque
            env:
              venv: {json.dumps(str(venv))}
            run:
              command: {json.dumps(["bash", "-c", command])}
            """
        )
    )
    return path


@pytest.mark.pbs
@pytest.mark.usefixtures("pbs_cluster")
def test_torque_text_captured_live(tmp_path: Path) -> None:
    script = tmp_path / "held.sh"
    script.write_text("#!/bin/bash\n#PBS -N livetext\ntrue\n")
    first = subprocess.run(
        ["qsub", "-h", str(script)], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.strip()
    second = subprocess.run(
        ["qsub", "-h", str(script)], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.strip()
    try:
        live = subprocess.run(
            ["qstat", "-f", first, second], capture_output=True, text=True, check=True
        ).stdout
        jobs = parse_torque_text(live)
        assert set(jobs) == {first, second}
        for attrs in jobs.values():
            assert attrs["Job_Name"] == "livetext"
            assert attrs["job_state"] in ("Q", "H")
            assert observe_torque(attrs).state in (State.QUEUED, State.HELD)
    finally:
        subprocess.run(["qdel", first, second], capture_output=True, check=False)


@pytest.mark.pbs
@pytest.mark.usefixtures("pbs_cluster")
def test_qsub_tracked_to_completion(workdir: Path, jobkit: Invoke) -> None:
    ok = jobkit("submit", str(_pbs_spec(workdir, "pbsok", "echo pbs-hello")), "--json")
    bad = jobkit("submit", str(_pbs_spec(workdir, "pbsbad", "exit 3")), "--json")
    assert ok.code == 0 and bad.code == 0, ok.err + bad.err
    ok_id, bad_id = json.loads(ok.out)["jobkit_id"], json.loads(bad.out)["jobkit_id"]
    final_ok = wait_until(jobkit, ok_id, is_settled)
    assert (final_ok["state"], final_ok["exit_code"]) == ("SUCCEEDED", 0)
    assert final_ok["raw_state"] in ("C", "")  # C from qstat, "" once qstat forgot the job
    sched = final_ok["scheduler_id"]
    out = workdir / "logs" / f"pbsok-{sched}.out"
    assert final_ok["log_paths"]["out"] == str(out)
    assert "jobkit: finished with exit code 0" in out.read_text()
    assert "pbs-hello" in (out.with_suffix("") / "node-0.out").read_text()
    history = [h["state"] for h in final_ok["history"]]
    assert history[0] == "SUBMITTING" and history[-1] == "SUCCEEDED"
    final_bad = wait_until(jobkit, bad_id, is_settled)
    # torchrun exits 1 for a failed worker; the script passes on the program's own 3, read
    # from torchrun's root-cause block
    assert (final_bad["state"], final_bad["exit_code"]) == ("FAILED", 3)


@pytest.mark.pbs
@pytest.mark.usefixtures("pbs_cluster")
def test_qdel_cancel_and_one_qstat_per_status(
    workdir: Path, jobkit: Invoke, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    env = env_with_path(wrapper_dir(tmp_path / "bin", ["qstat", "qdel", "qsub"], log))
    spec = _pbs_spec(workdir, "pbslong", "sleep 120")
    ids = []
    for _ in range(3):
        done = run_jobkit_process("submit", str(spec), "--json", cwd=workdir, env=env)
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["jobkit_id"])
    log.unlink()
    status = run_jobkit_process("status", cwd=workdir, env=env)
    assert status.returncode == 0, status.stderr
    assert [c.split()[0] for c in calls(log)] == ["qstat"]
    assert calls(log)[0].startswith("qstat -f ")
    log.unlink()
    cancel = run_jobkit_process("cancel", *ids, cwd=workdir, env=env)
    assert cancel.returncode == 0, cancel.stderr
    assert [c.split()[0] for c in calls(log)] == ["qstat", "qdel"]
    for jobkit_id in ids:
        final = wait_until(jobkit, jobkit_id, lambda r: r["state_source"] != "cancel")
        # The wrappers show every ended job as C; the script's exit_code file says 143 (TERM).
        # A job jobkit cancelled that then ends unsuccessfully is confirmed CANCELLED.
        assert final["state"] == "CANCELLED", final
        assert final["state_source"] in ("qstat", "exit-file")


def test_a_job_deleted_before_it_started_is_cancelled_whatever_its_run_folder_says(
    tmp_path: Path,
) -> None:
    """The Torque wrappers show a job qdel'd while waiting as `C` with no exec_host and no
    exit status (seen here). A chain's later stage shares its run folder with its next
    attempt, which wrote exit_code 0: the waiting attempt was shown SUCCEEDED (CI)."""
    from jobkit.backends.base import Observation

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "exit_code").write_text("0\n")
    job = TrackedJob("jk0", "80", tmp_path, tmp_path, {"run_dir": str(run_dir)})
    never_ran = Observation(State.SUCCEEDED, "C", "qstat")
    ran = Observation(State.SUCCEEDED, "C", "qstat", nodes="n1")
    answer = _match_ids([job], {"80": never_ran})["80"]
    assert (answer.state, answer.exit_code, answer.source) == (State.CANCELLED, None, "qstat")
    assert answer.reason is not None and "deleted while waiting" in answer.reason
    answer = _match_ids([job], {"80": ran})["80"]
    assert (answer.state, answer.exit_code, answer.source) == (State.SUCCEEDED, 0, "exit-file")


def test_a_job_qstat_forgot_reads_only_its_own_exit_code(tmp_path: Path) -> None:
    """qstat forgets a finished job (the Torque wrappers after MinJobAge): its run folder's
    exit_code decides, but only when this job wrote it. A chain's stage cancelled while
    waiting shares the folder with its next attempt, whose `0` made it SUCCEEDED (CI)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    job = TrackedJob("jk0", "8166", tmp_path, tmp_path, {"run_dir": str(run_dir)})
    (run_dir / "exit_code").write_text("0\n8170\n")  # attempt 2 (job 8170) wrote it
    assert _match_ids([job], {}) == {}
    (run_dir / "exit_code").write_text("3\n8166\n")
    answer = _match_ids([job], {})["8166"]
    assert (answer.state, answer.exit_code, answer.source) == (State.FAILED, 3, "exit-file")
