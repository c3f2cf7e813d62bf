"""fp16 dynamic loss scaling: the GradScaler from `amp.*`, and a count of skipped steps."""

from __future__ import annotations

import re
import warnings

import torch

from train.config.load import AmpConfig

SCHEDULER_BEFORE_OPTIMIZER = "Detected call of `lr_scheduler.step()` before `optimizer.step()`"


def build_scaler(config: AmpConfig, device: torch.device, enabled: bool) -> torch.amp.GradScaler:
    """A GradScaler with amp.init_scale, growth_factor, backoff_factor and growth_interval."""
    return torch.amp.GradScaler(
        device.type,
        init_scale=config.init_scale,
        growth_factor=config.growth_factor,
        backoff_factor=config.backoff_factor,
        growth_interval=config.growth_interval,
        enabled=enabled,
    )


def fp16_autocast_works(device_type: str) -> bool:
    """Whether autocast to float16 runs on this device type (CPU: recent torch only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unsupported dtype warns and disables autocast
        try:
            with torch.autocast(device_type, dtype=torch.float16):
                out = torch.mm(torch.ones(2, 2), torch.ones(2, 2))
        except (RuntimeError, AssertionError):
            return False
    return out.dtype == torch.float16


class OverflowCounter:
    """Counts optimizer steps the GradScaler skipped for inf/NaN gradients.

    A skipped step is one after which `update()` lowered the scale (backoff_factor < 1). The
    count stays a tensor on the device: reading it (`total()`) is the only synchronisation,
    done when a metrics line is written.
    """

    def __init__(self, device: torch.device) -> None:
        self._count = torch.zeros((), dtype=torch.int64, device=device)
        self._reported = 0
        # A skipped first step makes torch warn that the LR scheduler stepped before the
        # optimizer: expected with a GradScaler, and counted here instead.
        warnings.filterwarnings("ignore", message=re.escape(SCHEDULER_BEFORE_OPTIMIZER))

    def step_and_update(
        self, scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer
    ) -> None:
        """`scaler.step(optimizer)` and `scaler.update()`, counting a skipped step."""
        before = scaler._scale.clone() if scaler._scale is not None else None
        scaler.step(optimizer)
        scaler.update()
        if before is not None and scaler._scale is not None:
            self._count += scaler._scale < before

    def total(self) -> int:
        """Steps skipped since this process started."""
        return int(self._count.item())

    def since_last_report(self) -> tuple[int, int]:
        """(skipped since the previous call, skipped in all)."""
        total = self.total()
        new, self._reported = total - self._reported, total
        return new, total
