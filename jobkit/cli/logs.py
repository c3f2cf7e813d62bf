"""`jobkit logs ID [-f] [--rank N | --all-ranks] [--stderr] [--tail N] [--last]`.

Without -f: prints what the files hold now (or their last N lines) and exits 0.
With -f: prints as lines are written until the job is final and the files are drained,
then exits like `jobkit submit --wait`: 0 when the job succeeded, else its exit code
(128+signal without one, 1 without either).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobkit.core.errors import JobkitError, UsageError
from jobkit.core.states import State
from jobkit.logs.follow import (
    FollowTiming,
    LogLine,
    LogSource,
    follow_batches,
    read_all,
    tail,
    tail_offset,
)
from jobkit.registry.store import SUBMITTING, JobRecord, Store

if TYPE_CHECKING:
    from jobkit.logs.files import Selection


def _task_example(record: JobRecord) -> str:
    """The array's first task, named as its scheduler names tasks (`123_0`, `45.1`)."""
    first = re.match(r"\d+", str(record.extra.get("array", ""))) or None
    return _task_name(record, first.group(0) if first else "0")


def _task_name(record: JobRecord, task: str) -> str:
    """A task of the array job `record`, named as its scheduler names tasks."""
    from jobkit.backends.registry import BackendUnavailable, backend_class

    try:
        return backend_class(record.backend).task_label(record.scheduler_id or "ID", task)
    except (BackendUnavailable, UsageError):
        return f"{record.scheduler_id or 'ID'}_{task}"


def poll_interval(backend: str) -> float:
    """How often to ask about a followed job: its backend's Backend.poll_interval_s (1 s where
    a poll reads local files, 3 s where it runs squeue/qstat)."""
    from jobkit.backends.registry import BackendUnavailable, backend_class

    try:
        return backend_class(backend).poll_interval_s
    except (BackendUnavailable, UsageError):
        return 3.0


RANK_HOST_POLL_S = 0.5
"""How often `--rank N -f` looks for the note of which host runs rank N."""


@click.command()
@click.argument("job_ids", nargs=-1, metavar="ID...")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the jobs end.")
@click.option(
    "--rank", type=click.IntRange(min=0), metavar="N", help="One rank's file (see docs/logs.md)."
)
@click.option("--all-ranks", is_flag=True, help="Every rank's (or node's) file, prefixed.")
@click.option("--stderr", "show_stderr", is_flag=True, help="The job's .err instead of .out.")
@click.option("--tail", "tail_n", type=click.IntRange(min=0), metavar="N", help="Last N lines.")
@click.option("--last", is_flag=True, help="The last submission (a whole sweep too).")
def logs(
    job_ids: tuple[str, ...],
    follow: bool,
    rank: int | None,
    all_ranks: bool,
    show_stderr: bool,
    tail_n: int | None,
    last: bool,
) -> int:
    """Print a job's output: its .out (or --stderr .err), or per-rank files from its run folder.

    ID is a jobkit id (or a unique prefix of one) or the scheduler's id; an array task is
    named like 123_4 (Grid Engine: 123.4). With --all-ranks every line is prefixed with
    [rank N] or [node N]. Several IDs, or a sweep's id (its tasks): each job's output under a
    `==> ID <==` line; with -f merged as lines come, each line prefixed with its job's id.
    """
    from jobkit.logs.files import select_files

    if (not job_ids) == (not last):
        raise UsageError("give one or more job IDs or --last (not both)")
    with Store() as store:
        named = _resolve(store, job_ids, last)
        for record, task in named:
            _check_has_logs(record, task)
        if any("@" in record.backend for record, _ in named):  # docs/remote.md: copies
            from jobkit.remote.mirror import local_view

            named = [(local_view(record), task) for record, task in named]
        if len(named) > 1:
            return _many(store, named, follow, rank, all_ranks, show_stderr, tail_n)
        ((record, task),) = named
        selection = select_files(
            record.log_paths_for(task),
            record.spec,
            record.extra,
            rank=rank,
            all_ranks=all_ranks,
            stderr=show_stderr,
        )
        if follow and selection.rank_host_pending and rank is not None:
            record = _wait_for_rank_host(store, record, rank, task)
            selection = select_files(
                record.log_paths_for(task), record.spec, record.extra, rank=rank
            )
        if follow:
            if selection.note:
                click.echo(f"jobkit: {selection.note}", err=True)
            return _follow(store, [record], selection.sources, tail_n)
        return _print_now(store, record, selection, tail_n)


