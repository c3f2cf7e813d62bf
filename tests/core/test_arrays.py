"""Array expressions read one way (jobkit/core/arrays.py): scheduler.array, Slurm's pending
ranges, Grid Engine's task lists; and a task of an array submission as its row records it."""

from __future__ import annotations

import pytest

from jobkit.backends.base import Submitted
from jobkit.backends.registry import backend_class
from jobkit.core.arrays import array_includes, array_ranges, array_size
from jobkit.manager.submit import as_array_task


@pytest.mark.parametrize(
    ("text", "size"),
    [("0-9", 10), ("1,3,5", 3), ("0-10:2", 6), ("0-99%10", 100), ("7", 1), ("5-10:1", 6)],
)
def test_sizes(text: str, size: int) -> None:
    assert array_size(text) == size


@pytest.mark.parametrize("text", ["x", "", "5-3", "0-9:0", "1,,2", "[1-3]", "undefined"])
def test_what_is_not_an_array_expression(text: str) -> None:
    assert array_ranges(text) is None
    assert array_size(text) is None
    assert not array_includes(text, "1")


@pytest.mark.parametrize(
    ("text", "task", "named"),
    [
        ("2-5%2", "4", True),
        ("1,3,7-9", "8", True),
        ("1,3,7-9", "5", False),
        ("0-10:2", "3", False),
        ("0-10:2", "10", True),
        ("4", "4", True),
        ("0-9", "x", False),
        (None, "1", False),
    ],
)
def test_includes(text: str | None, task: str, named: bool) -> None:
    assert array_includes(text, task) is named


@pytest.mark.parametrize(
    ("backend", "array_id", "task", "scheduler_id", "file_task"),
    [("slurm", "123", "4", "123_4", "4"), ("sge", "77", "4", "77.5", "5")],
)
def test_a_task_of_an_array_submission_has_its_own_id_and_files(
    backend: str, array_id: str, task: str, scheduler_id: str, file_task: str
) -> None:
    """Grid Engine numbers tasks from 1: sweep task 4 is SGE task 5, and its files say so."""
    submitted = Submitted(
        scheduler_id=array_id,
        argv=["submit"],
        log_paths={"out": f"/l/x-{array_id}_{{task}}.out", "run_dir": f"/l/x-{array_id}_{{task}}"},
        extra={"array": "0-9", "run_dir": f"/l/x-{array_id}_{{task}}"},
    )
    one = as_array_task(backend_class(backend)(), submitted, task)
    assert one.scheduler_id == scheduler_id
    assert one.log_paths == {
        "out": f"/l/x-{array_id}_{file_task}.out",
        "run_dir": f"/l/x-{array_id}_{file_task}",
    }
    assert one.extra == {"run_dir": f"/l/x-{array_id}_{file_task}", "array_job": array_id}
