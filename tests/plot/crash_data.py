"""A dataset plug-in that kills its own trainer once, for `jobkit plot`'s restart tests.

The bundled character windows of train/data/corpus.txt; the first attempt of a run (no
`crashed-once` file in $JOBKIT_RUN_DIR yet) SIGKILLs its process when it hands out sample
number `after_samples`, as a node failure or the OOM killer would: no checkpoint is saved,
so torchrun's restart (launch.max_restarts) resumes from the last periodic checkpoint and
repeats the steps logged after it. Used as `data.name: tests.plot.crash_data:crash_once_chars`
(the trainer imports it from its working directory, the repository root).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import torch

from train.parts.data import CharWindows

MARKER = "crashed-once"


class CrashOnceCharWindows(CharWindows):
    """CharWindows whose first attempt dies at one sample."""

    def __init__(self, after_samples: int, context: int) -> None:
        super().__init__(None, context, None)
        self.after_samples = after_samples
        self.served = 0
        self.marker = Path(os.environ["JOBKIT_RUN_DIR"]) / MARKER

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.served += 1
        if self.served == self.after_samples and not self.marker.exists():
            self.marker.write_text(f"killed at sample {self.served}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(index)


def crash_once_chars(after_samples: int, context: int = 64) -> CrashOnceCharWindows:
    """The trainer's factory: `data.args: {after_samples: 245, context: 64}`."""
    return CrashOnceCharWindows(int(after_samples), int(context))
