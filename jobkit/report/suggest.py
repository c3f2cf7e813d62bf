"""The next run's size: `--set` words the user can paste, and notes (docs/report.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from jobkit.core.units import format_memory, format_slurm_time

TIME_MARGIN = 1.3
MEM_MARGIN = 1.25
LOW_CPU = 0.5
"""Below this CPU efficiency the report says the CPUs mostly waited."""


@dataclass(frozen=True)
class Suggestion:
    """`--set` words and the notes that explain or qualify them."""

    sets: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def round_time_up(seconds: float) -> int:
    """Seconds rounded up to a step that reads well: 1 min under 10 min, 5 min under 2 h,
    15 min under a day, else 1 h; at least a minute."""
    step = 60 if seconds < 600 else 300 if seconds < 7200 else 900 if seconds < 86400 else 3600
    return max(60, math.ceil(seconds / step) * step)


def round_mem_up(megabytes: float) -> int:
    """Megabytes rounded up: to 64M under 1G, 256M under 16G, else whole gigabytes."""
    step = 64 if megabytes < 1024 else 256 if megabytes < 16384 else 1024
    return max(step, math.ceil(megabytes / step) * step)


def _hms(seconds: float) -> str:
    return format_slurm_time(round(seconds))


def suggest(
    *,
    state: str,
    elapsed_s: float | None,
    time_limit_s: float | None,
    peak_mem_mb: float | None,
    mem_request_mb: float | None,
    lowest_cpu: tuple[str, float] | None,
    gpu: bool,
) -> Suggestion:
    """What to ask for next time, from what this run used.

    time = elapsed * 1.3 rounded up (never below elapsed); mem = peak per node * 1.25
    rounded up; a note when the least busy node's CPU efficiency is below 50 %."""
    result = Suggestion()
    if state in ("RUNNING", "QUEUED", "SUBMITTING", "UNKNOWN"):
        result.notes.append(f"the job is {state}: no suggestion until it ends")
        return result
    if elapsed_s:
        wanted = round_time_up(max(elapsed_s * TIME_MARGIN, elapsed_s))
        result.sets.append(f"--set resources.time={format_slurm_time(wanted)}")
        result.why.append(f"time: elapsed {_hms(elapsed_s)} x {TIME_MARGIN}, rounded up")
        if state == "TIMEOUT":
            limit = f" ({_hms(time_limit_s)})" if time_limit_s else ""
            result.notes.append(
                f"the job reached its time limit{limit}: it needed more than it ran, so this"
                " is a lower bound; checkpoint and requeue (scheduler.requeue) to go on"
            )
    if peak_mem_mb:
        base = peak_mem_mb
        if state == "OUT_OF_MEMORY" and mem_request_mb:
            base = max(peak_mem_mb, mem_request_mb) * 1.5 / MEM_MARGIN
            result.notes.append("the job was killed for memory: asking for 1.5x the request")
        wanted_mb = round_mem_up(base * MEM_MARGIN)
        result.sets.append(f"--set resources.mem={format_memory(wanted_mb)}")
        result.why.append(
            f"memory: peak {format_memory(math.ceil(peak_mem_mb))} per node x {MEM_MARGIN},"
            " rounded up"
        )
    else:
        result.notes.append("memory: no peak was measured, so no resources.mem suggestion")
    if lowest_cpu is not None and lowest_cpu[1] < LOW_CPU:
        node, value = lowest_cpu
        busy = (
            "if the GPUs are also idle, the input pipeline is the bottleneck: more data loader"
            " workers"
            if gpu
            else "ask for fewer CPUs (resources.cpus_per_process) or keep them busy: more data"
            " loader workers or threads"
        )
        result.notes.append(
            f"CPU efficiency is low ({node}: {value:.0%}): the CPUs mostly waited; {busy}"
            " (bundled trainer: --set run.train.overrides.data.num_workers=4)"
        )
    return result
