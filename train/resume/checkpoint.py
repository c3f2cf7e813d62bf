"""Checkpoint files: atomic writes, keep-last-N, and finding the newest one that loads.

Files are `step-00000120.pt` in the checkpoint folder; a write goes to a hidden temp file in
the same folder (flush, fsync), is renamed over the final name (os.replace) and the folder
is fsynced, so a crash leaves either the old set of files or the new one, never half a file
under a final name. `best.pt` (checkpoint.keep_best) is written the same way and is never
pruned nor resumed from by `resume: auto`. Loading uses `torch.load(weights_only=True)`: a
checkpoint holds only tensors and plain Python values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

FORMAT = "jobkit-train-checkpoint"
VERSION = 1
REQUIRED_KEYS = ("format", "version", "step", "epoch", "position", "model", "optimizer")
_NAME = re.compile(r"^step-(?P<step>\d{8,})\.pt$")
_TEMP = re.compile(r"^\.(step-\d{8,}|best)\.pt\.tmp-\d+$")
BEST_NAME = "best.pt"


class CheckpointError(Exception):
    """A checkpoint file that cannot be used; the message says why."""


def checkpoint_path(folder: Path, step: int) -> Path:
    """Where the checkpoint of `step` lives."""
    return folder / f"step-{step:08d}.pt"


def best_path(folder: Path) -> Path:
    """Where checkpoint.keep_best's checkpoint lives."""
    return folder / BEST_NAME


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_atomic(state: dict[str, Any], path: Path) -> None:
    """Write `state` to `path` so that `path` is always either absent, old or complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temp, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint file in `folder`, newest step first."""
    if not folder.is_dir():
        return []
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match and entry.is_file():
            found.append((int(match["step"]), entry))
    return sorted(found, reverse=True)


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete temp files a killed writer left behind; returns what was removed."""
    if not folder.is_dir():
        return []
    removed = []
    for entry in folder.iterdir():
        if _TEMP.match(entry.name):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def prune(folder: Path, keep_last: int, up_to_step: int | None = None) -> list[Path]:
    """Delete all but the newest `keep_last` checkpoints; returns what was removed. With
    `up_to_step` (a resume: the step resumed from), newer files are neither counted nor
    deleted, so the checkpoint resumed from always stays."""
    removed = []
    listed = list_checkpoints(folder)
    if up_to_step is not None:
        listed = [(step, path) for step, path in listed if step <= up_to_step]
    for _step, path in listed[keep_last:]:
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load and check one checkpoint (weights_only); CheckpointError if it is unusable."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError ...
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"cannot be loaded: {reason}") from None
    if not isinstance(state, dict):
        raise CheckpointError("is not a checkpoint (not a mapping)")
    missing = [key for key in REQUIRED_KEYS if key not in state]
    if missing:
        raise CheckpointError(f"lacks {', '.join(missing)}")
    if state["format"] != FORMAT or state["version"] != VERSION:
        raise CheckpointError(f"has format {state['format']!r} version {state['version']!r}")
    return state


def set_aside(path: Path) -> Path:
    """Rename an unusable checkpoint to NAME.corrupt, so it no longer counts as the newest
    (keep-last-N would otherwise keep it and delete good ones); returns the new path."""
    target = path.with_name(path.name + ".corrupt")
    os.replace(path, target)
    return target


def find_latest_valid(
    folder: Path, on_skip: Callable[[Path, str], None]
) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint in `folder` that loads, with its state; `on_skip(path, why)` is
    called for each newer one that does not (corrupt, partial, foreign)."""
    for _step, path in list_checkpoints(folder):
        try:
            return path, load_checkpoint(path)
        except CheckpointError as err:
            on_skip(path, str(err))
    return None
