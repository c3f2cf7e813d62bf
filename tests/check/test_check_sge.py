"""`jobkit check` against the real Grid Engine of tests/cluster: `qsub -w v` names an unknown
queue at resources.partition; a good job is ok; the Torque wrappers have no verify (a note)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.manager.helpers import Invoke


@pytest.mark.sge
def test_grid_engine_unknown_queue_by_qsub_verify(
    workdir: Path, jobkit: Invoke, sge_cluster: Any
) -> None:
    (workdir / "sge.yaml").write_text(
        "name: chksge\nbackend: sge\nresources:\n  partition: nosuch.q\n  time: '00:02:00'\n"
        "run: {command: [bash, -c, 'true']}\n",
        encoding="utf-8",
    )
    result = jobkit("check", "sge.yaml")
    assert (result.code, result.out.splitlines()) == (
        2,
        [
            "sge.yaml:4: resources.partition: Grid Engine has no such queue (qsub -w v: Unable"
            ' to run job: Job was rejected because job requests unknown queue "nosuch.q")'
        ],
    )
    fine = jobkit("check", "sge.yaml", "--set", "resources.partition=null")
    assert fine.code == 0, fine.out
    assert fine.out == "ok: sge.yaml (sge): checked spec, program, queue h_rt, qsub -w v\n"


def test_torque_wrappers_have_no_scheduler_checks(workdir: Path, jobkit: Invoke) -> None:
    (workdir / "pbs.yaml").write_text(
        "name: chkpbs\nbackend: pbs\nrun: {command: [bash, -c, 'true']}\n", encoding="utf-8"
    )
    result = jobkit("check", "pbs.yaml")
    assert result.code == 0, result.out
    assert result.out.splitlines() == [
        "note: scheduler checks are not available for the pbs backend",
        "ok: pbs.yaml (pbs): checked spec, program",
    ]
