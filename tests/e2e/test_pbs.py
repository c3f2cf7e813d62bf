"""PBS: a Torque job through qsub (Slurm's Torque wrappers), and the PBS script's multi-node
path run for real with a PBS environment this test makes.

No PBS server exists for Debian, so the wrappers stand in for qsub/qstat: they run the script
as a one-node Slurm job and set no PBS_* variable. The script's multi-node path (a
PBS_NODEFILE with several hosts, one torchrun per host started over ssh) is therefore run
here as PBS would run it on the job's first host: in $HOME, with PBS_NODEFILE listing n1 and
n2, PBS_JOBID and PBS_O_WORKDIR set. Host 0 (n1, the host the script runs on) starts its
torchrun itself; host 1 (n2) is reached over the loopback sshd.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e import runs
from tests.e2e.cli import REPO, VENV, Jobkit, trainer_sets
from tests.e2e.conftest import Figures

STEPS = 40


@pytest.mark.pbs
@pytest.mark.slow
def test_torque_job_through_qsub_trains_and_is_tracked(
    jobkit: Jobkit, pbs_cluster: object, figures: Figures, tmp_path: Path
) -> None:
    """examples/pbs-torque.yaml (2 processes on one host) via qsub, followed with qstat."""
    # The wrappers drop `<script>.o<id>` files in the submission directory: use a fresh one.
    workdir = tmp_path / "submit-dir"
    workdir.mkdir()
    sub = jobkit.submit(
        str(REPO / "examples" / "pbs-torque.yaml"),
        *trainer_sets(train__steps=STEPS),
        cwd=workdir,
    )
    assert sub.returncode == 0, sub.explain()
    assert re.fullmatch(r"\d+", sub.scheduler_id), sub.scheduler_id
    record = jobkit.status(sub.jobkit_id)
    assert (record["backend"], record["state"], record["exit_code"]) == ("pbs", "SUCCEEDED", 0)
    assert record["extra"]["pbs_flavor"] == "torque"
    history = [change["state"] for change in record["history"]]
    assert "RUNNING" in history and history[-1] == "SUCCEEDED", history
    run_dir = Path(record["log_paths"]["run_dir"])
    assert run_dir.name == f"pbs-torque-{sub.scheduler_id}"
    assert (run_dir / "exit_code").read_text().splitlines() == ["0", sub.scheduler_id]
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"rank={rank}" in log and "world_size=2 local_world_size=2" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    first, last = runs.assert_loss_fell(run_dir)
    assert STEPS in runs.checkpoint_steps(run_dir)
    assert "finished with exit code 0" in jobkit.logs(sub.jobkit_id)
    figures(
        job=sub.scheduler_id,
        first_loss=first,
        final_loss=last,
        submit_to_succeeded_s=round(sub.seconds, 1),
    )


@pytest.mark.pbs
@pytest.mark.ssh
@pytest.mark.slow
def test_pbs_script_multi_node_path_over_ssh(
    jobkit: Jobkit, ssh_hosts: object, figures: Figures, tmp_path: Path
) -> None:
    """The rendered PBS script on a 2-host PBS_NODEFILE (n1, n2), pbs_spawner ssh."""
    script = tmp_path / "job.sh"
    # Each host says whether it was reached over ssh (SSH_CONNECTION) in its node-I.out.
    rendered = jobkit.run(
        "render",
        "examples/pbs-torque.yaml",
        *jobkit.common_sets(),
        "--set",
        "resources.nodes=2",
        "--set",
        "launch.nproc_per_node=1",
        "--set",
        "scheduler.pbs_spawner=ssh",
        "--set",
        'env.setup=echo "e2e ssh_connection=[${SSH_CONNECTION:-none}]"',
        *trainer_sets(train__steps=STEPS),
        "-o",
        str(script),
    )
    assert rendered.returncode == 0, rendered.stderr
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("n1\nn2\n")
    pbs_home = tmp_path / "pbs-home"  # PBS starts a job's script in $HOME
    pbs_home.mkdir()
    job_id = f"{random.randint(100000, 999999)}.e2e-pbs-server"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_"))}
    env.update(
        PBS_JOBID=job_id,
        PBS_NODEFILE=str(nodefile),
        PBS_O_WORKDIR=str(REPO),
        PBS_JOBNAME="pbs-torque",
        HOME=str(pbs_home),
    )
    done = subprocess.run(
        ["bash", str(script)],
        cwd=pbs_home,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    out_file = jobkit.logs_dir / f"pbs-torque-{job_id}.out"
    out = out_file.read_text() if out_file.exists() else ""
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n--- {out_file}\n{out}"
    assert "on 2 host(s): n1 n2" in out, out
    assert (
        "host 0 (n1) ended with exit code 0" in out and "host 1 (n2) ended with exit code 0" in out
    )
    run_dir = jobkit.logs_dir / f"pbs-torque-{job_id}"
    assert (run_dir / "exit_code").read_text().splitlines()[0] == "0"
    node0 = (run_dir / "node-0.out").read_text()
    node1 = (run_dir / "node-1.out").read_text()
    assert "e2e ssh_connection=[none]" in node0, node0  # host 0 is the script's own host
    assert re.search(r"e2e ssh_connection=\[127\.0\.0\.1 \d+ 127\.0\.0\.1 \d+\]", node1), node1
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"rank={rank}" in log and "world_size=2" in log, log
        assert f"node_rank={rank} num_nodes=2" in log and f"job_id={job_id}" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    first, last = runs.assert_loss_fell(run_dir)
    assert STEPS in runs.checkpoint_steps(run_dir)
    assert str(VENV) in script.read_text()
    figures(job=job_id, first_loss=first, final_loss=last)
