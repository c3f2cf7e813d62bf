"""A tracked job's runs (one, or one per array task) found, read and joined.

The metrics are in the job's run folder (`record.log_paths['run_dir']`; an array's holds a
`{task}` placeholder), or where the job's `run.train.overrides` point `logging.dir`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobkit.core.conventions import METRICS_FILE
from jobkit.core.errors import JobkitError
from jobkit.core.lifecycle import SUBMITTING
from jobkit.plot.join import JoinedRun, join
from jobkit.plot.read import RANK0_LOG, MetricsFile, read_metrics, read_resumes
from jobkit.registry.record import JobRecord

TASK_PLACEHOLDER = "{task}"


class NoMetricsError(JobkitError):
    """A job (or the asked task) has no metrics to plot yet (exit 1)."""


@dataclass(frozen=True)
class RunSource:
    """One run to plot: a job, or one task of an array job, and where its metrics are."""

    record: JobRecord
    task: str | None
    run_dir: Path
    metrics_path: Path
    caption: str | None = None
    """The legend's text when the caller names the run (a sweep's task: its overrides)."""

    @property
    def label(self) -> str:
        """The legend's text: `name (jobkit id)`, `name (jobkit id task 3)`, or the caption."""
        if self.caption is not None:
            return self.caption
        task = f" task {self.task}" if self.task is not None else ""
        return f"{self.record.name} ({self.record.jobkit_id}{task})"

    @property
    def stem(self) -> str:
        """`name-id` (`name-id_task`), for a file name."""
        task = f"_{self.task}" if self.task is not None else ""
        return f"{self.record.name}-{self.record.jobkit_id}{task}"


@dataclass(frozen=True)
class LoadedRun:
    """A run's metrics file as read and its joined curve."""

    source: RunSource
    file: MetricsFile
    joined: JoinedRun

    def to_dict(self, metrics: list[str] | None = None) -> dict[str, Any]:
        """JSON-ready: who, where, the attempts and the joined records."""
        record = self.source.record
        return {
            "jobkit_id": record.jobkit_id,
            "scheduler_id": record.scheduler_id,
            "name": record.name,
            "task": self.source.task,
            "label": self.source.label,
            "state": record.state,
            "metrics_file": str(self.file.path),
            "skipped_lines": self.file.skipped_lines,
            "metrics": self.joined.metrics(),
            "attempts": [a.to_dict() for a in self.joined.attempts],
            "records": self.joined.records,
        }


@dataclass
class Found:
    """A job's runs with metrics, and a note for each of its tasks without."""

    runs: list[LoadedRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def find_sources(record: JobRecord, task: str | None) -> list[RunSource]:
    """The runs of a job: itself, the asked task, or every array task with a run folder."""
    run_dir = record.run_dir
    if record.state == SUBMITTING or not run_dir:
        raise NoMetricsError(
            f"job {record.jobkit_id} ({record.name}) has no run folder yet (still submitting)"
        )
    if record.is_array and task is None and TASK_PLACEHOLDER in run_dir:
        tasks = _task_folders(run_dir)
        if not tasks:
            pattern = run_dir.replace(TASK_PLACEHOLDER, "N")
            raise NoMetricsError(
                f"job {record.jobkit_id} ({record.name}) has no metrics yet: no task has"
                f" started ({pattern} is not there, job is {record.state})"
            )
        return [_source(record, t, run_dir.replace(TASK_PLACEHOLDER, t)) for t in tasks]
    if task is not None:
        run_dir = run_dir.replace(TASK_PLACEHOLDER, task)
    return [_source(record, task, run_dir)]


def _task_folders(pattern: str) -> list[str]:
    """The tasks whose run folder exists (`.../name-123_{task}` -> ["0", "3"]), in order."""
    folder = Path(pattern)
    head, _, tail = folder.name.partition(TASK_PLACEHOLDER)
    shape = re.compile(re.escape(head) + r"(\d+)" + re.escape(tail) + r"$")
    try:
        names = [p.name for p in folder.parent.iterdir() if p.is_dir()]
    except OSError:
        return []
    tasks = [m.group(1) for m in map(shape.match, names) if m]
    return sorted(tasks, key=int)


def _source(record: JobRecord, task: str | None, run_dir: str) -> RunSource:
    folder = Path(run_dir)
    return RunSource(record, task, folder, _metrics_dir(record, folder) / METRICS_FILE)


def _trainer_overrides(record: JobRecord) -> dict[str, Any] | None:
    """The bundled trainer's overrides, or None when the job runs a command of its own."""
    run = record.spec.get("run") or {}
    train = run.get("train") if isinstance(run, dict) else None
    if not isinstance(train, dict):
        return None
    overrides = train.get("overrides") or {}
    return overrides if isinstance(overrides, dict) else {}


def _metrics_dir(record: JobRecord, run_dir: Path) -> Path:
    """Where the trainer writes metrics.jsonl: the run folder, or `logging.dir` when the
    job's overrides set it (relative to the directory the trainer runs in)."""
    overrides = _trainer_overrides(record) or {}
    logging_dir = overrides.get("logging.dir")
    if not logging_dir:
        return run_dir
    run = record.spec.get("run") or {}
    workdir = run.get("workdir") if isinstance(run, dict) else None
    return record.workdir / (workdir or "") / str(logging_dir)


def load_run(source: RunSource, state: str) -> LoadedRun:
    """Read and join a run's metrics; NoMetricsError (saying where it looked) when none.

    `state` is the job's state, for the message."""
    record = source.record
    who = f"job {record.jobkit_id} ({record.name})" + (
        f" task {source.task}" if source.task is not None else ""
    )
    try:
        file = read_metrics(source.metrics_path)
    except FileNotFoundError:
        raise NoMetricsError(
            f"{who} has no metrics yet: no {source.metrics_path} (job is {state})"
            + _why_none(record)
        ) from None
    except OSError as err:
        raise JobkitError(f"cannot read {source.metrics_path}: {err.strerror or err}") from None
    if not file.records:
        raise NoMetricsError(
            f"{who} has no metrics yet: {source.metrics_path} holds no record (job is {state})"
        )
    resumes = read_resumes(source.metrics_path.parent / RANK0_LOG)
    return LoadedRun(source, file, join(file.records, resumes))


def _why_none(record: JobRecord) -> str:
    """Why a job may never write metrics: its own command, or logging.metrics off."""
    overrides = _trainer_overrides(record)
    if overrides is None:
        return (
            "; it runs its own command: jobkit plot reads the metrics.jsonl the bundled"
            " trainer writes (docs/plot.md)"
        )
    if str(overrides.get("logging.metrics", "")).lower() in ("false", "no", "off", "0"):
        return "; its run.train.overrides set logging.metrics: false"
    return ""


def load_job(record: JobRecord, task: str | None) -> Found:
    """A job's runs with metrics. An array job named without a task: its tasks with metrics
    (a note for each without); NoMetricsError when none has any."""
    sources = find_sources(record, task)
    found = Found()
    errors: list[NoMetricsError] = []
    for source in sources:
        try:
            found.runs.append(load_run(source, record.state))
        except NoMetricsError as err:
            errors.append(err)
    if not found.runs:
        raise errors[0]
    found.notes = [str(err) for err in errors]
    return found
