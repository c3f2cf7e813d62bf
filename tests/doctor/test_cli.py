"""`jobkit doctor` and `jobkit status`'s diagnosis without a cluster: registry rows written
through the store (final, so nothing is polled) whose run folders hold recorded log text
(tests/doctor/recorded.py: a torchrun traceback as the local backend writes it)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from jobkit.backends.base import Observation
from jobkit.core.states import State
from jobkit.registry.store import Store
from tests.plugins.invoke import Invoke

NODE_OUT = """\
jobkit: host 0 (vm) of 1: torchrun with 2 process(es)
Traceback (most recent call last):
  File "/home/u/train.py", line 12, in <module>
    step()
  File "/home/u/train.py", line 9, in step
    raise ValueError("loss is nan")
ValueError: loss is nan
Root Cause (first observed failure):
[0]:
  time      : 2026-11-25_11:41:51
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 15637)
"""


def _job(
    folder: Path,
    state: State,
    exit_code: int | None,
    node_out: str | None,
    sweep: tuple[str, str] | None = None,
) -> str:
    """A local job ended `state` `exit_code` a minute ago, its node-0.out holding `node_out`
    (`sweep`: the sweep id and task it is a task of)."""
    run_dir = folder / "logs" / "t-x"
    run_dir.mkdir(parents=True, exist_ok=True)
    if node_out is not None:
        (run_dir / "node-0.out").write_text(node_out)
    now = time.time()
    with Store() as store:
        rec = store.create_intent(
            backend="local",
            name="t",
            spec={"launch": {"nproc_per_node": 2}, "run": {"command": ["x"]}},
            script="",
            workdir=folder,
            sweep_id=sweep[0] if sweep else None,
            task=sweep[1] if sweep else None,
            now=now - 65,
        )
        paths = {"out": str(folder / "logs/t-x.out"), "err": "", "run_dir": str(run_dir)}
        store.mark_submitted(rec.jobkit_id, scheduler_id=rec.jobkit_id, argv=[], log_paths=paths)
        seen = Observation(state, state.value, "exit-file", exit_code=exit_code)
        store.record_observations({rec.jobkit_id: seen}, now=now - 60)
    return rec.jobkit_id


def test_status_shows_the_cached_diagnosis(jobkit: Invoke, tmp_path: Path) -> None:
    job = _job(tmp_path, State.FAILED, 1, NODE_OUT)
    ok = _job(tmp_path / "ok", State.SUCCEEDED, 0, None)
    first = jobkit("status")
    assert first.code == 0, first.err
    line = f"{job}  a rank raised a Python exception on rank 1 (vm): ValueError: loss is nan"
    assert line in first.out.splitlines(), first.out
    assert ok not in first.out.split("diagnosis (")[1]
    with Store() as store:
        cached = store.get(job).extra["diagnosis"]
    assert (cached["class"], cached["rank"], cached["host"]) == ("python_exception", 1, "vm")
    # The logs are gone: status still shows the line, read from the registry (no rescan).
    shutil.rmtree(tmp_path / "logs")
    assert line in jobkit("status").out.splitlines()
    listed = json.loads(jobkit("status", "--json").out)
    assert {r["jobkit_id"]: r["diagnosis"] for r in listed}[job] == line.split("  ", 1)[1]
    detail = jobkit("status", job)
    assert f"  diagnosis   {line.split('  ', 1)[1]} (jobkit doctor {job})" in detail.out
    assert json.loads(jobkit("status", job, "--json").out)[0]["diagnosis"].startswith("a rank")


def test_doctor_text(jobkit: Invoke, tmp_path: Path) -> None:
    job = _job(tmp_path, State.FAILED, 1, NODE_OUT)
    shown = jobkit("doctor", job)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == f"{job}  t  (local {job})  FAILED, exit 1"
    assert "  cause       a rank raised a Python exception [python_exception]" in lines
    assert "  first rank  1, host vm (node 0)" in lines
    assert "  where       /home/u/train.py:9 in step" in lines
    assert f"  evidence    {tmp_path}/logs/t-x/node-0.out:7: ValueError: loss is nan" in lines
    assert (
        f"  fix         the program, at the frame named; the full traceback:"
        f" `jobkit logs {job} --rank 1`" in lines
    )


def test_doctor_on_a_job_that_succeeded(jobkit: Invoke, tmp_path: Path) -> None:
    job = _job(tmp_path, State.SUCCEEDED, 0, "all good\n")
    shown = jobkit("doctor", job)
    assert shown.out.splitlines()[1] == "  the job succeeded: nothing to diagnose"
    data = json.loads(jobkit("doctor", job, "--json").out)
    assert (data["outcome"], data["class"]) == ("succeeded", None)


def test_doctor_errors(jobkit: Invoke) -> None:
    assert jobkit("doctor").err == "jobkit: give one or more job IDs, or --last\n"
    missing = jobkit("doctor", "jknothere")
    assert (missing.code, missing.err) == (2, "jobkit: no tracked job 'jknothere'\n")


def test_doctor_takes_several_ids_as_why_report_and_status_do(
    jobkit: Invoke, tmp_path: Path
) -> None:
    failed = _job(tmp_path / "a", State.FAILED, 1, NODE_OUT)
    ok = _job(tmp_path / "b", State.SUCCEEDED, 0, "all good\n")
    shown = jobkit("doctor", failed, ok)
    assert shown.code == 0, shown.err
    blocks = shown.out.split("\n\n")
    assert blocks[0].startswith(f"{failed}  t  (local {failed})  FAILED, exit 1\n")
    assert "  cause       a rank raised a Python exception [python_exception]" in blocks[0]
    assert blocks[1].startswith(f"{ok}  t  (local {ok})  SUCCEEDED, exit 0\n")
    data = json.loads(jobkit("doctor", "--json", failed, ok).out)
    assert [(d["jobkit_id"], d["outcome"]) for d in data] == [
        (failed, "failed"),
        (ok, "succeeded"),
    ]


def test_doctor_of_a_sweep_diagnoses_each_failed_task(jobkit: Invoke, tmp_path: Path) -> None:
    """The user's words: "doctor/logs/why refuse a sweep id (status/report/plot take it)";
    and `--last` after a sweep is that sweep (the last submission), not its last task."""
    sweep = "jkswp01"
    tasks = [
        _job(tmp_path / "t0", State.SUCCEEDED, 0, "all good\n", (sweep, "0")),
        _job(tmp_path / "t1", State.FAILED, 1, NODE_OUT, (sweep, "1")),
        _job(tmp_path / "t2", State.SUCCEEDED, 0, "all good\n", (sweep, "2")),
    ]
    for words in ([sweep], ["--last"]):
        shown = jobkit("doctor", *words)
        assert shown.code == 0, shown.err
        head, body = shown.out.split("\n\n", 1)
        assert head == (
            f"sweep {sweep}: 3 tasks (1 FAILED, 2 SUCCEEDED): each failed task diagnosed"
        )
        assert body.startswith(f"{tasks[1]}  t  (local {tasks[1]})  FAILED, exit 1\n")
        assert "python_exception" in body and tasks[0] not in body
    data = json.loads(jobkit("doctor", "--json", sweep).out)
    assert data[0] == {"note": head}
    assert [d["jobkit_id"] for d in data[1:]] == [tasks[1]]
    why = jobkit("why", sweep)  # why takes the sweep too: each task
    assert why.code == 0, why.err
    assert all(task in why.out for task in tasks)
    logs = jobkit("logs", sweep)  # logs takes the sweep too (issue 24): each task's output
    assert all(
        f"==> {task} ({task}, sweep task {n}) <==" in logs.out for n, task in enumerate(tasks)
    )


def test_a_sweep_with_no_failed_or_running_task_says_so(jobkit: Invoke, tmp_path: Path) -> None:
    sweep = "jkswp02"
    _job(tmp_path / "t0", State.SUCCEEDED, 0, "all good\n", (sweep, "0"))
    shown = jobkit("doctor", sweep)
    assert (shown.code, shown.out) == (
        0,
        f"sweep {sweep}: 1 tasks (1 SUCCEEDED): no task failed or runs, nothing to diagnose\n",
    )
