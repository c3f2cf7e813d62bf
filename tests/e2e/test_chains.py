"""Chains (docs/chains.md) on the real schedulers: three tiny shell stages in order, and a
chain whose middle stage fails, shown as one status line with the rest cancelled (Slurm:
by Slurm itself, --kill-on-invalid-dep=yes; PBS through the Torque wrappers and Grid
Engine: by jobkit; local: by the stage's own waiter). Each stage appends its name to one
file, so the file's order is the order the stages really ran in.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import Jobkit, poll_cli

STAGES = ("prep", "train", "eval")

BACKEND_KEYS: dict[str, list[str]] = {
    "slurm": ["resources:", "  nodes: 1", "  partition: debug", '  time: "00:05:00"'],
    "pbs": ["resources:", "  nodes: 1", '  time: "00:05:00"', "pbs:", "  flavor: torque"],
    "sge": ["resources:", "  nodes: 1", '  time: "00:05:00"'],
    "local": ["resources:", "  nodes: 1", '  time: "00:05:00"'],
    "ssh": ["resources:", "  nodes: 1", '  time: "00:05:00"', "ssh:", "  hosts: [n1]"],
}


def write_stages(folder: Path, backend: str, order: Path, failing: str | None = None) -> list[str]:
    """One spec per stage: append the stage's name to `order` (and exit 3 for `failing`)."""
    paths = []
    for name in STAGES:
        code = 3 if name == failing else 0
        spec = [
            f"name: {name}",
            f"backend: {backend}",
            *BACKEND_KEYS[backend],
            "launch:",
            "  launcher: none",
            "run:",
            f"  command: bash -c 'echo {name} >> {order}; exit {code}'",
        ]
        path = folder / f"{name}.yaml"
        path.write_text("\n".join(spec) + "\n")
        paths.append(str(path))
    return paths


def chain_status(jobkit: Jobkit, ids: list[str]) -> list[dict[str, Any]]:
    """Each stage's detail record (`jobkit status --json`)."""
    return [jobkit.status(job) for job in ids]


POLL_S = 3.0
"""Between two `jobkit status` calls of a chain wait. Each call is a Python process, squeue
and sacct: at one a second, the chain tests' waits were most of CI's ~1,000 CLI calls (about
0.4 CPU-s each on the loaded 2-core machine; issue 25). Now most of them run in the test's
own process (poll_cli), a process only confirming the line."""


def wait_chain_line(
    jobkit: Jobkit, wanted: str, cwd: Path, timeout: float = 480.0, *, note: bool = False
) -> str:
    """`jobkit status` until its chain line reads `wanted`; the whole output then, a CLI
    call's (in between, the same status runs in this process: poll_cli). With `note` the
    test reads the line status says once, when it marks the chain broken (`kept`): that
    status must be the CLI's, so every poll is a CLI call."""
    deadline = time.monotonic() + timeout

    def here() -> str | None:
        if note:
            return None
        done = jobkit.run_here("status", cwd=cwd)
        return None if done is None or done.returncode != 0 else done.stdout + done.stderr

    def settled(text: str) -> bool:
        if wanted in text:
            return True
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {wanted!r} after {timeout} s:\n{text}")
        return False

    def cli() -> str:
        done = jobkit.run("status", cwd=cwd)
        return done.stdout + done.stderr

    return poll_cli(
        cli,
        here,
        worth_asking=lambda text: wanted in text,
        settled=settled,
        deadline=deadline,
        poll_s=POLL_S,
    )


