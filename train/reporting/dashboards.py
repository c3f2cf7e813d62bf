"""Dashboards on rank 0: TensorBoard event files and Weights & Biases, fed each metrics record.

Both are optional extras (`pip install jobkit[tensorboard]`, `jobkit[wandb]`), imported only
when `logging.tensorboard` / `logging.wandb` ask for them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from train.config.load import LoadedConfig, WandbConfig

TENSORBOARD_DIR = "tensorboard"
WANDB_ID_FILE = "wandb-run-id"
NOT_SCALARS = ("step", "time")
"""Record keys that are not plotted: the x axis and the wall clock."""
DEFAULT_SPLIT = "train"
"""The tag prefix of a record without a `split` key (evaluation records say `val`)."""
_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


class Sink(Protocol):
    """Where metrics records go besides metrics.jsonl."""

    def log(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The plotted numbers of a metrics record, tagged `SPLIT/KEY` (`train/loss`,
    `val/val_loss`): every int or float but step and time."""
    split = str(record.get("split", DEFAULT_SPLIT))
    return {
        f"{split}/{key}": float(value)
        for key, value in record.items()
        if key not in NOT_SCALARS
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    }


class TensorBoardSink:
    """`SPLIT/KEY` scalars at the record's step, in RUN/tensorboard (torch's SummaryWriter)."""

    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = log_dir
        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, record: Mapping[str, Any]) -> None:
        step = int(record["step"])
        for tag, value in scalars(record).items():
            self.writer.add_scalar(tag, value, step)

    def close(self) -> None:
        self.writer.close()


def wandb_run_id(run_dir: Path, environ: Mapping[str, str]) -> str:
    """The W&B run id of this run, the same across requeues and resumes.

    Read from RUN/wandb-run-id when an earlier start wrote it; else JOBKIT_RUN_ID when
    exported, else made from the run folder's path (which holds the job id under jobkit).
    The caller writes it back (`remember_wandb_run_id`) so a later start finds it.
    """
    saved = run_dir / WANDB_ID_FILE
    if saved.is_file():
        text = saved.read_text(encoding="utf-8").strip()
        if text:
            return text
    given = environ.get("JOBKIT_RUN_ID", "").strip()
    if given:
        return _ID_CHARS.sub("-", given)[:64]
    folder = run_dir.resolve()
    digest = hashlib.sha1(str(folder).encode()).hexdigest()[:8]
    return f"{_ID_CHARS.sub('-', folder.name)[:55]}-{digest}"


def remember_wandb_run_id(run_dir: Path, run_id: str) -> None:
    """Write RUN/wandb-run-id (atomically) unless it already holds `run_id`."""
    path = run_dir / WANDB_ID_FILE
    if path.is_file() and path.read_text(encoding="utf-8").strip() == run_id:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temp.write_text(run_id + "\n", encoding="utf-8")
    os.replace(temp, path)


class WandbSink:
    """One W&B run per training run (resume="allow" with a stable id), files in RUN/wandb."""

    def __init__(
        self,
        config: WandbConfig,
        run_dir: Path,
        name: str,
        settings: dict[str, Any],
        environ: Mapping[str, str],
    ) -> None:
        import wandb

        self.run_id = wandb_run_id(run_dir, environ)
        remember_wandb_run_id(run_dir, self.run_id)
        os.environ.setdefault("WANDB_RESUME", "allow")
        self.run = wandb.init(
            project=config.project,
            entity=config.entity,
            mode=config.mode,
            id=self.run_id,
            resume="allow",
            name=name,
            dir=str(run_dir),
            config=settings,
        )

    def log(self, record: Mapping[str, Any]) -> None:
        self.run.log(scalars(record), step=int(record["step"]))

    def close(self) -> None:
        self.run.finish()


def open_dashboards(
    loaded: LoadedConfig, run_dir: Path, environ: Mapping[str, str], is_main: bool
) -> list[Sink]:
    """The sinks `logging` asks for, on rank 0 (none elsewhere, and none when not asked).

    Every rank first checks that the packages are installed (without importing them), so a
    missing one stops the run on all ranks with one line: `KEY: ... not installed`.
    """
    logging = loaded.config.logging
    if not (logging.tensorboard or logging.wandb):
        return []
    wanted = {"logging.tensorboard": logging.tensorboard, "logging.wandb": logging.wandb}
    for key, package in (("logging.tensorboard", "tensorboard"), ("logging.wandb", "wandb")):
        if wanted[key] and importlib.util.find_spec(package) is None:
            raise loaded.error(
                key, f"the {package} package is not installed (pip install 'jobkit[{package}]')"
            )
    if not is_main:
        return []
    sinks: list[Sink] = []
    if logging.tensorboard:
        sinks.append(TensorBoardSink(run_dir / TENSORBOARD_DIR))
    if logging.wandb is not None:
        settings = loaded.config.model_dump(mode="json")
        sinks.append(WandbSink(logging.wandb, run_dir, loaded.config.name, settings, environ))
    return sinks
