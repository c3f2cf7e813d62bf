"""Leaving bad nodes out of a Grid Engine job (`jobkit nodes`, docs/nodes.md): qsub's
`-l h=!n1&!n2` (tried on the test cluster's Son of Grid Engine) and the execution hosts
(`qconf -sel`)."""

from __future__ import annotations

from collections.abc import Sequence

EXEC_HOSTS_ARGV = ["qconf", "-sel"]


def exclude_args(nodes: Sequence[str]) -> list[str]:
    """`-l h=!n1&!n2` for qsub, or nothing."""
    return ["-l", "h=" + "&".join(f"!{node}" for node in nodes)] if nodes else []


def usable_nodes(timeout: float) -> tuple[str, ...]:
    """The execution hosts, one per line of `qconf -sel` (short names, as qstat shows
    them); SchedulerError when qconf cannot answer."""
    from jobkit.backends.commands import GRID_ENGINE
    from jobkit.core import proc

    out = proc.run(GRID_ENGINE.argv(EXEC_HOSTS_ARGV), timeout=timeout).stdout
    return tuple(dict.fromkeys(line.split(".")[0] for line in out.split() if line))
