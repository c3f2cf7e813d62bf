"""Issue 24: "a sweep's ELAPSED is its longest task, not its wall time". A real local sweep
of 3 tasks of 3 s, 2 at a time: the sweep's line in `jobkit status` shows the array's wall
time (first task start to last task end: about 6 s), not its longest task (3 s) nor the
tasks' sum (9 s); each task's own line keeps its own time."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.manager.helpers import Invoke


def seconds(text: str) -> int:
    """`1:02` or `0:06` (status's ELAPSED) as seconds."""
    minutes, _, secs = text.rpartition(":")
    return int(minutes or 0) * 60 + int(secs)


def test_a_sweeps_elapsed_is_its_wall_time(jobkit: Invoke, workdir: Path) -> None:
    spec = workdir / "naps.yaml"
    command = ["bash", "-c", "sleep 3", "nap"]
    spec.write_text(
        "name: naps\nbackend: local\nlaunch:\n  launcher: none\n"
        f"run:\n  command: {json.dumps(command)}\n"
        "sweep:\n  grid:\n    n: ['1', '2', '3']\n  max_parallel: 2\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    submitted = jobkit("submit", str(spec), "--wait")
    took = time.monotonic() - started
    assert submitted.code == 0, submitted.err
    shown = jobkit("status", "--all", "--expand")
    assert shown.code == 0, shown.err
    lines = [line.split() for line in shown.out.splitlines()[1:]]
    sweep = next(words for words in lines if words[1] == "-" and "tasks:" in words)
    task_times = [seconds(words[-3]) for words in lines if words[2] == "task"]
    wall = seconds(sweep[-3])
    assert len(task_times) == 3 and all(3 <= t < 6 for t in task_times), shown.out
    # two rounds: the third task starts when a slot frees, after the first round's 3 s
    assert 2 * 3 <= wall < sum(task_times), shown.out
    assert wall <= took + 1, (wall, took)
