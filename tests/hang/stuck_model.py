"""Test-only model plug-in (`model.name: tests.hang.stuck_model:stuck_mlp`): the bundled MLP
whose forward all-reduces a probe tensor every step; at step `hang_step` rank `hang_rank`
sleeps just before that all-reduce, so every other rank blocks inside it: a real hang in a
collective, as a stuck rank makes one. Loaded by the trainer through train/parts/plugins.py (the
job runs from the repository root, so `tests` is importable); the trainer has no knob for it.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from train.parts.models import MlpClassifier


def sleep_before_all_reduce(seconds: float) -> None:
    """Where the stuck rank sits (its innermost Python frame in py-spy's dump)."""
    time.sleep(seconds)


class StuckMlp(nn.Module):
    """MlpClassifier plus one all-reduce per forward; one rank sleeps before it once."""

    def __init__(self, mlp: nn.Module, hang_rank: int, hang_step: int, sleep_s: float) -> None:
        super().__init__()
        self.mlp = mlp
        self.hang_rank, self.hang_step, self.sleep_s = hang_rank, hang_step, sleep_s
        self.calls = 0

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        rank = dist.get_rank() if dist.is_initialized() else 0
        if self.calls == self.hang_step and rank == self.hang_rank:
            sleep_before_all_reduce(self.sleep_s)
        probe = torch.ones(1)
        if dist.is_initialized():
            dist.all_reduce(probe)  # the other ranks wait here for the sleeping one
        out: torch.Tensor = self.mlp(inputs)
        return out


def stuck_mlp(
    info: dict[str, Any],
    hang_rank: int = 1,
    hang_step: int = 20,
    sleep_s: float = 600.0,
    **mlp_args: Any,
) -> nn.Module:
    """The factory `model.name` names; `model.args` pick the rank, step and sleep."""
    mlp = MlpClassifier(info["in_features"], info["num_classes"], **mlp_args)
    return StuckMlp(mlp, hang_rank, hang_step, sleep_s)
