"""Two Slurm nodes (n1, n2) train the bundled model, or the user's own DDP script.

Each test submits an example through the real CLI (`jobkit submit ... --wait`) and reads
back what the job left: the state jobkit recorded, each rank's log, metrics, checkpoint.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import runs
from tests.e2e.cli import Jobkit, trainer_sets
from tests.e2e.conftest import Figures

pytestmark = pytest.mark.slurm

STEPS = 40
SMALL_TRAINING = trainer_sets(train__steps=STEPS, logging__every_steps=5)


_WAIT_OUTPUT: dict[str, str] = {}
"""What `jobkit submit --wait` printed on stdout, by jobkit id."""


def record_wait_output(record: dict[str, Any]) -> str:
    return _WAIT_OUTPUT[record["jobkit_id"]]


def _finished(jobkit: Jobkit, spec: str, *options: str) -> tuple[dict[str, Any], Path]:
    """Submit with --wait; the job must have SUCCEEDED. Returns its record and run folder."""
    sub = jobkit.submit(spec, *options)
    assert sub.returncode == 0, sub.explain()
    _WAIT_OUTPUT[sub.jobkit_id] = sub.stdout
    assert f"{sub.jobkit_id} SUCCEEDED" in sub.stderr, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert record["scheduler_id"] == sub.scheduler_id
    assert (record["state"], record["raw_state"], record["exit_code"]) == (
        "SUCCEEDED",
        "COMPLETED",
        0,
    ), record
    assert record["nodes"] == "n[1-2]" and record["requeues"] == 0, record
    return record, Path(record["log_paths"]["run_dir"])


def _check_trained(run_dir: Path, launcher: str) -> tuple[float, float]:
    """Both ranks trained together to STEPS, the loss fell, the final checkpoint exists."""
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"launcher={launcher} rank={rank}" in log, log
        assert "world_size=2" in log and f"node_rank={rank} num_nodes=2" in log, log
        if launcher == "slurm":  # torchrun gives its workers a master of its own choosing
            assert "master=n1:" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    assert runs.last_step(run_dir) == STEPS
    assert STEPS in runs.checkpoint_steps(run_dir)
    return runs.assert_loss_fell(run_dir)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "srun"])
def test_two_slurm_nodes_train_the_bundled_model(
    jobkit: Jobkit, slurm_cluster: object, figures: Figures, launcher: str
) -> None:
    """examples/slurm-2node.yaml: one torchrun per node (c10d on n1), or one srun task per rank."""
    record, run_dir = _finished(
        jobkit, "examples/slurm-2node.yaml", "--set", f"launch.launcher={launcher}", *SMALL_TRAINING
    )
    first, last = _check_trained(run_dir, "torchrun" if launcher == "torchrun" else "slurm")
    per_process = (
        ["node-0.out", "node-1.out"] if launcher == "torchrun" else ["rank-0.out", "rank-1.out"]
    )
    for name in per_process:
        assert (run_dir / name).is_file(), sorted(p.name for p in run_dir.iterdir())
    if launcher == "torchrun":
        # c10d rendezvous on n1, at the port derived from the job id (docs/design.md).
        port = 15000 + int(record["scheduler_id"]) % 15000
        assert f"master n1:{port}" in Path(record["log_paths"]["out"]).read_text()

    # What a user looks at: the status table, the job's output and one rank's log.
    table = jobkit.run("status")
    assert table.returncode == 0 and re.search(
        rf"{record['jobkit_id']}\s+{record['scheduler_id']}\s+slurm-2node\s+slurm\s+SUCCEEDED",
        table.stdout,
    ), table.stdout
    # `jobkit logs ID` (and `submit --wait`) show the training, not just jobkit's lines:
    # rank 0's output (its host's node file, or rank-0.out under srun) and the job's .out.
    shown = jobkit.logs(record["jobkit_id"])
    assert "job step ended with exit code 0" in shown
    assert re.search(rf"^step {STEPS}/{STEPS} loss ", shown, re.M), shown
    assert f"step {STEPS}/{STEPS} loss" in record_wait_output(record), record  # [node N] ...
    merged = jobkit.logs(record["jobkit_id"], "--all-ranks")
    for rank in (0, 1):  # the trainer's own rank-R.log, each line prefixed once
        assert re.search(rf"^\[rank {rank}\] \S+ step {STEPS}/{STEPS} loss ", merged, re.M)
    assert " rank 0: " not in merged
    # --rank R shows the trainer's own rank-R.log, whichever launcher started it.
    for rank in (0, 1):
        shown = jobkit.logs(record["jobkit_id"], "--rank", str(rank))
        assert shown.rstrip("\n") == runs.rank_log(run_dir, rank).rstrip("\n"), shown
        assert f"step {STEPS}/{STEPS} loss" in shown, shown
    figures(
        launcher=launcher,
        job=record["scheduler_id"],
        first_loss=first,
        final_loss=last,
        elapsed_s=record["elapsed_s"],
        submit_to_succeeded_s=round(record["final_at"] - record["submitted_at"], 1),
    )


@pytest.mark.slow
def test_users_own_ddp_script_on_two_slurm_nodes(
    jobkit: Jobkit, slurm_cluster: object, figures: Figures
) -> None:
    """examples/own-script.yaml: a plain DDP script that reads only torchrun's variables."""
    record, run_dir = _finished(jobkit, "examples/own-script.yaml")
    # One torchrun per node; c10d rendezvous decides which node hosts rank 0.
    outputs = [(run_dir / f"node-{node}.out").read_text() for node in (0, 1)]
    ranks = [
        re.findall(r"^rank (\d)/2 \(local 0\) on cpu$", text, re.MULTILINE) for text in outputs
    ]
    assert sorted(ranks) == [["0"], ["1"]], outputs
    rank0 = outputs[ranks.index(["0"])]
    # --rank R finds the host's file through the note torchrun's worker left (ranks/R).
    for rank in ("0", "1"):
        shown = jobkit.logs(record["jobkit_id"], "--rank", rank)
        assert shown.rstrip("\n") == outputs[ranks.index([rank])].rstrip("\n"), (rank, shown)
    losses = [float(x) for x in re.findall(r"^epoch \d/3 loss (\S+)$", rank0, re.MULTILINE)]
    assert len(losses) == 3 and losses[-1] < losses[0], rank0
    figures(job=record["scheduler_id"], epoch_losses=losses, elapsed_s=record["elapsed_s"])


def test_a_missing_venv_fails_the_job_with_one_line(jobkit: Jobkit, slurm_cluster: object) -> None:
    """A batch job's environment can only be checked where it runs: the script's first check
    stops it, and its line is the job's failure reason."""
    sub = jobkit.submit("examples/slurm-2node.yaml", "--set", "env.venv=/opt/gone-venv", venv=False)
    assert sub.returncode != 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert record["state"] == "FAILED", record
    assert re.fullmatch(
        r"jobkit: env\.venv: /opt/gone-venv/bin/activate not found on n[12]", record["reason"]
    ), record
    assert f"- {record['reason']}" in sub.stderr, sub.explain()  # said by --wait too
    detail = jobkit.run("status", sub.jobkit_id).stdout
    assert f"reason      {record['reason']}" in detail, detail
