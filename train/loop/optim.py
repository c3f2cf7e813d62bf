"""Optimizer and learning-rate schedule (linear warmup, then cosine decay or constant)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch.optim.lr_scheduler import LambdaLR

from train.config.load import OptimConfig


def build_optimizer(
    params: Iterable[torch.nn.Parameter], config: OptimConfig, lr: float
) -> torch.optim.Optimizer:
    """AdamW or SGD over `params` at learning rate `lr` (already scaled for the world size)."""
    if config.name == "adamw":
        return torch.optim.AdamW(
            params, lr=lr, betas=config.betas, eps=config.eps, weight_decay=config.weight_decay
        )
    return torch.optim.SGD(
        params,
        lr=lr,
        momentum=config.momentum,
        nesterov=config.nesterov and config.momentum > 0,
        weight_decay=config.weight_decay,
    )


def lr_factor(step: int, total_steps: int, config: OptimConfig) -> float:
    """The multiple of the base lr used at optimizer step `step` (0-based)."""
    if config.warmup_steps and step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    if config.schedule == "constant":
        return 1.0
    span = max(1, total_steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine


def build_scheduler(
    optimizer: torch.optim.Optimizer, config: OptimConfig, total_steps: int
) -> LambdaLR:
    """A LambdaLR stepping once per optimizer step."""
    return LambdaLR(optimizer, lambda step: lr_factor(step, total_steps, config))
