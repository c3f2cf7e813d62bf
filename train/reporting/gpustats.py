"""What the trainer logs about its GPU in each metrics record (`jobkit report` reads them)."""

from __future__ import annotations

import contextlib

import torch


def gpu_figures(device: torch.device) -> dict[str, float]:
    """Peak memory allocated on `device` so far (MB) and, where NVML is installed, the GPU's
    utilisation over the last sample period (%)."""
    figures = {"gpu_mem_peak_mb": torch.cuda.max_memory_allocated(device) / 2**20}
    # torch.cuda.utilization needs NVML (pynvml); without it the record has no utilisation.
    with contextlib.suppress(Exception):
        figures["gpu_util_pct"] = float(torch.cuda.utilization(device))
    return figures
