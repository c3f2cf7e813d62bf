"""A job that asks for GPUs trains on CUDA or stops with one clear line: never quietly on the
CPU. This machine has no GPU, so the real job below must fail (a Slurm GPU job cannot be
submitted here: the test cluster has no gres)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.cli import Jobkit

pytestmark = pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None,
    reason="a GPU machine: the no-GPU refusal cannot happen here",
)

REFUSAL = (
    "the job asked for 1 GPU(s) per node (resources.gpus_per_node) but no CUDA device is visible on"
)


def test_a_gpu_job_without_a_gpu_fails_and_says_why(tmp_path: Path) -> None:
    jobkit = Jobkit(workdir=tmp_path / "work", home=tmp_path / "home")
    jobkit.workdir.mkdir()
    spec = {
        "name": "gpu",
        "backend": "local",
        "resources": {"gpus_per_node": 1},
        "run": {"train": {"config": "mlp", "overrides": {"train.steps": 5}}},
    }
    (jobkit.workdir / "gpu.yaml").write_text(json.dumps(spec))
    done = jobkit.run("submit", "gpu.yaml", "--wait", timeout=180)
    assert done.returncode != 0
    assert REFUSAL in done.stdout, done.stdout  # rank 0's output, shown by --wait
    listed = json.loads(jobkit.run("status", "--json").stdout)
    assert len(listed) == 1
    job = listed[0]
    assert job["state"] == "FAILED"
    run_dir = Path(job["log_paths"]["run_dir"])
    assert not (run_dir / "checkpoints").exists() or not any((run_dir / "checkpoints").iterdir())
    metrics = run_dir / "metrics.jsonl"
    assert not metrics.exists() or metrics.read_text() == ""  # not one step was trained


def test_the_health_check_refuses_the_same_way(tmp_path: Path) -> None:
    env = {**os.environ, "JOBKIT_GPUS_PER_NODE": "1"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-m", "train", "--check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"train: {REFUSAL} ")
    assert done.stderr.rstrip().endswith(
        "CUDA_VISIBLE_DEVICES unset); not training on the CPU instead"
        " (train.device: cpu does that on purpose)"
    )
    # On purpose: the CPU, with a warning in the log.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "train",
            "--config",
            "mlp",
            "--set",
            "train.steps=2",
            "--set",
            "train.device=cpu",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "warning: the job asked for 1 GPU(s) per node, but train.device is cpu: training on"
        " the CPU" in done.stdout
    )
