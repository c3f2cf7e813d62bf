"""Your own training step, run by jobkit's bundled loop (DDP, AMP, accumulation, checkpoints,
preemption and resume stay the trainer's).

The step trains a classifier on two noisy views of each batch: cross entropy on the first
view plus a consistency term between the two views' predictions, something a plain
`loss(outputs, targets)` cannot say (it calls the model twice). Two ways to use it:

1. As a plug-in of `python -m train` (examples/own-step.yaml): run from the repository root,

       python -m train --config mlp --set train.step=examples.own_step:make_step \\
           --set train.step_args='{noise: 0.3}'

2. From your own script, with your own model object (the Python API, `train.fit`):

       python examples/own_step.py --steps 60
       torchrun --standalone --nproc-per-node 2 examples/own_step.py
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def make_step(
    info: dict[str, Any], noise: float = 0.3, consistency: float = 0.5
) -> Callable[[nn.Module, Any], torch.Tensor]:
    """The `train.step` factory: called once as make_step(info, **train.step_args)."""

    def training_step(model: nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = batch
        first = model(inputs + noise * torch.randn_like(inputs))
        second = model(inputs + noise * torch.randn_like(inputs))
        agree = F.mse_loss(first.softmax(-1), second.softmax(-1))
        return F.cross_entropy(first.float(), targets) + consistency * agree.float()

    return training_step


def main() -> int:
    """Train the bundled `mlp` config's data with this script's own model and step."""
    import train

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    # Every rank builds the same model (DDP also copies rank 0's weights to the others).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    overrides = [f"train.steps={args.steps}", "name=own-step", *args.overrides]
    return train.fit("mlp", overrides, model=model, step=make_step({}, noise=0.3))


if __name__ == "__main__":
    sys.exit(main())
