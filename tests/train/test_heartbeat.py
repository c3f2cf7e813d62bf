"""The trainer's heartbeat files (train/reporting/heartbeat.py) after a real run under torchrun."""

from __future__ import annotations

import json

from jobkit.core.conventions import HEARTBEAT_DIR
from tests.train.launch import Launcher


def test_each_rank_leaves_a_done_heartbeat(launcher: Launcher) -> None:
    result = launcher.run("beat", "mlp", ("train.steps=30", "checkpoint.every_steps=10"), nproc=2)
    assert result.returncode == 0, result.explain()
    folder = result.run_dir / HEARTBEAT_DIR
    assert sorted(p.name for p in folder.iterdir()) == ["rank-0.json", "rank-1.json"]
    for rank in (0, 1):
        beat = json.loads((folder / f"rank-{rank}.json").read_text())
        assert (beat["rank"], beat["step"], beat["phase"]) == (rank, 30, "done"), beat
        assert beat["pid"] > 0 and beat["python"] and beat["node_index"] is None, beat
