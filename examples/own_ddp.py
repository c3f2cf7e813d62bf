"""A plain DistributedDataParallel script, the kind you already have: it knows nothing of jobkit.

It reads what torchrun sets on every process (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), trains a tiny regression model on synthetic data (nccl on GPUs, gloo on CPU)
and prints its loss. Run it by hand with:

    torchrun --standalone --nproc-per-node 2 examples/own_ddp.py --epochs 2
"""

from __future__ import annotations

import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist

# Two PyTorch pitfalls at exit, worth copying into your own script (see docs/e2e.md): the
# optimizer imports torch.distributed.nn.functional lazily, and imported after the process
# group exists it keeps the group alive past destroy_process_group; and DDP holds the group
# too. A group destroyed late, at interpreter teardown, now and then aborts ("terminate called
# without an active exception") or deadlocks in gloo's threads after training succeeded.
# Import this first, and drop the DDP model before destroy_process_group (end of main).
import torch.distributed.nn.functional
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    address, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]

    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend="nccl" if use_cuda else "gloo",
        init_method=f"tcp://{address}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(minutes=5),
    )
    print(f"rank {rank}/{world_size} (local {local_rank}) on {device}", flush=True)

    torch.manual_seed(0)  # the same true weights and initial model on every rank
    true_weights = torch.randn(16, 1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own samples

    for epoch in range(args.epochs):
        total = torch.zeros((), device=device)
        for _ in range(args.steps_per_epoch):
            inputs = torch.randn(args.batch_size, 16, generator=data)
            targets = inputs @ true_weights + 0.01 * torch.randn(args.batch_size, 1, generator=data)
            loss = nn.functional.mse_loss(ddp(inputs.to(device)), targets.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        dist.all_reduce(total)  # mean over steps and ranks
        mean = total.item() / (args.steps_per_epoch * world_size)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} loss {mean:.4f}", flush=True)

    del ddp, optimizer  # the last holders of the group besides torch.distributed
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
