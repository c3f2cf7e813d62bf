"""The next-run suggestion: rounding rules and the exact text for constructed cases."""

from __future__ import annotations

import pytest

from jobkit.report.suggest import round_mem_up, round_time_up, suggest


@pytest.mark.parametrize(
    ("seconds", "rounded"),
    [(1, 60), (61, 120), (599, 600), (601, 900), (5000, 5100), (7201, 8100), (86401, 90000)],
)
def test_time_rounds_up_to_a_readable_step(seconds: float, rounded: int) -> None:
    assert round_time_up(seconds) == rounded and rounded >= seconds


@pytest.mark.parametrize(
    ("mb", "rounded"),
    [(1, 64), (266.4, 320), (1024, 1024), (1025, 1280), (5000, 5120), (20000, 20480)],
)
def test_memory_rounds_up(mb: float, rounded: int) -> None:
    assert round_mem_up(mb) == rounded


def test_a_finished_job_gets_time_and_memory_words_and_a_low_cpu_note() -> None:
    got = suggest(
        state="SUCCEEDED",
        elapsed_s=3725,  # 01:02:05 -> x1.3 = 4842.5 s -> 01:25:00
        time_limit_s=4 * 3600,
        peak_mem_mb=3000,  # x1.25 = 3750 -> 3840M
        mem_request_mb=32768,
        lowest_cpu=("n2", 0.12),
        gpu=False,
    )
    assert got.sets == ["--set resources.time=01:25:00", "--set resources.mem=3840M"]
    assert got.why == [
        "time: elapsed 01:02:05 x 1.3, rounded up",
        "memory: peak 3000M per node x 1.25, rounded up",
    ]
    assert got.notes == [
        "CPU efficiency is low (n2: 12%): the CPUs mostly waited; ask for fewer CPUs"
        " (resources.cpus_per_process) or keep them busy: more data loader workers or threads"
        " (bundled trainer: --set run.train.overrides.data.num_workers=4)"
    ]


def test_a_timed_out_job_is_told_its_figure_is_a_lower_bound() -> None:
    got = suggest(
        state="TIMEOUT",
        elapsed_s=600,
        time_limit_s=600,
        peak_mem_mb=None,
        mem_request_mb=None,
        lowest_cpu=("n1", 0.9),
        gpu=True,
    )
    assert got.sets == ["--set resources.time=00:15:00"]
    assert got.notes == [
        "the job reached its time limit (00:10:00): it needed more than it ran, so this is a"
        " lower bound; checkpoint and requeue (scheduler.requeue) to go on",
        "memory: no peak was measured, so no resources.mem suggestion",
    ]


def test_an_out_of_memory_job_asks_for_half_as_much_again() -> None:
    got = suggest(
        state="OUT_OF_MEMORY",
        elapsed_s=30,
        time_limit_s=None,
        peak_mem_mb=900,
        mem_request_mb=1024,
        lowest_cpu=None,
        gpu=False,
    )
    assert got.sets == ["--set resources.time=00:01:00", "--set resources.mem=1536M"]


def test_a_running_job_gets_no_suggestion() -> None:
    got = suggest(
        state="RUNNING",
        elapsed_s=30,
        time_limit_s=None,
        peak_mem_mb=900,
        mem_request_mb=None,
        lowest_cpu=None,
        gpu=False,
    )
    assert got.sets == [] and got.notes == ["the job is RUNNING: no suggestion until it ends"]
