"""torch.profiler over a window of optimizer steps (`profile: {start_step, steps}`).

Every rank profiles the same steps and writes its own Chrome trace,
RUN/profile/rank-R.steps-A-B.pt.trace.json (chrome://tracing, Perfetto, or TensorBoard's
profiler plug-in, which reads `*.pt.trace.json`), then logs one summary table. Outside the
window nothing runs: the loop only compares the step number with the window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from train.config.load import ProfileConfig
from train.reporting.runlog import RunLog

PROFILE_DIR = "profile"
TABLE_ROWS = 15


def trace_path(run_dir: Path, rank: int, first: int, last: int) -> Path:
    """Where rank `rank` writes the trace of steps first..last."""
    return run_dir / PROFILE_DIR / f"rank-{rank}.steps-{first}-{last}.pt.trace.json"


class StepProfiler:
    """Profiles optimizer steps start_step .. start_step + steps - 1 (1-based, as logged).

    `begin(step)` before the step numbered `step`, `end(step)` after it; each profiled step is
    marked `step N` in the trace. `close()` finishes a window a stop cut short.
    """

    def __init__(
        self, config: ProfileConfig, run_dir: Path, rank: int, device: torch.device, log: RunLog
    ) -> None:
        self.first = config.start_step
        self.last = config.start_step + config.steps - 1
        self.run_dir = run_dir
        self.rank = rank
        self.device = device
        self.log = log
        self._profile: profile | None = None
        self._mark: Any = None
        self._started = 0
        self._done_step = 0

    def begin(self, step: int) -> None:
        """Start the profiler at the window's first step; mark each step inside it."""
        if step < self.first or step > self.last:
            return
        if self._profile is None:
            activities = [ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(ProfilerActivity.CUDA)
            self._profile = profile(activities=activities, record_shapes=False)
            self._profile.start()
            self._started = step
        self._mark = record_function(f"step {step}")
        self._mark.__enter__()

    def end(self, step: int) -> None:
        """Close the step's mark; after the window's last step, write the trace and table."""
        if self._mark is None:
            return
        self._mark.__exit__(None, None, None)
        self._mark = None
        self._done_step = step
        if step >= self.last:
            self.close()

    def close(self) -> None:
        """Stop the profiler if it runs; write the trace and log the summary table."""
        if self._profile is None:
            return
        prof, self._profile = self._profile, None
        if self._mark is not None:
            self._mark.__exit__(None, None, None)
            self._mark = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        prof.stop()
        first = self._started
        path = trace_path(self.run_dir, self.rank, first, self._done_step)
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(path))
        sort_by = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=sort_by, row_limit=TABLE_ROWS)
        self.log.info(
            f"profile: steps {first}-{self._done_step}, trace {path}"
            f" (top {TABLE_ROWS} by {sort_by})\n{table.rstrip()}"
        )


def step_profiler(
    config: ProfileConfig, run_dir: Path, rank: int, device: torch.device, log: RunLog
) -> StepProfiler | None:
    """A StepProfiler when `profile.steps` > 0, else None (the loop then does nothing)."""
    if config.steps <= 0:
        return None
    return StepProfiler(config, run_dir, rank, device, log)