def _check_has_logs(record: JobRecord, task: str | None) -> None:
    """One line when the job has no files to show yet, or is an array named without a task."""
    if record.state == SUBMITTING or not record.log_paths:
        raise JobkitError(f"job {record.jobkit_id} has no log files yet (still submitting)")
    if record.is_array and task is None:
        example = _task_example(record)
        raise UsageError(f"job {record.jobkit_id} is an array: name one task, e.g. {example}")


def _resolve(
    store: Store, job_ids: Sequence[str], last: bool
) -> list[tuple[JobRecord, str | None]]:
    """The jobs named, in order, once each, with the array task each names: a sweep's id
    (or `--last` after a sweep) stands for its tasks' newest attempts."""
    from jobkit.registry.ids import resolve_job_task, with_last
    from jobkit.registry.selection import named_sweeps, newest_attempts

    texts = with_last(store, job_ids, last)
    sweeps, _ = named_sweeps(store, texts)
    named: list[tuple[JobRecord, str | None]] = []
    for text in texts:
        found: list[tuple[JobRecord, str | None]]
        if text.strip() in sweeps:
            found = [(r, None) for r in newest_attempts(sweeps[text.strip()])]
        else:
            found = [resolve_job_task(store, text)]
        for record, task in found:
            if all((r.jobkit_id, t) != (record.jobkit_id, task) for r, t in named):
                named.append((record, task))
    return named


def _many(
    store: Store,
    named: Sequence[tuple[JobRecord, str | None]],
    follow: bool,
    rank: int | None,
    all_ranks: bool,
    show_stderr: bool,
    tail_n: int | None,
) -> int:
    """Several jobs' output: one after another under a `==> ID <==` line each, or (-f)
    followed together, each line prefixed with its job's id."""
    from jobkit.logs.files import select_files

    chosen = [
        (
            record,
            select_files(
                record.log_paths_for(task),
                record.spec,
                record.extra,
                rank=rank,
                all_ranks=all_ranks,
                stderr=show_stderr,
            ),
        )
        for record, task in named
    ]
    if follow:
        sources = [
            replace(source, label=_job_label(record, source.label))
            for record, selection in chosen
            for source in selection.sources
        ]
        return _follow(store, [record for record, _ in chosen], sources, tail_n)
    code = 0
    for number, (record, selection) in enumerate(chosen):
        if number:
            click.echo("")
        click.echo(f"==> {_job_heading(record, named[number][1])} <==")
        sys.stdout.flush()
        try:
            _print_now(store, record, selection, tail_n)
        except JobkitError as err:
            click.echo(f"jobkit: {err.show()}", err=True)
            code = err.exit_code
    return code


def _job_label(record: JobRecord, label: str | None) -> str:
    """A merged line's prefix: the job's id, then the file's own label (`jk3f9a2 node 1`)."""
    return f"{record.jobkit_id} {label}" if label else record.jobkit_id


def _job_heading(record: JobRecord, task: str | None) -> str:
    """`jk3f9a2 (13587_1, sweep task 1)`: which job the lines below are."""
    from jobkit.core.display import printable

    scheduler_id = _task_name(record, task) if task is not None else record.scheduler_id or "-"
    sweep = f", sweep task {record.task}" if record.sweep_id and record.task is not None else ""
    return printable(f"{record.jobkit_id} ({scheduler_id}{sweep})")


def _write(lines: Iterable[LogLine]) -> None:
    out = sys.stdout
    for line in lines:
        out.write(line.render() + "\n")
    out.flush()


def _wait_for_rank_host(store: Store, record: JobRecord, rank: int, task: str | None) -> JobRecord:
    """Wait until torchrun notes which host runs `rank` (or the job ends); the latest record."""
    from jobkit.logs.files import rank_host
    from jobkit.manager.refresh import refresh

    run_dir = Path(record.log_paths_for(task)["run_dir"])
    click.echo(f"jobkit: waiting for the job to start rank {rank}", err=True)
    interval = poll_interval(record.backend)
    next_poll = 0.0
    while rank_host(run_dir, rank) is None:
        if time.monotonic() >= next_poll:
            record = refresh(store, [record]).records[0]
            if record.is_final or record.state == State.UNKNOWN.value:
                break
            next_poll = time.monotonic() + interval
        time.sleep(RANK_HOST_POLL_S)
    return record


