"""Dataset plug-ins that pace the bundled trainer, for the interruption and progress tests.

The bundled character windows of train/data/corpus.txt, with a sleep before every sample,
so a step takes about `batch_size_per_rank * delay_s` whatever the load on the machine.
The interruption tests need a run that is still training when they interrupt it, and one
whose length does not depend on how busy the 2 cores are. Used through the trainer's
plug-in interface (`data.name: tests.e2e.paced_data:paced_chars`), which the trainer
imports from its working directory: the repository root the tests submit from.
"""

from __future__ import annotations

import time

import torch

from train.parts.data import CharWindows, SyntheticBlobs


class PacedCharWindows(CharWindows):
    """CharWindows that sleeps `delay_s` before handing out each sample."""

    def __init__(self, delay_s: float, context: int) -> None:
        super().__init__(None, context, None)
        self.delay_s = delay_s

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay_s)
        return super().__getitem__(index)


def paced_chars(delay_s: float = 0.01, context: int = 64) -> PacedCharWindows:
    """The trainer's factory: `data.args: {delay_s: 0.01, context: 64}`."""
    return PacedCharWindows(float(delay_s), int(context))


class PacedBlobs(SyntheticBlobs):
    """The mlp config's SyntheticBlobs that sleeps `delay_s` before handing out each sample:
    a run lasts steps x batch x delay_s seconds, at a few milliseconds of CPU a step."""

    def __init__(self, delay_s: float, **blobs: float) -> None:
        super().__init__(
            samples=int(blobs["samples"]),
            features=int(blobs["features"]),
            classes=int(blobs["classes"]),
            separation=float(blobs["separation"]),
            seed=int(blobs.get("seed", 0)),
        )
        self.delay_s = delay_s

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay_s)
        return super().__getitem__(index)


def paced_blobs(delay_s: float = 0.001, **blobs: float) -> PacedBlobs:
    """The trainer's factory: `data.args: {delay_s: 0.001, samples: 4096, ...}` (the mlp
    config's args plus delay_s)."""
    return PacedBlobs(float(delay_s), **blobs)
