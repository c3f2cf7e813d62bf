"""The one reader and writer of durations (core/units): schedulers' clocks, elapsed, ETA, age."""

from __future__ import annotations

import pytest

from jobkit.core.units import format_age, format_clock, format_duration, parse_clock


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:05", 5.0),  # squeue %M under an hour: M:SS
        ("1:02:03", 3723.0),
        ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5.0),
        ("00:01:02.500", 62.5),  # sacct TotalCPU keeps milliseconds
        ("1-00:00:00", 86400.0),
        (" 12:00 ", 720.0),
    ],
)
def test_scheduler_clocks_read_as_seconds(text: str, seconds: float) -> None:
    assert parse_clock(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "   ", "INVALID", "Unknown", "x-01:00", "1:2:3:4", "1:-2", "1:02.", "1e3"]
)
def test_what_is_not_a_clock_is_none(text: str) -> None:
    assert parse_clock(text) is None


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (-3, "0:00"), (5.9, "0:05"), (3723, "1:02:03"), (183845, "2-03:04:05")],
)
def test_elapsed_is_shown_in_slurm_style(seconds: float | None, shown: str) -> None:
    assert format_duration(seconds) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"), [(42.4, "0:42"), (5520, "1:32:00"), (184200, "2d 03:10:00")]
)
def test_an_eta_reads_as_a_clock(seconds: float, shown: str) -> None:
    assert format_clock(seconds) == shown


@pytest.mark.parametrize(
    ("seconds", "coarse", "fine"),
    [
        (45, "45s", "45s"),
        (720, "12m", "12m"),
        (3 * 3600 + 5 * 60, "3h", "3h05m"),
        (2 * 86400 + 4 * 3600, "2d", "2d04h"),
        (-1, "0s", "0s"),
    ],
)
def test_ages_coarse_and_fine(seconds: float, coarse: str, fine: str) -> None:
    assert format_age(seconds) == coarse
    assert format_age(seconds, fine=True) == fine
