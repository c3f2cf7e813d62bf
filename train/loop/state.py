"""What set-up builds for one rank's run (TrainState), and the error that stops it early."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import Dataset, DistributedSampler

from train.env.launch import LaunchEnv
from train.loop.evaluate import Evaluator
from train.parts.data import BatchStream
from train.reporting.paths import RunPaths
from train.reporting.runlog import RunLog


class TrainSetupError(Exception):
    """The run cannot start as configured on this launch; one line, exit 2."""


@dataclass(eq=False)
class TrainState:
    """One rank's run as set up by `train.loop.setup.build_state`, and the little that changes as
    it trains (`start_step` once resumed, `last_loss`). `model` is what the step calls (the
    DDP or DataParallel wrapper, or `module` itself); `module` is the bare model."""

    env: LaunchEnv
    paths: RunPaths
    log: RunLog
    device: torch.device
    backend: str
    strategy: str
    amp_dtype: torch.dtype | None
    """The autocast dtype; None: no autocast."""
    dataset: Dataset[Any]
    info: dict[str, Any]
    """The dataset's info dict (sizes the model needs, tokens_per_sample)."""
    dataset_size: int
    sampler: DistributedSampler[Any]
    stream: BatchStream
    batch_size: int
    """Samples per rank per micro-step."""
    global_batch: int
    """Samples per optimizer step over all ranks."""
    tokens_per_sample: int | None
    module: nn.Module
    model: nn.Module
    lr: float
    optimizer: torch.optim.Optimizer
    scheduler: LambdaLR
    scaler: torch.amp.GradScaler
    total_steps: int
    """train.steps, or the steps train.epochs makes (train/loop/length.py)."""
    evaluator: Evaluator | None = None
    """Evaluation on the validation split; None when eval is off."""
    step_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None
    """Your own loss or training step (train/parts/userstep.py); None: the bundled loss."""
    best: dict[str, Any] | None = None
    """checkpoint.keep_best's best so far: {"metric", "value", "step"} (None: none yet)."""
    start_step: int = 0
    last_loss: float = math.nan
    """The mean loss over all ranks at the last step whose votes were read (NaN: none yet)."""

    RELEASED = ("model", "module", "optimizer", "scheduler", "scaler", "stream", "evaluator")

    def release(self) -> None:
        """Let go of the model, its optimizer and the data stream.

        DDP's reducer holds the process group: released here, the group is destroyed by
        `dist.shutdown()` rather than at interpreter teardown, where gloo's threads now and
        then abort or deadlock on the GIL (docs/e2e.md, "Your own DDP script").
        """
        for name in self.RELEASED:
            self.__dict__.pop(name, None)
