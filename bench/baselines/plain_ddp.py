"""A minimal hand-written DDP training loop: the baseline of the trainer-overhead case.

    torchrun --standalone --nproc-per-node 2 bench/baselines/plain_ddp.py --steps 300

It trains what the trainer's tiny-lm config trains, the way one would write it by hand:
the same model and dataset classes (imported from train/, so both train the very same
network on the very same samples), AdamW, linear warm-up then cosine decay, gradient
clipping, the same batch size and precision. Everything else is written here: process
group, DistributedDataParallel, DistributedSampler, the loop, and a loss line every
--log-every steps. It prints `trained N steps in X s (Y steps/s)` as the trainer does, timed
over the same span (first step to last step, set-up excluded).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, DistributedSampler

from train.parts.data import CharWindows
from train.parts.models import CharTransformer


def parse_args() -> argparse.Namespace:
    """Defaults are the tiny-lm config's values."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16, help="Samples per rank per step.")
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--stride", type=int, default=None, help="Window stride (default: context).")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--amp", choices=("off", "bf16", "fp16"), default="off")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main() -> None:
    """Train for --steps optimizer steps and print the throughput line on rank 0."""
    args = parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    torch.manual_seed(args.seed)
    data = CharWindows(None, args.context, args.stride)
    model = CharTransformer(
        vocab_size=data.info["vocab_size"],
        context=args.context,
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        dropout=args.dropout,
    ).to(device)
    ddp: torch.nn.Module = model  # one process: no DDP wrapper (the trainer has none either)
    if world > 1:
        ddp = DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == "cuda" else None
        )
    sampler: DistributedSampler[int] = DistributedSampler(
        data, world, rank, shuffle=True, seed=args.seed, drop_last=True
    )
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    warmup, total, floor = int(args.warmup_steps), int(args.steps), float(args.min_lr_ratio)

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    schedule = LambdaLR(optimizer, lr_factor)
    amp_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.amp]
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp == "fp16")

    step, epoch = 0, 0
    start = time.perf_counter()
    while step < args.steps:
        sampler.set_epoch(epoch)
        loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True)
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                logits = ddp(inputs)
                loss = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1)
                )
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), args.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            schedule.step()
            step += 1
            if step % args.log_every == 0 and rank == 0:
                print(f"step {step}/{args.steps} loss {loss.item():.4f}", flush=True)
            if step == args.steps:
                break
        epoch += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(f"trained {step} steps in {elapsed:.2f} s ({step / elapsed:.3f} steps/s)", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # Leave without the interpreter's teardown, where gloo's threads made a run abort
    # (SIGABRT) or hang now and then, failing the round; everything is printed and flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
