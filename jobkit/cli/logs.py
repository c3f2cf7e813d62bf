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
from collections.abc import Iterable
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
    from jobkit.backends.registry import BackendUnavailable, backend_class

    first = re.match(r"\d+", str(record.extra.get("array", ""))) or None
    task = first.group(0) if first else "0"
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
@click.argument("job_id", required=False, metavar="ID")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option(
    "--rank", type=click.IntRange(min=0), metavar="N", help="One rank's file (see docs/logs.md)."
)
@click.option("--all-ranks", is_flag=True, help="Every rank's (or node's) file, prefixed.")
@click.option("--stderr", "show_stderr", is_flag=True, help="The job's .err instead of .out.")
@click.option("--tail", "tail_n", type=click.IntRange(min=0), metavar="N", help="Last N lines.")
@click.option("--last", is_flag=True, help="The newest job.")
def logs(
    job_id: str | None,
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
    [rank N] or [node N].
    """
    from jobkit.logs.files import select_files

    if (job_id is None) == (not last):
        raise UsageError("give a job ID or --last (not both)")
    with Store() as store:
        record, task = _resolve(store, job_id)
        if record.state == SUBMITTING or not record.log_paths:
            raise JobkitError(f"job {record.jobkit_id} has no log files yet (still submitting)")
        if record.is_array and task is None:
            example = _task_example(record)
            raise UsageError(f"job {record.jobkit_id} is an array: name one task, e.g. {example}")
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
            return _follow(store, record, selection.sources, tail_n)
        return _print_now(store, record, selection, tail_n)


def _resolve(store: Store, job_id: str | None) -> tuple[JobRecord, str | None]:
    """The job named; `--last` is the last submission: after a sweep, the sweep, refused
    with its tasks listed (one task's output at a time, docs/logs.md)."""
    from jobkit.registry.ids import resolve_job_task, with_last

    (text,) = with_last(store, [job_id] if job_id else [], job_id is None)
    return resolve_job_task(store, text)


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


def _follow(store: Store, record: JobRecord, sources: list[LogSource], tail_n: int | None) -> int:
    """Print lines as they come until the job is final and every file is drained."""
    from jobkit.manager.refresh import exit_status_for, refresh

    if tail_n is not None:
        sources = [replace(s, start=tail_offset(s.path, tail_n)) for s in sources]
    current = record
    warned: set[str] = set()
    said: list[tuple[str, str | None]] = []

    def is_done() -> bool:
        nonlocal current
        result = refresh(store, [current])
        current = result.records[0]
        for failure in result.failures:
            if failure.backend not in warned:
                warned.add(failure.backend)
                click.echo(f"jobkit: {failure.warning()}", err=True)
        line = state_line(current, said[-1] if said else None)
        said.append((current.state, current.reason))
        if line is not None:
            click.echo(f"jobkit: {line}", err=True)
        return current.is_final or current.state == State.UNKNOWN.value

    interval = poll_interval(record.backend)
    timing = FollowTiming(done_interval_s=interval)
    for batch in follow_batches(sources, is_done, timing=timing):
        _write(batch)
    code = exit_status_for(current) if current.is_final else 1
    if code != 0:
        how = f" (exit {current.exit_code})" if current.exit_code is not None else ""
        reason = f": {current.reason}" if current.reason else ""
        click.echo(f"jobkit: job {current.jobkit_id} ended {current.state}{how}{reason}", err=True)
    return code
