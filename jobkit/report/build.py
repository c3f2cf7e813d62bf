"""One job's report assembled from its registry record, its backend's Usage and its run
folder's metrics.jsonl (docs/report.md). Pure but for reading metrics.jsonl."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobkit.core.conventions import METRICS_FILE
from jobkit.core.earlier_runs import EarlierRuns, earlier_runs
from jobkit.core.units import parse_duration, parse_memory_mb
from jobkit.core.usage import Usage
from jobkit.registry.record import JobRecord
from jobkit.report.efficiency import (
    NEGLIGIBLE_CPU_S,
    NodeFigures,
    job_efficiency,
    node_figures,
    peak_node_rss_mb,
    step_efficiency,
    total_cpu_s,
)
from jobkit.report.suggest import Suggestion, suggest
from jobkit.report.throughput import Throughput, read_metrics, throughput


@dataclass(frozen=True)
class Report:
    """Everything `jobkit report` shows for one job (`to_dict` for --json)."""

    jobkit_id: str
    scheduler_id: str | None
    backend: str
    name: str
    state: str
    elapsed_s: float | None
    elapsed_source: str
    time_limit_s: float | None
    mem_request_mb: float | None
    """resources.mem: per node."""
    peak_mem_mb: float | None
    """The largest node's peak resident memory."""
    cpu_s: float | None
    cpu_efficiency: float | None
    """The whole allocation's (what seff prints); the nodes' figures say more."""
    nodes: list[NodeFigures]
    steps: list[dict[str, Any]]
    usage: Usage | None
    usage_note: str | None
    throughput: Throughput | None
    throughput_note: str | None
    gpus_per_node: int
    suggestion: Suggestion
    notes: list[str] = field(default_factory=list)
    earlier_runs: int = 0
    """A requeued job's runs before the latest (their time is in elapsed_s)."""
    earlier_runs_s: float = 0.0
    earlier_runs_from: str | None = None
    """Who summed them: the scheduler's query ('sacct') or 'last seen' (at least)."""

    @property
    def last_run_s(self) -> float | None:
        """The latest run's elapsed (the one the time limit applies to)."""
        return None if self.elapsed_s is None else self.elapsed_s - self.earlier_runs_s

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "jobkit_id": self.jobkit_id,
            "scheduler_id": self.scheduler_id,
            "backend": self.backend,
            "name": self.name,
            "state": self.state,
            "elapsed_s": self.elapsed_s,
            "elapsed_source": self.elapsed_source,
            "time_limit_s": self.time_limit_s,
            "time_used": _ratio(self.last_run_s, self.time_limit_s),
            "earlier_runs": self.earlier_runs,
            "earlier_runs_s": self.earlier_runs_s,
            "earlier_runs_from": self.earlier_runs_from,
            "mem_request_mb": self.mem_request_mb,
            "peak_mem_mb": self.peak_mem_mb,
            "mem_used": _ratio(self.peak_mem_mb, self.mem_request_mb),
            "cpu_s": self.cpu_s,
            "cpu_efficiency": self.cpu_efficiency,
            "nodes": [vars(n) | {"steps": list(n.steps)} for n in self.nodes],
            "steps": self.steps,
            "usage": self.usage.to_dict() if self.usage else None,
            "usage_note": self.usage_note,
            "throughput": self.throughput.to_dict() if self.throughput else None,
            "throughput_note": self.throughput_note,
            "gpu": self._gpu(),
            "suggestion": {
                "sets": self.suggestion.sets,
                "why": self.suggestion.why,
                "notes": self.suggestion.notes,
            },
            "notes": self.notes,
        }

    def _gpu(self) -> dict[str, Any] | None:
        if not self.gpus_per_node:
            return None
        t = self.throughput
        return {
            "gpus_per_node": self.gpus_per_node,
            "util_pct": t.gpu_util_pct if t else None,
            "mem_peak_mb": t.gpu_mem_peak_mb if t else None,
        }


def _ratio(used: float | None, asked: float | None) -> float | None:
    return used / asked if used is not None and asked else None


def _requested(spec: dict[str, Any]) -> tuple[float | None, float | None, int]:
    """(resources.time in s, resources.mem in MB per node, gpus_per_node) of the spec."""
    resources = spec.get("resources") or {}
    time_s = mem = None
    value = resources.get("time")
    try:  # the stored spec holds seconds and megabytes; text only from an older jobkit
        if value is not None:
            time_s = float(value if isinstance(value, int) else parse_duration(value))
        value = resources.get("mem")
        if value is not None:
            mem = float(value if isinstance(value, int) else parse_memory_mb(value))
    except ValueError:
        pass  # unreadable: the scheduler's figures stand in
    return time_s, mem, int(resources.get("gpus_per_node") or 0)


