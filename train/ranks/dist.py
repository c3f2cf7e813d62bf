"""Process group, device and the few collectives the trainer needs."""

from __future__ import annotations

import datetime
import gc
import os
import pickle
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from train.env.launch import LaunchEnv, apply_to_environ


class DistSetupError(Exception):
    """Devices or backend do not fit the launch; the message is one line."""


@dataclass(frozen=True)
class DeviceInfo:
    """What one rank runs on, as gathered by the health check and the trainer."""

    rank: int
    local_rank: int
    host: str
    device: str
    uuid: str | None


GPUS_VARIABLE = "JOBKIT_GPUS_PER_NODE"
"""Exported by jobkit's scripts when the job asked for GPUs (resources.gpus_per_node)."""


def gpus_requested(environ: Mapping[str, str] | None = None) -> int:
    """GPUs per node the job asked the scheduler for (0: none asked, or not run by jobkit)."""
    text = (os.environ if environ is None else environ).get(GPUS_VARIABLE, "").strip()
    return int(text) if text.isdigit() else 0


def choose_device(
    wanted: str, env: LaunchEnv, environ: Mapping[str, str] | None = None
) -> torch.device:
    """cuda:N for this local rank when CUDA is there (or asked for), else cpu.

    `auto` on a job that asked for GPUs means CUDA: no visible GPU is an error, not a
    quiet fall-back to the CPU (train.device: cpu does that on purpose).
    """
    requested = gpus_requested(environ)
    use_cuda = wanted == "cuda" or (
        wanted == "auto" and (requested > 0 or torch.cuda.is_available())
    )
    if not use_cuda:
        return torch.device("cpu")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
        seen = (
            f"CUDA_VISIBLE_DEVICES={visible!r}"
            if visible is not None
            else "CUDA_VISIBLE_DEVICES unset"
        )
        build = f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}"
        if wanted == "auto":
            raise DistSetupError(
                f"the job asked for {requested} GPU(s) per node (resources.gpus_per_node) but"
                f" no CUDA device is visible on {socket.gethostname()} ({build}, {seen});"
                " not training on the CPU instead (train.device: cpu does that on purpose)"
            )
        raise DistSetupError(
            f"train.device is cuda but no CUDA device is visible on {socket.gethostname()}"
            f" ({build}, {seen})"
        )
    if count >= env.local_world_size:
        return torch.device("cuda", env.local_rank)
    if count == 1:
        return torch.device("cuda", 0)  # one GPU per task (CUDA_VISIBLE_DEVICES binding)
    raise DistSetupError(
        f"{env.local_world_size} ranks on this node but {count} GPUs visible to each;"
        " give every rank its own GPU (one per rank, or exactly one visible per task)"
    )


def choose_backend(wanted: str, device: torch.device) -> str:
    """nccl for CUDA and gloo for CPU when `wanted` is auto; nccl on CPU is refused."""
    if wanted == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    if wanted == "nccl" and device.type != "cuda":
        raise DistSetupError("distributed.backend nccl needs CUDA; use gloo (or auto) on CPU")
    return wanted


def init_process_group(env: LaunchEnv, backend: str, device: torch.device, timeout_s: int) -> None:
    """Join the job's process group (env:// rendezvous; an in-memory store for one rank).

    With nccl, CPU tensors go through gloo in the same group: the small control messages
    (device check, RNG states, checkpoint choice) then need no GPU, and the device check
    runs before NCCL creates its communicator (which would fail on a shared GPU first).
    """
    # torch.distributed.nn.functional binds `group.WORLD` as a default argument when first
    # imported (optimizers import it lazily through torch._dynamo). Imported after the group
    # exists, it keeps the group alive past destroy_process_group, and gloo's threads then
    # abort the interpreter at exit ("terminate called without an active exception").
    import torch.distributed.nn.functional

    if device.type == "cuda":
        torch.cuda.set_device(device)
    spec = "cpu:gloo,cuda:nccl" if backend == "nccl" else backend
    timeout = datetime.timedelta(seconds=timeout_s)
    if env.world_size == 1:
        store = dist.HashStore()  # type: ignore[attr-defined]
        dist.init_process_group(spec, store=store, rank=0, world_size=1, timeout=timeout)
        return
    apply_to_environ(env)
    dist.init_process_group(
        spec, init_method="env://", rank=env.rank, world_size=env.world_size, timeout=timeout
    )


def shutdown() -> None:
    """Leave the process group if joined, once nothing else holds it.

    Reference cycles still holding a DDP model (and through it the group) are collected
    first, so that the group is destroyed here and not at interpreter teardown.
    """
    if dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def describe_device(env: LaunchEnv, device: torch.device) -> DeviceInfo:
    """This rank's host and device (with the GPU's uuid when there is one)."""
    uuid = None
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", index))
    return DeviceInfo(env.rank, env.local_rank, socket.gethostname(), str(device), uuid)


def _encode(value: Any) -> torch.Tensor:
    return torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8)


def _decode(tensor: torch.Tensor, size: int) -> Any:
    return pickle.loads(bytes(tensor[:size].tolist()))


def gather_objects(value: Any) -> list[Any]:
    """`value` from every rank, in rank order, on every rank (through CPU tensors).

    torch's all_gather_object needs numpy; this pickles into uint8 tensors itself.
    """
    payload = _encode(value)
    size = torch.tensor([payload.numel()], dtype=torch.long)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    longest = int(max(int(item.item()) for item in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[: payload.numel()] = payload
    buffers = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(buffers, padded)
    return [_decode(buffer, int(item.item())) for buffer, item in zip(buffers, sizes, strict=True)]


def find_shared_devices(infos: list[DeviceInfo]) -> list[str]:
    """One message per GPU that two or more ranks on one host use (empty: all distinct)."""
    users: dict[tuple[str, str], list[int]] = {}
    for info in infos:
        if info.uuid is not None:
            users.setdefault((info.host, info.uuid), []).append(info.rank)
    return [
        f"ranks {', '.join(map(str, ranks))} on host {host} share one GPU ({uuid})"
        for (host, uuid), ranks in users.items()
        if len(ranks) > 1
    ]


def broadcast_object(value: Any, src: int = 0) -> Any:
    """`value` from rank `src`, on every rank (pickled into CPU tensors; no numpy needed)."""
    is_source = dist.get_rank() == src
    payload = _encode(value) if is_source else None
    size = torch.tensor([payload.numel() if payload is not None else 0])
    dist.broadcast(size, src=src)
    buffer = payload if payload is not None else torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(buffer, src=src)
    return value if is_source else _decode(buffer, int(size.item()))


def all_agree(ok: bool, device: torch.device) -> bool:
    """True when `ok` holds on every rank; also a barrier."""
    flag = torch.tensor([0.0 if ok else 1.0], device=device)
    dist.all_reduce(flag)
    return flag.item() == 0.0


def barrier(device: torch.device) -> None:
    """Wait for every rank (an all-reduce, so it works the same on gloo and nccl)."""
    flag = torch.zeros(1, device=device)
    dist.all_reduce(flag)
