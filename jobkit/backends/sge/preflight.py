"""Grid Engine's answers before queueing (`jobkit check` only): `qsub -w v` of the rendered
script (verify: the scheduler says whether any queue could ever run it, and submits nothing)
and, for a queue the spec names, its h_rt from `qconf -sq` against resources.time. At submit
nothing is asked: qsub itself refuses the same at once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.backends.preflight import Finding, Preflight
from jobkit.core.units import format_hms, parse_duration

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

_VERIFY_WORDS: tuple[tuple[str, str, str], ...] = (
    ("unknown queue", "resources.partition", "Grid Engine has no such queue"),
    ("parallel environment", "sge.pe", "Grid Engine has no such parallel environment"),
    ("unknown resource", "resources", "Grid Engine knows no such resource (complex)"),
)


def preflight(
    spec: JobSpec, script: str, workdir: Path, *, thorough: bool, timeout: float
) -> Preflight:
    """`qsub -w v` and the named queue's h_rt (thorough only)."""
    if not thorough:
        return Preflight()
    findings = queue_time_limit(spec, timeout)
    findings += [
        f for f in verify(script, workdir, timeout) if f.key not in {g.key for g in findings}
    ]
    return Preflight(tuple(findings), ("queue h_rt", "qsub -w v"))


def queue_time_limit(spec: JobSpec, timeout: float) -> list[Finding]:
    """resources.time over h_rt of the queue resources.partition names."""
    from jobkit.backends.commands import GRID_ENGINE
    from jobkit.core import proc

    queue, wanted = spec.resources.partition, spec.resources.time
    if not queue or not wanted:
        return []
    done = proc.run(GRID_ENGINE.argv(["qconf", "-sq", queue]), timeout=timeout, check=False)
    match = re.search(r"^h_rt\s+(\S+)", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not match or match[1].upper() == "INFINITY":
        return []
    try:
        limit = parse_duration(match[1])
    except ValueError:
        return []
    if wanted <= limit:
        return []
    message = f"{format_hms(wanted)} is over queue {queue}'s h_rt {format_hms(limit)}"
    return [Finding("resources.time", message + ": the job would never start")]


def verify(script: str, workdir: Path, timeout: float) -> list[Finding]:
    """`qsub -w v` (script on stdin): its refusal at the key at fault."""
    from jobkit.backends.commands import GRID_ENGINE
    from jobkit.core import proc

    done = proc.run(
        GRID_ENGINE.argv(["qsub", "-w", "v"]),
        input=script,
        cwd=workdir,
        timeout=timeout,
        check=False,
    )
    if done.returncode == 0:
        return []
    said = " ".join((done.stderr + " " + done.stdout).replace("Exiting.", "").split())
    lower = said.lower()
    for needle, key, meaning in _VERIFY_WORDS:
        if needle in lower:
            return [Finding(key, f"{meaning} (qsub -w v: {said})")]
    return [Finding("resources", f"qsub -w v refused the job: {said}")]
