"""Where a run writes: logs, metrics, checkpoints and the marker files for jobkit's scripts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jobkit.core.conventions import CHECKPOINTS_DIR, FINISHED_FILE, REQUEUE_MARKER_FILE
from train.config.load import TrainerConfig

MARKER_NAME = REQUEUE_MARKER_FILE
"""Written by rank 0 when the run stopped early and saved a checkpoint to resume from."""
FINISHED_NAME = FINISHED_FILE
"""Written by rank 0 once training is complete: the job script then knows the work is done
even when a signal (a time-limit warning) turned the launcher's exit code into a failure."""


@dataclass(frozen=True)
class RunPaths:
    """Where this run writes: logs, metrics, checkpoints and the requeue marker."""

    run_dir: Path
    log_dir: Path
    checkpoint_dir: Path
    marker: Path | None
    finished: Path | None = None


def resolve_paths(config: TrainerConfig, environ: Mapping[str, str]) -> RunPaths:
    """$JOBKIT_RUN_DIR when set (jobkit jobs), else runs/NAME; config dirs override."""
    jobkit_dir = environ.get("JOBKIT_RUN_DIR", "").strip()
    run_dir = Path(jobkit_dir) if jobkit_dir else Path("runs") / config.name
    return RunPaths(
        run_dir=run_dir,
        log_dir=Path(config.logging.dir) if config.logging.dir else run_dir,
        checkpoint_dir=(
            Path(config.checkpoint.dir) if config.checkpoint.dir else run_dir / CHECKPOINTS_DIR
        ),
        marker=Path(jobkit_dir) / MARKER_NAME if jobkit_dir else None,
        finished=Path(jobkit_dir) / FINISHED_NAME if jobkit_dir else None,
    )