REGISTRY_ELAPSED = "registry"
SINCE_SUBMISSION = "registry (since submission)"
NO_ELAPSED = "none"
JOBKIT_ELAPSED_SOURCES = frozenset({REGISTRY_ELAPSED, SINCE_SUBMISSION, NO_ELAPSED})
"""Where an elapsed time came from when the scheduler's accounting (Usage.source) had none:
`jobkit report` names these beside the time."""


def _elapsed(record: JobRecord, usage: Usage | None, now: float) -> tuple[float | None, str]:
    if usage is not None and usage.elapsed_s is not None:
        return usage.elapsed_s, usage.source
    if record.elapsed_s is not None:
        return record.elapsed_s, REGISTRY_ELAPSED
    if record.submitted_at is not None:
        return (record.final_at or now) - record.submitted_at, SINCE_SUBMISSION
    return None, NO_ELAPSED


def _earlier_fields(earlier: EarlierRuns, elapsed_source: str) -> dict[str, Any]:
    """Report's earlier_runs fields (none where the elapsed is the time since submission,
    which already holds them)."""
    if not earlier.count or elapsed_source == SINCE_SUBMISSION:
        return {}
    return {
        "earlier_runs": earlier.count,
        "earlier_runs_s": earlier.seconds,
        "earlier_runs_from": earlier.source,
    }


def _metrics(run_dir: str | None) -> tuple[Throughput | None, str | None]:
    if not run_dir:
        return None, "no run folder recorded"
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return None, f"no {METRICS_FILE} in the run folder (not the bundled trainer?)"
    found = throughput(read_metrics(path))
    return found, None if found else f"{path} holds no record"


def build_report(
    record: JobRecord,
    usage: Usage | None,
    usage_note: str | None,
    run_dir: str | None,
    now: float | None = None,
) -> Report:
    """The report of one job (`usage_note` says why `usage` is None, or what failed)."""
    at = time.time() if now is None else now
    time_req, mem_req, gpus = _requested(record.spec)
    elapsed, elapsed_source = _elapsed(record, usage, at)
    earlier = earlier_runs(record.extra)
    if earlier.count and usage is not None and usage.requeued_run:
        # accounting's latest line is the run that was requeued (no line for the queued run
        # yet, e.g. slurmdbd behind): it is among the earlier runs; the current one has not begun
        elapsed = 0.0
    last_run = elapsed
    if earlier.count and elapsed_source != SINCE_SUBMISSION:
        # a requeued job: its earlier runs count too (core/earlier_runs.py)
        elapsed = (elapsed or 0.0) + earlier.seconds
    limit = time_req if time_req is not None else (usage.time_limit_s if usage else None)
    figures = node_figures(usage) if usage else []
    peak = peak_node_rss_mb(usage, figures) if usage else None
    if usage is not None and not usage.steps and len(usage.nodes) > 1 and peak is not None:
        usage_note = f"{usage.source} gives totals for all nodes together, not per node"
    steps = [
        {
            "name": s.name,
            "nodes": list(s.nodes),
            "cpus": s.cpus,
            "tasks": s.tasks,
            "elapsed_s": s.elapsed_s,
            "cpu_s": s.cpu_s,
            "efficiency": step_efficiency(s),
            "max_task_rss_mb": s.max_task_rss_mb,
            "note": s.note,
        }
        for s in (usage.steps if usage else ())
    ]
    known = [(f.node, f.efficiency) for f in figures if f.efficiency is not None]
    efficiency = job_efficiency(usage) if usage else None
    if known:
        lowest: tuple[str, float] | None = min(known, key=lambda item: item[1])
    elif efficiency is not None:
        lowest = ("all nodes", efficiency)
    else:
        lowest = None
    metrics, metrics_note = _metrics(run_dir)
    notes = list(usage.notes) if usage else []
    idle = [f.node for f in figures if f.cpu_s is not None and f.cpu_s < NEGLIGIBLE_CPU_S]
    if idle:
        notes.append(
            f"no accounted step ran on {', '.join(idle)}: processes started there without"
            " srun (ssh, mpirun's own launcher) are not accounted, or the node was idle"
        )
    return Report(
        jobkit_id=record.jobkit_id,
        scheduler_id=record.scheduler_id,
        backend=record.backend,
        name=record.name,
        state=record.state,
        elapsed_s=elapsed,
        elapsed_source=elapsed_source,
        time_limit_s=limit,
        mem_request_mb=mem_req,
        peak_mem_mb=peak,
        cpu_s=total_cpu_s(usage) if usage else None,
        cpu_efficiency=efficiency,
        nodes=figures,
        steps=steps,
        usage=usage,
        usage_note=usage_note,
        throughput=metrics,
        throughput_note=metrics_note,
        gpus_per_node=gpus,
        suggestion=suggest(
            state=record.state,
            elapsed_s=last_run,
            time_limit_s=limit,
            peak_mem_mb=peak,
            mem_request_mb=mem_req,
            lowest_cpu=lowest,
            gpu=gpus > 0,
        ),
        notes=notes,
        **_earlier_fields(earlier, elapsed_source),
    )
