"""`train.fit`: the bundled loop from your own script, with your own model, data, loss or step.

    import train
    sys.exit(train.fit("my.yaml", model=net, data=dataset, step=training_step))

It does what `python -m train --config my.yaml --set ...` does (launcher detection, DDP, AMP,
accumulation, checkpoints, resume, preemption, evaluation, logs) with the objects you give
in place of the config's `model.name`, `data.name`, `data.val`, `model.loss` or `train.step`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from train.cli import EXIT_USAGE, prepare, train_rank
from train.startup import import_torch_quietly

if TYPE_CHECKING:
    from torch import nn

    from train.parts.userstep import LossFn, StepFn


def fit(
    config: str | Path,
    overrides: Sequence[str] = (),
    *,
    model: nn.Module | None = None,
    data: Any = None,
    val_data: Any = None,
    loss: LossFn | None = None,
    step: StepFn | None = None,
) -> int:
    """Train this process's rank as `python -m train` would; returns its exit code: 0 (done),
    75 (stopped by a preemption signal or train.stop_after_step: run it again to resume),
    2 (a bad config or argument: one line on stderr).

    `config` is a bundled config name or a YAML path, `overrides` `key=value` words as
    `--set` takes them. `model` (an nn.Module), `data` and `val_data` (map-style Datasets),
    `loss` (`loss(outputs, targets) -> scalar tensor`, on (inputs, targets) batches) and
    `step` (`training_step(model, batch) -> scalar tensor`, the model DDP-wrapped, the batch
    on the device, inside autocast) replace what the config names; give loss or step, not both.
    """
    import_torch_quietly()
    from train.parts.userstep import UserParts

    parts = UserParts(model=model, data=data, val_data=val_data, loss=loss, step=step)
    problem = parts.problem()
    if problem is not None:
        print(f"train.fit: {problem}", file=sys.stderr)
        return EXIT_USAGE
    prepared = prepare(str(config), overrides)
    if isinstance(prepared, int):
        return prepared
    loaded, env = prepared
    assert loaded is not None  # a config was given
    return train_rank(loaded, env, parts)
