"""Grid Engine: the bundled trainer on two real exec hosts (n1, n2 of tests/cluster/sge.sh),
tracked with qstat -xml and qacct; a cancelled job and a failing one.

The exec hosts are network and UTS namespaces of this machine: `hostname` says n1 or n2 there,
and host 1's torchrun is started with `qrsh -inherit` (tight integration), so the rendezvous
really crosses hosts.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.e2e import runs
from tests.e2e.cli import Jobkit, trainer_sets
from tests.e2e.conftest import Figures
from tests.plugins.sge import SgeCluster

STEPS = 30


@pytest.mark.sge
@pytest.mark.slow
def test_two_hosts_train_and_are_tracked_to_the_end(
    jobkit: Jobkit, sge_cluster: SgeCluster, figures: Figures
) -> None:
    """examples/sge-2node.yaml: -pe jobkit 2, one torchrun per host, qrsh -inherit."""
    sub = jobkit.submit("examples/sge-2node.yaml", *trainer_sets(train__steps=STEPS))
    assert sub.returncode == 0, sub.explain()
    assert re.fullmatch(r"\d+", sub.scheduler_id), sub.scheduler_id
    record = jobkit.status(sub.jobkit_id)
    assert (record["backend"], record["state"], record["exit_code"]) == ("sge", "SUCCEEDED", 0)
    history = [change["state"] for change in record["history"]]
    assert "RUNNING" in history and history[-1] == "SUCCEEDED", history
    run_dir = Path(record["log_paths"]["run_dir"])
    assert run_dir.name == f"sge-2node-{sub.scheduler_id}"
    out = Path(record["log_paths"]["out"]).read_text()
    assert re.search(r"on 2 host\(s\): n[12] n[12]", out), out
    hosts = set()
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"rank={rank}" in log and "world_size=2" in log, log
        assert f"job_id={sub.scheduler_id}" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
        hosts.add((run_dir / f"node-{rank}.out").read_text().split("(")[1].split(")")[0])
    assert hosts == {"n1", "n2"}, hosts  # each host ran its own torchrun
    first, last = runs.assert_loss_fell(run_dir)
    assert STEPS in runs.checkpoint_steps(run_dir)
    figures(job=sub.scheduler_id, first_loss=first, final_loss=last, submit_to_end_s=sub.seconds)


@pytest.mark.sge
@pytest.mark.slow
def test_cancel_stops_a_running_job(
    jobkit: Jobkit, sge_cluster: SgeCluster, tmp_path: Path
) -> None:
    """`jobkit cancel` of a training 2-host job: qdel warns the script (SIGUSR2, -notify), which
    stops both torchruns in order: the trainer saves a checkpoint, the job is CANCELLED (not
    FAILED), and no process of it is left on either host (torchrun runs in a session of its
    own, which the SIGKILL of the job's process group would not reach)."""
    output = tmp_path / "submit.out"
    proc = jobkit.start(
        "examples/sge-2node.yaml", *trainer_sets(train__steps=100000), output=output
    )
    job = None
    try:
        job, _ = jobkit.submitted(output)
        record = jobkit.wait_state(job, {"RUNNING"}, timeout=120)
        run_dir = Path(record["log_paths"]["run_dir"])
        deadline = time.monotonic() + 180
        while not re.search(r"rank 0: step \d+/", _text(run_dir / "rank-0.log")):
            assert time.monotonic() < deadline, "the trainer logged no step in 180 s"
            time.sleep(1)
        done = jobkit.run("cancel", job)
        assert done.returncode == 0, done.stderr
        record = jobkit.wait_state(job, {"CANCELLED", "FAILED", "SUCCEEDED"}, timeout=120)
        assert record["state"] == "CANCELLED", record
        proc.wait(timeout=120)
        assert leftovers(str(run_dir), within_s=30) == [], "processes of the cancelled job remain"
        assert (
            "received SIGUSR2: stopping every host" in Path(record["log_paths"]["err"]).read_text()
        )
        assert runs.checkpoint_steps(run_dir), "no checkpoint saved when the job was cancelled"
    finally:
        if proc.poll() is None:
            proc.kill()
        if job is not None:
            jobkit.run("cancel", job)  # a job left running by a failed assertion


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def leftovers(run_dir: str, within_s: float) -> list[str]:
    """Command lines of processes that still name the job's run folder after `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        found = []
        for proc_dir in Path("/proc").iterdir():
            try:
                if proc_dir.name.isdigit():
                    raw = (proc_dir / "cmdline").read_bytes() + (proc_dir / "environ").read_bytes()
                    if run_dir.encode() in raw:
                        found.append((proc_dir / "cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(1)


@pytest.mark.sge
@pytest.mark.slow
def test_failing_program_is_failed_with_its_exit_code(
    jobkit: Jobkit, sge_cluster: SgeCluster, tmp_path: Path
) -> None:
    """A one-slot job whose program exits 3: FAILED with exit code 3 (torchrun exits 1 for
    a failed worker; the script reads the program's own code from torchrun's report)."""
    spec = tmp_path / "fails.yaml"
    spec.write_text(
        "name: sge-fails\nbackend: sge\nrun:\n  command: [python3, -c, 'import sys; sys.exit(3)']\n"
    )
    sub = jobkit.submit(str(spec))
    assert sub.returncode != 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("FAILED", 3), record
    run_dir = Path(record["log_paths"]["run_dir"])
    assert "exitcode  : 3" in (run_dir / "node-0.out").read_text()
    assert "finished with exit code 3" in Path(record["log_paths"]["out"]).read_text()
