"""What a job asks Slurm for (Request) against what the partition, its nodes and the
accounting limits allow (pure: slurm/preflight.py runs the queries and hands their answers
here); each problem a Finding about one spec key."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobkit.backends.preflight import Finding
from jobkit.core.units import format_slurm_time, parse_duration, parse_memory_mb

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec


@dataclass(frozen=True)
class Request:
    """What the job asks for, in Slurm's units."""

    nodes: int
    cpus_per_node: int
    gpus_per_node: int
    gpu_type: str | None
    mem_mb: int | None
    """Per node."""
    time_s: int | None
    partition: str | None
    account: str | None
    qos: str | None
    cpu_key: str = "resources.cpus_per_process"
    """The spec key that sets the CPUs (cpus_per_task when given; launch.nproc_per_node when
    neither is: one CPU per process then)."""

    @classmethod
    def of(cls, spec: JobSpec) -> Request:
        res = spec.resources
        return cls(
            nodes=res.nodes,
            cpus_per_node=spec.tasks_per_node * (spec.cpus_per_scheduler_task or 1),
            gpus_per_node=res.gpus_per_node,
            gpu_type=res.gpu_type,
            mem_mb=res.mem,
            time_s=res.time,
            partition=res.partition,
            account=res.account,
            qos=res.qos,
            cpu_key="resources.cpus_per_task"
            if res.cpus_per_task
            else "resources.cpus_per_process"
            if res.cpus_per_process
            else "launch.nproc_per_node",
        )

    @property
    def gpu_key(self) -> str:
        """The spec key behind the GPU request: gpu_type only when the user set one."""
        return "resources.gpu_type" if self.gpu_type else "resources.gpus_per_node"

    def total(self, tres: str) -> int | None:
        """The whole job's count of one TRES (`cpu`, `node`, `mem` in MB, `gres/gpu`)."""
        per_node = self.per_node(tres)
        return None if per_node is None else per_node * (1 if tres == "node" else self.nodes)

    def per_node(self, tres: str) -> int | None:
        """One node's count of one TRES."""
        if tres == "cpu":
            return self.cpus_per_node
        if tres == "node":
            return self.nodes
        if tres == "mem":
            return self.mem_mb
        if tres == "gres/gpu" or (self.gpu_type and tres == f"gres/gpu:{self.gpu_type}"):
            return self.gpus_per_node
        return None


@dataclass(frozen=True)
class Node:
    """One node as `sinfo --Node` shows it (a node in two partitions is two rows)."""

    name: str
    partition: str
    gres: str
    memory_mb: int
    cpus: int

    def gpu_types(self) -> set[str | None]:
        """The GPU types of its GRES (None: GPUs without a type); empty: no GPUs."""
        types: set[str | None] = set()
        for item in re.split(r",(?![^(]*\))", self.gres):
            parts = item.split("(")[0].split(":")
            if parts[0] != "gpu":
                continue
            types.add(
                parts[1] if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()) else None
            )
        return types


def partition_limits(request: Request, name: str, fields: dict[str, str]) -> list[Finding]:
    """The request against the partition's MaxTime, MaxNodes, MaxMemPerNode and State."""
    found: list[Finding] = []
    max_time = slurm_seconds(fields.get("MaxTime", ""))
    if request.time_s and max_time is not None and request.time_s > max_time:
        found.append(
            Finding(
                "resources.time",
                f"{format_slurm_time(request.time_s)} is over partition {name}'s MaxTime"
                f" {format_slurm_time(max_time)}: the job would never start",
            )
        )
    max_nodes = fields.get("MaxNodes", "UNLIMITED")
    if max_nodes.isdigit() and request.nodes > int(max_nodes):
        found.append(
            Finding(
                "resources.nodes",
                f"{request.nodes} nodes is over partition {name}'s MaxNodes {max_nodes}",
            )
        )
    max_mem = fields.get("MaxMemPerNode", "UNLIMITED")
    if request.mem_mb and max_mem.isdigit() and request.mem_mb > int(max_mem):
        found.append(
            Finding(
                "resources.mem",
                f"{request.mem_mb}M per node is over partition {name}'s MaxMemPerNode {max_mem}M",
            )
        )
    state = fields.get("State", "UP")
    if state != "UP":
        found.append(
            Finding("resources.partition", f"partition {name} is {state}: it starts no jobs")
        )
    return found


