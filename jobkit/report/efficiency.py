"""CPU efficiency per node and per step from a backend's Usage (docs/report.md, "The
formula"). Pure functions.

A node's efficiency is the CPU time its processes used, summed over every step that ran
there, divided by what the allocation held on it: its CPUs times the job's elapsed time.
A step's efficiency is its CPU time over its own CPUs times its own elapsed time.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobkit.core.usage import StepUsage, Usage

ELAPSED_RESOLUTION_S = 1.0
"""Schedulers record elapsed time in whole seconds (sacct Elapsed, PBS walltime, qacct
ru_wallclock) while CPU time is exact: a busy job's CPU time can exceed CPUs x elapsed by
up to this much per CPU."""

NEGLIGIBLE_CPU_S = 0.05
"""A step using less CPU time than this (extern, an idle batch shell) never makes a node's
figure unknown."""


@dataclass(frozen=True)
class NodeFigures:
    """One node of the allocation."""

    node: str
    cpus: float | None
    """CPUs the allocation held on the node (the job's CPUs shared evenly over its nodes)."""
    cpu_s: float | None
    """CPU seconds used there, all steps together; None when a step's share is unknown."""
    efficiency: float | None
    """cpu_s / (cpus * job elapsed) (cpu_ratio)."""
    rss_mb: float | None
    """Peak resident memory of the largest step there (None: not sampled)."""
    steps: tuple[str, ...]
    """The steps that ran there."""


def cpu_ratio(cpu_s: float, cpus: float, elapsed_s: float) -> float:
    """cpu_s / (cpus * elapsed_s), read as 100 % where it exceeds that by no more than the
    elapsed time's one-second resolution allows (a full CPU, not a CPU and a bit); above that
    it is kept: the processes used more CPUs than the allocation held."""
    ratio = cpu_s / (cpus * elapsed_s)
    if ratio > 1.0 and cpu_s <= cpus * (elapsed_s + ELAPSED_RESOLUTION_S):
        return 1.0
    return ratio


def step_efficiency(step: StepUsage) -> float | None:
    """TotalCPU / (AllocCPUS * Elapsed) of one step; None without those figures."""
    if step.cpu_s is None or not step.cpus or not step.elapsed_s:
        return None
    return cpu_ratio(step.cpu_s, step.cpus, step.elapsed_s)


def node_figures(usage: Usage) -> list[NodeFigures]:
    """Every node of the allocation with its CPU time, efficiency and peak memory."""
    if not usage.nodes or not usage.steps:
        return []
    per_node_cpus = usage.cpus / len(usage.nodes) if usage.cpus else None
    figures = []
    for node in usage.nodes:
        here = [s for s in usage.steps if node in s.nodes]
        cpu_s: float | None = 0.0
        rss: list[float] = []
        for step in here:
            share = step.per_node.get(node)
            if share is not None and share.rss_mb is not None:
                rss.append(share.rss_mb)
            if share is not None and share.cpu_s is not None:
                cpu_s = None if cpu_s is None else cpu_s + share.cpu_s
            elif step.cpu_s is not None and step.cpu_s >= NEGLIGIBLE_CPU_S:
                cpu_s = None
        efficiency = None
        if cpu_s is not None and per_node_cpus and usage.elapsed_s:
            efficiency = cpu_ratio(cpu_s, per_node_cpus, usage.elapsed_s)
        figures.append(
            NodeFigures(
                node=node,
                cpus=per_node_cpus,
                cpu_s=cpu_s,
                efficiency=efficiency,
                rss_mb=max(rss) if rss else None,
                steps=tuple(s.name for s in here),
            )
        )
    return figures


def total_cpu_s(usage: Usage) -> float | None:
    """CPU seconds of the whole job: the steps' sum (Slurm), else the scheduler's total."""
    if usage.steps:
        known = [s.cpu_s for s in usage.steps if s.cpu_s is not None]
        return sum(known) if known else None
    return usage.cpu_s


def job_efficiency(usage: Usage, cpus: int | None = None) -> float | None:
    """The whole allocation's: total CPU time / (CPUs * elapsed) — the average of the node
    figures, what seff prints (`cpus` where the usage does not say)."""
    used = total_cpu_s(usage)
    held = usage.cpus or cpus
    if used is None or not held or not usage.elapsed_s:
        return None
    return cpu_ratio(used, held, usage.elapsed_s)


def peak_node_rss_mb(usage: Usage, figures: list[NodeFigures]) -> float | None:
    """The largest per-node peak memory known; else the one figure the scheduler gave."""
    known = [f.rss_mb for f in figures if f.rss_mb is not None]
    if known:
        return max(known)
    return usage.max_rss_mb
