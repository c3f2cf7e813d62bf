"""Your own loss or training step: `model.loss` / `train.step` plug-ins and `train.fit` objects.

Both become one `StepFn(model, batch) -> loss` that the loop calls inside its autocast and
DDP `no_sync` contexts, with the batch already on the device. A plug-in loss
`loss(outputs, targets)` is wrapped as `loss(model(inputs), targets)`. With neither set the
loop keeps its own bundled step (the step function is None: no extra call per step).
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from train.config.load import LoadedConfig
from train.config.sections import BUILTIN_LOSSES
from train.loop.state import TrainSetupError
from train.parts.plugins import PluginArgsError, PluginError, call_factory

StepFn = Callable[[nn.Module, Any], torch.Tensor]
"""training_step(model, batch) -> the mean loss of the batch (a scalar tensor)."""
LossFn = Callable[[Any, Any], torch.Tensor]
"""loss(outputs, targets) -> the mean loss (a scalar tensor)."""


class StepError(TrainSetupError):
    """Your step or loss returned something that is not a scalar loss; one line, exit 2."""


def _checked(loss: object, what: str) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        shape = f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""
        raise StepError(
            f"{what} returned {shape or type(loss).__name__}, not a scalar tensor (the loss)"
        )
    return loss


def step_from_loss(loss_fn: LossFn, what: str) -> StepFn:
    """The step `loss_fn(model(inputs), targets)` over (inputs, targets) batches."""

    def step(model: nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = batch
        return _checked(loss_fn(model(inputs), targets), what)

    return step


def checked_step(step_fn: StepFn, what: str) -> StepFn:
    """`step_fn`, refusing a result that is not a scalar tensor (one line)."""

    def step(model: nn.Module, batch: Any) -> torch.Tensor:
        return _checked(step_fn(model, batch), what)

    return step


def loss_problem(loss_fn: object, what: str) -> str | None:
    """Why `loss_fn` cannot be a loss (one line), or None; `what` is the subject and verb
    (`pkg.mod:make_loss returned`, `loss= is`)."""
    if not callable(loss_fn):
        return f"{what} {type(loss_fn).__name__}, not a callable loss(outputs, targets)"
    if isinstance(loss_fn, nn.Module):
        trainable = sum(p.numel() for p in loss_fn.parameters() if p.requires_grad)
        if trainable:
            return (
                f"{what} a loss with {trainable} trainable parameters that the optimizer would"
                " not see: make them part of the model and compute the loss in a training step"
            )
    return None


def step_problem(step_fn: object, what: str) -> str | None:
    """Why `step_fn` cannot be a training step (one line), or None; `what` as loss_problem."""
    if not callable(step_fn):
        return f"{what} {type(step_fn).__name__}, not a callable training_step(model, batch)"
    return None


def build_step(loaded: LoadedConfig, info: dict[str, Any], device: torch.device) -> StepFn | None:
    """The configured plug-in step (train.step) or loss (model.loss), or None for the bundled
    loss. A factory is called as `factory(info, **args)`; a problem is a ConfigError."""
    config = loaded.config
    if config.train.step is not None:
        name = config.train.step
        step_fn = _call(loaded, name, "train.step", info)
        problem = step_problem(step_fn, f"{name} returned")
        if problem:
            raise loaded.error("train.step", problem)
        _to_device(step_fn, device)
        return checked_step(step_fn, f"train.step {name}")
    if config.model.loss in BUILTIN_LOSSES:
        return None
    name = config.model.loss
    loss_fn = _call(loaded, name, "model.loss", info)
    problem = loss_problem(loss_fn, f"{name} returned")
    if problem:
        raise loaded.error("model.loss", problem)
    _to_device(loss_fn, device)
    return step_from_loss(loss_fn, f"model.loss {name}")


def _call(loaded: LoadedConfig, import_path: str, key: str, info: dict[str, Any]) -> Any:
    """`factory(info, **args)`; a factory that does not load, or arguments that do not fit
    it, is a ConfigError against `key` or its `_args` key."""
    args_key = f"{key}_args"
    args = loaded.config.train.step_args if key == "train.step" else loaded.config.model.loss_args
    try:
        return call_factory(import_path, info, **args)
    except PluginArgsError as err:
        raise loaded.error(args_key, str(err)) from None
    except PluginError as err:
        raise loaded.error(key, str(err)) from None


def _to_device(part: object, device: torch.device) -> None:
    """A loss or step that is an nn.Module (buffers such as class weights) goes to the device."""
    if isinstance(part, nn.Module):
        part.to(device)


@dataclass(frozen=True)
class UserParts:
    """Objects given to `train.fit` in place of the config's model, data, loss or step."""

    model: nn.Module | None = None
    data: Any = None
    """A map-style Dataset of the training samples."""
    val_data: Any = None
    """A map-style Dataset for evaluation (default: eval.holdout of `data`)."""
    loss: LossFn | None = None
    step: StepFn | None = None

    def problem(self) -> str | None:
        """Why these objects cannot train (one line), or None."""
        if self.model is not None and not isinstance(self.model, nn.Module):
            return f"model= must be an nn.Module (got {type(self.model).__name__})"
        for name, data in (("data", self.data), ("val_data", self.val_data)):
            if data is not None and not (isinstance(data, Sized) and hasattr(data, "__getitem__")):
                return (
                    f"{name}= must be a map-style Dataset with __len__ and __getitem__"
                    f" (got {type(data).__name__})"
                )
        if self.loss is not None and self.step is not None:
            return "give loss= or step=, not both: a step computes its own loss"
        if self.loss is not None:
            return loss_problem(self.loss, "loss= is")
        return step_problem(self.step, "step= is") if self.step is not None else None

    def build_step(self, device: torch.device) -> StepFn | None:
        """The step these objects make, or None when they give neither loss nor step."""
        if self.step is not None:
            _to_device(self.step, device)
            return checked_step(self.step, "step=")
        if self.loss is not None:
            _to_device(self.loss, device)
            return step_from_loss(self.loss, "loss=")
        return None
