"""A report as the text `jobkit report` prints (docs/report.md shows one)."""

from __future__ import annotations

import math

from jobkit.core.units import format_memory, format_slurm_time
from jobkit.report.build import JOBKIT_ELAPSED_SOURCES, Report


def _hms(seconds: float | None) -> str:
    return "?" if seconds is None else format_slurm_time(round(seconds))


def _mb(megabytes: float | None) -> str:
    return "?" if megabytes is None else format_memory(max(1, math.ceil(megabytes)))


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.0%}"


def _cpu(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.1f} s" if seconds < 600 else _hms(seconds)


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def _time_line(report: Report) -> str:
    line = f"time        {_hms(report.elapsed_s)} elapsed"
    last = report.last_run_s
    if report.earlier_runs:
        runs = report.earlier_runs + 1
        how = (
            f"from {report.earlier_runs_from}"
            if report.earlier_runs_from not in (None, "last seen")
            else "at least: as last seen"
        )
        line += (
            f" in {runs} runs ({_hms(report.earlier_runs_s)} before the requeue"
            f"{'s' if report.earlier_runs > 1 else ''}, {how}); the last {_hms(last)}"
        )
    if report.time_limit_s:
        share = _pct(last / report.time_limit_s) if last else "?"
        line += f" of {_hms(report.time_limit_s)} requested ({share})"
    else:
        line += ", no time limit requested"
    if report.elapsed_source in JOBKIT_ELAPSED_SOURCES:  # not the scheduler's own count
        line += f" [{report.elapsed_source}]"
    return line


def _memory_line(report: Report) -> str:
    if report.peak_mem_mb is None:
        return "memory      peak not measured"
    nodes = [n for n in report.nodes if n.rss_mb == report.peak_mem_mb]
    where = f" ({nodes[0].node})" if nodes and len(report.nodes) > 1 else ""
    per = " per node" if report.nodes else ""
    line = f"memory      {_mb(report.peak_mem_mb)} peak{per}{where}"
    if report.mem_request_mb:
        line += (
            f" of {_mb(report.mem_request_mb)} requested"
            f" ({_pct(report.peak_mem_mb / report.mem_request_mb)})"
        )
    return line


def _cpu_lines(report: Report) -> list[str]:
    usage = report.usage
    if usage is None:
        return []
    if report.cpu_s is None:
        return ["cpu         CPU time not reported"]
    line = f"cpu         {_cpu(report.cpu_s)} CPU time"
    if report.cpu_efficiency is not None and usage.cpus:
        line += f": {_pct(report.cpu_efficiency)} of {usage.cpus} CPUs x the elapsed time"
    elif report.last_run_s:
        line += f": {report.cpu_s / report.last_run_s:.2f} cores busy on average"
    lines = [line]
    if report.nodes:
        rows = [["node", "CPUs", "CPU time", "efficiency", "peak memory", "steps"]]
        for n in report.nodes:
            cpus = "?" if n.cpus is None else f"{n.cpus:g}"
            rss = _mb(n.rss_mb) if n.rss_mb is not None else "-"
            steps = ", ".join(n.steps) or "-"
            rows.append([n.node, cpus, _cpu(n.cpu_s), _pct(n.efficiency), rss, steps])
        lines += _table(rows)
    if report.steps:
        rows = [["step", "nodes", "tasks", "CPUs", "elapsed", "CPU time", "efficiency", "max task"]]
        for s in report.steps:
            rows.append(
                [
                    s["name"],
                    ",".join(s["nodes"]) or "-",
                    str(s["tasks"] if s["tasks"] is not None else "?"),
                    str(s["cpus"] if s["cpus"] is not None else "?"),
                    _hms(s["elapsed_s"]),
                    _cpu(s["cpu_s"]),
                    _pct(s["efficiency"]),
                    _mb(s["max_task_rss_mb"]) if s["max_task_rss_mb"] is not None else "-",
                ]
            )
        lines += _table(rows)
        lines += [f"  step {s['name']}: {s['note']}" for s in report.steps if s["note"]]
    return lines


def _throughput_lines(report: Report) -> list[str]:
    t = report.throughput
    if t is None:
        return [f"throughput  {report.throughput_note}"]
    parts = []
    if t.samples_per_s is not None:
        parts.append(f"{t.samples_per_s:.1f} samples/s")
    if t.tokens_per_s is not None:
        parts.append(f"{t.tokens_per_s:.0f} tokens/s")
    where = f"median of {t.used} of {t.records} records"
    if t.last_step is not None:
        where += f", to step {t.last_step}"
    lines = [f"throughput  {', '.join(parts) or 'not logged'} ({where})"]
    if t.note:
        lines.append(f"            {t.note}")
    return lines


def _gpu_line(report: Report) -> str:
    if not report.gpus_per_node:
        return "gpu         no GPU (resources.gpus_per_node is 0)"
    t = report.throughput
    if t is None or (t.gpu_util_pct is None and t.gpu_mem_peak_mb is None):
        return f"gpu         {report.gpus_per_node} per node; the trainer logged no GPU figures"
    util = "utilisation not logged" if t.gpu_util_pct is None else f"{t.gpu_util_pct:.0f}% busy"
    return f"gpu         {util}, {_mb(t.gpu_mem_peak_mb)} peak memory (rank 0)"


def render_text(report: Report) -> str:
    """The report's lines, ready to print."""
    sched = f"{report.backend} job {report.scheduler_id}" if report.scheduler_id else report.backend
    lines = [f"{report.jobkit_id} ({sched}, {report.name}): {report.state}", _time_line(report)]
    lines.append(_memory_line(report))
    lines += _cpu_lines(report)
    if report.usage_note:
        lines.append(f"            {report.usage_note}")
    lines += _throughput_lines(report)
    lines.append(_gpu_line(report))
    suggestion = report.suggestion
    if suggestion.sets:
        lines.append(f"next run    {' '.join(suggestion.sets)}")
        lines += [f"            {why}" for why in suggestion.why]
    lines += [f"note: {note}" for note in (*report.notes, *suggestion.notes)]
    return "\n".join(lines)