def submit_chain(jobkit: Jobkit, specs: list[str], cwd: Path, *options: str) -> list[str]:
    """`jobkit submit A B C --chain OPTIONS --json`: the stages' jobkit ids in order."""
    done = jobkit.run(
        "submit", *specs, "--chain", *options, *jobkit.common_sets(venv=False), "--json", cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    (view,) = json.loads(done.stdout)
    assert [stage["name"] for stage in view["stages"]] == list(STAGES), view
    return [stage["jobkit_id"] for stage in view["stages"]]


def check_succeeds_in_order(jobkit: Jobkit, backend: str, tmp_path: Path) -> None:
    workdir = tmp_path / "submit-dir"  # the Torque wrappers drop files where qsub runs
    workdir.mkdir()
    order = tmp_path / "order.txt"
    ids = submit_chain(jobkit, write_stages(tmp_path, backend, order), workdir)
    text = wait_chain_line(jobkit, "prep SUCCEEDED -> train SUCCEEDED -> eval SUCCEEDED", workdir)
    assert "WILL NEVER START" not in text, text
    assert order.read_text().split() == list(STAGES)
    records = chain_status(jobkit, ids)
    assert [r["state"] for r in records] == ["SUCCEEDED"] * 3
    # each stage started only after the previous one ended
    for before, after in itertools.pairwise(records):
        assert before["final_at"] is not None and after["final_at"] >= before["final_at"]


def check_middle_failure_breaks_chain(jobkit: Jobkit, backend: str, tmp_path: Path) -> None:
    workdir = tmp_path / "submit-dir"
    workdir.mkdir()
    order = tmp_path / "order.txt"
    ids = submit_chain(jobkit, write_stages(tmp_path, backend, order, failing="train"), workdir)
    text = wait_chain_line(
        jobkit, "prep SUCCEEDED -> train FAILED -> eval WILL NEVER START", workdir
    )
    assert f"never started: stage train ({ids[1]}) FAILED (exit 3)" in text, text
    assert f"jobkit doctor {ids[1]}" in text, text
    evaluation = jobkit.wait_state(ids[2], {"CANCELLED", "FAILED"}, timeout=60)
    if evaluation["state"] == "FAILED":  # Grid Engine: its script saw the exit code first
        assert backend == "sge", evaluation
        assert evaluation["reason"].startswith(
            "jobkit: never started: the previous stage ended with exit code 3"
        ), evaluation
    assert evaluation["extra"]["chain_broken"].startswith(f"never started: stage train ({ids[1]})")
    assert order.read_text().split() == ["prep", "train"]  # eval never ran
    detail = jobkit.run("status", ids[2], cwd=workdir).stdout
    assert "  chain       ch" in detail and "-> eval WILL NEVER START" in detail, detail
    assert f"  not run     never started: stage train ({ids[1]})" in detail, detail
    # said once: a second status prints no new chain line
    again = jobkit.run("status", cwd=workdir)
    assert "jobkit: chain:" not in again.stderr, again.stderr


@pytest.mark.slurm
def test_slurm_chain_runs_in_order(jobkit: Jobkit, slurm_cluster: object, tmp_path: Path) -> None:
    check_succeeds_in_order(jobkit, "slurm", tmp_path)


@pytest.mark.slurm
def test_slurm_chain_with_failed_middle_is_shown_and_cancelled(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    check_middle_failure_breaks_chain(jobkit, "slurm", tmp_path)


@pytest.mark.slurm
def test_slurm_keep_broken_leaves_the_stage_waiting(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    """--keep-broken: --kill-on-invalid-dep=no; the stage stays PENDING
    (DependencyNeverSatisfied) and status says it will never start; jobkit cancels nothing."""
    workdir = tmp_path / "submit-dir"
    workdir.mkdir()
    order = tmp_path / "order.txt"
    specs = write_stages(tmp_path, "slurm", order, failing="train")
    ids = submit_chain(jobkit, specs, workdir, "--keep-broken")
    text = wait_chain_line(jobkit, "train FAILED -> eval WILL NEVER START", workdir, note=True)
    assert "kept (--keep-broken)" in text, text
    record = jobkit.status(ids[2])
    assert record["state"] == "QUEUED", record
    done = jobkit.run("cancel", ids[2])
    assert done.returncode == 0, done.stderr


@pytest.mark.pbs
def test_pbs_chain_runs_in_order(jobkit: Jobkit, pbs_cluster: object, tmp_path: Path) -> None:
    check_succeeds_in_order(jobkit, "pbs", tmp_path)


@pytest.mark.pbs
def test_pbs_chain_with_failed_middle_is_cancelled_by_jobkit(
    jobkit: Jobkit, pbs_cluster: object, tmp_path: Path
) -> None:
    check_middle_failure_breaks_chain(jobkit, "pbs", tmp_path)


@pytest.mark.sge
def test_sge_chain_runs_in_order(jobkit: Jobkit, sge_cluster: object, tmp_path: Path) -> None:
    check_succeeds_in_order(jobkit, "sge", tmp_path)


@pytest.mark.sge
def test_sge_chain_with_failed_middle_is_cancelled_by_jobkit(
    jobkit: Jobkit, sge_cluster: object, tmp_path: Path
) -> None:
    check_middle_failure_breaks_chain(jobkit, "sge", tmp_path)


@pytest.mark.ssh
def test_ssh_chain_with_failed_middle_never_starts_the_rest(
    jobkit: Jobkit, ssh_hosts: object, tmp_path: Path
) -> None:
    """The stages run on n1 over ssh; their waiters run here, beside the launchers."""
    check_middle_failure_breaks_chain(jobkit, "ssh", tmp_path)


def test_local_chain_runs_in_order(jobkit: Jobkit, tmp_path: Path) -> None:
    check_succeeds_in_order(jobkit, "local", tmp_path)


def test_local_chain_with_failed_middle_never_starts_the_rest(
    jobkit: Jobkit, tmp_path: Path
) -> None:
    check_middle_failure_breaks_chain(jobkit, "local", tmp_path)


def test_local_chain_survives_kill_9_of_jobkit(jobkit: Jobkit, tmp_path: Path) -> None:
    """The waiter is detached: `jobkit submit --chain --wait` killed with SIGKILL right after
    submitting changes nothing; the stages still run in order."""
    import signal
    import subprocess

    from tests.e2e.cli import JOBKIT

    order = tmp_path / "order.txt"
    specs = write_stages(tmp_path, "local", order)
    out = tmp_path / "submit.out"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [str(JOBKIT), "submit", *specs, "--chain", *jobkit.common_sets(False), "--wait"],
            cwd=tmp_path,
            env=jobkit.env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while "chain ch" not in out.read_text():
        assert time.monotonic() < deadline, out.read_text()
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_chain_line(jobkit, "prep SUCCEEDED -> train SUCCEEDED -> eval SUCCEEDED", tmp_path)
    assert order.read_text().split() == list(STAGES)


def test_after_an_earlier_job_and_bad_input(jobkit: Jobkit, tmp_path: Path) -> None:
    """--after ID:any joins that job's chain; bad --after / --chain values are one line."""
    order = tmp_path / "order.txt"
    prep, train, _ = write_stages(tmp_path, "local", order, failing="prep")
    first = jobkit.run("submit", prep, *jobkit.common_sets(False), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    prep_id = json.loads(first.stdout)["jobkit_id"]
    done = jobkit.run(
        "submit", train, "--after", f"{prep_id}:any", *jobkit.common_sets(False), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    wait_chain_line(jobkit, "prep FAILED -> train SUCCEEDED", tmp_path)
    assert order.read_text().split() == ["prep", "train"]
    bad = jobkit.run("submit", train, "--after", f"{prep_id}:later", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert (
        bad.stderr.strip()
        .splitlines()[-1]
        .endswith(f"--after '{prep_id}:later': give ID or ID:COND with COND one of ok, any, fail")
    ), bad.stderr
    two = jobkit.run("submit", prep, train, cwd=tmp_path)
    assert two.returncode == 2
    assert "several SPECs are a chain: add --chain (or --chain any)" in two.stderr
