"""A job that hangs for real: the bundled trainer with a test-only model plug-in
(tests/hang/stuck_model.py) whose rank 1 sleeps just before an all-reduce at one step, so rank 0
blocks inside that collective. `jobkit status` must show the job STALLED (monitor.stall_after is
5 s here), and the hang section of `jobkit doctor` (jobkit/hang/report.py) must dump both
ranks' stacks with py-spy on their nodes (Slurm: `srun --overlap --jobid`) and name rank 1:
called in process for the local job, through `jobkit doctor` for the Slurm job.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from jobkit.hang.report import HangReport, hang_section
from jobkit.registry.ids import resolve_jobs
from jobkit.registry.store import Store
from tests.e2e.cli import Jobkit, poll_cli
from tests.e2e.conftest import Figures

HANG_STEP = 200
SPEC = """\
name: {name}
backend: {backend}
{resources}
launch:
  nproc_per_node: {nproc}
monitor:
  stall_after: "00:00:05"
run:
  train:
    config: mlp
    overrides:
      train.steps: 100000
      logging.every_steps: 50
      checkpoint.every_steps: 0
      model.name: "tests.hang.stuck_model:stuck_mlp"
      model.args.hang_step: {hang_step}
      model.args.hidden: 16
"""


def stuck_spec(tmp_path: Path, backend: str, resources: str, nproc: int) -> Path:
    path = tmp_path / f"hang-{backend}.yaml"
    text = SPEC.format(
        name=f"hang-{backend}",
        backend=backend,
        resources=resources,
        nproc=nproc,
        hang_step=HANG_STEP,
    )
    path.write_text(text)
    return path


def submit(jobkit: Jobkit, spec: Path) -> str:
    """`jobkit submit SPEC` (no --wait); the jobkit id."""
    done = jobkit.run("submit", str(spec), *jobkit.common_sets())
    assert done.returncode == 0, done.stderr
    match = re.search(r"^submitted (\S+) ", done.stdout, re.M)
    assert match, done.stdout
    return match[1]


def wait_stalled(jobkit: Jobkit, job: str, timeout: float) -> dict[str, Any]:
    """Poll `jobkit status --json JOB` until it carries "stalled" while training (a loaded
    machine's slow start-up, over monitor.stall_after's 5 s here, is a stall in setup); that
    record, a CLI call's (in between, the same status runs in this process: poll_cli)."""
    deadline = time.monotonic() + timeout

    def stalled_in_training(record: dict[str, Any]) -> bool:
        stalled: Any = record.get("stalled")
        return bool(stalled) and all(rank["phase"] == "train" for rank in stalled["ranks"])

    def settled(record: dict[str, Any]) -> bool:
        if stalled_in_training(record):
            return True
        assert record["state"] in ("QUEUED", "RUNNING"), record
        assert time.monotonic() < deadline, f"{job} not STALLED after {timeout} s: {record}"
        return False

    return poll_cli(
        lambda: jobkit.status(job),
        lambda: jobkit.status_here(job),
        worth_asking=lambda r: stalled_in_training(r) or r["state"] not in ("QUEUED", "RUNNING"),
        settled=settled,
        deadline=deadline,
        poll_s=1.0,
    )


def doctor_hang(jobkit: Jobkit, job: str, monkeypatch: pytest.MonkeyPatch) -> HangReport:
    """The doctor's hang section of JOB, computed as `jobkit doctor` does."""
    monkeypatch.setenv("JOBKIT_HOME", str(jobkit.home))
    with Store() as store:
        (record,) = resolve_jobs(store, [job], last=False)
    report = hang_section(record, time.time(), collect_stacks=True)
    assert report is not None, record
    return report


def doctor_cli(jobkit: Jobkit, job: str) -> tuple[dict[str, Any], str]:
    """`jobkit doctor --json JOB`'s hang section and `jobkit doctor JOB`'s text."""
    as_json = jobkit.run("doctor", "--json", job, timeout=180)
    assert as_json.returncode == 0, as_json.stderr
    hang = json.loads(as_json.stdout)["hang"]
    text = jobkit.run("doctor", job, timeout=180)
    assert text.returncode == 0, text.stderr
    return hang, text.stdout


