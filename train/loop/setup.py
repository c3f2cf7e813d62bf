"""Set-up of one rank's run: process group, device, data, model, optimizer, AMP, resume."""

from __future__ import annotations

import math
import os
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DataParallel, DistributedDataParallel
from torch.utils.data import Dataset, DistributedSampler

from train.config.load import LoadedConfig, per_rank_batch, scaled_lr
from train.env.launch import LaunchEnv
from train.loop.ampscale import build_scaler, fp16_autocast_works
from train.loop.evaluate import Evaluator
from train.loop.length import derive_length
from train.loop.optim import build_optimizer, build_scheduler
from train.loop.state import TrainSetupError, TrainState
from train.parts.data import BatchStream, build_dataset, build_val_dataset, holdout_split
from train.parts.models import ModelBuildError, build_model
from train.parts.plugins import PluginArgsError, PluginError
from train.parts.userstep import UserParts, build_step
from train.ranks.dist import (
    DistSetupError,
    choose_backend,
    choose_device,
    describe_device,
    find_shared_devices,
    gather_objects,
    gpus_requested,
    init_process_group,
)
from train.reporting.paths import RunPaths
from train.reporting.runlog import RunLog
from train.resume.checkpointer import Checkpointer
from train.resume.rng import seed_everything, seed_per_rank


def build_state(
    loaded: LoadedConfig,
    env: LaunchEnv,
    paths: RunPaths,
    log: RunLog,
    checkpointer: Checkpointer,
    parts: UserParts | None = None,
) -> TrainState:
    """Join the process group and build everything this rank trains with, resumed from the
    checkpoint `checkpointer` chooses (state.start_step) and wrapped for the strategy.
    `parts` (train.fit) replace the config's model, data, loss or step."""
    parts = parts or UserParts()
    config = loaded.config
    log.info(f"launch: {env.describe()}", all_ranks=False)
    for note in env.notes:
        log.info(f"launch: {note}", all_ranks=False)
    if env.restart_count:
        log.info(f"requeue count: {env.restart_count} (SLURM_RESTART_COUNT)")
    if os.environ.get("JOBKIT_RUN_ID"):  # the same in every attempt of a run (docs/runs.md)
        attempt = os.environ.get("JOBKIT_ATTEMPT") or "1"
        log.info(f"run id: {os.environ['JOBKIT_RUN_ID']}, attempt {attempt} (JOBKIT_RUN_ID)")
    device, backend = _start_process_group(loaded, env, log)
    strategy = _resolve_strategy(loaded, env, device, log)
    amp_dtype, use_scaler = _resolve_amp(config.amp.dtype, device, log)
    ignored = config.amp.scaler_keys_set()
    if ignored and not use_scaler and env.is_main:
        log.warning(
            f"ignoring {', '.join('amp.' + key for key in ignored)}: GradScaler settings, and"
            f" amp.dtype {config.amp.dtype} on {device.type} uses no GradScaler (fp16 only)"
        )
    if env.is_main:
        log.info(
            f"config: {loaded.path}\n{loaded.dump().rstrip()}",
            console=f"config: {loaded.path} (in full in {log.path})",
        )
        checkpointer.clear_leftovers()

    seed_everything(config.train.seed)  # same model init and data on every rank
    dataset, info, module = _build_data_and_model(loaded, parts)
    val_set = None
    if config.eval.enabled:
        dataset, val_set = _validation_split(loaded, dataset, parts)
    dataset_size = len(dataset)  # type: ignore[arg-type]  # checked Sized
    batch_size, global_batch = per_rank_batch(loaded, env.world_size)
    sampler: DistributedSampler[Any] = DistributedSampler(
        dataset,
        num_replicas=env.world_size,
        rank=env.rank,
        shuffle=config.data.shuffle,
        seed=config.train.seed,
        drop_last=True,
    )
    stream = BatchStream(
        dataset,
        sampler,
        batch_size,
        config.data.num_workers,
        pin_memory=device.type == "cuda",
    )
    if stream.batches_per_epoch < 1:
        key = (
            "data.batch_size_per_rank"
            if config.data.batch_size_per_rank
            else "data.global_batch_size"
        )
        raise loaded.error(
            key,
            f"the dataset has {dataset_size} samples, fewer than one batch of"
            f" {batch_size} per rank on {env.world_size} ranks",
        )
    length = derive_length(
        steps=config.train.steps,
        epochs=config.train.epochs,
        samples=dataset_size,
        batches_per_epoch=stream.batches_per_epoch,
        batch_size=batch_size,
        world_size=env.world_size,
        grad_accum_steps=config.train.grad_accum_steps,
    )
    seed_per_rank(config.train.seed, env.rank)

    module.to(device)
    step_fn = parts.build_step(device) or build_step(loaded, info, device)
    lr = scaled_lr(config, env.world_size)
    optimizer = build_optimizer(module.parameters(), config.optim, lr)
    state = TrainState(
        env=env,
        paths=paths,
        log=log,
        device=device,
        backend=backend,
        strategy=strategy,
        amp_dtype=amp_dtype,
        dataset=dataset,
        info=info,
        dataset_size=dataset_size,
        sampler=sampler,
        stream=stream,
        batch_size=batch_size,
        global_batch=global_batch,
        tokens_per_sample=info.get("tokens_per_sample"),
        module=module,
        model=module,
        lr=lr,
        optimizer=optimizer,
        scheduler=build_scheduler(optimizer, config.optim, length.steps),
        scaler=build_scaler(config.amp, device, use_scaler),
        total_steps=length.steps,
        start_step=0,
        last_loss=math.nan,
        step_fn=step_fn,
    )
    checkpointer.resume(state)
    if val_set is not None:
        state.evaluator = _evaluator(loaded, env, state, val_set)
    state.model = _wrap(loaded, module, strategy, device)
    log.info(
        f"device: {device} backend: {backend} strategy: {strategy}"
        f" amp: {config.amp.dtype}" + (" (GradScaler)" if use_scaler else "")
    )
    log.info(
        f"batch: {batch_size} per rank x {env.world_size} ranks x"
        f" {config.train.grad_accum_steps} accumulation steps = {global_batch} samples per"
        f" optimizer step (global); lr {lr:g} ({config.optim.lr_scaling} scaling)"
    )
    log.info(
        f"data: {dataset_size} samples, {stream.batches_per_epoch} batches per"
        f" epoch per rank; params: {sum(p.numel() for p in state.model.parameters())}"
    )
    log.info(f"length: {length.describe()}")
    own = _describe_parts(loaded, parts)
    if own:
        log.info(f"your own parts: {own}")
    if state.evaluator is not None:
        log.info(f"eval: {state.evaluator.describe(env.world_size)}")
    return state


