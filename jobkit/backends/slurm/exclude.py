"""Leaving bad nodes out of a Slurm job (`jobkit nodes`, docs/nodes.md): the nodes its
partition has (one sinfo) and the sbatch option that excludes some of them."""

from __future__ import annotations

from collections.abc import Sequence

SINFO_ARGV = ["sinfo", "--noheader", "--Node", "--format=%N|%P"]
"""One line per node and partition: `n1|debug*` (`*`: the default partition)."""


def exclude_args(nodes: Sequence[str]) -> list[str]:
    """`--exclude=n1,n2` for sbatch, or nothing."""
    return [f"--exclude={','.join(nodes)}"] if nodes else []


def partition_nodes(sinfo_out: str, partition: str | None) -> tuple[str, ...]:
    """The nodes of `partition` (None: the default one, marked `*`) in sinfo's `%N|%P` lines,
    in order, each once. A comma-separated partition list takes every node of any of them."""
    wanted = {p.strip() for p in partition.split(",")} if partition else None
    names: list[str] = []
    for line in sinfo_out.splitlines():
        node, sep, part = line.strip().partition("|")
        if not sep or not node:
            continue
        name = part.rstrip("*")
        chosen = name in wanted if wanted is not None else part.endswith("*")
        if chosen and node not in names:
            names.append(node)
    return tuple(names)


def usable_nodes(partition: str | None, timeout: float) -> tuple[str, ...]:
    """The nodes a job of this partition (None: the default) may run on; SchedulerError
    when sinfo cannot answer."""
    from jobkit.core import proc

    return partition_nodes(proc.run(SINFO_ARGV, timeout=timeout).stdout, partition)
