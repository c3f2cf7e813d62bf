"""The run's checkpoints: which one to resume from, restoring it, saving (and the best one,
checkpoint.keep_best), and the marker files jobkit's scripts read (`requeue-requested`,
`finished`). The file format itself (atomic writes, keep-last-N, validity) is
train/resume/checkpoint.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.config.load import LoadedConfig
from train.env.launch import LaunchEnv
from train.loop.state import TrainSetupError, TrainState
from train.ranks.dist import all_agree, broadcast_object, gather_objects
from train.reporting.paths import RunPaths
from train.reporting.runlog import RunLog
from train.resume import checkpoint as ckpt
from train.resume.rng import capture_rng, restore_rng, seed_per_rank


class Checkpointer:
    """Saves and restores one rank's TrainState; rank 0 writes the files, all ranks agree."""

    def __init__(self, loaded: LoadedConfig, env: LaunchEnv, paths: RunPaths, log: RunLog) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.env = env
        self.paths = paths
        self.log = log
        self.last_saved_step = -1

    def clear_leftovers(self) -> None:
        """Rank 0, before training: remove the previous run's requeue marker and the temp
        files of a checkpoint write that was killed."""
        if self.paths.marker is not None and self.paths.marker.exists():
            self.paths.marker.unlink()
            self.log.info(f"removed the previous run's {self.paths.marker}")
        for temp in ckpt.remove_stale_temps(self.paths.checkpoint_dir):
            self.log.info(f"removed a partial checkpoint write: {temp}")

    # resuming

    def resume(self, state: TrainState) -> None:
        """Load the checkpoint checkpoint.resume names (or the newest valid one) into
        `state` (its bare model, before any DDP wrapper); sets state.start_step."""
        chosen = self._choose(state)
        if chosen is not None:
            state.start_step = self._restore(state, *chosen)

    def _choose(self, state: TrainState) -> tuple[Path, dict[str, Any]] | None:
        """Rank 0 picks the checkpoint to resume from; every rank loads that same file."""
        resume = self.config.checkpoint.resume
        chosen: tuple[Path, dict[str, Any]] | None = None
        error = ""
        if self.env.is_main and resume != "never":
            if resume == "auto":
                chosen = ckpt.find_latest_valid(self.paths.checkpoint_dir, self._skip)
                if chosen is None:
                    self.log.info(
                        f"no checkpoint found in {self.paths.checkpoint_dir}: starting from step 0"
                    )
                else:
                    self._prune_at_resume(int(chosen[1]["step"]))
            else:
                try:
                    chosen = Path(resume), ckpt.load_checkpoint(Path(resume))
                except ckpt.CheckpointError as err:
                    error = f"{resume} {err}"
        if self.env.is_main and not error and resume != "auto":
            error = self._foreign_checkpoints(int(chosen[1]["step"]) if chosen else 0)
        error = broadcast_object(error)
        if error:
            raise self.loaded.error("checkpoint.resume", error)
        path = broadcast_object(str(chosen[0]) if chosen else None)
        if path is None:
            return None
        failure = ""
        if not self.env.is_main:
            try:
                chosen = Path(path), ckpt.load_checkpoint(Path(path))
            except ckpt.CheckpointError as err:
                failure = (
                    f"rank {self.env.rank} cannot use checkpoint {path} chosen by rank 0: {err}"
                )
        if not all_agree(not failure, state.device):
            raise TrainSetupError(
                failure
                or f"another rank cannot read checkpoint {path}: checkpoint.dir must be on a"
                " file system every node shares"
            )
        return chosen

    def _prune_at_resume(self, step: int) -> None:
        """keep_last before the first save too: a run stopped between a save and its prune
        (a SIGKILL after a requeue's checkpoint) left one file more."""
        keep = self.config.checkpoint.keep_last
        try:
            removed = ckpt.prune(self.paths.checkpoint_dir, keep, up_to_step=step)
        except OSError as err:
            self.log.info(f"could not delete checkpoints beyond checkpoint.keep_last: {err}")
            return
        for path in removed:
            self.log.info(f"removed {path}: beyond checkpoint.keep_last {keep}")

    def _skip(self, path: Path, why: str) -> None:
        """An unusable checkpoint met while resuming: log it and set it aside."""
        try:
            moved = f" (renamed to {ckpt.set_aside(path).name})"
        except OSError as err:
            moved = f" (could not rename it: {err.strerror})"
        self.log.info(f"skipping checkpoint {path}: {why}{moved}")

    def _foreign_checkpoints(self, start_step: int) -> str:
        """An error when the folder holds checkpoints newer than this run's start: they
        would outrank this run's own under keep_last and on the next `resume: auto`."""
        found = ckpt.list_checkpoints(self.paths.checkpoint_dir)
        if found and found[0][0] > start_step:
            return (
                f"{self.config.checkpoint.resume}: {self.paths.checkpoint_dir} already holds"
                f" checkpoints up to step {found[0][0]}, newer than this run's start (step"
                f" {start_step}); use resume: auto, another checkpoint.dir, or remove them"
            )
        return ""

    def _restore(self, state: TrainState, path: Path, saved: dict[str, Any]) -> int:
        env = self.env
        state.module.load_state_dict(saved["model"])
        state.optimizer.load_state_dict(saved["optimizer"])
        if saved.get("scheduler") is not None:
            state.scheduler.load_state_dict(saved["scheduler"])
            state.scheduler.base_lrs = [state.lr] * len(state.optimizer.param_groups)
        if saved.get("scaler") is not None and state.scaler.is_enabled():
            state.scaler.load_state_dict(saved["scaler"])
        rng = saved.get("rng") or []
        same_shape = (
            saved.get("world_size") == env.world_size
            and saved.get("batch_size_per_rank") == state.batch_size
        )
        if same_shape and len(rng) > env.rank:
            restore_rng(rng[env.rank])
            epoch, position = int(saved["epoch"]), int(saved["position"])
        else:
            old_world = int(saved.get("world_size") or 1)
            old_batch = int(saved.get("batch_size_per_rank") or state.batch_size)
            done = int(saved["position"]) * old_world * old_batch
            epoch, position = int(saved["epoch"]), done // (env.world_size * state.batch_size)
            seed_per_rank(self.config.train.seed, env.rank)
            self.log.warning(
                f"checkpoint was written by {old_world} ranks x batch {old_batch}, this run has"
                f" {env.world_size} x {state.batch_size}: data position mapped to batch"
                f" {position} of epoch {epoch}, RNG reseeded (not bit-identical to one run)"
            )
        state.stream.epoch, state.stream.position = epoch, position
        state.last_loss = float(saved.get("loss", math.nan))
        step = int(saved["step"])
        self.last_saved_step = step
        self.log.info(f"resumed from step {step} ({path})")
        self._restore_best(state, saved.get("best"))
        return step

    def _restore_best(self, state: TrainState, best: object) -> None:
        """The best-so-far of checkpoint.keep_best as of the checkpoint (a later eval must
        beat it to replace best.pt); kept only when it is of the metric now configured."""
        metric = self.config.checkpoint.keep_best
        if metric is None or not isinstance(best, dict) or best.get("metric") != metric:
            return
        state.best = {"metric": metric, "value": float(best["value"]), "step": int(best["step"])}
        self.log.info(
            f"best so far: {metric} {state.best['value']!r} at step {state.best['step']}"
            f" ({ckpt.best_path(self.paths.checkpoint_dir)})"
        )

    # saving

    def save(
        self, state: TrainState, step: int, reason: str, then: Callable[[], None] | None = None
    ) -> None:
        """Every rank hands over its RNG state; rank 0 writes the file; then all agree."""
        path = ckpt.checkpoint_path(self.paths.checkpoint_dir, step)
        done = f"checkpoint saved: {path} (step {step}, {reason})"
        self._write(state, step, path, done, then, prune=True)
        self.last_saved_step = step

    def save_best(self, state: TrainState, step: int) -> None:
        """After an evaluation that set a new state.best: write it to best.pt (atomic, never
        pruned), on every rank together as `save`."""
        assert state.best is not None
        path = ckpt.best_path(self.paths.checkpoint_dir)
        done = (
            f"best checkpoint saved: {path} (step {step}, {state.best['metric']}"
            f" {state.best['value']!r})"
        )
        self._write(state, step, path, done, None, prune=False)

    def _write(
        self,
        state: TrainState,
        step: int,
        path: Path,
        done: str,
        then: Callable[[], None] | None,
        prune: bool,
    ) -> None:
        rng_states = gather_objects(capture_rng())
        problem = ""
        if self.env.is_main:
            epoch, position = state.stream.state()
            saved = {
                "format": ckpt.FORMAT,
                "version": ckpt.VERSION,
                "step": step,
                "epoch": epoch,
                "position": position,
                "world_size": self.env.world_size,
                "batch_size_per_rank": state.batch_size,
                "loss": state.last_loss,
                "model": state.module.state_dict(),
                "optimizer": state.optimizer.state_dict(),
                "scheduler": state.scheduler.state_dict(),
                "scaler": state.scaler.state_dict() if state.scaler.is_enabled() else None,
                "rng": rng_states,
                "config_name": self.config.name,
                "best": state.best,
            }
            try:
                ckpt.save_atomic(saved, path)
                if prune:
                    ckpt.prune(self.paths.checkpoint_dir, self.config.checkpoint.keep_last)
                self.log.info(done)
                if then is not None:
                    then()
            except OSError as err:
                problem = f"cannot write checkpoint {path}: {err}"
        if not all_agree(not problem, state.device):
            raise RuntimeError(problem or "rank 0 could not write the checkpoint")

    def save_for_requeue(self, state: TrainState, step: int, reason: str) -> None:
        """The run stops early at `step`: a checkpoint of it (unless just saved), then the
        requeue marker (rank 0); every rank returns once both are written."""
        if self.last_saved_step == step:
            if self.env.is_main:
                self._write_marker(step, reason)
            all_agree(True, state.device)
        else:
            self.save(state, step, reason, then=lambda: self._write_marker(step, reason))

    # marker files

    def _write_marker(self, step: int, reason: str) -> None:
        if self.paths.marker is not None:
            self.paths.marker.write_text(f"step {step} {reason}\n", encoding="utf-8")
            self.log.info(f"wrote {self.paths.marker}")

    def write_finished(self, step: int, last_loss: float) -> None:
        """Rank 0: note in the run folder that training is complete (see FINISHED_NAME)."""
        if self.env.is_main and self.paths.finished is not None:
            self.paths.finished.write_text(
                f"step {step} final loss {last_loss!r}\n", encoding="utf-8"
            )
