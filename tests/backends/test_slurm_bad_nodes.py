"""Bad nodes left out on the real Slurm cluster (tests/cluster/up.sh, nodes n1 and n2):
`jobkit nodes --add` then sbatch --exclude; a node downed under a running job goes on the
list through `jobkit status` and the next submission leaves it out (docs/nodes.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.manager.helpers import Invoke, is_settled, slurm_spec, status_of, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]


def _submit(jobkit: Invoke, spec: Path) -> tuple[dict[str, Any], str]:
    """Submit; (the job as --json prints it, what submit said on stderr)."""
    result = jobkit("submit", str(spec), "--json", "--no-check")
    assert result.code == 0, result.err
    return json.loads(result.out), result.err


def _sacct_nodes(scheduler_id: str) -> str:
    done = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", scheduler_id, "-o", "NodeList"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.strip()


def test_added_node_is_excluded_and_the_job_runs_on_the_other(
    workdir: Path, jobkit: Invoke
) -> None:
    added = jobkit("nodes", "--add", "n2", "--for", "1h", "--reason", "jobkit-test")
    assert added.code == 0, added.err
    job, said = _submit(jobkit, slurm_spec(workdir, "dodge", "hostname"))
    argv = job["submit_argv"]
    assert isinstance(argv, list) and "--exclude=n2" in argv
    assert argv.index("--exclude=n2") == len(argv) - 2  # before the script's path
    assert said.startswith("jobkit: excluding n2 (jobkit-test: added by hand just now, until ")
    assert said.rstrip().endswith("): jobkit nodes")
    final = wait_until(jobkit, str(job["jobkit_id"]), is_settled)
    assert (final["state"], final["nodes"]) == ("SUCCEEDED", "n1")
    assert _sacct_nodes(str(job["scheduler_id"])) == "n1"


def test_exclusion_that_would_leave_too_few_nodes_is_not_used(
    workdir: Path, jobkit: Invoke
) -> None:
    assert jobkit("nodes", "--add", "n2", "--for", "1h").code == 0
    spec = slurm_spec(workdir, "wide", "hostname", "resources:", "  nodes: 2")
    job, said = _submit(jobkit, spec)
    jobkit("cancel", str(job["jobkit_id"]))  # never needs to run: the argv is the point
    assert not any(str(word).startswith("--exclude") for word in job["submit_argv"])
    assert said.startswith("jobkit: warning: not excluding n2 (added by hand just now, until ")
    assert "the job needs 2 node(s) and only 1 of the partition's 2 would be left" in said


def test_switched_off_spec_is_submitted_without_exclusion(workdir: Path, jobkit: Invoke) -> None:
    assert jobkit("nodes", "--add", "n2", "--for", "1h").code == 0
    spec = slurm_spec(workdir, "anywhere", "hostname", "scheduler:", "  exclude_bad_nodes_for: 0")
    job, said = _submit(jobkit, spec)
    jobkit("cancel", str(job["jobkit_id"]))
    assert not any(str(word).startswith("--exclude") for word in job["submit_argv"])
    assert "excluding" not in said


@pytest.mark.slow
@pytest.mark.cluster_alone  # takes a node down
def test_node_downed_during_a_job_is_excluded_from_the_next(workdir: Path, jobkit: Invoke) -> None:
    """The issue's case: a node goes down under a running job (scontrol ... state=down, the
    job ends NODE_FAIL: jobkit's scripts submit with --no-requeue by default); `jobkit
    status` puts the node on the list; the next job is submitted with --exclude and runs on
    the other node. The node is resumed at once, whatever happens."""
    first, _ = _submit(jobkit, slurm_spec(workdir, "victim", "sleep 300"))
    jobkit_id = str(first["jobkit_id"])
    running = wait_until(jobkit, jobkit_id, lambda r: r["state"] == "RUNNING" and r["nodes"])
    node = str(running["nodes"])
    other = {"n1": "n2", "n2": "n1"}[node]
    try:
        subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=down", "reason=jobkit-test"],
            check=True,
            timeout=30,
        )
        ended = wait_until(jobkit, jobkit_id, lambda r: r["state"] == "NODE_FAIL", timeout=120)
        assert ended["nodes"] == node  # the node list is kept after the end
    finally:
        subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=resume"], check=False, timeout=30
        )
    listed = json.loads(jobkit("nodes", "--json").out)
    assert [(r["node"], r["reason"], r["jobkit_id"]) for r in listed] == [
        (node, "NODE_FAIL", jobkit_id)
    ]
    assert status_of(jobkit, jobkit_id)["state"] == "NODE_FAIL"
    second, said = _submit(jobkit, slurm_spec(workdir, "next", "hostname"))
    assert f"--exclude={node}" in second["submit_argv"]
    assert said.startswith(f"jobkit: excluding {node} (NODE_FAIL of {jobkit_id} just now, until ")
    final = wait_until(jobkit, str(second["jobkit_id"]), is_settled)
    assert (final["state"], final["nodes"]) == ("SUCCEEDED", other)
