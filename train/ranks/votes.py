"""Stop votes: when the ranks all-reduce (stop flag, loss), so that they all stop together."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Votes:
    """One step's all-reduced votes: did any rank get a stop signal, the sum of the losses."""

    stop: bool
    loss_sum: float


class StepVotes:
    """The all-reduce of (stop flag, loss), started after a voting step and read at the next
    one (VoteCadence): it overlaps training instead of holding every rank at a barrier.

    `collect()` returns the pending votes (waiting for them) or None when none is pending.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pending: tuple[dist.Work, torch.Tensor] | None = None

    def start(self, stop: bool, loss: torch.Tensor) -> None:
        """All-reduce this step's (stop, loss) in the background."""
        flag = torch.tensor(1.0 if stop else 0.0, dtype=torch.float64, device=self.device)
        packed = torch.stack([flag, loss.detach().double()])
        work = dist.all_reduce(packed, async_op=True)
        assert work is not None
        self._pending = (work, packed)

    def collect(self) -> Votes | None:
        """The votes started last, once reduced; None when they were collected already."""
        if self._pending is None:
            return None
        work, packed = self._pending
        self._pending = None
        work.wait()
        stop_votes, loss_sum = packed.tolist()
        return Votes(stop=stop_votes > 0, loss_sum=loss_sum)


class VoteCadence:
    """How many steps apart the ranks vote on stopping: about `every_s` seconds of training.

    Every step votes until PROBE_STEPS steps after the first have been timed; then the ranks
    agree (the slowest rank's mean step time) on a number of steps, so that a fast step does
    not pay for an all-reduce each time. A stop signal is then acted on within about two
    vote intervals. `every_s` 0 keeps a vote after every step.
    """

    PROBE_STEPS = 10
    MAX_STEPS = 1000

    def __init__(self, every_s: float, start_step: int) -> None:
        self.every_s = every_s
        self.steps = 1
        self._probe_from = start_step + 1  # the first step (warm-up) is not timed
        self._probe_to = self._probe_from + self.PROBE_STEPS
        self._probe_start = 0.0

    def probe_due(self, step: int) -> bool:
        """True at the step after which the ranks agree on the cadence (same on all ranks)."""
        if step == self._probe_from:
            self._probe_start = time.perf_counter()
        return self.every_s > 0 and step == self._probe_to

    def agree(self, device: torch.device) -> float:
        """All-reduce the slowest mean step time, set the cadence from it and return it."""
        mean = (time.perf_counter() - self._probe_start) / self.PROBE_STEPS
        reduced = torch.tensor([mean], dtype=torch.float64, device=device)
        dist.all_reduce(reduced, op=dist.ReduceOp.MAX)
        slowest = float(reduced.item())
        self.steps = steps_between_votes(slowest, self.every_s, self.MAX_STEPS)
        return slowest

    def votes_at(self, step: int) -> bool:
        """True when the ranks vote after `step`."""
        return step % self.steps == 0


def steps_between_votes(step_s: float, every_s: float, most: int) -> int:
    """About `every_s` seconds of `step_s`-long steps, between 1 and `most`."""
    if every_s <= 0 or step_s <= 0:
        return 1
    return max(1, min(most, int(every_s / step_s)))