def _print_now(store: Store, record: JobRecord, selection: Selection, tail_n: int | None) -> int:
    """Print what exists now; a missing file is named on stderr (an optional one only when
    nothing at all is there)."""
    sources = selection.sources
    present = [s for s in sources if s.path.exists()]
    absent = [s for s in sources if not s.path.exists()]
    required = [s for s in absent if s.path not in selection.optional]
    missing = required if present or required else absent
    shown = not selection.optional or any(s.path in selection.optional for s in present)
    if selection.note and shown:
        click.echo(f"jobkit: {selection.note}", err=True)
    if tail_n is not None:
        for source in present:
            _write(LogLine(source.label, text) for text in tail(source.path, tail_n))
    else:
        _write(read_all(present))
    if missing:
        from jobkit.manager.refresh import refresh

        record = refresh(store, [record]).records[0]
        names = ", ".join(str(s.path) for s in missing)
        if not present and record.is_final:
            raise JobkitError(f"job {record.jobkit_id} ended ({record.state}) without {names}")
        click.echo(f"jobkit: no output yet: {names} (job is {record.state})", err=True)
    return 0


def state_line(record: JobRecord, before: tuple[str, str | None] | None) -> str | None:
    """What `logs -f` says when the job's state or reason changed while nothing is printed:
    a waiting job's state, the scheduler's reason and its fix (`job jk.. is HELD
    (JobHeldUser): held by its owner (fix: scontrol release 133)`), and when it starts. None
    when nothing changed, or at the first look at a job already running."""
    from jobkit.backends.waiting import one_line_why

    now = (record.state, record.reason)
    if now == before or record.is_final:
        return None
    if record.state == State.RUNNING.value:
        return None if before is None else f"job {record.jobkit_id} is RUNNING"
    reason = f" ({record.reason})" if record.reason else ""
    why = one_line_why(record.backend, record.state, record.reason, record.scheduler_id)
    return f"job {record.jobkit_id} is {record.state}{reason}" + (f": {why}" if why else "")


def _follow(
    store: Store, records: Sequence[JobRecord], sources: list[LogSource], tail_n: int | None
) -> int:
    """Print lines as they come until every job is final and every file is drained; exit
    like the jobs (the first one that did not succeed decides)."""
    from jobkit.manager.refresh import exit_status_for, refresh

    if tail_n is not None:
        sources = [replace(s, start=tail_offset(s.path, tail_n)) for s in sources]
    current = list(records)
    warned: set[str] = set()
    said: dict[str, tuple[str, str | None]] = {}

    def is_done() -> bool:
        nonlocal current
        result = refresh(store, current)
        current = result.records
        if any("@" in record.backend for record in current):  # docs/remote.md: the copies
            from jobkit.remote.mirror import fetch_files  # grow after each poll, the last

            fetch_files(current)  # one after the job ended
        for failure in result.failures:
            if failure.backend not in warned:
                warned.add(failure.backend)
                click.echo(f"jobkit: {failure.warning()}", err=True)
        for record in current:
            line = state_line(record, said.get(record.jobkit_id))
            said[record.jobkit_id] = (record.state, record.reason)
            if line is not None:
                click.echo(f"jobkit: {line}", err=True)
        return all(r.is_final or r.state == State.UNKNOWN.value for r in current)

    interval = min(poll_interval(record.backend) for record in records)
    timing = FollowTiming(done_interval_s=interval)
    for batch in follow_batches(sources, is_done, timing=timing):
        _write(batch)
    code = 0
    for record in current:
        status = exit_status_for(record) if record.is_final else 1
        if status != 0:
            how = f" (exit {record.exit_code})" if record.exit_code is not None else ""
            reason = f": {record.reason}" if record.reason else ""
            click.echo(
                f"jobkit: job {record.jobkit_id} ended {record.state}{how}{reason}", err=True
            )
            code = code or status
    return code
