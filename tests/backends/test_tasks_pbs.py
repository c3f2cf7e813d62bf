"""One task of a PBS array as its own tracked job (issue 16): PBS Pro and Torque name it
`123[4].server`. Slurm's Torque wrappers (this cluster's `pbs`) cannot address one task: their
qstat lists tasks under Slurm's internal job numbers and their qdel reads `123[4]` as 123 (the
whole array), so jobkit refuses to cancel such a task with qdel and says how to do it."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.backends.base import TrackedJob
from jobkit.backends.pbs.backend import PbsBackend
from jobkit.core.errors import SchedulerError


@pytest.mark.parametrize(
    ("array", "task", "expected"),
    [
        ("123[].server", "4", "123[4].server"),
        ("123.server", "4", "123[4].server"),
        ("123", "0", "123[0]"),
    ],
)
def test_a_task_is_named_as_pbs_names_a_subjob(array: str, task: str, expected: str) -> None:
    assert PbsBackend.task_job_id(array, task) == expected
    assert PbsBackend.task_label(array, task) == expected.split(".")[0]


def test_a_task_behind_the_torque_wrappers_is_refused_not_the_whole_array_stopped(
    tmp_path: Path,
) -> None:
    task = TrackedJob("jk1", PbsBackend.task_job_id("13210", "1"), tmp_path, tmp_path)
    with pytest.raises(SchedulerError) as caught:
        PbsBackend().cancel([task])  # no qdel runs: it would stop array 13210 whole
    assert "scancel 13210_1" in caught.value.show()


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("slurm", "array"),
        ("pbs", "array"),
        ("sge", "array"),
        ("local", "each"),
        ("ssh", "each"),
        ("submitit", "none"),
    ],
)
def test_each_backend_says_how_it_runs_a_sweep(name: str, mode: str) -> None:
    from jobkit.backends.registry import backend_class

    assert backend_class(name).sweep_mode == mode
