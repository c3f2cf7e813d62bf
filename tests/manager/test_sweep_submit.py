"""`jobkit submit` of a sweep on the local backend (real launchers on this machine): one row
per task sharing the sweep id, each task with its own overrides, at most max_parallel at
once; `--dry-run` lists the tasks; status groups them; a refused spec says so in one line."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.plugins.invoke import Invoke

# Writes when it ran and the words it got, then holds its slot for a moment.
PROGRAM = (
    "import json, os, sys, time; start = time.time(); time.sleep(1.5);"
    " out = os.path.join(os.environ['OUT'], 'task-' + os.environ['JOBKIT_TASK_ID'] + '.json');"
    " json.dump({'words': sys.argv[1:], 'start': start, 'end': time.time()}, open(out, 'w'))"
)


def _spec(folder: Path, out: Path, max_parallel: int = 1) -> Path:
    spec = {
        "name": "swloc",
        "backend": "local",
        "env": {"vars": {"OUT": str(out)}},
        "run": {"command": ["python3", "-c", PROGRAM]},
        "sweep": {"grid": {"optim.lr": ["1e-3", "3e-4"]}, "max_parallel": max_parallel},
    }
    path = folder / "sweep.yaml"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def test_dry_run_lists_the_tasks_and_their_overrides(jobkit: Invoke, workdir: Path) -> None:
    spec = _spec(workdir, workdir)
    result = jobkit("submit", str(spec), "--dry-run", "--no-check")
    assert result.code == 0, result.err
    assert "# sweep: 2 tasks as local jobs (max 1 at once)" in result.err
    assert "#   task 0: lr=1e-3" in result.err and "#   task 1: lr=3e-4" in result.err
    data = json.loads(jobkit("submit", str(spec), "--dry-run", "--json", "--no-check").out)
    assert data["sweep"] == [
        {"task": "0", "overrides": {"optim.lr": "1e-3"}},
        {"task": "1", "overrides": {"optim.lr": "3e-4"}},
    ]
    assert jobkit("status", "--all").err.startswith("jobkit: no tracked jobs")


def test_local_sweep_runs_each_task_with_its_overrides_one_at_a_time(
    jobkit: Invoke, workdir: Path
) -> None:
    out = workdir / "out"
    out.mkdir()
    result = jobkit("submit", str(_spec(workdir, out)), "--wait", "--no-check")
    assert result.code == 0, result.out + result.err
    head = re.match(r"submitted sweep (jk\w+): 2 tasks as local jobs \(max 1 at once\)", result.out)
    assert head, result.out
    sweep_id = head[1]
    tasks = re.findall(r"^  task (\d)  (jk\w+)", result.out, re.M)
    assert [t for t, _ in tasks] == ["0", "1"]
    runs = [json.loads((out / f"task-{i}.json").read_text()) for i in range(2)]
    assert runs[0]["words"] == ["optim.lr=1e-3"] and runs[1]["words"] == ["optim.lr=3e-4"]
    first, second = sorted(runs, key=lambda r: r["start"])
    assert second["start"] >= first["end"] - 0.05  # max_parallel 1: one after the other
    status = jobkit("status")
    assert re.search(rf"^{sweep_id}\s+-\s+swloc\s+local\s+2 tasks: 2 SUCCEEDED", status.out, re.M)
    data = json.loads(jobkit("status", sweep_id, "--json").out)[0]
    assert [t["task"] for t in data["tasks"]] == ["0", "1"]
    for task in data["tasks"]:
        run_dir = Path(task["log_paths"]["run_dir"])
        written = json.loads((run_dir / "sweep-overrides.json").read_text())
        assert written == task["overrides"]
    logs = jobkit("logs", tasks[1][1])
    assert logs.code == 0 and "sweep task 1: optim.lr=3e-4" in logs.out + logs.err


def test_a_backend_without_sweeps_is_refused_in_one_line(jobkit: Invoke, workdir: Path) -> None:
    spec = workdir / "s.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "x",
                "backend": "submitit",
                "run": {"command": ["true"]},
                "sweep": {"grid": {"a": [1, 2]}},
            }
        )
    )
    result = jobkit("submit", str(spec), "--dry-run")
    assert result.code != 0
    assert "sweep" in result.err and "cannot run a sweep" in result.err
    assert "Traceback" not in result.err


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_a_refused_array_fails_every_task_with_the_schedulers_message(
    jobkit: Invoke, workdir: Path
) -> None:
    """sbatch refuses the array (a partition Slurm does not have; --no-check skips jobkit's
    own check of it): every task row is FAILED with sbatch's words, nothing is left
    SUBMITTING."""
    spec = workdir / "s.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "refused",
                "backend": "slurm",
                "launch": {"launcher": "srun"},
                "resources": {"partition": "no-such-partition"},
                "run": {"command": ["true"]},
                "sweep": {"grid": {"a": [1, 2, 3]}},
            }
        )
    )
    result = jobkit("submit", str(spec), "--no-check")
    assert result.code != 0
    assert "invalid partition" in result.err.lower(), result.err
    assert "Traceback" not in result.err
    listing = json.loads(jobkit("status", "--json").out)
    assert [r["task"] for r in sorted(listing, key=lambda r: r["task"])] == ["0", "1", "2"]
    assert len({r["sweep_id"] for r in listing}) == 1
    for row in listing:
        assert row["state"] == "FAILED" and row["scheduler_id"] is None
        assert row["reason"].startswith("submission refused:")
        assert "invalid partition" in row["reason"].lower()
    line = jobkit("status").out
    assert "3 tasks: 3 FAILED" in line


@pytest.mark.sge
@pytest.mark.slow
def test_a_grid_engine_sweep_tracks_each_task_in_its_own_run_folder(
    jobkit: Invoke, workdir: Path, sge_cluster: object
) -> None:
    """Grid Engine counts array tasks from 1: sweep task i runs as SGE task i+1, and its row's
    run folder and state are that task's (task 0 fails, task 1 succeeds: a swapped folder
    would swap the two, its exit-code file overriding qacct)."""
    program = "import sys; sys.exit(3 if 'x=fail' in sys.argv[1:] else 0)"
    spec = workdir / "sge-sweep.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "sgesw",
                "backend": "sge",
                "run": {"command": ["python3", "-c", program]},
                "sweep": {"grid": {"x": ["fail", "ok"]}},
            }
        )
    )
    result = jobkit("submit", str(spec), "--wait", "--no-check")
    assert result.code != 0, result.out + result.err  # one task failed
    rows = json.loads(jobkit("status", "--json", "--all").out)
    tasks = sorted(rows, key=lambda r: r["task"])
    assert [(t["task"], t["state"]) for t in tasks] == [("0", "FAILED"), ("1", "SUCCEEDED")]
    number = tasks[0]["scheduler_id"].split(".")[0]
    assert [t["scheduler_id"] for t in tasks] == [f"{number}.1", f"{number}.2"]
    for task, words in zip(tasks, (["x=fail"], ["x=ok"]), strict=True):
        run_dir = Path(task["log_paths"]["run_dir"])
        assert run_dir.name == f"sgesw-{task['scheduler_id']}"
        assert json.loads((run_dir / "sweep-overrides.json").read_text()) == {
            "x": words[0].split("=")[1]
        }


@pytest.mark.pbs
@pytest.mark.slow
def test_a_pbs_sweep_tracks_each_task_in_its_own_run_folder(
    jobkit: Invoke, workdir: Path, pbs_cluster: object
) -> None:
    """Through Slurm's Torque wrappers (qsub -t): each task writes its own run folder and
    output, named ARRAY_TASK as the row's log paths say, and ends in its own state (task 0
    fails, task 1 succeeds: shared files would give both one state)."""
    program = "import sys; sys.exit(3 if 'x=fail' in sys.argv[1:] else 0)"
    spec = workdir / "pbs-sweep.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "pbssw",
                "backend": "pbs",
                "scheduler": {"pbs_flavor": "torque"},
                "run": {"command": ["python3", "-c", program]},
                "sweep": {"grid": {"x": ["fail", "ok"]}},
            }
        )
    )
    result = jobkit("submit", str(spec), "--wait", "--no-check")
    assert result.code != 0, result.out + result.err  # one task failed
    rows = json.loads(jobkit("status", "--json", "--all").out)
    tasks = sorted(rows, key=lambda r: r["task"])
    assert [(t["task"], t["state"]) for t in tasks] == [("0", "FAILED"), ("1", "SUCCEEDED")]
    for task, value in zip(tasks, ("fail", "ok"), strict=True):
        run_dir = Path(task["log_paths"]["run_dir"])
        assert json.loads((run_dir / "sweep-overrides.json").read_text()) == {"x": value}
        out = Path(task["log_paths"]["out"]).read_text()
        assert f"sweep task {task['task']}: x={value}" in out, out
    assert len({t["log_paths"]["out"] for t in tasks}) == 2


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_last_is_the_last_submission_a_whole_1000_task_sweep(jobkit: Invoke, workdir: Path) -> None:
    """The user's words: "`cancel --last` after submitting a 1,000-task sweep cancels its last
    task only (999 stay queued) and `report --last` reports one task". The array is held
    (`--hold`), so no task takes a node from the other tests."""
    spec = workdir / "big.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "big-sweep",
                "backend": "slurm",
                "launch": {"launcher": "srun"},
                "resources": {"partition": "debug", "time": 1},
                "scheduler": {"extra": ["--hold"]},
                "run": {"command": ["true"]},
                "sweep": {"grid": {"i": list(range(1000))}},
            }
        )
    )
    result = jobkit("submit", str(spec), "--no-check", "--json")
    assert result.code == 0, result.err
    rows = json.loads(jobkit("status", "--json").out)
    assert len(rows) == 1000 and len({r["sweep_id"] for r in rows}) == 1
    sweep_id, array = rows[0]["sweep_id"], rows[0]["scheduler_id"].split("_")[0]
    try:
        shown = jobkit("status", "--last")
        assert shown.code == 0, shown.err
        assert f"{sweep_id}" in shown.out and "1000 tasks" in shown.out, shown.out
        reported = json.loads(jobkit("report", "--last", "--json").out)
        assert [r["sweep_id"] for r in reported] == [sweep_id]
        assert len(reported[0]["tasks"]) == 1000
        cancelled = jobkit("cancel", "--last", "--json")
        assert cancelled.code == 0, cancelled.err
        queued = subprocess.run(
            ["squeue", "-h", "-r", "-j", array, "-o", "%i %T"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        assert [w for w in queued if w in ("PENDING", "RUNNING")] == [], queued[:10]
        states = {
            r["state"] for r in json.loads(jobkit("status", "--json", sweep_id).out)[0]["tasks"]
        }
        assert states == {"CANCELLED"}, states
    finally:
        subprocess.run(["scancel", array], capture_output=True, check=False)
