"""The other launchers, for real: spawn (local, Slurm), distributed-launch (two Slurm nodes),
ssh.fanout pdsh (the loopback hosts n1 n2), and `jobkit render --node-rank` run by hand on
n1 and n2 (docs/train.md "Launchers", docs/e2e.md). The pdsh jobs run a shell command: under
torchrun (static rendezvous across both hosts) where cancel must clean both hosts' process
trees, launcher none (one process per host, no torchrun agent) where only pdsh's output and
exit code are the subject."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import hosts, runs
from tests.e2e.cli import REPO, VENV, Jobkit

STEPS = 12


def _spec(folder: Path, name: str, **sections: Any) -> str:
    """A job spec file (JSON is YAML) for the bundled trainer's mlp config unless run is given."""
    data: dict[str, Any] = {
        "name": name,
        "run": {"train": {"config": "mlp", "overrides": {"train.steps": STEPS}}},
        **sections,
    }
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps(data))
    return str(path)


def _done(jobkit: Jobkit, spec: str, *options: str) -> tuple[dict[str, Any], Path]:
    sub = jobkit.submit(spec, *options)
    assert sub.returncode == 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("SUCCEEDED", 0), record
    return record, Path(record["log_paths"]["run_dir"])


@pytest.mark.slow
def test_spawn_on_local_trains_like_torchrun(jobkit: Jobkit, tmp_path: Path) -> None:
    """Two processes spawned by the trainer reach the same loss as torchrun's two, step for
    step (same seed, same data, gloo on CPU: deterministic)."""
    launch = {"nproc_per_node": 2}
    _, spawned = _done(jobkit, _spec(tmp_path, "spawned", launch={**launch, "launcher": "spawn"}))
    _, torchrun = _done(jobkit, _spec(tmp_path, "torchrun", launch=launch))
    for rank in (0, 1):
        log = runs.rank_log(spawned, rank)
        assert f"launcher=env rank={rank} local_rank={rank} world_size=2" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    assert "spawning 2 process(es) on this node" in (spawned / "node-0.out").read_text()
    assert runs.final_loss(spawned) == runs.final_loss(torchrun)
    assert [r["loss"] for r in runs.metrics(spawned)] == [r["loss"] for r in runs.metrics(torchrun)]


@pytest.mark.slow
def test_spawn_cancel_reaches_the_children_which_checkpoint(jobkit: Jobkit, tmp_path: Path) -> None:
    """SIGTERM to the spawning parent (jobkit cancel) reaches both children: they save a
    checkpoint and stop, as under torchrun, and nothing of the job is left."""
    marker = hosts.unique_marker("e2e-spawn-cancel")
    spec = _spec(
        tmp_path,
        "spawn-cancel",
        launch={"launcher": "spawn", "nproc_per_node": 2},
        run={"train": {"config": "mlp", "overrides": {"train.steps": 100000, "name": marker}}},
    )
    output = tmp_path / "submit.out"
    waiting = jobkit.start(spec, output=output)
    try:
        jobkit_id, _ = jobkit.submitted(output)
        run_dir = Path(jobkit.status(jobkit_id)["log_paths"]["run_dir"])
        runs.wait_for(
            lambda: (run_dir / "rank-1.log").exists() and "step 10/" in runs.rank_log(run_dir, 1),
            timeout=180,
            what="rank 1 at step 10",
        )
        cancelled = jobkit.run("cancel", jobkit_id, timeout=180)
        assert cancelled.returncode == 0, cancelled.stderr
        assert waiting.wait(timeout=120) != 0
        for rank in (0, 1):
            assert "stopped after step" in runs.rank_log(run_dir, rank), runs.rank_log(
                run_dir, rank
            )
        saved = runs.checkpoint_steps(run_dir)
        assert saved and saved[-1] >= 10, saved
        assert hosts.local_pgrep(marker) == {}
        assert jobkit.status(jobkit_id)["state"] == "CANCELLED"
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
        hosts.kill_leftovers(marker)


