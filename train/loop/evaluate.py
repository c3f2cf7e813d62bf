"""Evaluation on the validation split: every rank its own shard, the sums all-reduced.

Rank r evaluates samples r, r + W, r + 2W, ... of the validation set (W ranks; no padding,
so shards differ by at most one sample). Each rank adds up its loss over every target
element, the element count, the correct predictions (cross entropy) and the samples; one
all-reduce of those sums gives every rank the same exact figures (a sum of losses over a
sum of counts, not a mean of per-rank means). The model runs bare (not through DDP, whose
forward may talk to the other ranks) in eval mode under the training autocast, and nothing
here draws from the global random generators, so evaluating does not change training.
With your own loss or step (train/parts/userstep.py) val_loss is its batch mean weighted by the
batch's samples, and a step that draws random numbers draws from a copy of the generators.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from train.parts.data import to_device

LOWER_IS_BETTER = {"val_loss": True, "val_acc": False}
"""The metrics `checkpoint.keep_best` may name, and which way is better."""


def loss_sums(kind: str, outputs: torch.Tensor, targets: torch.Tensor) -> tuple[Any, int, Any]:
    """(summed loss, element count, correct predictions or 0) of one batch, for
    `model.loss` `kind`: the training loss is the first over the second."""
    if kind == "cross_entropy":
        logits = outputs.reshape(-1, outputs.shape[-1]).float()
        flat = targets.reshape(-1)
        summed = F.cross_entropy(logits, flat, reduction="sum")
        return summed, flat.numel(), (logits.argmax(dim=-1) == flat).sum()
    summed = F.mse_loss(outputs.float(), targets.float(), reduction="sum")
    return summed, max(outputs.numel(), targets.numel()), 0


def batch_samples(batch: Any) -> int:
    """The samples in a batch: the first dimension of its first tensor (depth first)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else 1
    items = batch.values() if isinstance(batch, dict) else batch
    if isinstance(items, (list, tuple)) or isinstance(batch, dict):
        for item in items:
            found = batch_samples(item)
            if found:
                return found
    return 0


def shard(size: int, rank: int, world_size: int) -> range:
    """The validation samples rank `rank` evaluates."""
    return range(rank, size, world_size)


def is_better(metric: str, value: float, best: float | None) -> bool:
    """Whether `value` of `metric` beats the best so far (strictly; None: no best yet)."""
    if best is None or math.isnan(best):
        return not math.isnan(value)
    return value < best if LOWER_IS_BETTER[metric] else value > best


class Evaluator:
    """One rank's evaluation: when it is due, and the all-reduced metrics."""

    def __init__(
        self,
        dataset: Dataset[Any],
        *,
        rank: int,
        world_size: int,
        batch_size: int,
        max_batches: int,
        num_workers: int,
        loss_kind: str,
        perplexity: bool,
        device: torch.device,
        amp_dtype: torch.dtype | None,
        every_steps: int,
        every_epochs: int,
        epoch: int,
        step_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    ) -> None:
        self.size = len(dataset)  # type: ignore[arg-type]
        self.part = Subset(dataset, shard(self.size, rank, world_size))
        self.batch_size = batch_size
        self.max_batches = max_batches
        self.num_workers = num_workers
        self.loss_kind = loss_kind
        self.perplexity = perplexity
        self.device = device
        self.amp_dtype = amp_dtype
        self.every_steps = every_steps
        self.every_epochs = every_epochs
        self.epoch = epoch
        """The data stream's epoch at the last check (an epoch boundary is a change)."""
        self.step_fn = step_fn
        """Your own loss or step: val_loss is its mean over samples (no val_acc)."""

    def describe(self, world_size: int) -> str:
        """The start-of-run line: when, on how many samples."""
        when = [f"every {self.every_steps} steps"] if self.every_steps else []
        when += [f"every {self.every_epochs} epochs"] if self.every_epochs else []
        limit = f", at most {self.max_batches} batches per rank" if self.max_batches else ""
        return (
            f"{' and '.join(when)} and after the last step, on {self.size} validation samples"
            f" ({len(self.part)} on this rank of {world_size}, batch {self.batch_size}{limit})"
        )

    def due(self, step: int, epoch: int, total: int) -> bool:
        """After optimizer step `step` (the stream now in `epoch`): whether to evaluate.

        Every `every_steps` steps, when an epoch that is a multiple of `every_epochs` was
        completed, and after the last step."""
        crossed = epoch != self.epoch
        completed = range(self.epoch + 1, epoch + 1)
        self.epoch = epoch
        if step == total or (self.every_steps and step % self.every_steps == 0):
            return True
        return bool(
            crossed and self.every_epochs and any(e % self.every_epochs == 0 for e in completed)
        )

    def _loader(self) -> DataLoader[Any]:
        # Its own generator: making an iterator must not draw from the global RNG.
        return DataLoader(
            self.part,
            batch_size=self.batch_size,
            shuffle=False,
            num_workers=self.num_workers,
            generator=torch.Generator(),
        )

    def run(self, module: nn.Module, tick: Callable[[], None] | None = None) -> dict[str, Any]:
        """Evaluate `module` (the bare model) on this rank's shard; every rank returns the
        same metrics: val_loss, val_acc (cross entropy), val_ppl (token data), val_samples."""
        sums = torch.zeros(4, dtype=torch.float64, device=self.device)
        was_training = module.training
        module.eval()
        # Your own step may draw random numbers: from a copy of the generators, so that
        # evaluating does not change what training draws next.
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        try:
            with torch.no_grad(), torch.random.fork_rng(cuda, enabled=self.step_fn is not None):
                for index, batch in enumerate(self._loader()):
                    if self.max_batches and index >= self.max_batches:
                        break
                    batch = to_device(batch, self.device)
                    with torch.autocast(
                        self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None
                    ):
                        if self.step_fn is not None:
                            samples = batch_samples(batch)
                            mean = self.step_fn(module, batch)
                            summed, count, correct = mean.float() * samples, samples, 0
                        else:
                            inputs, targets = batch
                            samples = targets.shape[0]
                            outputs = module(inputs)
                    if self.step_fn is None:
                        summed, count, correct = loss_sums(self.loss_kind, outputs, targets)
                    sums[0] += summed.double()
                    sums[1] += count
                    sums[2] += correct
                    sums[3] += samples
                    if tick is not None:
                        tick()
        finally:
            module.train(was_training)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sums)
        loss_sum, count, correct, samples = sums.tolist()
        loss = loss_sum / count if count else math.nan
        metrics: dict[str, Any] = {"val_loss": loss}
        if self.loss_kind == "cross_entropy" and self.step_fn is None:
            metrics["val_acc"] = correct / count if count else math.nan
        if self.perplexity:
            metrics["val_ppl"] = math.exp(loss) if loss < 700 else math.inf
        metrics["val_samples"] = int(samples)
        return metrics
