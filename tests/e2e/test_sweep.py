"""Issue 16's sweep, end to end on the real Slurm cluster: a 2x2 grid of the bundled trainer
runs as ONE array job, each task with its own overrides (its log and sweep-overrides.json say
so), `jobkit status` groups it in one line, one task cancelled while it waits is retried
alone (`jobkit retry`, attempt 2), and `jobkit report` / `jobkit plot` of the sweep name each
task's overrides."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import Jobkit
from tests.e2e.conftest import Figures

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

STEPS = 6
GRID: dict[str, list[Any]] = {"optim.lr": ["1e-3", "3e-4"], "model.args.d_model": [32, 64]}
SHORT = ["lr=1e-3 d_model=32", "lr=1e-3 d_model=64", "lr=3e-4 d_model=32", "lr=3e-4 d_model=64"]


def _spec(folder: Path) -> Path:
    spec = {
        "name": "grid",
        "backend": "slurm",
        "resources": {"nodes": 1, "partition": "debug", "time": "00:10:00"},
        "launch": {"launcher": "torchrun", "nproc_per_node": 1},
        "run": {
            "train": {
                "config": "tiny-lm",
                "overrides": {"train.steps": STEPS, "logging.every_steps": 2},
            }
        },
        "sweep": {"grid": GRID, "max_parallel": 2},
    }
    path = folder / "grid.yaml"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def _sweep(jobkit: Jobkit, sweep_id: str) -> dict[str, Any]:
    done = jobkit.run("status", sweep_id, "--json")
    assert done.returncode in (0, 3), done.stderr
    data: list[dict[str, Any]] = json.loads(done.stdout)
    return data[0]


def _wait_tasks(
    jobkit: Jobkit, sweep_id: str, wanted: dict[str, set[str]], timeout: float
) -> dict[str, dict[str, Any]]:
    """Poll until each named task's newest attempt is in one of its wanted states."""
    deadline = time.monotonic() + timeout
    while True:
        rows = _sweep(jobkit, sweep_id)["tasks"]
        newest = {r["task"]: r for r in sorted(rows, key=lambda r: r["attempt"])}
        if all(newest[t]["state"] in states for t, states in wanted.items()):
            return newest
        states = {t: r["state"] for t, r in newest.items()}
        assert time.monotonic() < deadline, f"tasks {states}, wanted {wanted}"
        time.sleep(3)


def test_a_2x2_sweep_runs_as_one_array_grouped_cancelled_and_retried(
    jobkit: Jobkit, tmp_path: Path, figures: Figures
) -> None:
    started = time.monotonic()
    done = jobkit.run("submit", str(_spec(tmp_path)), *jobkit.common_sets())
    assert done.returncode == 0, done.stderr
    head = re.match(
        r"submitted sweep (jk\w+): 4 tasks as Slurm array (\d+) \(max 2 at once\): grid",
        done.stdout,
    )
    assert head, done.stdout
    sweep_id, array = head[1], head[2]
    tasks = re.findall(r"^  task (\d)  (jk\w+)\s+(\S+)\s+(.+)$", done.stdout, re.M)
    assert [(t[0], t[2], t[3]) for t in tasks] == [
        (str(i), f"{array}_{i}", SHORT[i]) for i in range(4)
    ], done.stdout
    ids = {t[0]: t[1] for t in tasks}
    try:
        # task 3 waits behind max_parallel 2: cancel it alone, the others go on
        cancelled = jobkit.run("cancel", ids["3"])
        assert cancelled.returncode == 0, cancelled.stderr
        assert f"cancelled {ids['3']} (slurm job {array}_3, sweep {sweep_id} task 3)" in (
            cancelled.stdout
        )
        ended = _wait_tasks(
            jobkit,
            sweep_id,
            {"0": {"SUCCEEDED"}, "1": {"SUCCEEDED"}, "2": {"SUCCEEDED"}, "3": {"CANCELLED"}},
            timeout=420,
        )
        line = jobkit.run("status").stdout
        assert re.search(
            rf"^{sweep_id}\s+{array}\s+grid\s+slurm\s+4 tasks: 3 SUCCEEDED, 1 CANCELLED", line, re.M
        ), line
        for task, record in ended.items():
            if task == "3":
                continue  # cancelled before it started: no run folder
            run_dir = Path(record["log_paths"]["run_dir"])
            assert run_dir.name == f"grid-{array}_{task}"
            written = json.loads((run_dir / "sweep-overrides.json").read_text())
            assert written == record["overrides"]
            assert {k: str(v) for k, v in written.items()} == {
                k: str(v) for k, v in zip(GRID, _values(int(task)), strict=True)
            }
            log = jobkit.run("logs", ids[task]).stdout
            lr, d_model = _values(int(task))
            assert f"sweep task {task}: optim.lr={lr} model.args.d_model={d_model}" in log, log
        # the cancelled task again, alone: attempt 2 of its run, a one-task array
        retried = jobkit.run("retry", ids["3"])
        assert retried.returncode == 0, retried.stderr
        final = _wait_tasks(jobkit, sweep_id, {"3": {"SUCCEEDED"}}, timeout=300)
        again = final["3"]
        assert (again["attempt"], again["run_id"]) == (2, ids["3"])
        assert again["scheduler_id"].endswith("_3") and not again["scheduler_id"].startswith(
            f"{array}_"
        )
        expanded = jobkit.run("status", "--expand").stdout
        assert "4 tasks: 4 SUCCEEDED" in expanded, expanded
        assert f"task 3: {SHORT[3]} (attempt 2)" in expanded, expanded
        one = jobkit.run("status", again["jobkit_id"]).stdout
        assert f"1 {ids['3']} {array}_3 CANCELLED, 2 {again['jobkit_id']}" in one, one
        # compare the tasks
        report = jobkit.run("report", sweep_id)
        assert report.returncode == 0, report.stderr
        rows = [r for r in report.stdout.splitlines() if r[:1].isdigit()]
        assert sorted(r.split()[0] for r in rows) == ["0", "1", "2", "3"], report.stdout
        for row in rows:
            assert SHORT[int(row.split()[0])] in row and "SUCCEEDED" in row, report.stdout
        losses = [float(r.split()[3]) for r in rows]
        assert losses == sorted(losses), report.stdout
        plotted = jobkit.run("plot", sweep_id, "--json", "-o", str(tmp_path / "grid.png"))
        assert plotted.returncode == 0, plotted.stderr
        labels = [run["label"] for run in json.loads(plotted.stdout)["runs"]]
        assert labels == [f"task {i}: {SHORT[i]}" for i in range(4)]
        assert (tmp_path / "grid.png").stat().st_size > 0
    finally:
        jobkit.run("cancel", sweep_id)
    figures(sweep_s=round(time.monotonic() - started, 1))


def _values(task: int) -> tuple[Any, Any]:
    """Task i's (lr, d_model): the grid's last key varies fastest."""
    return GRID["optim.lr"][task // 2], GRID["model.args.d_model"][task % 2]