@pytest.mark.slurm
@pytest.mark.slow
def test_spawn_on_one_slurm_node(jobkit: Jobkit, slurm_cluster: object, tmp_path: Path) -> None:
    """One Slurm task; the trainer starts its two processes itself."""
    spec = _spec(
        tmp_path,
        "slurm-spawn",
        backend="slurm",
        resources={"time": "00:05:00"},
        launch={"launcher": "spawn", "nproc_per_node": 2},
    )
    _, run_dir = _done(jobkit, spec)
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"rank={rank} local_rank={rank} world_size=2" in log and "num_nodes=1" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    assert STEPS in runs.checkpoint_steps(run_dir)


@pytest.mark.slurm
@pytest.mark.slow
def test_distributed_launch_on_two_slurm_nodes(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    """`python -m torch.distributed.launch --use_env` on each of two nodes (static rendezvous,
    node rank from SLURM_NODEID); torch's deprecation warning is in the node's output."""
    spec = _spec(
        tmp_path,
        "slurm-dlaunch",
        backend="slurm",
        resources={"nodes": 2, "time": "00:05:00"},
        launch={"launcher": "distributed-launch", "nproc_per_node": 1},
    )
    _, run_dir = _done(jobkit, spec)
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert "launcher=torchrun" in log and f"node_rank={rank} num_nodes=2" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
        assert (run_dir / "ranks" / str(rank)).read_text().strip() == str(rank)
    node0 = (run_dir / "node-0.out").read_text()
    assert "torch.distributed.launch is deprecated" in node0, node0


def _pdsh_spec(folder: Path, name: str, command: str, launcher: str = "none", **extra: Any) -> str:
    """`bash -c COMMAND` on n1 and n2 through pdsh, under `launcher` (none: once per host)."""
    launch = {"launcher": "none"} if launcher == "none" else {"rdzv": "static"}
    return _spec(
        folder,
        name,
        backend="ssh",
        resources={"nodes": 2},
        ssh={"hosts": ["n1", "n2"], "fanout": "pdsh"},
        launch=launch,
        run={"command": ["bash", "-c", command]},
        **extra,
    )


@pytest.mark.ssh
def test_pdsh_runs_both_hosts_and_prefixes_their_output(
    jobkit: Jobkit, ssh_hosts: object, tmp_path: Path
) -> None:
    spec = _pdsh_spec(tmp_path, "pdsh-ok", 'echo "hello from rank $RANK of $WORLD_SIZE"')
    record, run_dir = _done(jobkit, spec)
    out = Path(record["log_paths"]["out"]).read_text()
    assert "n1: hello from rank 0 of 2\n" in out and "n2: hello from rank 1 of 2\n" in out, out
    assert "jobkit: pdsh -w n1,n2\n" in out, out
    for node in (0, 1):
        text = (run_dir / f"node-{node}.out").read_text()
        assert f"hello from rank {node} of 2\n" in text, text
        assert f"hello from rank {1 - node} " not in text and "n1: " not in text, text


@pytest.mark.ssh
def test_pdsh_exit_code_is_the_failing_hosts(
    jobkit: Jobkit, ssh_hosts: object, tmp_path: Path
) -> None:
    """Host 1 fails (exit 3) in its setup, before its command starts; host 0's command would
    run on (sleep 120): jobkit stops it, and the job's exit code is host 1's."""
    setup = 'if [ "$JOBKIT_NODE_INDEX" = 1 ]; then echo "failing on purpose"; exit 3; fi'
    spec = _pdsh_spec(tmp_path, "pdsh-bad", "sleep 120", env={"setup": [setup]})
    sub = jobkit.submit(spec)
    assert sub.returncode != 0
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("FAILED", 3), record
    out = Path(record["log_paths"]["out"]).read_text()
    assert "n2: failing on purpose" in out and "n2: ssh exited with exit code 3" in out, out
    assert "jobkit: host 1 (n2) ended with exit code 3" in out, out
    assert "jobkit: finished with exit code 3" in out, out
    assert sub.seconds < 60, sub.seconds  # host 0 was stopped, not left to time out


@pytest.mark.ssh
@pytest.mark.slow
def test_pdsh_cancel_cleans_both_hosts(jobkit: Jobkit, ssh_hosts: object, tmp_path: Path) -> None:
    marker = hosts.unique_marker("e2e-pdsh-cancel")
    spec = _pdsh_spec(tmp_path, "pdsh-cancel", "echo started; sleep 300; true", "torchrun")
    data = json.loads(Path(spec).read_text())
    data["run"]["command"] += ["--set", f"name={marker}"]  # on bash's command line: pgrep finds it
    Path(spec).write_text(json.dumps(data))
    output = tmp_path / "submit.out"
    waiting = jobkit.start(spec, output=output)
    try:
        jobkit_id, _ = jobkit.submitted(output)
        run_dir = Path(jobkit.status(jobkit_id)["log_paths"]["run_dir"])
        runs.wait_for(
            lambda: all(
                (run_dir / f"node-{n}.out").exists()
                and "started" in (run_dir / f"node-{n}.out").read_text()
                for n in (0, 1)
            ),
            timeout=120,
            what="both hosts started",
        )
        before = {host: hosts.remote_pgrep(host, marker) for host in ("n1", "n2")}
        assert all(before.values()), before
        cancelled = jobkit.run("cancel", jobkit_id, timeout=180)
        assert cancelled.returncode == 0, cancelled.stderr
        after = {host: hosts.remote_pgrep(host, marker) for host in ("n1", "n2")}
        assert after == {"n1": [], "n2": []}, after
        assert waiting.wait(timeout=120) != 0
        assert jobkit.status(jobkit_id)["state"] == "CANCELLED"
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
        hosts.kill_leftovers(marker)


@pytest.mark.ssh
@pytest.mark.slow
def test_node_rank_commands_run_by_hand_form_one_job(
    jobkit: Jobkit, ssh_hosts: object, tmp_path: Path
) -> None:
    """`jobkit render --node-rank N` for nodes 0 and 1, each run by hand over ssh on its host
    (n1, n2), train one 2-node job together."""
    spec = _spec(
        tmp_path,
        "by-hand",
        backend="ssh",
        resources={"nodes": 2},
        ssh={"hosts": ["n1", "n2"]},
        env={"venv": str(VENV)},
        logs={"dir": str(jobkit.logs_dir)},
    )
    scripts = []
    for node in (0, 1):
        done = jobkit.run("render", spec, "--node-rank", str(node), "--port", "29617")
        assert done.returncode == 0, done.stderr
        assert f"--node-rank {node} " in done.stdout and "--nnodes 2 " in done.stdout
        assert "export MASTER_ADDR=n1\n" in done.stdout and "MASTER_PORT=29617\n" in done.stdout
        scripts.append(done.stdout)
    logs = [tmp_path / f"node-{node}.log" for node in (0, 1)]
    started = []
    for host, script, log in zip(("n1", "n2"), scripts, logs, strict=True):
        (tmp_path / f"{host}.sh").write_text(script)
        with (tmp_path / f"{host}.sh").open() as stdin, log.open("w") as sink:
            started.append(
                subprocess.Popen(
                    ["ssh", host, f"cd {REPO} && JOBKIT_JOB_ID=by-hand-{tmp_path.name} bash -s"],
                    stdin=stdin,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        for proc in started:
            proc.wait(timeout=240)
        outputs = [log.read_text() for log in logs]
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in started] == [0, 0], outputs
    run_dir = jobkit.logs_dir / f"by-hand-by-hand-{tmp_path.name}"
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"rank={rank}" in log and f"node_rank={rank} num_nodes=2" in log, log
        assert "master=n1:29617" in log, log
    assert STEPS in runs.checkpoint_steps(run_dir)
