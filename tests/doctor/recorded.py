"""A job record whose run folder holds given log text, for the classes that cannot run here.

The text is recorded from real runs elsewhere (NCCL, CUDA, a failing node, the Slurm
step daemon's lines): this machine has no GPU, and the shared test cluster must not lose a
node. Every test that uses it says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobkit.registry.record import JobRecord, new_record


def job_with_logs(
    folder: Path,
    files: dict[str, str],
    *,
    state: str = "FAILED",
    exit_code: int | None = 1,
    signal: int | None = None,
    nodes: int = 1,
    nproc: int = 1,
    launcher: str = "torchrun",
    ranks: dict[int, int] | None = None,
    script: str = "",
    spec_extra: dict[str, Any] | None = None,
) -> JobRecord:
    """A final job `t-1` whose .out/.err and run-folder files hold `files` (names relative to
    the run folder, or `OUT` / `ERR` for the job's own files)."""
    run_dir = folder / "logs" / "t-1"
    (run_dir / "ranks").mkdir(parents=True)
    paths = {
        "out": str(folder / "logs" / "t-1.out"),
        "err": str(folder / "logs" / "t-1.err"),
        "run_dir": str(run_dir),
    }
    for name, text in files.items():
        target = Path(paths["out"] if name == "OUT" else paths["err"] if name == "ERR" else "")
        if name not in ("OUT", "ERR"):
            target = run_dir / name
        target.write_text(text, encoding="utf-8")
    for rank, node in (ranks or {}).items():
        (run_dir / "ranks" / str(rank)).write_text(f"{node}\n")
    spec = {
        "name": "t",
        "resources": {"nodes": nodes},
        "launch": {"nproc_per_node": nproc, "launcher": launcher},
        "run": {"command": ["python", "x.py"]},
        **(spec_extra or {}),
    }
    return new_record(
        jobkit_id="jktest1",
        scheduler_id="1",
        backend="slurm",
        name="t",
        state=state,
        raw_state=state,
        exit_code=exit_code,
        signal=signal,
        created_at=1.7e9,
        submitted_at=1.7e9,
        workdir=folder,
        job_dir=folder / "job",
        log_paths=paths,
        spec_json=json.dumps(spec),
        script=script,
        token="t",
    )