def _describe_parts(loaded: LoadedConfig, parts: UserParts) -> str:
    """What the run's own model, data, loss or step are, for the start-of-run log."""
    config = loaded.config
    given = [
        f"{key} {type(value).__name__} (train.fit)"
        for key, value in (
            ("model", parts.model),
            ("data", parts.data),
            ("val_data", parts.val_data),
            ("loss", parts.loss),
            ("step", parts.step),
        )
        if value is not None
    ]
    if parts.loss is None and parts.step is None:
        if config.train.step is not None:
            given.append(f"train.step {config.train.step}")
        elif config.model.loss not in ("cross_entropy", "mse"):
            given.append(f"model.loss {config.model.loss}")
    return ", ".join(given)


def _validation_split(
    loaded: LoadedConfig, dataset: Dataset[Any], parts: UserParts
) -> tuple[Dataset[Any], Dataset[Any]]:
    """(training, validation) data: train.fit's val_data, a plug-in's data.val factory, else
    the held-out tail."""
    config = loaded.config
    if parts.val_data is not None:
        return dataset, parts.val_data
    if config.data.val is None or parts.data is not None:
        return holdout_split(dataset, config.eval.holdout)
    try:
        val_set = build_val_dataset(config.data)
    except PluginError as err:  # PluginArgsError too: data.val gets data.args
        raise loaded.error("data.val", str(err)) from None
    if len(val_set) < 1:  # type: ignore[arg-type]  # checked Sized
        raise loaded.error("data.val", f"{config.data.val} returned an empty dataset")
    return dataset, val_set


def _evaluator(
    loaded: LoadedConfig, env: LaunchEnv, state: TrainState, val_set: Dataset[Any]
) -> Evaluator:
    config = loaded.config
    return Evaluator(
        val_set,
        rank=env.rank,
        world_size=env.world_size,
        batch_size=config.eval.batch_size_per_rank or state.batch_size,
        max_batches=config.eval.batches,
        num_workers=config.data.num_workers,
        loss_kind=config.model.loss,
        step_fn=state.step_fn,
        perplexity=bool(state.tokens_per_sample),
        device=state.device,
        amp_dtype=state.amp_dtype,
        every_steps=config.eval.every_steps,
        every_epochs=config.eval.every_epochs,
        epoch=state.stream.epoch,
    )


_DEBUG_ENV = ("MASTER_ADDR", "MASTER_PORT", "TORCH_DISTRIBUTED_DEBUG", "NCCL_DEBUG")
"""Variables the DEBUG log line names (env.log_level DEBUG, docs/spec.md)."""


