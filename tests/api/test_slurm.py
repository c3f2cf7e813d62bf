"""jobkit.api on the real Slurm cluster: examples/api_sweep.py (a sweep as one array job, the
best task by final val_loss, a longer run of it) and a function on two nodes whose rank 1
raises, re-raised here with that rank's traceback."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

import jobkit

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 420.0


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_sweep", REPO / "examples" / "api_sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_sweep_example_on_slurm(
    workdir: Path, slurm_cluster: object, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _example()
    longer = example.main(
        "slurm",
        {"resources.partition": "debug"},
        learning_rates=["1e-2", "1e-3"],
        short_steps=6,
        long_steps=10,
    )
    printed = capsys.readouterr().out
    tasks = [j for j in jobkit.jobs(all=True) if j.sweep_id is not None]
    assert sorted(t.task or "" for t in tasks) == ["0", "1"]
    array = {(t.scheduler_id or "").split("_")[0] for t in tasks}
    assert len(array) == 1 and all("_" in (t.scheduler_id or "") for t in tasks)  # one array
    losses = {t.task: example.final_val_loss(t) for t in tasks}
    assert all(loss < float("inf") for loss in losses.values()), printed
    best = min(tasks, key=example.final_val_loss)
    best_lr = jobkit.sweep(best.sweep_id or "").overrides(best)["optim.lr"]
    assert (longer.backend, longer.state, longer.exit_code) == ("slurm", "SUCCEEDED", 0)
    overrides = longer.record.spec["run"]["train"]["overrides"]
    assert (overrides["optim.lr"], overrides["train.steps"]) == (best_lr, "10")
    steps = [r["step"] for r in longer.metrics() if "val_loss" in r]
    assert steps == [10]
    assert f"best: task {best.task} ({{'optim.lr': '{best_lr}'}})" in printed


def test_a_function_raising_on_rank_1_of_2_slurm_nodes(
    workdir: Path, slurm_cluster: object
) -> None:
    def fails_on_rank_1() -> str:
        if os.environ["RANK"] == "1":
            raise RuntimeError(f"rank 1 of {os.environ['WORLD_SIZE']} gives up")
        return "fine"

    spec = {
        "name": "fn-2node",
        "backend": "slurm",
        "resources": {"nodes": 2, "partition": "debug", "time": "00:05:00"},
        "launch": {"nproc_per_node": 1},
    }
    job = jobkit.submit_function(fails_on_rank_1, spec=spec)
    with pytest.raises(jobkit.FunctionError) as caught:
        job.result(timeout=TIMEOUT_S)
    err = caught.value
    assert err.rank == 1
    assert err.summary == "RuntimeError: rank 1 of 2 gives up"
    assert err.remote_traceback.rstrip().endswith("RuntimeError: rank 1 of 2 gives up")
    assert "in fails_on_rank_1" in err.remote_traceback
    assert (job.backend, job.state) == ("slurm", "FAILED")
