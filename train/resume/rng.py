"""Random-number-generator states as plain values (tensors, tuples) for checkpoints."""

from __future__ import annotations

import random
import sys
from typing import Any

import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, torch's (CPU and CUDA) and, if loaded, numpy's generators."""
    random.seed(seed)
    torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


def seed_per_rank(seed: int, rank: int) -> None:
    """Different streams for dropout and the like on each rank, fixed by the seed."""
    seed_everything(seed * 100_003 + 1 + rank)


def capture_rng() -> dict[str, Any]:
    """This process's generator states, loadable with torch.load(weights_only=True)."""
    cuda_ready = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if cuda_ready else [],
        "python": random.getstate(),
        "numpy": None,
    }
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        kind, keys, pos, has_gauss, cached = numpy.random.get_state()
        state["numpy"] = (kind, torch.as_tensor(keys.astype("int64")), pos, has_gauss, cached)
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put back what capture_rng() returned."""
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    numpy = sys.modules.get("numpy")
    if numpy is not None and state.get("numpy") is not None:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        numpy.random.set_state((kind, keys.numpy().astype("uint32"), pos, has_gauss, cached))