def _start_process_group(
    loaded: LoadedConfig, env: LaunchEnv, log: RunLog
) -> tuple[torch.device, str]:
    """Choose the device and backend, join the group, refuse a GPU two ranks share."""
    config = loaded.config
    try:
        device = choose_device(config.train.device, env)
        backend = choose_backend(config.distributed.backend, device)
    except DistSetupError as err:
        raise TrainSetupError(str(err)) from None
    requested = gpus_requested()
    if requested and device.type == "cpu" and env.is_main:
        log.warning(
            f"the job asked for {requested} GPU(s) per node, but train.device is"
            f" {config.train.device}: training on the CPU"
        )
    log.debug(
        f"joining the process group: backend {backend}, device {device},"
        f" rank {env.rank}/{env.world_size}, local rank {env.local_rank},"
        f" timeout {config.distributed.timeout}s, "
        + " ".join(f"{name}={os.environ.get(name, '')}" for name in _DEBUG_ENV)
    )
    init_process_group(env, backend, device, config.distributed.timeout)
    log.debug(f"joined the process group ({backend})")
    infos = gather_objects(describe_device(env, device))
    shared = find_shared_devices(infos)
    if shared:
        raise TrainSetupError("; ".join(shared))
    return device, backend


def _resolve_strategy(
    loaded: LoadedConfig, env: LaunchEnv, device: torch.device, log: RunLog
) -> str:
    strategy = loaded.config.distributed.strategy
    world = env.world_size
    if strategy == "auto":
        return "ddp" if world > 1 else "single"
    if strategy in ("single", "dp") and world > 1:
        raise loaded.error(
            "distributed.strategy",
            f"{strategy} runs one process but the launcher started {world}; use ddp or auto",
        )
    if strategy == "dp" and (device.type != "cuda" or torch.cuda.device_count() < 2):
        log.warning("distributed.strategy dp needs 2+ GPUs in one process; using single")
        return "single"
    return strategy


def _resolve_amp(wanted: str, device: torch.device, log: RunLog) -> tuple[torch.dtype | None, bool]:
    """(autocast dtype or None, whether a GradScaler is used) for amp.dtype on `device`."""
    if wanted == "off":
        return None, False
    on_cuda = device.type == "cuda"
    if wanted == "fp16" and not on_cuda and not fp16_autocast_works(device.type):
        log.warning(f"this torch has no fp16 autocast on {device.type}; using bf16 autocast")
        return torch.bfloat16, False
    if wanted == "bf16" and on_cuda and not torch.cuda.is_bf16_supported():
        log.warning("this GPU has no bf16; using fp16 autocast with a GradScaler")
        return torch.float16, True
    return (torch.float16, True) if wanted == "fp16" else (torch.bfloat16, False)


def _build_data_and_model(
    loaded: LoadedConfig, parts: UserParts
) -> tuple[Dataset[Any], dict[str, Any], nn.Module]:
    config = loaded.config
    # A plug-in that cannot be found is a config error (one line); an exception raised
    # inside the user's own factory keeps its traceback.
    try:
        if parts.data is not None:
            dataset, info = parts.data, dict(getattr(parts.data, "info", None) or {})
        else:
            dataset, info = build_dataset(config.data)
    except PluginArgsError as err:
        raise loaded.error("data.args", str(err)) from None
    except PluginError as err:
        raise loaded.error("data.name", str(err)) from None
    except OSError as err:
        if config.data.name != "chars":
            raise
        raise loaded.error("data.args.path", f"cannot read the text: {err}") from None
    if parts.model is not None:
        return dataset, info, parts.model
    try:
        model = build_model(config.model, info)
    except PluginArgsError as err:
        raise loaded.error("model.args", str(err)) from None
    except (PluginError, ModelBuildError) as err:
        raise loaded.error("model.name", str(err)) from None
    return dataset, info, model


def _wrap(
    loaded: LoadedConfig, module: nn.Module, strategy: str, device: torch.device
) -> nn.Module:
    """The model the step calls: DDP (ddp), DataParallel (dp) or `module` itself (single)."""
    if strategy == "ddp":
        dist_config = loaded.config.distributed
        return DistributedDataParallel(
            module,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=dist_config.bucket_cap_mb,
            find_unused_parameters=dist_config.find_unused_parameters,
            gradient_as_bucket_view=dist_config.gradient_as_bucket_view,
            static_graph=dist_config.static_graph,
        )
    if strategy == "dp":
        return DataParallel(module)
    return module
