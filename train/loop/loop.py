"""The training run: the DDP+AMP step loop, preemption and the end.

Set-up is train/loop/setup.py (a TrainState), checkpoints and marker files
train/resume/checkpointer.py, stop votes train/ranks/votes.py.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from jobkit.core.conventions import REQUEUE_EXIT_CODE
from train.config.load import LoadedConfig
from train.env.launch import LaunchEnv
from train.loop.ampscale import OverflowCounter
from train.loop.evaluate import is_better
from train.loop.malloc import keep_freed_memory
from train.loop.setup import build_state
from train.loop.state import TrainState
from train.parts.data import to_device
from train.parts.models import compute_loss
from train.parts.userstep import UserParts
from train.ranks.votes import StepVotes, VoteCadence
from train.reporting.dashboards import open_dashboards
from train.reporting.gpustats import gpu_figures
from train.reporting.heartbeat import CHECKPOINT, DONE, SETUP, TRAIN, Heartbeat
from train.reporting.paths import resolve_paths
from train.reporting.profiling import step_profiler
from train.reporting.runlog import RunLog
from train.resume.checkpointer import Checkpointer
from train.resume.preempt import StopRequest

EXIT_OK = 0
EXIT_REQUEUE = REQUEUE_EXIT_CODE


class Trainer:
    """One rank's share of a training run. `run()` returns the process exit code."""

    def __init__(
        self,
        loaded: LoadedConfig,
        env: LaunchEnv,
        stop: StopRequest,
        environ: Mapping[str, str] | None = None,
        parts: UserParts | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.env = env
        self.stop = stop
        self.parts = parts
        """Objects given to train.fit in place of the config's model, data, loss or step."""
        self.environ = os.environ if environ is None else environ
        self.paths = resolve_paths(self.config, self.environ)
        self.log = RunLog(env.rank, self.paths.log_dir, self.config.logging.metrics)
        self.checkpointer = Checkpointer(loaded, env, self.paths, self.log)
        self.heartbeat = Heartbeat(self.paths.run_dir, env.rank, environ, warn=self.log.warning)
        self.state: TrainState | None = None
        self.overflow: OverflowCounter | None = None
        """Counts fp16 steps the GradScaler skipped (None without a GradScaler)."""
        self._params: list[torch.nn.Parameter] = []
        """The model's parameters, listed once for the per-step gradient clipping."""

    def _micro_sync(self, state: TrainState, micro: int) -> AbstractContextManager[Any]:
        last = micro == self.config.train.grad_accum_steps - 1
        if isinstance(state.model, DistributedDataParallel) and not last:
            return state.model.no_sync()
        return nullcontext()

    def _train_step(self, state: TrainState) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimizer step over grad_accum_steps micro-batches; returns the grad norm and
        the mean loss (a tensor on the device, not synchronised).

        Kept lean (docs/benchmarks.md, "trainer per-step overhead"): the model is put in
        training mode once before the loop (and after each evaluation, which restores it
        itself), not every step, unless your own step runs between steps; with one
        micro-batch there is no `loss / 1` node and no zeros-plus-loss tensor (both were
        exact no-ops: the same numbers, bit for bit); autocast is entered only with AMP on.
        """
        config = self.config
        accum = config.train.grad_accum_steps
        step_fn = state.step_fn  # your own loss or step (train/parts/userstep.py), else None
        if step_fn is not None:
            state.model.train()  # your step may have switched a part to eval mode
        loss_sum: torch.Tensor | None = None
        scaler_on = state.scaler.is_enabled()
        for micro in range(accum):
            batch = to_device(state.stream.next(), state.device)
            with self._micro_sync(state, micro):
                with self._autocast(state):
                    if step_fn is None:
                        inputs, targets = batch
                        loss = compute_loss(config.model.loss, state.model(inputs), targets)
                    else:
                        loss = step_fn(state.model, batch)
                scaled = loss if accum == 1 else loss / accum
                if scaler_on:
                    scaled = state.scaler.scale(scaled)
                torch.autograd.backward(scaled)
            detached = loss.detach().float()
            loss_sum = detached if loss_sum is None else loss_sum + detached
        assert loss_sum is not None  # grad_accum_steps >= 1
        if scaler_on:
            state.scaler.unscale_(state.optimizer)
        max_norm = config.optim.grad_clip or math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self._params, max_norm)
        if self.overflow is not None:
            self.overflow.step_and_update(state.scaler, state.optimizer)
        elif scaler_on:
            state.scaler.step(state.optimizer)
            state.scaler.update()
        else:
            state.optimizer.step()
        state.optimizer.zero_grad(set_to_none=True)
        state.scheduler.step()
        return grad_norm, loss_sum if accum == 1 else loss_sum / accum

    @staticmethod
    def _autocast(state: TrainState) -> AbstractContextManager[Any]:
        """torch.autocast with AMP on; nothing to enter with it off (the same numbers)."""
        if state.amp_dtype is None:
            return nullcontext()
        return torch.autocast(state.device.type, dtype=state.amp_dtype)

    def _report(
        self,
        state: TrainState,
        step: int,
        lr: float,
        grad_norm: torch.Tensor,
        seconds: float,
        steps: int,
    ) -> None:
        total = state.total_steps
        samples_per_s = state.global_batch * steps / max(seconds, 1e-9)
        record: dict[str, Any] = {
            "step": step,
            "epoch": state.stream.epoch,
            "loss": state.last_loss,
            "lr": lr,
            "grad_norm": float(grad_norm),
            "samples_per_s": samples_per_s,
        }
        line = (
            f"step {step}/{total} loss {state.last_loss:.6f} lr {lr:.3e}"
            f" grad_norm {record['grad_norm']:.4f} samples/s {samples_per_s:.1f}"
        )
        if state.tokens_per_sample:
            record["tokens_per_s"] = samples_per_s * state.tokens_per_sample
            line += f" tokens/s {record['tokens_per_s']:.0f}"
        if state.device.type == "cuda":
            record.update(gpu_figures(state.device))
        if state.scaler.is_enabled():
            record["loss_scale"] = state.scaler.get_scale()
            line += f" loss_scale {record['loss_scale']:g}"
        if self.overflow is not None:
            record["overflow_skips"], record["overflow_skips_total"] = (
                self.overflow.since_last_report()
            )
            if record["overflow_skips"]:
                line += f" skipped {record['overflow_skips']} (inf/nan grads)"
        record["time"] = time.time()
        self.log.info(line)
        self.log.metrics(record)

    def _evaluate(self, state: TrainState, step: int) -> float:
        """Evaluate after `step` (every rank): log and record the metrics (rank 0), write
        best.pt on a new best of checkpoint.keep_best; returns the seconds it took."""
        assert state.evaluator is not None
        began = time.perf_counter()
        metrics = state.evaluator.run(state.module, tick=lambda: self.heartbeat.tick(step))
        seconds = time.perf_counter() - began
        shown = " ".join(
            f"{name} {value:.6g}" for name, value in metrics.items() if name != "val_samples"
        )
        self.log.info(
            f"eval step {step}/{state.total_steps}: {shown}"
            f" ({metrics['val_samples']} samples, {seconds:.2f} s)"
        )
        self.log.metrics(
            {
                "step": step,
                "epoch": state.stream.epoch,
                "split": "val",
                **metrics,
                "time": time.time(),
            }
        )
        metric = self.config.checkpoint.keep_best
        if metric is not None:
            best = None if state.best is None else state.best["value"]
            if is_better(metric, metrics[metric], best):
                state.best = {"metric": metric, "value": metrics[metric], "step": step}
                self.heartbeat.write(step, CHECKPOINT)
                self.checkpointer.save_best(state, step)
                self.heartbeat.write(step, TRAIN)
        return time.perf_counter() - began

    def run(self) -> int:
        """Train to train.steps (exit 0) or until asked to stop (checkpoint, exit 75)."""
        config, env, log, checkpointer = self.config, self.env, self.log, self.checkpointer
        heartbeat = self.heartbeat
        heartbeat.write(0, SETUP)
        log.sinks = open_dashboards(self.loaded, self.paths.run_dir, self.environ, env.is_main)
        state = self.state = build_state(
            self.loaded, env, self.paths, log, checkpointer, self.parts
        )
        if state.scaler.is_enabled():
            self.overflow = OverflowCounter(state.device)
        if state.device.type == "cpu" and keep_freed_memory(self.environ):
            log.debug("malloc: freed tensor memory kept for the next step (train/loop/malloc.py)")
        profiler = step_profiler(config.profile, self.paths.run_dir, env.rank, state.device, log)
        start_step = state.start_step
        total = state.total_steps
        heartbeat.start_training(start_step, total)
        if start_step >= total:
            log.info(f"training already complete at step {start_step} (train.steps = {total})")
            log.info(f"final loss {state.last_loss!r}")
            checkpointer.write_finished(start_step, state.last_loss)
            heartbeat.write(start_step, DONE)
            return EXIT_OK
        step = start_step
        stop_reason = ""
        interval_start = run_start = time.perf_counter()
        interval_steps = 0
        log_every = config.logging.every_steps
        every = config.checkpoint.every_steps
        votes = StepVotes(state.device)
        cadence = VoteCadence(config.train.stop_vote_every_s, start_step)
        self._params = list(state.model.parameters())
        state.model.train()  # once: evaluation puts the mode back itself
        while step < total:
            lr = float(state.scheduler.get_last_lr()[0])
            if profiler is not None:
                profiler.begin(step + 1)
            grad_norm, loss_mean = self._train_step(state)
            step += 1
            if profiler is not None:
                profiler.end(step)
            interval_steps += 1
            heartbeat.tick(step)
            if cadence.probe_due(step):
                slowest = cadence.agree(state.device)
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
                votes.start(self.stop.requested, loss_mean)
                stopping = seen is not None and seen.stop and step < total
                if stopping or exact:
                    seen = votes.collect()
            if seen is not None:
                state.last_loss = seen.loss_sum / env.world_size
            if seen is not None and seen.stop and step < total:
                why = self.stop.signal_name or "a signal on another rank"
                stop_reason = f"preempted by {why}"
            elif config.train.stop_after_step == step and step < total:
                stop_reason = "train.stop_after_step"
            if step % log_every == 0 or step == total or stop_reason:
                now = time.perf_counter()
                self._report(state, step, lr, grad_norm, now - interval_start, interval_steps)
                interval_start, interval_steps = now, 0
            if state.evaluator is not None and state.evaluator.due(step, state.stream.epoch, total):
                interval_start += self._evaluate(state, step)
            if stop_reason:
                break
            if every and step % every == 0 and step < total:
                heartbeat.write(step, CHECKPOINT)  # a long save is not a hang
                checkpointer.save(state, step, "periodic")
                heartbeat.write(step, TRAIN)
        if profiler is not None:
            profiler.close()  # a stop inside the window
        elapsed = time.perf_counter() - run_start
        done = step - start_step
        log.info(
            f"trained {done} steps in {elapsed:.2f} s ({done / max(elapsed, 1e-9):.3f} steps/s)"
        )
        heartbeat.write(step, CHECKPOINT)
        if stop_reason:
            checkpointer.save_for_requeue(state, step, stop_reason)
            log.info(
                f"stopped after step {step} ({stop_reason}): exiting with {EXIT_REQUEUE} (requeue)"
            )
            return EXIT_REQUEUE
        if config.checkpoint.save_final and checkpointer.last_saved_step != step:
            checkpointer.save(state, step, "final")
        log.info(f"final loss {state.last_loss!r}")
        checkpointer.write_finished(step, state.last_loss)
        heartbeat.write(step, DONE)
        return EXIT_OK

    def close(self) -> None:
        """Close the log files; let go of the model, its optimizer and the data stream
        (TrainState.release: the process group is then destroyed by `dist.shutdown()`)."""
        self.log.close()
        if self.state is not None:
            self.state.release()
            self.state = None


def run_training(
    loaded: LoadedConfig, env: LaunchEnv, stop: StopRequest, parts: UserParts | None = None
) -> int:
    """Build a Trainer for this rank and run it; returns the exit code (0 or 75)."""
    trainer = Trainer(loaded, env, stop, parts=parts)
    try:
        return trainer.run()
    finally:
        trainer.close()
