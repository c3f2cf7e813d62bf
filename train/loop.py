"""The training run: set-up, the DDP+AMP step loop, checkpoints, preemption and the end."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DataParallel, DistributedDataParallel
from torch.utils.data import DistributedSampler

from train import checkpoint as ckpt
from train.config import LoadedConfig, TrainerConfig, per_rank_batch, scaled_lr
from train.data import BatchStream, build_dataset
from train.dist import (
    DistSetupError,
    broadcast_object,
    choose_backend,
    choose_device,
    describe_device,
    find_shared_devices,
    gather_objects,
    gpus_requested,
    init_process_group,
)
from train.env import LaunchEnv
from train.models import ModelBuildError, build_model, compute_loss
from train.optim import build_optimizer, build_scheduler
from train.plugins import PluginArgsError, PluginError
from train.preempt import StopRequest
from train.rng import capture_rng, restore_rng, seed_everything
from train.runlog import RunLog

EXIT_OK = 0
EXIT_REQUEUE = 75
MARKER_NAME = "requeue-requested"
FINISHED_NAME = "finished"
"""Written by rank 0 once training is complete: the job script then knows the work is done
even when a signal (a time-limit warning) turned the launcher's exit code into a failure."""


class TrainSetupError(Exception):
    """The run cannot start as configured on this launch; one line, exit 2."""


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
            Path(config.checkpoint.dir) if config.checkpoint.dir else run_dir / "checkpoints"
        ),
        marker=Path(jobkit_dir) / MARKER_NAME if jobkit_dir else None,
        finished=Path(jobkit_dir) / FINISHED_NAME if jobkit_dir else None,
    )


@dataclass(frozen=True)
class Votes:
    """One step's all-reduced votes: did any rank get a stop signal, the sum of the losses."""

    stop: bool
    loss_sum: float


class StepVotes:
    """The all-reduce of (stop flag, loss), started after a voting step and read at the next
    one (VoteCadence): it overlaps training instead of holding every rank at a barrier.

    `collect()` returns the pending votes (waiting for them) or None when none is pending.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pending: tuple[dist.Work, torch.Tensor] | None = None

    def start(self, stop: bool, loss: torch.Tensor) -> None:
        """All-reduce this step's (stop, loss) in the background."""
        flag = torch.tensor(1.0 if stop else 0.0, dtype=torch.float64, device=self.device)
        packed = torch.stack([flag, loss.detach().double()])
        work = dist.all_reduce(packed, async_op=True)
        assert work is not None
        self._pending = (work, packed)

    def collect(self) -> Votes | None:
        """The votes started last, once reduced; None when they were collected already."""
        if self._pending is None:
            return None
        work, packed = self._pending
        self._pending = None
        work.wait()
        stop_votes, loss_sum = packed.tolist()
        return Votes(stop=stop_votes > 0, loss_sum=loss_sum)


class VoteCadence:
    """How many steps apart the ranks vote on stopping: about `every_s` seconds of training.

    Every step votes until PROBE_STEPS steps after the first have been timed; then the ranks
    agree (the slowest rank's mean step time) on a number of steps, so that a fast step does
    not pay for an all-reduce each time. A stop signal is then acted on within about two
    vote intervals. `every_s` 0 keeps a vote after every step.
    """

    PROBE_STEPS = 10
    MAX_STEPS = 1000

    def __init__(self, every_s: float, start_step: int) -> None:
        self.every_s = every_s
        self.steps = 1
        self._probe_from = start_step + 1  # the first step (warm-up) is not timed
        self._probe_to = self._probe_from + self.PROBE_STEPS
        self._probe_start = 0.0

    def probe_due(self, step: int) -> bool:
        """True at the step after which the ranks agree on the cadence (same on all ranks)."""
        if step == self._probe_from:
            self._probe_start = time.perf_counter()
        return self.every_s > 0 and step == self._probe_to

    def agree(self, device: torch.device) -> float:
        """All-reduce the slowest mean step time, set the cadence from it and return it."""
        mean = (time.perf_counter() - self._probe_start) / self.PROBE_STEPS
        reduced = torch.tensor([mean], dtype=torch.float64, device=device)
        dist.all_reduce(reduced, op=dist.ReduceOp.MAX)
        slowest = float(reduced.item())
        self.steps = steps_between_votes(slowest, self.every_s, self.MAX_STEPS)
        return slowest

    def votes_at(self, step: int) -> bool:
        """True when the ranks vote after `step`."""
        return step % self.steps == 0


