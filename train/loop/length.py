"""How long a run trains: `train.steps` or `train.epochs`, the other derived from the data.

    length = derive_length(steps=None, epochs=2, samples=6400, batches_per_epoch=50,
                           grad_accum_steps=1, global_batch=64)
    length.steps            # 100
    length.describe()       # '100 steps = 2 epochs of 6400 samples at global batch 64 ...'

An epoch is one pass of the data stream (train/parts/data.py BatchStream): each rank's share of
the shuffled training samples in full batches (`batches_per_epoch` micro-batches per rank).
Epochs given: steps = ceil(epochs x batches_per_epoch / grad_accum_steps), so every sample
is seen at least `epochs` times, whatever the world size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class RunLength:
    """The run's optimizer steps and the epochs they make, as derived at the start."""

    steps: int
    epochs: Fraction
    given: str
    """Which key the config gave: `steps` or `epochs`."""
    samples: int
    """Samples in the training data."""
    samples_per_epoch: int
    """Samples an epoch uses: full batches on every rank (the rest is dropped)."""
    global_batch: int
    steps_per_epoch: Fraction

    def describe(self) -> str:
        """The start-of-run line: `200 steps = 2 epochs of 6400 samples at global batch 64`."""
        epochs = _number(self.epochs)
        text = (
            f"{self.steps} steps = {epochs} {'epoch' if epochs == '1' else 'epochs'} of"
            f" {self.samples} samples at global batch"
            f" {self.global_batch} (train.{self.given} given; {_number(self.steps_per_epoch)}"
            " steps per epoch"
        )
        dropped = self.samples - self.samples_per_epoch
        if dropped:
            text += f"; {dropped} samples of each shuffled epoch left out: not a full batch"
        return text + ")"


def _number(value: Fraction) -> str:
    """An exact value as written (`2`, `1.5`), else to 6 significant digits (`~1.33333`)."""
    if value.denominator == 1:
        return str(value.numerator)
    shown = f"{float(value):.6g}"
    return shown if Fraction(shown) == value else f"~{shown}"


def derive_length(
    *,
    steps: int | None,
    epochs: float | None,
    samples: int,
    batches_per_epoch: int,
    batch_size: int,
    world_size: int,
    grad_accum_steps: int,
) -> RunLength:
    """The run length from the one of `steps` and `epochs` the config gives."""
    steps_per_epoch = Fraction(batches_per_epoch, grad_accum_steps)
    if steps is None:
        assert epochs is not None
        wanted = Fraction(repr(float(epochs)))  # 0.1 is 1/10, not the float's binary value
        steps = max(1, math.ceil(wanted * steps_per_epoch))
        given = "epochs"
    else:
        given = "steps"
    return RunLength(
        steps=steps,
        epochs=Fraction(steps) / steps_per_epoch,
        given=given,
        samples=samples,
        samples_per_epoch=batches_per_epoch * batch_size * world_size,
        global_batch=batch_size * world_size * grad_accum_steps,
        steps_per_epoch=steps_per_epoch,
    )
