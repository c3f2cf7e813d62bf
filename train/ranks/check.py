"""`python -m train --check`: is every rank there, on its own device, and how fast is all-reduce?"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from train.config.load import DistributedConfig
from train.env.launch import LaunchEnv
from train.ranks.dist import (
    barrier,
    choose_backend,
    choose_device,
    describe_device,
    find_shared_devices,
    gather_objects,
    init_process_group,
)

SIZES_MIB = (1, 8, 32)
EXIT_HEALTHY = 0
EXIT_UNHEALTHY = 1


def _measure(size_mib: int, device: torch.device, iterations: int = 5) -> float:
    """Seconds per all-reduce of `size_mib` MiB of float32 (after two warm-up rounds)."""
    tensor = torch.ones(size_mib * 1024 * 1024 // 4, device=device)
    for _ in range(2):
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    barrier(device)
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / iterations


def run_check(env: LaunchEnv, config: DistributedConfig, device_kind: str = "auto") -> int:
    """Run the health check on this rank; rank 0 prints the report. Returns the exit code."""
    device = choose_device(device_kind, env)
    backend = choose_backend(config.backend, device)
    init_process_group(env, backend, device, config.timeout)
    say = print if env.is_main else (lambda *_args, **_kw: None)
    infos = gather_objects(describe_device(env, device))
    say(f"check: world size {env.world_size}, backend {backend}, launcher {env.launcher}")
    for info in infos:
        uuid = f" uuid {info.uuid}" if info.uuid else ""
        say(
            f"check: rank {info.rank} local_rank {info.local_rank} host {info.host}"
            f" device {info.device}{uuid}"
        )
    problems = find_shared_devices(infos)
    if not problems:  # never run NCCL on a GPU two ranks share: it fails or hangs there
        total = torch.ones(1, device=device)
        dist.all_reduce(total)
        if int(total.item()) != env.world_size:
            problems.append(f"all-reduce of ones gave {int(total.item())}, not {env.world_size}")
        else:
            say(f"check: all-reduce ok (sum {int(total.item())} = world size)")
    if not problems:
        factor = 2 * (env.world_size - 1) / env.world_size
        for size in SIZES_MIB:
            seconds = _measure(size, device)
            algbw = size * 1024 * 1024 / seconds / 1e9
            say(
                f"check: all-reduce {size} MiB: {seconds * 1e3:.2f} ms,"
                f" algbw {algbw:.3f} GB/s, busbw {algbw * factor:.3f} GB/s"
            )
    for problem in problems:
        say(f"check: FAILED: {problem}")
    if not problems:
        say("check: healthy")
    return EXIT_UNHEALTHY if problems else EXIT_HEALTHY