def check_stuck_rank_named(data: dict[str, Any], text: str) -> None:
    """Both stacks dumped; rank 1 (asleep before the all-reduce) named; rank 0 in it."""
    assert data["stalled"] is True and data["stuck_ranks"] == [1], json.dumps(data, indent=1)
    stacks = {s["rank"]: s for s in data["stacks"]}
    assert stacks[1]["frames"][0]["function"] == "sleep_before_all_reduce", stacks[1]
    assert stacks[0]["frames"][0]["function"] == "all_reduce", stacks[0]
    assert data["comparison"]["majority"]["collective"] == "all_reduce", data["comparison"]
    assert re.search(
        r"^\s*STALLED: no rank advanced for \d+s \(monitor.stall_after 5s\)", text, re.M
    )
    assert "stack differs: rank 1 in sleep_before_all_reduce (tests/hang/stuck_model.py:" in text
    assert "  while rank 0 waits in all_reduce: all_reduce (torch/distributed/" in text, text


def check_status_shows_it(jobkit: Jobkit, job: str) -> None:
    """The table and the detail view say STALLED, with how long."""
    table = jobkit.run("status").stdout
    assert re.search(rf"^{job}\s.*\sRUNNING \(STALLED \d+s\)\s", table, re.M), table
    detail = jobkit.run("status", job).stdout
    assert re.search(r"^  state       RUNNING \(STALLED \d+s\) \(raw ", detail, re.M), detail


@pytest.mark.slow
def test_a_local_job_stuck_in_a_collective(
    jobkit: Jobkit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, figures: Figures
) -> None:
    """Two ranks on this machine (local backend): py-spy runs here directly."""
    job = submit(jobkit, stuck_spec(tmp_path, "local", "", nproc=2))
    try:
        record = wait_stalled(jobkit, job, timeout=180)
        stalled = record["stalled"]
        assert isinstance(stalled, dict) and stalled["threshold_s"] == 5.0
        assert sorted(r["rank"] for r in stalled["ranks"]) == [0, 1], stalled
        # The step reached, not the first beat's (steps are far faster than a write a second),
        # and the STALLED age counted from it.
        assert stalled["last_step"] == HANG_STEP - 1, stalled
        assert {r["step"] for r in stalled["ranks"]} == {HANG_STEP - 1}, stalled
        check_status_shows_it(jobkit, job)
        started = time.monotonic()
        report = doctor_hang(jobkit, job, monkeypatch)
        took = time.monotonic() - started
        check_stuck_rank_named(report.to_dict(), "\n".join(report.lines()))
        figures(stacks_s=round(took, 2), since_progress_s=stalled["since_progress_s"])
        answer = json.loads(jobkit.run("doctor", "--json", job, timeout=180).stdout)
        assert (answer["class"], answer["rank"], answer["node"]) == ("stalled", 1, 0), answer
        assert answer["summary"].startswith("no rank advanced for "), answer
        assert (
            f"(last step {HANG_STEP - 1}); rank 1 in sleep_before_all_reduce" in (answer["summary"])
        ), answer
        assert answer["one_line"].startswith("the job is stalled on rank 1 ("), answer
    finally:
        jobkit.run("cancel", job)
    assert jobkit.wait_state(job, {"CANCELLED"}, timeout=120)["state"] == "CANCELLED"


@pytest.mark.slow
@pytest.mark.slurm
def test_a_two_node_slurm_job_stuck_in_a_collective(
    jobkit: Jobkit,
    slurm_cluster: object,
    tmp_path: Path,
    figures: Figures,
) -> None:
    """One torchrun per node (n1, n2), one rank each: each rank's stack is dumped on its own
    node through `srun --overlap --jobid JOB -w NODE` while the job's step runs."""
    resources = 'resources:\n  nodes: 2\n  partition: debug\n  time: "00:10:00"'
    job = submit(jobkit, stuck_spec(tmp_path, "slurm", resources, nproc=1))
    try:
        record = wait_stalled(jobkit, job, timeout=600)
        check_status_shows_it(jobkit, job)
        started = time.monotonic()
        hang, text = doctor_cli(jobkit, job)
        took = (time.monotonic() - started) / 2
        check_stuck_rank_named(hang, text)
        nodes = sorted(s["node"] for s in hang["stacks"])
        assert nodes == ["n1", "n2"], text  # one rank on each node, each dumped there
        print(text)
        figures(job=record["scheduler_id"], stacks_s=round(took, 2))
    finally:
        jobkit.run("cancel", job)
    assert jobkit.wait_state(job, {"CANCELLED"}, timeout=180)["state"] == "CANCELLED"
