"""The README quickstart: `jobkit submit examples/quickstart.yaml --wait` on this machine."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e import runs
from tests.e2e.cli import Jobkit, trainer_sets
from tests.e2e.conftest import Figures

STEPS = 60


def test_quickstart_trains_with_two_local_processes(jobkit: Jobkit, figures: Figures) -> None:
    """Two DDP processes (gloo) through the local backend, with the Python jobkit runs with
    (the example names no venv: env.python auto)."""
    sub = jobkit.submit(
        "examples/quickstart.yaml", *trainer_sets(train__steps=STEPS), venv=False, timeout=400
    )
    assert sub.returncode == 0, sub.explain()
    # --wait streams the training: rank 0's lines come through node-0.out, the launcher's own
    # lines through the job's .out. The loss falls on the terminal.
    assert "jobkit: finished with exit code 0" in sub.stdout, sub.explain()
    shown = [float(x) for x in re.findall(r"^step \d+/\d+ loss (\S+) ", sub.stdout, re.M)]
    assert len(shown) == STEPS // 10 and shown[-1] < shown[0], sub.stdout
    assert "rank 0's output is in " in sub.stderr, sub.explain()
    # No stray warnings in what the user reads: torch finds NumPy (the train extra), torchrun
    # has OMP_NUM_THREADS and prints no banner.
    for noise in ("Failed to initialize NumPy", "Warning", "OMP_NUM_THREADS environment"):
        assert noise not in sub.stdout and noise not in sub.stderr, (noise, sub.explain())
    record = jobkit.status(sub.jobkit_id)
    assert (record["backend"], record["state"], record["exit_code"]) == ("local", "SUCCEEDED", 0)
    run_dir = Path(record["log_paths"]["run_dir"])
    assert (run_dir / "exit_code").read_text().splitlines()[0] == "0"
    node_out = (run_dir / "node-0.out").read_text()
    assert "Failed to initialize NumPy" not in node_out and "Warning" not in node_out, node_out
    for rank in (0, 1):
        log = runs.rank_log(run_dir, rank)
        assert f"launcher=torchrun rank={rank}" in log and "world_size=2" in log, log
        assert f"step {STEPS}/{STEPS} loss" in log, log
    first, last = runs.assert_loss_fell(run_dir)
    assert STEPS in runs.checkpoint_steps(run_dir)
    assert f"final loss {last!r}" in jobkit.logs(sub.jobkit_id, "--rank", "0")
    figures(
        first_loss=first,
        final_loss=last,
        submit_to_succeeded_s=round(sub.seconds, 1),
    )
