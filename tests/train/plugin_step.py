"""Plug-in losses and training steps for tests/train/test_own_step.py (`model.loss`,
`train.step`), and wrong ones whose mistakes must be one line."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

Step = Callable[[nn.Module, Any], torch.Tensor]


def make_cross_entropy(info: dict[str, Any]) -> Callable[[Any, Any], torch.Tensor]:
    """The bundled cross entropy written as a plug-in: it must train bit-identically."""

    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]).float(), targets.reshape(-1))

    return loss


def make_smoothed(info: dict[str, Any], smoothing: float = 0.0) -> nn.Module:
    """A loss module (label smoothing): moved to the device, no parameters."""
    return nn.CrossEntropyLoss(label_smoothing=smoothing)


def make_plain_step(info: dict[str, Any]) -> Step:
    """The bundled step written as a plug-in step: it must train bit-identically."""

    def step(model: nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = batch
        return F.cross_entropy(model(inputs).float(), targets)

    return step


def make_two_view_step(info: dict[str, Any], noise: float = 0.3) -> Step:
    """Two noisy views per batch (two forward passes, global RNG): cross entropy on both."""

    def step(model: nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = batch
        first = model(inputs + noise * torch.randn_like(inputs))
        second = model(inputs + noise * torch.randn_like(inputs))
        return (F.cross_entropy(first.float(), targets) + F.cross_entropy(second, targets)) / 2

    return step


def not_callable(info: dict[str, Any]) -> int:
    return 42


def make_weighted(info: dict[str, Any]) -> nn.Module:
    """A loss with a trainable parameter the optimizer would never see: refused."""
    return nn.Linear(2, 2)


def make_vector_step(info: dict[str, Any]) -> Step:
    """Forgets the mean: returns one loss per sample."""

    def step(model: nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = batch
        return F.cross_entropy(model(inputs), targets, reduction="none")

    return step


def make_collector_probe_step(info: dict[str, Any]) -> Step:
    """The bundled step, which first prints whether the garbage collector is on and how many
    objects are frozen (tests/train/test_startup.py)."""
    said = False

    def step(model: nn.Module, batch: Any) -> torch.Tensor:
        nonlocal said
        if not said:
            state = "on" if gc.isenabled() else "off"
            print(f"probe: collector {state}, {gc.get_freeze_count()} frozen", flush=True)
            said = True
        inputs, targets = batch
        return F.cross_entropy(model(inputs).float(), targets)

    return step
