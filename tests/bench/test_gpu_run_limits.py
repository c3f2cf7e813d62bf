"""What keeps bench/gpu.sh inside its 8 minutes and readable when it fails; no GPU needed.

- `interleave(..., deadline=)` starts no round that would end past the deadline, judged by the
  slowest round so far, and says how many rounds it kept (the first H200 bench run, cut by
  its timeout in round 5, kept nothing).
- `rank_error` names the rank's exception, not torchrun's ChildFailedError summary that hid
  it (the same day: the plain loop failed with "No module named 'pydantic'", unseen).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

import bench.measure
from bench.cases.trainer import rank_error
from bench.measure import interleave

# Shortened from the device's log of 2026-11-27 (plain_ddp.py under torchrun on an H200).
TORCHRUN_FAILURE = """\
Traceback (most recent call last):
  File "/work/main/bench/baselines/plain_ddp.py", line 29, in <module>
    from train.parts.data import CharWindows
  File "/work/main/train/config/load.py", line 18, in <module>
    from pydantic import BaseModel, ValidationError
ModuleNotFoundError: No module named 'pydantic'
E1127 12:38:24.100000 450 torch/distributed/elastic/multiprocessing/api.py:986] failed \
(exitcode: 1) local_rank: 0 (pid: 464) of binary: /opt/torch/.venv/bin/python
Traceback (most recent call last):
  File "/opt/torch/.venv/bin/torchrun", line 10, in <module>
    sys.exit(main())
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
/work/main/bench/baselines/plain_ddp.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
============================================================
"""


class FakeClock:
    """time.monotonic() for bench.measure, moved on by the runs themselves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(bench.measure.time, "monotonic", fake.monotonic)
    return fake


def runners(clock: FakeClock, seconds: list[float]) -> dict[str, bench.measure.Runner]:
    """Four contenders; each run takes the next of `seconds` on the fake clock."""
    pending = iter(seconds)

    def one() -> Mapping[str, float]:
        taken = next(pending)
        clock.now += taken
        return {"wall_s": taken}

    return {name: one for name in ("plain bf16", "trainer bf16", "plain fp16", "trainer fp16")}


def test_no_round_starts_that_would_end_past_the_deadline(clock: FakeClock) -> None:
    # Rounds of 80 s: round 2 would end at +240 s, past the deadline at +170 s.
    data = interleave(runners(clock, [20.0] * 20), 5, warmup=0, deadline=clock.now + 170)
    assert data.rounds == 2
    assert data.get("trainer fp16", "wall_s") == [20.0, 20.0]
    assert clock.now == 1160.0


def test_the_slowest_round_so_far_decides(clock: FakeClock) -> None:
    # Round 0 takes 100 s, round 1 only 40 s: at +140 s, round 2 (judged at 100 s) would end
    # at +240 s, past +200 s, although at round 1's pace it would have fitted.
    seconds = [25.0] * 4 + [10.0] * 4 + [10.0] * 12
    data = interleave(runners(clock, seconds), 5, warmup=0, deadline=clock.now + 200)
    assert data.rounds == 2


def test_every_round_runs_without_a_deadline_or_when_they_fit(clock: FakeClock) -> None:
    assert interleave(runners(clock, [20.0] * 20), 5, warmup=0).rounds == 5
    start = clock.now
    data = interleave(runners(clock, [20.0] * 20), 5, warmup=0, deadline=start + 400)
    assert data.rounds == 5
    assert len(data.get("plain bf16", "wall_s")) == 5


def test_the_first_round_always_runs(clock: FakeClock) -> None:
    data = interleave(runners(clock, [20.0] * 4), 5, warmup=0, deadline=clock.now - 1)
    assert data.rounds == 1


def test_a_failed_torchrun_names_the_ranks_exception() -> None:
    assert rank_error(TORCHRUN_FAILURE) == "ModuleNotFoundError: No module named 'pydantic'"


def test_a_prefixed_rank_line_is_read_too() -> None:
    output = "[rank0]: Traceback (most recent call last):\n[rank0]: RuntimeError: CUDA OOM\n"
    assert rank_error(output) == "RuntimeError: CUDA OOM"


def test_without_an_exception_line_the_last_lines_are_given() -> None:
    output = "one\ntwo\nthree\nfour\nKilled\n"
    assert rank_error(output) == "two | three | four | Killed"