def node_fit(request: Request, partition: str, nodes: Sequence[Node]) -> list[Finding]:
    """GPU type, CPUs, memory and node count against the partition's nodes."""
    if not nodes:
        return []
    found: list[Finding] = []
    most_cpus = max(node.cpus for node in nodes)
    if request.cpus_per_node > most_cpus:
        found.append(
            Finding(
                request.cpu_key,
                f"asks for {request.cpus_per_node} CPUs per node; no node of partition"
                f" {partition} has more than {most_cpus}",
            )
        )
    if request.gpus_per_node:
        types = set().union(*(node.gpu_types() for node in nodes))
        if not types:
            found.append(
                Finding(
                    request.gpu_key,
                    f"no node of partition {partition} has GPUs"
                    f" (its nodes' GRES: {gres_of(nodes)})",
                )
            )
        elif request.gpu_type and request.gpu_type not in types:
            named = ", ".join(sorted(t for t in types if t)) or "GPUs without a type"
            found.append(
                Finding(
                    "resources.gpu_type",
                    f"no node of partition {partition} has GPU type {request.gpu_type!r}"
                    f" (types there: {named})",
                )
            )
    most = max(node.memory_mb for node in nodes)
    if request.mem_mb and request.mem_mb > most:
        found.append(
            Finding(
                "resources.mem",
                f"{request.mem_mb}M per node is more than any node of partition {partition}"
                f" has ({most}M)",
            )
        )
    count = len({node.name for node in nodes})
    if request.nodes > count:
        found.append(
            Finding(
                "resources.nodes", f"{request.nodes} nodes asked, partition {partition} has {count}"
            )
        )
    return found


def slurm_seconds(text: str) -> int | None:
    """A Slurm time limit in seconds; None when unset or UNLIMITED."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE"):
        return None
    if re.fullmatch(r"\d+:\d\d", text):
        text = f"00:{text}"
    try:
        return parse_duration(text)
    except ValueError:
        return None


def parse_tres(text: str) -> dict[str, int]:
    """`cpu=4,mem=8G,gres/gpu=2` -> counts (mem in MB)."""
    found: dict[str, int] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        try:
            found[name.strip()] = parse_memory_mb(value) if name.strip() == "mem" else int(value)
        except ValueError:
            continue
    return found


def tres_limits(
    request: Request, limits: list[dict[str, int]], what: str, *, per_node: bool
) -> list[Finding]:
    """TRES counts over a limit that every one of `limits` sets (the loosest)."""
    found: list[Finding] = []
    names = set().union(*limits) if limits else set()
    for name in sorted(names):
        limit = loosest([one.get(name) for one in limits])
        asked = request.per_node(name) if per_node else request.total(name)
        if limit is not None and asked is not None and asked > limit:
            key = (
                request.cpu_key if name == "cpu" else TRES_KEYS.get(name.split(":")[0], "resources")
            )
            found.append(
                Finding(
                    key,
                    f"the job asks for {name}={asked}{' per node' if per_node else ''},"
                    f" over {what} {name}={limit}",
                )
            )
    return found


TRES_KEYS = {
    "node": "resources.nodes",
    "mem": "resources.mem",
    "gres/gpu": "resources.gpus_per_node",
}


def loosest(values: Sequence[int | None]) -> int | None:
    """The largest limit, or None when any is unlimited (or there are none)."""
    if not values or any(value is None for value in values):
        return None
    return max(value for value in values if value is not None)


def only_one(values: set[str]) -> str | None:
    return next(iter(values)) if len(values) == 1 else None


def gres_of(nodes: Sequence[Node]) -> str:
    return ", ".join(sorted({node.gres for node in nodes}))
