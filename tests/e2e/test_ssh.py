"""Two hosts over ssh (the loopback sshd's n1 and n2): training, and `jobkit cancel`.

n1 and n2 are this machine reached over sshd on 127.0.0.1:2222, so "nothing left on
either host" is checked over ssh on each, as on a real pair of hosts.

Only the training test runs the bundled trainer; the others run a few lines of Python (no
torch) under torchrun: the rank placement's and cancel's subject is the ssh backend (its
launcher, ssh, torchrun and workers), not training, and a trainer rank costs ~5 CPU-s.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e import hosts, runs
from tests.e2e.cli import JOBKIT, Jobkit, trainer_sets
from tests.e2e.conftest import Figures

pytestmark = pytest.mark.ssh

STEPS = 40


@pytest.mark.slow
def test_ssh_two_hosts_train_the_bundled_model(
    jobkit: Jobkit, ssh_hosts: object, figures: Figures
) -> None:
    """examples/ssh-2node.yaml: one torchrun per host started over ssh, rendezvous on n1."""
    sub = jobkit.submit("examples/ssh-2node.yaml", *trainer_sets(train__steps=STEPS))
    assert sub.returncode == 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["backend"], record["state"], record["exit_code"]) == ("ssh", "SUCCEEDED", 0)
    run_dir = Path(record["log_paths"]["run_dir"])
    out = Path(record["log_paths"]["out"]).read_text()
    assert (
        "host 0 (n1) ended with exit code 0" in out and "host 1 (n2) ended with exit code 0" in out
    )
    for node in (0, 1):
        assert f"host {node} (" in (run_dir / f"node-{node}.out").read_text()
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"rank={rank}" in log and f"node_rank={rank} num_nodes=2" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    first, last = runs.assert_loss_fell(run_dir)
    assert STEPS in runs.checkpoint_steps(run_dir)
    figures(first_loss=first, final_loss=last, submit_to_succeeded_s=round(sub.seconds, 1))


PRINT_RANK = "import os; print(f'rank {os.environ[\"RANK\"]} here', flush=True)"


def test_logs_of_one_rank_wait_for_c10d_to_place_it(
    jobkit: Jobkit, ssh_hosts: object, tmp_path: Path
) -> None:
    """c10d decides which host runs each rank. `jobkit logs --rank R -f`, started before any
    worker exists, waits for the worker's note (ranks/R) and follows that host's file."""
    spec = tmp_path / "placed.yaml"
    data = {
        "name": "placed",
        "backend": "ssh",
        "resources": {"nodes": 2},
        "ssh": {"hosts": ["n1", "n2"]},
        "launch": {"nproc_per_node": 1, "rdzv": "c10d"},
        "env": {"setup": ["sleep 3"]},  # no worker, so no note, for a while
        "run": {"command": ["python3", "-c", PRINT_RANK]},
    }
    spec.write_text(json.dumps(data))  # JSON is YAML
    sub = jobkit.run("submit", str(spec), "--json", *jobkit.common_sets())
    assert sub.returncode == 0, sub.stderr
    record = json.loads(sub.stdout)
    followers = {
        rank: subprocess.Popen(
            [str(JOBKIT), "logs", record["jobkit_id"], "--rank", str(rank), "-f"],
            env=jobkit.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    }
    run_dir = Path(record["log_paths"]["run_dir"])
    try:
        for rank, follower in followers.items():
            out, err = follower.communicate(timeout=180)
            assert follower.returncode == 0, err
            assert f"jobkit: waiting for the job to start rank {rank}" in err, err
            host = int((run_dir / "ranks" / str(rank)).read_text())
            assert out == (run_dir / f"node-{host}.out").read_text(), (rank, host)
            assert f"rank {rank} here\n" in out and f"rank {1 - rank} here" not in out, out
    finally:
        for follower in followers.values():
            if follower.poll() is None:
                follower.kill()
                follower.wait()
    hosts_noted = sorted(int((run_dir / "ranks" / r).read_text()) for r in ("0", "1"))
    assert hosts_noted == [0, 1]


WORKER = (
    "import os, pathlib, signal, sys, time;"
    " signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1), sys.exit(75)));"
    ' pathlib.Path(os.environ["JOBKIT_RUN_DIR"], "up-" + os.environ["RANK"]).touch();'
    " time.sleep(3600)"
)
"""A worker that notes it is up (run folder, up-RANK) and runs until stopped; on SIGTERM it
takes a moment and exits 75, as the trainer does (a checkpoint, then 75)."""


def worker_spec(folder: Path, marker: str) -> Path:
    """examples/ssh-2node.yaml with WORKER as the program; its command line carries
    `--set name=MARKER` (hosts.remote_pgrep, hosts.kill_leftovers)."""
    spec = folder / "ssh-cancel.yaml"
    data = {
        "name": "ssh-cancel",
        "backend": "ssh",
        "resources": {"nodes": 2},
        "ssh": {"hosts": ["n1", "n2"]},
        "launch": {"nproc_per_node": 1},
        "run": {"command": ["python3", "-c", WORKER, "--set", f"name={marker}"]},
    }
    spec.write_text(json.dumps(data))  # JSON is YAML
    return spec


@pytest.mark.slow
def test_cancel_leaves_no_process_on_either_host(
    jobkit: Jobkit, ssh_hosts: object, figures: Figures, tmp_path: Path
) -> None:
    """`jobkit cancel` of a running job (a torchrun and its WORKER per host): no launcher,
    ssh, torchrun or worker left."""
    marker = hosts.unique_marker("e2e-ssh-cancel")
    output = tmp_path / "submit.out"
    waiting = jobkit.start(str(worker_spec(tmp_path, marker)), output=output)
    try:
        jobkit_id, _ = jobkit.submitted(output)
        record = jobkit.status(jobkit_id)
        run_dir = Path(record["log_paths"]["run_dir"])
        # Both workers run.
        runs.wait_for(
            lambda: all((run_dir / f"up-{rank}").exists() for rank in (0, 1)),
            timeout=240,
            what="both workers up",
        )
        before = {host: hosts.remote_pgrep(host, marker) for host in ("n1", "n2")}
        assert all(len(found) >= 2 for found in before.values()), before  # torchrun + workers
        started = time.monotonic()
        cancelled = jobkit.run("cancel", jobkit_id, timeout=180)
        cancel_s = time.monotonic() - started
        assert cancelled.returncode == 0, cancelled.stderr
        after = {host: hosts.remote_pgrep(host, marker) for host in ("n1", "n2")}
        assert after == {"n1": [], "n2": []}, after
        launcher_pid = int((run_dir / "launcher.pid").read_text())
        assert not Path(f"/proc/{launcher_pid}").exists() or _is_zombie(launcher_pid)
        for node in (0, 1):
            assert not Path(f"/tmp/jobkit-{jobkit_id}-node-{node}.pgid").exists()
        assert waiting.wait(timeout=120) != 0  # --wait ends with the job, not in success
        final = jobkit.status(jobkit_id)
        assert final["state"] == "CANCELLED", final
        figures(
            processes_before={host: len(found) for host, found in before.items()},
            cancel_s=round(cancel_s, 1),
        )
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
        hosts.kill_leftovers(marker)


def _is_zombie(pid: int) -> bool:
    done = subprocess.run(
        ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, check=False
    )
    return done.stdout.strip().startswith("Z")
