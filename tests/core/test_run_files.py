"""The run folder's exit_code note: the code, then the scheduler id of the job that wrote it
(core/run_files.py). A run's attempts share the folder: a job reads only its own code."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.run_files import read_exit_file, same_job


@pytest.mark.parametrize(
    ("text", "job_id", "expected"),
    [
        ("0\n8166\n", "8166", 0),
        ("3\n8166\n", None, 3),  # no job asked: whoever wrote it
        ("0\n8170\n", "8166", None),  # the run's next attempt wrote it
        ("0\n", "8166", 0),  # an older jobkit wrote no id
        ("0\n\n", "8166", 0),  # a launcher with no job id
        ("-29\n77.pbs01\n", "77", -29),
        ("1\n123_4\n", "123_4", 1),  # a Slurm array task
        ("1\n123_4\n", "124_4", None),
        ("1\n123.4\n", "123.4", 1),  # a Grid Engine array task
        ("", "1", None),
        ("x\n1\n", "1", None),
        ("\n0\n", "1", None),
    ],
)
def test_the_exit_file_is_read_for_its_own_job(
    tmp_path: Path, text: str, job_id: str | None, expected: int | None
) -> None:
    (tmp_path / "exit_code").write_text(text)
    assert read_exit_file(tmp_path, job_id) == expected


def test_no_folder_or_file_is_none(tmp_path: Path) -> None:
    assert read_exit_file(None) is None
    assert read_exit_file(tmp_path / "missing") is None
    assert read_exit_file(tmp_path) is None
    (tmp_path / "exit_code").write_bytes(b"\xff\xfe\n")
    assert read_exit_file(tmp_path) is None


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        ("123", "123.server", True),
        ("123[4].server", "123_4", True),
        ("123", "1234", False),
        ("local-1-77", "local-1-77", True),
        ("local-1-77", "local-1-78", False),
    ],
)
def test_same_job(one: str, other: str, same: bool) -> None:
    assert same_job(one, other) is same
