"""`jobkit retry` of a chain's failed stage re-links the rest (docs/chains.md): the stages that
never started are submitted again as their runs' next attempts, after the new attempt (Slurm:
afterok on its new id; PBS through the Torque wrappers: -W depend=; Grid Engine: -hold_jid;
local: the detached waiter), and the chain then runs to its end. The middle stage fails
until a flag file exists; the order file shows what really ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.cli import Jobkit
from tests.e2e.test_chains import submit_chain, wait_chain_line, write_stages

DEPENDS = {
    "slurm": "--dependency=afterok:{id}",
    "pbs": "depend=afterok:{id}",
    "sge": "-hold_jid",
    "local": "--after",
}


def check_retry_relinks(jobkit: Jobkit, backend: str, tmp_path: Path, *options: str) -> None:
    workdir = tmp_path / "submit-dir"
    workdir.mkdir()
    order = tmp_path / "order.txt"
    fixed = tmp_path / "fixed"
    specs = write_stages(tmp_path, backend, order, failing="train")
    train = Path(specs[1])
    train.write_text(train.read_text().replace("exit 3", f"[ -e {fixed} ] || exit 3"))
    ids = submit_chain(jobkit, specs, workdir, *options)
    broken = "prep SUCCEEDED -> train FAILED -> eval WILL NEVER START"
    wait_chain_line(jobkit, broken, workdir)
    fixed.touch()
    done = jobkit.run("retry", ids[1], "--json", cwd=workdir)
    assert done.returncode == 0, done.stderr
    train2 = json.loads(done.stdout)
    assert train2["attempt"] == 2 and train2["run_id"] == ids[1], train2
    relinked = [line for line in done.stderr.splitlines() if " re-linked: " in line]
    assert len(relinked) == 1, done.stderr
    assert relinked[0].startswith(f"jobkit: chain: eval ({ids[2]}) re-linked: attempt 2 jk")
    assert relinked[0].endswith(f"after train {train2['jobkit_id']} (ok)"), relinked
    text = wait_chain_line(jobkit, "prep SUCCEEDED -> train SUCCEEDED -> eval SUCCEEDED", workdir)
    assert "WILL NEVER START" not in text, text
    assert order.read_text().split() == ["prep", "train", "train", "eval"]
    evals = json.loads(jobkit.run("status", "--json", "--all", cwd=workdir).stdout)
    eval2 = [r for r in evals if r["run_id"] == ids[2] and r["attempt"] == 2]
    assert len(eval2) == 1 and eval2[0]["state"] == "SUCCEEDED", evals
    argv = " ".join(eval2[0]["submit_argv"])
    wanted = DEPENDS[backend].format(id=str(train2["scheduler_id"]).split(".")[0])
    assert wanted in argv, argv
    assert str(train2["scheduler_id"]).split(".")[0] in argv, argv
    (first,) = [r for r in evals if r["jobkit_id"] == ids[2]]
    # Grid Engine releases the hold when train ends (not only when it succeeds): either
    # attempt 1's own script ran first, saw train's exit code 3 and stopped (FAILED), or
    # `jobkit status` saw the broken chain first and cancelled it (CANCELLED). Elsewhere
    # the scheduler never starts it, and jobkit cancels it.
    ended = ("FAILED", "CANCELLED") if backend == "sge" else ("CANCELLED",)
    assert first["state"] in ended, first
    assert first["attempt"] == 1 and first["extra"]["chain_broken"], first


@pytest.mark.slurm
def test_slurm_retry_relinks_the_cancelled_stage(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    check_retry_relinks(jobkit, "slurm", tmp_path)


@pytest.mark.slurm
def test_slurm_retry_relinks_a_kept_waiting_stage(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    """--keep-broken: eval still waits (DependencyNeverSatisfied); retry cancels it and
    submits it again after the new attempt."""
    check_retry_relinks(jobkit, "slurm", tmp_path, "--keep-broken")


@pytest.mark.pbs
def test_pbs_retry_relinks(jobkit: Jobkit, pbs_cluster: object, tmp_path: Path) -> None:
    check_retry_relinks(jobkit, "pbs", tmp_path)


@pytest.mark.sge
def test_sge_retry_relinks(jobkit: Jobkit, sge_cluster: object, tmp_path: Path) -> None:
    check_retry_relinks(jobkit, "sge", tmp_path)


def test_local_retry_relinks(jobkit: Jobkit, tmp_path: Path) -> None:
    check_retry_relinks(jobkit, "local", tmp_path)
