"""`jobkit report SWEEP_ID`: a sweep's tasks compared (docs/sweeps.md), one row per task:
its overrides, state, final training loss, best evaluation loss, steps/s and elapsed time,
best first. Pure but for reading each task's metrics.jsonl."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobkit.core.units import format_slurm_time
from jobkit.registry.record import JobRecord
from jobkit.report.throughput import read_metrics, runs_of

COLUMNS = ("TASK", "ID", "STATE", "FINAL LOSS", "BEST EVAL", "STEPS/S", "ELAPSED", "OVERRIDES")


@dataclass(frozen=True)
class TaskRow:
    """One task's figures (None: not known)."""

    task: str | None
    jobkit_id: str
    scheduler_id: str | None
    attempt: int
    state: str
    overrides: dict[str, Any]
    final_loss: float | None
    final_step: int | None
    best_eval: float | None
    """The lowest `loss` of the evaluation (split val) records."""
    best_eval_step: int | None
    steps_per_s: float | None
    elapsed_s: float | None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(vars(self))


@dataclass(frozen=True)
class SweepReport:
    """The comparison: rows best first, and what they are sorted by."""

    sweep_id: str
    name: str
    sorted_by: str
    rows: list[TaskRow]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "sweep_id": self.sweep_id,
            "name": self.name,
            "sorted_by": self.sorted_by,
            "tasks": [r.to_dict() for r in self.rows],
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """final_loss/final_step, best_eval/best_eval_step and steps_per_s of metrics records."""
    train = [r for r in records if r.get("split") != "val"]
    evals = [r for r in records if r.get("split") == "val" and _number(r.get("loss")) is not None]
    found: dict[str, Any] = {
        "final_loss": None,
        "final_step": None,
        "best_eval": None,
        "best_eval_step": None,
        "steps_per_s": None,
    }
    with_loss = [r for r in train if _number(r.get("loss")) is not None]
    if with_loss:
        found["final_loss"] = _number(with_loss[-1]["loss"])
        found["final_step"] = with_loss[-1].get("step")
    if evals:
        best = min(evals, key=lambda r: float(r["loss"]))
        found["best_eval"] = float(best["loss"])
        found["best_eval_step"] = best.get("step")
    timed = [
        r
        for r in (runs_of(train)[-1] if train else [])
        if isinstance(r.get("step"), int) and _number(r.get("time")) is not None
    ]
    if len(timed) >= 2:
        steps = timed[-1]["step"] - timed[0]["step"]
        seconds = float(timed[-1]["time"]) - float(timed[0]["time"])
        if steps > 0 and seconds > 0:
            found["steps_per_s"] = steps / seconds
    return found


def task_row(record: JobRecord, overrides: dict[str, Any], metrics: Path | None) -> TaskRow:
    """A task's row from its record and its metrics.jsonl (None: no run folder yet)."""
    values: dict[str, Any] = figures([])
    note = None
    if metrics is None:
        note = "no run folder yet"
    else:
        try:
            values = figures(read_metrics(metrics))
        except FileNotFoundError:
            note = f"no {metrics}"
        except OSError as err:
            note = f"cannot read {metrics}: {err.strerror or err}"
    return TaskRow(
        task=record.task,
        jobkit_id=record.jobkit_id,
        scheduler_id=record.scheduler_id,
        attempt=record.attempt,
        state=record.state,
        overrides=overrides,
        elapsed_s=record.elapsed_s,
        note=note,
        **values,
    )


def compare(sweep_id: str, name: str, rows: Sequence[TaskRow]) -> SweepReport:
    """Rows sorted best first: by the best evaluation loss when any task has one, else by
    the final training loss; tasks without the figure last, in task order."""
    key = "best_eval" if any(r.best_eval is not None for r in rows) else "final_loss"

    def order(row: TaskRow) -> tuple[int, float, int]:
        value = getattr(row, key)
        task = int(row.task) if row.task and row.task.isdigit() else -1
        return (value is None, value if value is not None else 0.0, task)

    return SweepReport(sweep_id, name, key, sorted(rows, key=order))


def _fmt(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def render_text(report: SweepReport, short: Mapping[str, str]) -> str:
    """The table; `short` gives each task's overrides as shown (`lr=0.001 d_model=64`)."""
    by = "best evaluation loss" if report.sorted_by == "best_eval" else "final training loss"
    head = f"sweep {report.sweep_id} ({report.name}): {len(report.rows)} tasks, best {by} first"
    table: list[tuple[str, ...]] = [COLUMNS]
    for row in report.rows:
        table.append(
            (
                str(row.task),
                row.jobkit_id,
                row.state,
                _fmt(row.final_loss, ".4f"),
                _fmt(row.best_eval, ".4f"),
                _fmt(row.steps_per_s, ".2f"),
                "-" if row.elapsed_s is None else format_slurm_time(int(row.elapsed_s)),
                short.get(row.jobkit_id, "-"),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    notes = [f"  task {r.task}: {r.note}" for r in report.rows if r.note]
    return "\n".join([head, *lines, *(["notes:", *notes] if notes else [])])
