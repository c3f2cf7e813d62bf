"""The live progress line of `jobkit submit --wait` and `jobkit watch` (jobkit/cli/progress.py):
the user's words, "`submit --wait` and `watch` print events, never a progress line". One line
rewritten in place on a terminal, a plain line once the rate is known (then at most once a
minute) otherwise; a real training job followed through a pseudo-terminal."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from jobkit.cli.progress import ProgressLine
from jobkit.core.conventions import HEARTBEAT_DIR
from jobkit.registry.record import JobRecord, new_record

REPO = Path(__file__).resolve().parents[2]


def training(run_dir: Path, step: int, total: int, seconds_per_step: float | None) -> JobRecord:
    """A RUNNING job whose rank 0 reached `step` of `total` just now."""
    now = time.time()
    beat = {"rank": 0, "pid": 1, "node": "n1", "step": step, "phase": "train", "time": now}
    if seconds_per_step is not None:
        beat |= {"total": total, "first_step": 0, "first_time": now - step * seconds_per_step}
    (run_dir / HEARTBEAT_DIR).mkdir(exist_ok=True)
    (run_dir / HEARTBEAT_DIR / "rank-0.json").write_text(json.dumps(beat))
    return new_record(
        jobkit_id="jk1",
        backend="local",
        name="x",
        state="RUNNING",
        log_paths={"run_dir": str(run_dir)},
        spec_json=json.dumps({"name": "x"}),
    )


def test_plain_output_gets_a_line_once_the_rate_is_known(tmp_path: Path) -> None:
    out = io.StringIO()
    line = ProgressLine(out, live=False)
    line.update([training(tmp_path, 0, 400, seconds_per_step=None)])  # no total, no rate yet
    assert out.getvalue() == ""
    line._next_look = 0.0
    line.update([training(tmp_path, 100, 400, seconds_per_step=0.5)])
    assert out.getvalue() == "jobkit: jk1 step 100/400 (25%) ETA 2:30\n"
    line._next_look = 0.0
    line.update([training(tmp_path, 101, 400, seconds_per_step=0.5)])  # within the minute
    assert out.getvalue().count("\n") == 1


def test_a_terminal_gets_one_line_rewritten_in_place(tmp_path: Path) -> None:
    out = io.StringIO()
    line = ProgressLine(out, live=True)
    line.update([training(tmp_path, 100, 400, seconds_per_step=0.5)])
    line._next_look = 0.0
    line.update([training(tmp_path, 200, 400, seconds_per_step=0.5)])
    line.clear()
    assert out.getvalue() == (
        "\r\033[Kjobkit: jk1 step 100/400 (25%) ETA 2:30"
        "\r\033[Kjobkit: jk1 step 200/400 (50%) ETA 1:40"
        "\r\033[K"
    )


def test_submit_wait_on_a_terminal_shows_the_live_progress_line(tmp_path: Path) -> None:
    """`jobkit submit --wait` of the bundled trainer with stderr on a pseudo-terminal."""
    spec = tmp_path / "train.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "progress",
                "backend": "local",
                "launch": {"nproc_per_node": 1},
                "logs": {"dir": str(tmp_path / "logs")},
                "run": {
                    "train": {
                        "config": "mlp",
                        # Paced (tests/e2e/paced_data.py): 64 samples at 1 ms, ~0.07 s a
                        # step, so the 120 steps train for ~8 s whatever the load, long
                        # enough for several heartbeats (1 s) and looks (1 s).
                        "overrides": {
                            "train.steps": 120,
                            "logging.every_steps": 40,
                            "data.name": "tests.e2e.paced_data:paced_blobs",
                            "data.args.delay_s": 0.001,
                        },
                    }
                },
            }
        )
    )
    leader, follower = os.openpty()
    env = {**os.environ, "JOBKIT_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobkit", "submit", str(spec), "--wait", "--no-check"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    out, _ = proc.communicate(timeout=60)
    text = seen.decode()
    assert proc.returncode == 0, text + out
    line = r"\r\033\[Kjobkit: (jk\w+) step ([\d,]+)/120 \((\d+)%\)( ETA [\d:]+)?"
    shown = re.findall(line, text)
    assert shown, text
    assert any(eta for *_, eta in shown), shown  # the rate became known while it ran
    assert "step 120/120" in out
    assert re.search(r"SUCCEEDED", text)
