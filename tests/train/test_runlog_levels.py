"""train/reporting/runlog.py's level (JOBKIT_LOG_LEVEL, set by env.log_level): what reaches the
console and what the rank's log file keeps."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from train.reporting.runlog import RunLog


def lines(level: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(console, rank-0.log) after one debug, info and warning line at this level."""
    monkeypatch.setenv("JOBKIT_LOG_LEVEL", level)
    console = io.StringIO()
    log = RunLog(0, tmp_path, metrics=False, console=console)
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.close()
    return console.getvalue(), (tmp_path / "rank-0.log").read_text()


@pytest.mark.parametrize(
    ("level", "console", "file"),
    [
        ("DEBUG", "debug: d\ni\nwarning: w\n", ["debug: d", "i", "warning: w"]),
        ("debug", "debug: d\ni\nwarning: w\n", ["debug: d", "i", "warning: w"]),
        ("INFO", "i\nwarning: w\n", ["i", "warning: w"]),
        ("", "i\nwarning: w\n", ["i", "warning: w"]),
        ("WARNING", "warning: w\n", ["i", "warning: w"]),
        ("ERROR", "", ["i", "warning: w"]),
    ],
)
def test_the_level_filters_the_console_and_the_file_keeps_info(
    level: str,
    console: str,
    file: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown, kept = lines(level, tmp_path, monkeypatch)
    assert shown == console
    assert [line.split("rank 0: ", 1)[1] for line in kept.splitlines()] == file
