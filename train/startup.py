"""The trainer process's start: what it imports, imported once, with the garbage collector
paused meanwhile.

Importing torch, torch._dynamo (every torch optimizer imports it when first built) and the
trainer builds ~480,000 objects that live as long as the process. With the cyclic collector
on, its collections walk them again and again: during the imports, in training steps, and
several times at exit (one full collection over torch's alone takes ~0.2 s here). So
`python -m train` pauses the collector before its first import; once the imports are done,
what they built is frozen (gc.freeze: kept, never walked again) and the collector resumes, so
that a collection looks only at what the run builds (the model, DDP, data: not frozen, so
that train/ranks/dist.py `shutdown` can still collect cycles holding the process group).
A 20-step tiny-lm run uses 31 % less CPU (7.88 -> 5.42 CPU-s; docs/benchmarks.md, 2026-11-28).
"""

from __future__ import annotations

import gc
import warnings

_paused_at_start = False
"""True from pause_collector_for_imports until import_torch_quietly has frozen the imports."""


def pause_collector_for_imports() -> None:
    """Turn the collector off until import_torch_quietly: for `python -m train` only.
    train.fit does not (a caller's own objects would be frozen with torch's)."""
    global _paused_at_start
    gc.disable()
    _paused_at_start = True


def import_torch_quietly(*, for_training: bool = False) -> None:
    """Import torch once without its 'Failed to initialize NumPy' warning (no numpy here);
    `for_training` also imports torch._dynamo and the training loop. After
    pause_collector_for_imports, freeze what the imports built and resume the collector
    (whatever the path: a process never runs on with the collector off)."""
    global _paused_at_start
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch

        if for_training:
            import torch._dynamo  # noqa: F401  (what torch.optim imports on its first use)

            import train.loop.loop  # noqa: F401
    if _paused_at_start:
        _paused_at_start = False
        gc.freeze()
        gc.enable()
