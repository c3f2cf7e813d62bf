"""Case 7, sweep submission: `jobkit submit` of a held sweep of 10, 1,000 and 10,000 tasks.

Each size is a 10 x N/10 grid (`sweep.grid`) of `true`, submitted held (Slurm `--hold`,
Grid Engine `-h`) as one array job into a fresh registry, timed from spawn to exit; its peak
memory is the whole process's (`ru_maxrss` of the reaped `jobkit submit`, which includes
the sbatch/qsub it waited for). The array is cancelled right after (its own id only). The
baseline, run in the same rounds, is the 10-task sweep: per task = (size N - size 10) /
(N - 10). Slurm takes the sizes its MaxArraySize allows (1,001 here); Grid Engine (the test
cluster's, max_aj_tasks 75,000) takes every size, so the 10,000-task figure is Grid
Engine's. Targets (issue 25): 10,000 tasks under 150 MB and in a few seconds.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from bench.case import CaseResult, Context, target
from bench.measure import interleave, stats

NAME = "sweep_submit"
TITLE = "Sweep submission (held array, whole-process peak memory)"
SIZES = (10, 1_000, 10_000)
QUICK_SIZES = (10, 1_000)
MAX_MB = 150.0
MAX_SECONDS = 5.0
SGE_ENV_FILE = Path("/var/lib/jobkit-cluster/sge/env.sh")
"""Written by tests/cluster/sge.sh: SGE_ROOT, SGE_CELL and the ports of the test cluster."""
_ID = re.compile(r"array (\d+)")


def sweep_spec(backend: str, tasks: int) -> dict[str, object]:
    """A held 10 x tasks/10 sweep of `true` for `backend`."""
    return {
        "name": f"bench-sweep-{tasks}",
        "backend": backend,
        "resources": {"nodes": 1, "time": 5},
        "scheduler": {"extra": ["--hold"] if backend == "slurm" else ["-h"]},
        "run": {"command": ["true"]},
        "sweep": {"grid": {"a": list(range(10)), "b": list(range(tasks // 10))}},
    }


def slurm_max_array() -> int | None:
    """Slurm's MaxArraySize (tasks an array may hold: indices 0..MaxArraySize-1)."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", done.stdout, re.MULTILINE)
    return int(found.group(1)) if found else None


def sge_environment() -> dict[str, str] | None:
    """The test cluster's Grid Engine variables, or None when it is not there."""
    try:
        text = SGE_ENV_FILE.read_text(encoding="utf-8")
    except OSError:
        return None
    found = dict(re.findall(r"^export (SGE_\w+)=(\S+)$", text, re.MULTILINE))
    return found if "SGE_ROOT" in found else None


def submit_once(
    ctx: Context, backend: str, tasks: int, extra_env: Mapping[str, str]
) -> dict[str, float]:
    """Submit the held sweep into a fresh registry; wall s and peak MB; cancel it."""
    folder = ctx.scratch(f"sweep-{backend}-{tasks}")
    spec = folder / "sweep.yaml"
    spec.write_text(json.dumps(sweep_spec(backend, tasks)), encoding="utf-8")
    env = ctx.env(JOBKIT_HOME=str(folder / "home"), **extra_env)
    argv = [str(ctx.jobkit), "submit", str(spec)]
    out_file, err_file = folder / "out.txt", folder / "err.txt"
    with out_file.open("w") as out, err_file.open("w") as err:
        start = time.perf_counter()
        child = subprocess.Popen(argv, cwd=folder, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage (and its qsub's)
        wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    found = _ID.search(out_file.read_text(encoding="utf-8", errors="replace"))
    if found:
        _cancel(backend, found.group(1), env)
    if child.returncode != 0 or not found:
        tail = err_file.read_text(encoding="utf-8", errors="replace").strip()[-300:]
        raise RuntimeError(f"jobkit submit ({backend}, {tasks} tasks): {tail}")
    return {"wall_s": wall, "peak_mb": usage.ru_maxrss / 1024}


def _cancel(backend: str, job_id: str, env: Mapping[str, str]) -> None:
    if backend == "slurm":
        argv = ["scancel", job_id]
    else:
        argv = [str(Path(env["SGE_ROOT"]) / "bin" / "lx-amd64" / "qdel"), job_id]
    subprocess.run(argv, env=dict(env), capture_output=True, timeout=60, check=False)


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    sizes = QUICK_SIZES if ctx.quick else SIZES
    max_array = slurm_max_array() if ctx.partition else None
    sge = sge_environment()
    plans: dict[str, tuple[str, int, dict[str, str]]] = {}
    for backend, allowed, extra in (
        ("slurm", max_array, {}),
        ("sge", 75_000 if sge else None, sge or {}),
    ):
        if allowed is None:
            result.notes.append(f"{backend}: not available here")
            continue
        for size in sizes:
            if size <= allowed:
                plans[f"{backend} {size} tasks"] = (backend, size, extra)
            else:
                result.notes.append(f"{backend}: {size} tasks is more than its {allowed}")
    if not plans:
        result.status, result.reason = "not available", "neither Slurm nor Grid Engine"
        return result
    result.facts["slurm_max_array_size"] = max_array
    rounds = 1 if ctx.quick else 3
    data = interleave(
        {name: functools.partial(submit_once, ctx, *plan) for name, plan in plans.items()},
        rounds,
        warmup=0 if ctx.quick else 1,
    )
    for name in plans:
        result.stats.append(data.stats(name, "wall_s", "s"))
    for name in plans:
        result.stats.append(data.stats(name, "peak_mb", "MB"))
    for name, (backend, size, _) in plans.items():
        base = f"{backend} {min(sizes)} tasks"
        if size == min(sizes) or base not in plans:
            continue
        wall, peak = (
            stats("", "s", data.get(name, "wall_s")),
            stats("", "MB", data.get(name, "peak_mb")),
        )
        base_wall = stats("", "s", data.get(base, "wall_s")).median
        base_peak = stats("", "MB", data.get(base, "peak_mb")).median
        extra_tasks = size - min(sizes)
        result.ratios[f"{name}: MB per task beyond {min(sizes)}"] = (
            peak.median - base_peak
        ) / extra_tasks
        result.ratios[f"{name}: ms per task beyond {min(sizes)}"] = (
            1000 * (wall.median - base_wall) / extra_tasks
        )
        if size == max(SIZES):
            result.targets.append(
                target(
                    f"{name}: peak memory",
                    f"< {MAX_MB:g} MB",
                    peak.median,
                    "MB",
                    peak.median < MAX_MB,
                )
            )
            result.targets.append(
                target(
                    f"{name}: submit time",
                    f"<= {MAX_SECONDS:g} s",
                    wall.median,
                    "s",
                    wall.median <= MAX_SECONDS,
                )
            )
    return result
