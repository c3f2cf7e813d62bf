"""Bad nodes left out on the real Grid Engine (tests/cluster, exec hosts n1 and n2): qsub's
`-l h=!NODE` keeps the job off the listed host (docs/nodes.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.manager.helpers import Invoke, is_settled, wait_until

pytestmark = [pytest.mark.sge, pytest.mark.usefixtures("sge_cluster")]


def test_added_host_is_left_out(workdir: Path, jobkit: Invoke) -> None:
    assert jobkit("nodes", "--add", "n1", "--backend", "sge", "--for", "10m").code == 0
    spec = workdir / "where.yaml"
    spec.write_text(
        "name: where\nbackend: sge\nresources:\n  nodes: 1\n  time: 5\n"
        "run:\n  command: [hostname]\n"
    )
    result = jobkit("submit", str(spec), "--json", "--no-check")
    assert result.code == 0, result.err
    job = json.loads(result.out)
    argv = job["submit_argv"]
    assert argv[argv.index("-l") : argv.index("-l") + 2] == ["-l", "h=!n1"]
    assert result.err.startswith("jobkit: excluding n1 (added by hand just now, until ")
    final = wait_until(jobkit, job["jobkit_id"], is_settled)
    assert (final["state"], final["nodes"]) == ("SUCCEEDED", "n2")
