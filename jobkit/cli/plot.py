"""`jobkit plot ID... [--metric M]... [-o FILE] [--term] [--x step|time] [--logy] [--json]`.

Training curves from each job's metrics.jsonl (docs/plot.md): a PNG by default, text with
--term, the joined series with --json. matplotlib and plotext are imported only to draw.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobkit.core.errors import JobkitError, UsageError

if TYPE_CHECKING:
    from jobkit.plot.runs import Found, LoadedRun
    from jobkit.registry.store import JobRecord, Store

DEFAULT_METRICS = ("loss",)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


@click.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--last", is_flag=True, help="The newest job (with any IDs given).")
@click.option(
    "--metric",
    "metric_args",
    multiple=True,
    metavar="NAME",
    help="A metric to plot, one panel each (default loss): lr, grad_norm, samples_per_s,"
    " tokens_per_s... Repeatable or comma-separated.",
)
@click.option("-o", "--output", metavar="FILE", help="The image file (.png, .svg, .pdf) to write.")
@click.option("--term", is_flag=True, help="Draw the chart in the terminal (no file unless -o).")
@click.option(
    "--x",
    "x_axis",
    type=click.Choice(["step", "time"]),
    default="step",
    show_default=True,
    help="x axis: the step, or the time since each run's first record.",
)
@click.option("--logy", is_flag=True, help="Log-scale y for the loss panels.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the joined series as JSON (no file unless -o)."
)
def plot(
    ids: tuple[str, ...],
    last: bool,
    metric_args: tuple[str, ...],
    output: str | None,
    term: bool,
    x_axis: str,
    logy: bool,
    as_json: bool,
) -> int:
    """Plot training curves (loss, lr, throughput) of one or more jobs on one chart.

    Reads metrics.jsonl from each job's run folder (every task of an array job, or the task
    named like 123_4). A sweep's id plots every task, labelled by its overrides. A requeued
    or restarted run is one curve, its restarts marked. The image goes to NAME-ID.png in the
    current directory unless -o names another file.
    """
    from jobkit.plot.chart import build_chart, check_metrics, check_time
    from jobkit.registry.store import Store

    if not ids and not last:
        raise UsageError("give one or more job ids, or --last")
    metrics = _metric_names(metric_args)
    target = _output_path(output) if output else None
    with Store() as store:
        runs, notes = _load(store, ids, last)
    for note in notes:
        click.echo(f"jobkit: {note}", err=True)
    check_metrics(metrics, runs)
    if x_axis == "time":
        check_time(runs)
    chart = build_chart(runs, metrics, "time" if x_axis == "time" else "step", logy)
    if target is None and not term and not as_json:
        target = Path.cwd() / f"{_default_stem(runs)}.png"
    if target is not None:
        from jobkit.plot.png import write_image

        write_image(chart, target)
    if term:
        from jobkit.plot.term import render_text

        width = shutil.get_terminal_size((100, 30)).columns
        click.echo(render_text(chart, width, color=sys.stdout.isatty()))
    if as_json:
        data = {
            "x": x_axis,
            "metrics": metrics,
            "image": str(target) if target else None,
            "runs": [run.to_dict() for run in runs],
        }
        click.echo(json.dumps(data, indent=2))
    elif target is not None:
        click.echo(str(target))
    return 0


def _metric_names(values: tuple[str, ...]) -> list[str]:
    """--metric values (repeatable, comma-separated) in order, without repeats."""
    names: list[str] = []
    for value in values:
        for word in value.split(","):
            name = word.strip()
            if name and name not in names:
                names.append(name)
    if values and not names:
        raise UsageError("--metric: give a metric name, e.g. --metric loss")
    return names or list(DEFAULT_METRICS)


def _output_path(text: str) -> Path:
    """-o FILE as an absolute path; its suffix and folder checked."""
    from jobkit.plot.png import FORMATS

    path = Path(text).expanduser().absolute()
    if path.suffix.lower() not in FORMATS:
        raise UsageError(f"-o {text}: give a file name ending in {', '.join(FORMATS)}")
    if not path.parent.is_dir():
        raise JobkitError(f"cannot write {path}: {path.parent} is not a directory")
    return path


def _load(store: Store, ids: tuple[str, ...], last: bool) -> tuple[list[LoadedRun], list[str]]:
    """Every named job's runs (in order, each once; a sweep's id: its tasks, labelled by
    their overrides), and notes about tasks left out."""
    from jobkit.registry.ids import resolve_job_task, with_last
    from jobkit.registry.selection import named_sweeps

    ids = tuple(with_last(store, ids, last))  # --last: the last submission (a whole sweep)
    sweeps, _ = named_sweeps(store, ids)
    wanted: list[tuple[JobRecord, str | None] | str] = []
    for text in ids:
        if text.strip() in sweeps:
            wanted.append(text.strip())
            continue
        record, task = resolve_job_task(store, text)
        if all(
            not isinstance(w, tuple) or (w[0].jobkit_id, w[1]) != (record.jobkit_id, task)
            for w in wanted
        ):
            wanted.append((record, task))
    runs: list[LoadedRun] = []
    notes: list[str] = []
    seen: set[tuple[str, str | None]] = set()
    for item in wanted:
        found = (
            _sweep_runs(store, sweeps[item]) if isinstance(item, str) else _load_job(store, *item)
        )
        for run in found.runs:
            key = (run.source.record.jobkit_id, run.source.task)
            if key not in seen:
                seen.add(key)
                runs.append(run)
        notes.extend(found.notes)
        for run in found.runs:
            if run.file.skipped_lines:
                lines = ", ".join(map(str, run.file.skipped_lines[:5]))
                more = "..." if len(run.file.skipped_lines) > 5 else ""
                notes.append(
                    f"{run.file.path}: skipped {len(run.file.skipped_lines)} line(s) that are"
                    f" not a metrics record (line {lines}{more})"
                )
    return runs, notes


def _sweep_runs(store: Store, rows: list[JobRecord]) -> Found:
    """The runs of a sweep's tasks (their newest attempts), each labelled `task 2: lr=0.001
    d_model=64`; a note for each task without metrics (NoMetricsError when none has any)."""
    from dataclasses import replace

    from jobkit.cli.taskfacts import short_overrides, task_overrides
    from jobkit.plot.runs import Found, NoMetricsError
    from jobkit.registry.selection import newest_attempts

    found = Found()
    errors: list[NoMetricsError] = []
    files: dict[Path, dict[str, Any]] = {}
    for record in sorted(newest_attempts(rows), key=lambda r: int(r.task or 0)):
        try:
            loaded = _load_job(store, record, None)
        except NoMetricsError as err:
            errors.append(err)
            continue
        caption = f"task {record.task}: {short_overrides(task_overrides(record, files))}"
        found.runs += [replace(r, source=replace(r.source, caption=caption)) for r in loaded.runs]
        found.notes += loaded.notes
    if not found.runs:
        raise errors[0]
    found.notes += [str(err) for err in errors]
    return found


def _load_job(store: Store, record: JobRecord, task: str | None) -> Found:
    """load_job; when a job still running has no metrics, its state is refreshed first so
    the message says what it is doing now."""
    from jobkit.plot.runs import NoMetricsError, load_job

    try:
        return load_job(_files_here(record), task)
    except NoMetricsError:
        if record.is_final:
            raise
    from jobkit.manager.refresh import refresh

    return load_job(_files_here(refresh(store, [record]).records[0]), task)


def _files_here(record: JobRecord) -> JobRecord:
    """A job on a cluster (`--on`): its metrics copied here first (docs/remote.md)."""
    if "@" not in record.backend:
        return record
    from jobkit.remote.mirror import local_view

    return local_view(record)


def _default_stem(runs: list[LoadedRun]) -> str:
    """`name-id` of one run; `name-id` of one job's tasks; `name-id1-id2...` of several jobs;
    `name-sweepid` of one sweep's tasks."""
    first = runs[0].source
    sweeps = {run.source.record.sweep_id for run in runs}
    if len(runs) > 1 and len(sweeps) == 1 and first.record.sweep_id is not None:
        return _UNSAFE.sub("_", f"{first.record.name}-{first.record.sweep_id}")
    ids = list(dict.fromkeys(run.source.record.jobkit_id for run in runs))
    stem = first.stem if len(runs) == 1 else "-".join([first.record.name, *ids])
    return _UNSAFE.sub("_", stem)
