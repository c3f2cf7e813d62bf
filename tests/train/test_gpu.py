"""GPU runs (NCCL, bf16/fp16 autocast, GradScaler, the shared-GPU check). Skipped without CUDA."""

from __future__ import annotations

import json
import re

import pytest
import torch

from tests.train.launch import TINY_LM, Launcher
from train.resume.checkpoint import checkpoint_path, load_checkpoint

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def ranks() -> int:
    """Use two GPUs when there are, else one."""
    return min(2, torch.cuda.device_count())


def falls(losses: list[float]) -> bool:
    return len(losses) >= 10 and sum(losses[-3:]) < 0.8 * sum(losses[:3])


def test_nccl_bf16_training(launcher: Launcher) -> None:
    result = launcher.run(
        "bf16", "tiny-lm", (*TINY_LM, "train.steps=40", "amp.dtype=bf16"), nproc=ranks()
    )
    assert result.returncode == 0, result.explain()
    assert "device: cuda:0 backend: nccl" in result.stdout
    assert "amp: bf16" in result.stdout
    assert falls(result.losses()), result.losses()


def test_fp16_uses_a_grad_scaler_and_resumes_it(launcher: Launcher) -> None:
    overrides = (*TINY_LM, "train.steps=20", "amp.dtype=fp16", "amp.init_scale=1024")
    first = launcher.run("fp16", "tiny-lm", (*overrides, "train.stop_after_step=10"), nproc=ranks())
    assert "amp: fp16 (GradScaler)" in first.stdout, first.explain()
    assert re.search(r"^step 10/20 .* loss_scale \d+", first.stdout, re.M)
    saved = load_checkpoint(checkpoint_path(first.run_dir / "checkpoints", 10))
    assert saved["scaler"] is not None and saved["scaler"]["scale"] > 0
    second = launcher.run("fp16", "tiny-lm", overrides, nproc=ranks())
    assert second.returncode == 0, second.explain()
    assert "resumed from step 10 (" in second.stdout
    records = [json.loads(x) for x in (second.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all("loss_scale" in record for record in records)


def test_health_check_on_gpus(launcher: Launcher) -> None:
    result = launcher.run("check", None, (), nproc=ranks(), extra=["--check"])
    assert result.returncode == 0, result.explain()
    assert f"check: world size {ranks()}, backend nccl" in result.stdout
    assert re.search(
        r"^check: rank 0 local_rank 0 host \S+ device cuda:0 uuid \S+", result.stdout, re.M
    )
    assert result.stdout.rstrip().endswith("check: healthy")


def test_two_ranks_on_one_gpu_are_refused(launcher: Launcher) -> None:
    """Both ranks see only GPU 0: the check and the trainer say so instead of NCCL's
    "Duplicate GPU detected" (or a hang)."""
    one_gpu = {"CUDA_VISIBLE_DEVICES": "0"}
    check = launcher.run("dupcheck", None, (), nproc=2, extra=["--check"], env=one_gpu)
    assert check.returncode != 0
    assert re.search(r"^check: FAILED: ranks 0, 1 on host \S+ share one GPU", check.stdout, re.M)
    train = launcher.run("duptrain", "tiny-lm", (*TINY_LM, "train.steps=2"), nproc=2, env=one_gpu)
    assert train.returncode != 0
    assert re.search(r"^train: ranks 0, 1 on host \S+ share one GPU", train.stderr, re.M), (
        train.explain()
    )
