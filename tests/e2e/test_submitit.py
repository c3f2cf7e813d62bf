"""The bundled trainer through the submitit backend, on the same Slurm: 2 tasks, 2 nodes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobkit.backends.submitit.backend import RENDER_NOTE, TOKEN_PLACEHOLDER
from tests.e2e import runs
from tests.e2e.cli import Jobkit, trainer_sets
from tests.e2e.conftest import Figures

pytestmark = pytest.mark.slurm

STEPS = 40


@pytest.mark.slow
def test_submitit_runs_the_trainer_on_two_tasks(
    jobkit: Jobkit, slurm_cluster: object, figures: Figures
) -> None:
    """examples/submitit.yaml on 2 nodes x 1 task (each test node has 1 CPU, so the example's
    1 node x 2 tasks could never be placed here)."""
    options = [
        "--set",
        "resources.nodes=2",
        "--set",
        "launch.nproc_per_node=1",
        *trainer_sets(train__steps=STEPS),
    ]
    rendered = jobkit.run("render", "examples/submitit.yaml", *jobkit.common_sets(), *options)
    assert rendered.returncode == 0, rendered.stderr
    sub = jobkit.submit("examples/submitit.yaml", *options)
    assert sub.returncode == 0, sub.explain()
    assert sub.scheduler_id.isdigit(), sub.scheduler_id
    record = jobkit.status(sub.jobkit_id)
    assert (record["backend"], record["state"], record["raw_state"]) == (
        "submitit",
        "SUCCEEDED",
        "COMPLETED",
    ), record
    assert record["nodes"] == "n[1-2]", record
    folder = Path(record["log_paths"]["run_dir"])
    # `jobkit render` printed the file submitit submitted, but for jobkit's note and the token.
    submitted = (folder / f"{sub.scheduler_id}_submission.sh").read_text()
    token = re.search(r"--comment='?jobkit:([0-9a-z]+)", submitted)
    assert token is not None, submitted
    note = RENDER_NOTE.format(placeholder=TOKEN_PLACEHOLDER)
    assert note in rendered.stdout
    note_free = rendered.stdout.replace(note, "")
    assert submitted.replace(token.group(1), TOKEN_PLACEHOLDER) == note_free
    for task in (0, 1):
        assert (folder / f"{sub.scheduler_id}_{task}_log.out").is_file()
    for rank in (0, 1):
        log = runs.rank_log(folder, rank)
        assert f"rank={rank}" in log and "world_size=2" in log, log
        assert f"node_rank={rank} num_nodes=2" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    first, last = runs.assert_loss_fell(folder)
    assert STEPS in runs.checkpoint_steps(folder)
    assert f"step {STEPS}/{STEPS} loss" in jobkit.logs(sub.jobkit_id)  # task 0's output
    figures(
        job=sub.scheduler_id,
        first_loss=first,
        final_loss=last,
        submit_to_succeeded_s=round(sub.seconds, 1),
    )