def steps_between_votes(step_s: float, every_s: float, most: int) -> int:
    """About `every_s` seconds of `step_s`-long steps, between 1 and `most`."""
    if every_s <= 0 or step_s <= 0:
        return 1
    return max(1, min(most, int(every_s / step_s)))


def _agree(ok: bool, device: torch.device) -> bool:
    """True when `ok` holds on every rank; also a barrier."""
    flag = torch.tensor([0.0 if ok else 1.0], device=device)
    dist.all_reduce(flag)
    return flag.item() == 0.0


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(item, device) for item in batch)
    if isinstance(batch, dict):
        return {key: _to_device(value, device) for key, value in batch.items()}
    return batch


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, (DistributedDataParallel, DataParallel)) else model


class Trainer:
    """One rank's share of a training run. `run()` returns the process exit code."""

    def __init__(
        self,
        loaded: LoadedConfig,
        env: LaunchEnv,
        stop: StopRequest,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.env = env
        self.stop = stop
        self.paths = resolve_paths(self.config, os.environ if environ is None else environ)
        self.log = RunLog(env.rank, self.paths.log_dir, self.config.logging.metrics)
        self.device = torch.device("cpu")
        self.last_saved_step = -1

    # set-up

    def _start_process_group(self) -> None:
        config = self.config
        try:
            self.device = choose_device(config.train.device, self.env)
            backend = choose_backend(config.distributed.backend, self.device)
        except DistSetupError as err:
            raise TrainSetupError(str(err)) from None
        requested = gpus_requested()
        if requested and self.device.type == "cpu" and self.env.is_main:
            self.log.warning(
                f"the job asked for {requested} GPU(s) per node, but train.device is"
                f" {config.train.device}: training on the CPU"
            )
        init_process_group(self.env, backend, self.device, config.distributed.timeout)
        self.backend = backend
        infos = gather_objects(describe_device(self.env, self.device))
        shared = find_shared_devices(infos)
        if shared:
            raise TrainSetupError("; ".join(shared))

    def _resolve_strategy(self) -> str:
        strategy = self.config.distributed.strategy
        world = self.env.world_size
        if strategy == "auto":
            return "ddp" if world > 1 else "single"
        if strategy in ("single", "dp") and world > 1:
            raise self.loaded.error(
                "distributed.strategy",
                f"{strategy} runs one process but the launcher started {world}; use ddp or auto",
            )
        if strategy == "dp" and (self.device.type != "cuda" or torch.cuda.device_count() < 2):
            self.log.warning("distributed.strategy dp needs 2+ GPUs in one process; using single")
            return "single"
        return strategy

    def _resolve_amp(self) -> tuple[torch.dtype | None, bool]:
        wanted = self.config.amp.dtype
        if wanted == "off":
            return None, False
        on_cuda = self.device.type == "cuda"
        if wanted == "fp16" and not on_cuda:
            self.log.warning("amp.dtype fp16 needs CUDA; using bf16 autocast on cpu")
            return torch.bfloat16, False
        if wanted == "bf16" and on_cuda and not torch.cuda.is_bf16_supported():
            self.log.warning("this GPU has no bf16; using fp16 autocast with a GradScaler")
            return torch.float16, True
        return (torch.float16, True) if wanted == "fp16" else (torch.bfloat16, False)

    def _build_data_and_model(self) -> None:
        config = self.config
        # A plug-in that cannot be found is a config error (one line); an exception raised
        # inside the user's own factory keeps its traceback.
        try:
            self.dataset, self.info = build_dataset(config.data)
        except PluginArgsError as err:
            raise self.loaded.error("data.args", str(err)) from None
        except PluginError as err:
            raise self.loaded.error("data.name", str(err)) from None
        except OSError as err:
            if config.data.name != "chars":
                raise
            raise self.loaded.error("data.args.path", f"cannot read the text: {err}") from None
        try:
            self.model = build_model(config.model, self.info)
        except PluginArgsError as err:
            raise self.loaded.error("model.args", str(err)) from None
        except (PluginError, ModelBuildError) as err:
            raise self.loaded.error("model.name", str(err)) from None

    def _choose_checkpoint(self) -> tuple[Path, dict[str, Any]] | None:
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
        if not _agree(not failure, self.device):
            raise TrainSetupError(
                failure
                or f"another rank cannot read checkpoint {path}: checkpoint.dir must be on a"
                " file system every node shares"
            )
        return chosen

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

    # checkpoints

    def _save(self, step: int, reason: str, then: Callable[[], None] | None = None) -> None:
        """Every rank hands over its RNG state; rank 0 writes the file; then all agree."""
        rng_states = gather_objects(capture_rng())
        problem = ""
        if self.env.is_main:
            epoch, position = self.stream.state()
            state = {
                "format": ckpt.FORMAT,
                "version": ckpt.VERSION,
                "step": step,
                "epoch": epoch,
                "position": position,
                "world_size": self.env.world_size,
                "batch_size_per_rank": self.batch_size,
                "loss": self.last_loss,
                "model": _unwrap(self.model).state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
                "rng": rng_states,
                "config_name": self.config.name,
            }
            path = ckpt.checkpoint_path(self.paths.checkpoint_dir, step)
            try:
                ckpt.save_atomic(state, path)
                ckpt.prune(self.paths.checkpoint_dir, self.config.checkpoint.keep_last)
                self.log.info(f"checkpoint saved: {path} (step {step}, {reason})")
                if then is not None:
                    then()
            except OSError as err:
                problem = f"cannot write checkpoint {path}: {err}"
        if not _agree(not problem, self.device):
            raise RuntimeError(problem or "rank 0 could not write the checkpoint")
        self.last_saved_step = step

    def _restore(self, path: Path, state: dict[str, Any]) -> int:
        env = self.env
        _unwrap(self.model).load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
            self.scheduler.base_lrs = [self.lr] * len(self.optimizer.param_groups)
        if state.get("scaler") is not None and self.scaler.is_enabled():
            self.scaler.load_state_dict(state["scaler"])
        rng = state.get("rng") or []
        same_shape = (
            state.get("world_size") == env.world_size
            and state.get("batch_size_per_rank") == self.batch_size
        )
        if same_shape and len(rng) > env.rank:
            restore_rng(rng[env.rank])
            epoch, position = int(state["epoch"]), int(state["position"])
        else:
            old_world = int(state.get("world_size") or 1)
            old_batch = int(state.get("batch_size_per_rank") or self.batch_size)
            done = int(state["position"]) * old_world * old_batch
            epoch, position = int(state["epoch"]), done // (env.world_size * self.batch_size)
            self._seed_per_rank()
            self.log.warning(
                f"checkpoint was written by {old_world} ranks x batch {old_batch}, this run has"
                f" {env.world_size} x {self.batch_size}: data position mapped to batch"
                f" {position} of epoch {epoch}, RNG reseeded (not bit-identical to one run)"
            )
        self.stream.epoch, self.stream.position = epoch, position
        self.last_loss = float(state.get("loss", math.nan))
        step = int(state["step"])
        self.last_saved_step = step
        self.log.info(f"resumed from step {step} ({path})")
        return step

    def _seed_per_rank(self) -> None:
        """Different streams for dropout and the like on each rank, fixed by the seed."""
        seed_everything(self.config.train.seed * 100_003 + 1 + self.env.rank)

    def _write_finished(self, step: int) -> None:
        """Rank 0: note in the run folder that training is complete (see FINISHED_NAME)."""
        if self.env.is_main and self.paths.finished is not None:
            self.paths.finished.write_text(
                f"step {step} final loss {self.last_loss!r}\n", encoding="utf-8"
            )

    def _write_marker(self, step: int, reason: str) -> None:
        if self.paths.marker is not None:
            self.paths.marker.write_text(f"step {step} {reason}\n", encoding="utf-8")
            self.log.info(f"wrote {self.paths.marker}")

    # the run

    def _setup(self) -> int:
        config, env, log = self.config, self.env, self.log
        log.info(f"launch: {env.describe()}", all_ranks=False)
        if env.restart_count:
            log.info(f"requeue count: {env.restart_count} (SLURM_RESTART_COUNT)")
        self._start_process_group()
        strategy = self._resolve_strategy()
        self.amp_dtype, use_scaler = self._resolve_amp()
        if env.is_main:
            log.info(
                f"config: {self.loaded.path}\n{self.loaded.dump().rstrip()}",
                console=f"config: {self.loaded.path} (in full in {log.path})",
            )
            if self.paths.marker is not None and self.paths.marker.exists():
                self.paths.marker.unlink()
                log.info(f"removed the previous run's {self.paths.marker}")
            for temp in ckpt.remove_stale_temps(self.paths.checkpoint_dir):
                log.info(f"removed a partial checkpoint write: {temp}")

        seed_everything(config.train.seed)  # same model init and data on every rank
        self._build_data_and_model()
        self.dataset_size = len(self.dataset)  # type: ignore[arg-type]  # checked Sized
        self.batch_size, global_batch = per_rank_batch(self.loaded, env.world_size)
        self.sampler: DistributedSampler[Any] = DistributedSampler(
            self.dataset,
            num_replicas=env.world_size,
            rank=env.rank,
            shuffle=config.data.shuffle,
            seed=config.train.seed,
            drop_last=True,
        )
        self.stream = BatchStream(
            self.dataset,
            self.sampler,
            self.batch_size,
            config.data.num_workers,
            pin_memory=self.device.type == "cuda",
        )
        if self.stream.batches_per_epoch < 1:
            key = (
                "data.batch_size_per_rank"
                if config.data.batch_size_per_rank
                else "data.global_batch_size"
            )
            raise self.loaded.error(
                key,
                f"the dataset has {self.dataset_size} samples, fewer than one batch of"
                f" {self.batch_size} per rank on {env.world_size} ranks",
            )
        self._seed_per_rank()

        self.model.to(self.device)
        self.lr = scaled_lr(config, env.world_size)
        self.optimizer = build_optimizer(self.model.parameters(), config.optim, self.lr)
        self.scheduler = build_scheduler(self.optimizer, config.optim, config.train.steps)
        self.scaler = torch.amp.GradScaler(
            self.device.type,
            init_scale=config.amp.init_scale,
            growth_interval=config.amp.growth_interval,
            enabled=use_scaler,
        )
        self.last_loss = math.nan
        start_step = 0
        chosen = self._choose_checkpoint()
        if chosen is not None:
            start_step = self._restore(*chosen)

        self.strategy = strategy
        if strategy == "ddp":
            dist_config = config.distributed
            self.model = DistributedDataParallel(
                self.model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                bucket_cap_mb=dist_config.bucket_cap_mb,
                find_unused_parameters=dist_config.find_unused_parameters,
                gradient_as_bucket_view=dist_config.gradient_as_bucket_view,
                static_graph=dist_config.static_graph,
            )
        elif strategy == "dp":
            self.model = DataParallel(self.model)
        self.tokens_per_sample = self.info.get("tokens_per_sample")
        self.global_batch = global_batch
        log.info(
            f"device: {self.device} backend: {self.backend} strategy: {strategy}"
            f" amp: {config.amp.dtype}" + (" (GradScaler)" if use_scaler else "")
        )
        log.info(
            f"batch: {self.batch_size} per rank x {env.world_size} ranks x"
            f" {config.train.grad_accum_steps} accumulation steps = {global_batch} samples per"
            f" optimizer step (global); lr {self.lr:g} ({config.optim.lr_scaling} scaling)"
        )
        log.info(
            f"data: {self.dataset_size} samples, {self.stream.batches_per_epoch} batches per"
            f" epoch per rank; params: {sum(p.numel() for p in self.model.parameters())}"
        )
        return start_step

    def _micro_sync(self, micro: int) -> AbstractContextManager[Any]:
        last = micro == self.config.train.grad_accum_steps - 1
        if isinstance(self.model, DistributedDataParallel) and not last:
            return self.model.no_sync()
        return nullcontext()

    def _train_step(self) -> torch.Tensor:
        """One optimizer step over grad_accum_steps micro-batches; returns the grad norm."""
        config = self.config
        accum = config.train.grad_accum_steps
        self.model.train()
        loss_sum = torch.zeros((), device=self.device)
        for micro in range(accum):
            inputs, targets = _to_device(self.stream.next(), self.device)
            with self._micro_sync(micro):
                with torch.autocast(
                    self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None
                ):
                    outputs = self.model(inputs)
                    loss = compute_loss(config.model.loss, outputs, targets)
                scaled = loss / accum
                if self.scaler.is_enabled():
                    scaled = self.scaler.scale(scaled)
                torch.autograd.backward(scaled)
            loss_sum += loss.detach().float()
        if self.scaler.is_enabled():
            self.scaler.unscale_(self.optimizer)
        max_norm = config.optim.grad_clip or math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self._loss_sum = loss_sum / accum
        return grad_norm

    def _report(
        self, step: int, lr: float, grad_norm: torch.Tensor, seconds: float, steps: int
    ) -> None:
        total = self.config.train.steps
        samples_per_s = self.global_batch * steps / max(seconds, 1e-9)
        record: dict[str, Any] = {
            "step": step,
            "epoch": self.stream.epoch,
            "loss": self.last_loss,
            "lr": lr,
            "grad_norm": float(grad_norm),
            "samples_per_s": samples_per_s,
        }
        line = (
            f"step {step}/{total} loss {self.last_loss:.6f} lr {lr:.3e}"
            f" grad_norm {record['grad_norm']:.4f} samples/s {samples_per_s:.1f}"
        )
        if self.tokens_per_sample:
            record["tokens_per_s"] = samples_per_s * self.tokens_per_sample
            line += f" tokens/s {record['tokens_per_s']:.0f}"
        if self.scaler.is_enabled():
            record["loss_scale"] = self.scaler.get_scale()
            line += f" loss_scale {record['loss_scale']:g}"
        record["time"] = time.time()
        self.log.info(line)
        self.log.metrics(record)

    def run(self) -> int:
        """Train to train.steps (exit 0) or until asked to stop (checkpoint, exit 75)."""
        config, env, log = self.config, self.env, self.log
        start_step = self._setup()
        total = config.train.steps
        if start_step >= total:
            log.info(f"training already complete at step {start_step} (train.steps = {total})")
            log.info(f"final loss {self.last_loss!r}")
            self._write_finished(start_step)
            return EXIT_OK
        step = start_step
        stop_reason = ""
        interval_start = run_start = time.perf_counter()
        interval_steps = 0
        log_every = config.logging.every_steps
        every = config.checkpoint.every_steps
        votes = StepVotes(self.device)
        cadence = VoteCadence(config.train.stop_vote_every_s, start_step)
        while step < total:
            lr = float(self.scheduler.get_last_lr()[0])
            grad_norm = self._train_step()
            step += 1
            interval_steps += 1
            if cadence.probe_due(step):
                slowest = cadence.agree(self.device)
                log.info(
                    f"stop votes every {cadence.steps} step(s): {slowest * 1000:.1f} ms per step"
                    f" (slowest rank), train.stop_vote_every_s {cadence.every_s:g}"
                )
            # Every rank votes at the same steps and reads the same votes, so all stop at the
            # same step: the previous vote's (already reduced by now), and this step's when its
            # exact loss is needed (a log line, a checkpoint, the end) or a stop is coming.
            exact = (
                step % log_every == 0
                or step == total
                or bool(every and step % every == 0)
                or config.train.stop_after_step == step
            )
            seen = None
            if exact or cadence.votes_at(step):
                seen = votes.collect()
                votes.start(self.stop.requested, self._loss_sum)
                stopping = seen is not None and seen.stop and step < total
                if stopping or exact:
                    seen = votes.collect()
            if seen is not None:
                self.last_loss = seen.loss_sum / env.world_size
            if seen is not None and seen.stop and step < total:
                why = self.stop.signal_name or "a signal on another rank"
                stop_reason = f"preempted by {why}"
            elif config.train.stop_after_step == step and step < total:
                stop_reason = "train.stop_after_step"
            if step % log_every == 0 or step == total or stop_reason:
                now = time.perf_counter()
                self._report(step, lr, grad_norm, now - interval_start, interval_steps)
                interval_start, interval_steps = now, 0
            if stop_reason:
                break
            if every and step % every == 0 and step < total:
                self._save(step, "periodic")
        elapsed = time.perf_counter() - run_start
        done = step - start_step
        log.info(
            f"trained {done} steps in {elapsed:.2f} s ({done / max(elapsed, 1e-9):.3f} steps/s)"
        )
        if stop_reason:
            reason = stop_reason
            if self.last_saved_step == step:
                if env.is_main:
                    self._write_marker(step, reason)
                _agree(True, self.device)
            else:
                self._save(step, reason, then=lambda: self._write_marker(step, reason))
            log.info(f"stopped after step {step} ({reason}): exiting with {EXIT_REQUEUE} (requeue)")
            return EXIT_REQUEUE
        if config.checkpoint.save_final and self.last_saved_step != step:
            self._save(step, "final")
        log.info(f"final loss {self.last_loss!r}")
        self._write_finished(step)
        return EXIT_OK

    def close(self) -> None:
        """Close the log files; let go of the model, its optimizer and the data stream.

        DDP's reducer holds the process group: released here, the group is destroyed by
        `dist.shutdown()` rather than at interpreter teardown, where gloo's threads now and
        then abort or deadlock on the GIL (docs/e2e.md, "Your own DDP script").
        """
        self.log.close()
        for name in ("model", "optimizer", "scheduler", "scaler", "stream"):
            self.__dict__.pop(name, None)


def run_training(loaded: LoadedConfig, env: LaunchEnv, stop: StopRequest) -> int:
    """Build a Trainer for this rank and run it; returns the exit code (0 or 75)."""
    trainer = Trainer(loaded, env, stop)
    try:
        return trainer.run()
    finally:
        trainer.close()
