"""What a chart shows, decided once for the PNG and the terminal; pure.

One panel per metric, one line per run (the same colour in every panel), a vertical marker
where each run restarted or was requeued, x in steps or in time since the run's first
record (seconds, minutes or hours, whichever reads best).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jobkit.core.errors import UsageError
from jobkit.plot.runs import LoadedRun

XAxis = Literal["step", "time"]

METRIC_NAMES = {
    "loss": "loss",
    "lr": "learning rate",
    "grad_norm": "gradient norm",
    "samples_per_s": "samples/s",
    "tokens_per_s": "tokens/s",
    "loss_scale": "AMP loss scale",
    "epoch": "epoch",
    "gpu_mem_peak_mb": "GPU memory peak (MB)",
    "gpu_util_pct": "GPU utilisation (%)",
}
"""How the bundled trainer's fields read on an axis (others show as they are named)."""

MAX_TITLED = 3
"""Runs named in the title (the legend names them all)."""
TIME_UNITS = (("h", 3600.0, 7200.0), ("min", 60.0, 120.0), ("s", 1.0, 0.0))
"""(unit, seconds in it, from which span of the data it is used)."""


@dataclass(frozen=True)
class Series:
    """One run's line in one panel: points with a value, and its restart markers."""

    label: str
    segments: list[tuple[list[float], list[float]]]
    """(x, y) lines: one on the step axis; on the time axis one per attempt, so the time
    between attempts is a gap."""
    restarts: list[float]
    color: int
    """The run's index: the same colour in every panel."""


@dataclass(frozen=True)
class Panel:
    """One metric's subplot."""

    metric: str
    ylabel: str
    logy: bool
    series: list[Series]


@dataclass(frozen=True)
class Chart:
    """The whole figure."""

    title: str
    xlabel: str
    panels: list[Panel]
    restart_note: str
    """The legend's text for the restart markers."""

    @property
    def has_restarts(self) -> bool:
        """Whether any run restarted (the legend then explains the markers)."""
        return any(s.restarts for p in self.panels for s in p.series)


def available_metrics(runs: Sequence[LoadedRun]) -> list[str]:
    """Every metric some run has, sorted."""
    return sorted({name for run in runs for name in run.joined.metrics()})


def check_metrics(wanted: Sequence[str], runs: Sequence[LoadedRun]) -> None:
    """UsageError naming the available metrics when one asked for is in no run."""
    available = available_metrics(runs)
    for metric in wanted:
        if metric not in available:
            listed = ", ".join(available) or "none"
            raise UsageError(f"unknown metric {metric!r}: the metrics are {listed}")


def check_time(runs: Sequence[LoadedRun]) -> None:
    """UsageError when `--x time` meets a run whose records have no `time`."""
    for run in runs:
        if any(_num(r.get("time")) is None for r in run.joined.records):
            raise UsageError(
                f"--x time: {run.source.label}'s metrics have no 'time' field (use --x step)"
            )


def build_chart(
    runs: Sequence[LoadedRun], metrics: Sequence[str], x: XAxis = "step", logy: bool = False
) -> Chart:
    """The chart of `runs` (checked: check_metrics, and for time check_time)."""
    unit, per = _time_unit(runs) if x == "time" else ("", 1.0)
    panels = []
    for metric in metrics:
        series = []
        for index, run in enumerate(runs):
            segments = _segments(run, metric, x, per)
            if segments is None:
                continue
            series.append(Series(run.source.label, segments, _restarts(run, x, per), index))
        name = METRIC_NAMES.get(metric, metric)
        panels.append(Panel(metric, name, logy and "loss" in metric, series))
    xlabel = "step" if x == "step" else f"time since the run's first record ({unit})"
    return Chart(_title(runs), xlabel, panels, "restart / requeue (resumed from a checkpoint)")


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _origin(run: LoadedRun) -> float:
    return min(float(r["time"]) for r in run.joined.records)


def _x(record: dict[str, Any], x: XAxis, origin: float, per: float) -> float:
    if x == "step":
        return float(record["step"])
    return (float(record["time"]) - origin) / per


def _segments(
    run: LoadedRun, metric: str, x: XAxis, per: float
) -> list[tuple[list[float], list[float]]] | None:
    """The run's (x, value) lines of `metric` (see Series); None when it never logs it."""
    origin = _origin(run) if x == "time" else 0.0
    starts = {a.first_step for a in run.joined.restarts} if x == "time" else set()
    segments: list[tuple[list[float], list[float]]] = [([], [])]
    seen = False
    for record in run.joined.records:
        if record["step"] in starts and segments[-1][0]:
            segments.append(([], []))
        if metric in record:
            seen = True
        value = _num(record.get(metric))
        if value is not None:
            segments[-1][0].append(_x(record, x, origin, per))
            segments[-1][1].append(value)
    return [seg for seg in segments if seg[0]] if seen else None


def _restarts(run: LoadedRun, x: XAxis, per: float) -> list[float]:
    """Where each restart is marked: the step it resumed from; on the time axis its first
    record (the resume line's time, to the second, without one)."""
    marks = []
    origin = _origin(run) if x == "time" else 0.0
    firsts = {int(r["step"]): float(r["time"]) for r in run.joined.records} if x == "time" else {}
    for attempt in run.joined.restarts:
        if x == "step":
            at = attempt.resumed_from if attempt.resumed_from is not None else attempt.first_step
            if at is not None:
                marks.append(float(at))
            continue
        when = firsts.get(attempt.first_step) if attempt.first_step is not None else None
        when = attempt.started_at if when is None else when
        if when is not None:
            marks.append((when - origin) / per)
    return marks


def _time_unit(runs: Sequence[LoadedRun]) -> tuple[str, float]:
    span = max(
        (max(float(r["time"]) for r in run.joined.records) - _origin(run) for run in runs),
        default=0.0,
    )
    for unit, per, start in TIME_UNITS:
        if span >= start:
            return unit, per
    return "s", 1.0


def _title(runs: Sequence[LoadedRun]) -> str:
    """`name (id): step N, 1 restart` for one run; the runs' labels for a few; `N runs:
    the first three...` for more."""
    labels = [run.source.label for run in runs]
    if len(runs) > MAX_TITLED:
        return f"{len(runs)} runs: {', '.join(labels[:MAX_TITLED])}, ..."
    if len(runs) > 1:
        return " vs ".join(labels)
    run = runs[0]
    last = run.joined.records[-1]["step"]
    restarts = len(run.joined.restarts)
    more = f", {restarts} restart{'s' if restarts != 1 else ''}" if restarts else ""
    return f"{run.source.label}: step {last}{more}"
