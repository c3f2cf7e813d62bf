"""`jobkit submit SPEC`: render, record, submit; `--wait` follows the job to its end."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobkit.cli import sweepsubmit
from jobkit.cli.common import SpecArgs, spec_options
from jobkit.cli.jobview import submitted_line
from jobkit.manager.badnodes import submit_note
from jobkit.manager.refresh import BackendFailure, Waiter
from jobkit.registry.store import JobRecord, Store

if TYPE_CHECKING:
    from jobkit.cli.progress import ProgressLine
    from jobkit.logs.follow import LogSource
    from jobkit.spec.load import LoadedSpec

EXIT_PROBLEMS = 2
"""A check found a problem: nothing was submitted or recorded."""


@click.command()
@spec_options
@click.option(
    "--dry-run", is_flag=True, help="Print the script and the submit command; record nothing."
)
@click.option(
    "--wait",
    is_flag=True,
    help="Follow the job until it ends (printing its output and state changes) and exit"
    " with its exit code.",
)
@click.option(
    "--no-check",
    is_flag=True,
    help="Skip the checks before queueing (the program; Slurm's partition and node limits;"
    " see `jobkit check`).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the job (or the plan) as JSON.")
def submit(spec_args: SpecArgs, dry_run: bool, wait: bool, no_check: bool, as_json: bool) -> int:
    """Submit SPEC to its backend and track it; prints the jobkit id and the scheduler's id."""
    from jobkit.manager import submit as pipeline

    loaded = spec_args.load()
    from jobkit.spec.trainer_check import check_trainer_config

    check_trainer_config(loaded, Path.cwd())
    plan = pipeline.plan_submission(
        loaded.spec, workdir=Path.cwd(), template_dir=loaded.template_dir
    )
    if not no_check and not _checked(loaded, plan.script, scheduler=not dry_run):
        return EXIT_PROBLEMS
    from jobkit.render.notes import spec_notes

    for spec_note in spec_notes(loaded.spec):  # what a seed-style spec may not expect: said
        click.echo(f"jobkit: note: {spec_note}", err=True)
    sweep = loaded.spec.sweep is not None  # docs/sweeps.md: cli/sweepsubmit.py
    if dry_run:
        if as_json:
            data = sweepsubmit.dry_run_data(plan) if sweep else plan.to_dict()
            click.echo(json.dumps(data, indent=2))
        else:
            sys.stdout.write(plan.script)
            sys.stdout.flush()
            click.echo(f"# would run (in {plan.workdir}): {shlex.join(plan.argv)}", err=True)
            if sweep:
                click.echo("\n".join(sweepsubmit.dry_run_lines(plan)), err=True)
        return 0
    from jobkit.manager.envcheck import check_environment
    from jobkit.render.interpreter import choose_interpreter

    check_environment(loaded, choose_interpreter(loaded.spec.env), Path.cwd())
    with Store() as store:
        _reconcile(store)
        if sweep:
            return sweepsubmit.submit_and_report(store, plan, wait=wait, as_json=as_json)
        record = pipeline.submit(store, plan)
        if (note := submit_note(record)) is not None:  # bad nodes left out: docs/nodes.md
            click.echo(f"jobkit: {note}", err=True)
        if as_json and not wait:
            click.echo(json.dumps(record.to_dict(), indent=2))
        elif not as_json:
            click.echo(submitted_line(record))
        if not wait:
            return 0
        final = _wait(store, record, stream=not as_json)
        if as_json:
            click.echo(json.dumps(final.to_dict(), indent=2))
        from jobkit.manager.refresh import exit_status_for

        return exit_status_for(final)


def _checked(loaded: LoadedSpec, script: str, *, scheduler: bool) -> bool:
    """The fast checks of `jobkit check` (the program; the scheduler's fast answers unless a
    dry run): each problem one line on stderr; False when any (nothing is recorded)."""
    from jobkit.check.run import check_loaded

    report = check_loaded(
        loaded, Path.cwd(), script=script, scheduler=scheduler, thorough=False, trainer=False
    )
    for problem in report.problems:
        click.echo(problem.line_text(), err=True)
    if report.problems:
        count = len(report.problems)
        click.echo(
            f"jobkit: not submitted: {count} problem{'s' if count > 1 else ''}"
            " (`jobkit check` for more; --no-check submits anyway)",
            err=True,
        )
    return report.ok


def _reconcile(store: Store) -> None:
    from jobkit.manager.submit import reconcile_submissions

    done = reconcile_submissions(store)
    for err in done.errors:
        click.echo(f"jobkit: warning: could not reconcile submissions: {err.show()}", err=True)


def _wait(store: Store, record: JobRecord, *, stream: bool) -> JobRecord:
    """Follow the job: its output on stdout (when there is a log file), states on stderr,
    and (with `stream`) a training job's progress line (cli/progress.py)."""
    from jobkit.cli.progress import ProgressLine

    progress = ProgressLine() if stream else None

    def on_change(current: JobRecord) -> None:
        if progress is not None:
            progress.clear()
        words = [f"jobkit: {current.jobkit_id} {current.state}"]
        if current.raw_state and current.raw_state != current.state:
            words.append(f"({current.raw_state})")
        if current.nodes:
            words.append(f"on {current.nodes}")
        if current.reason and current.state != "RUNNING":
            words.append(f"- {current.reason}")
        if current.exit_code is not None and current.is_final:
            words.append(f"exit code {current.exit_code}")
        click.echo(" ".join(words), err=True)

    def on_failure(failure: BackendFailure) -> None:
        if progress is not None:
            progress.clear()
        click.echo(f"jobkit: {failure.warning()}", err=True)

    from jobkit.cli.watch import next_attempt

    try:
        while True:  # each attempt of the run in turn (docs/runs.md)
            waiter = Waiter(store, record.jobkit_id, on_change, on_failure)
            final = _wait_attempt(store, record, waiter, progress=progress)
            following = next_attempt(store, final)
            if following is None:
                return final
            record = following
    finally:
        if progress is not None:
            progress.clear()


def _wait_attempt(
    store: Store, record: JobRecord, waiter: Waiter, *, progress: ProgressLine | None
) -> JobRecord:
    """Follow one job to its end (a job preempted and not requeued never becomes final:
    accounting saying it ended is its end)."""
    from jobkit.manager.attempts import has_ended

    def done() -> bool:
        current = store.get(record.jobkit_id)
        if progress is not None:
            progress.update([current])
        return waiter.done() or has_ended(current)

    sources = _log_sources(record) if progress is not None else []
    if sources:
        from jobkit.logs.follow import FollowTiming, follow

        for line in follow(sources, done, timing=FollowTiming(done_interval_s=0.5)):
            if progress is not None:
                progress.clear()
            click.echo(line.render())
    else:
        while not done():
            waiter.sleep_until_due()
    return store.get(record.jobkit_id)


def _log_sources(record: JobRecord) -> list[LogSource]:
    """What `jobkit logs ID -f` shows (rank 0's output and the job's own); none for an array."""
    if record.is_array or "out" not in record.log_paths:
        return []
    from jobkit.logs.files import job_view

    selection = job_view(record.log_paths, record.spec, record.extra)
    if selection.note:
        click.echo(f"jobkit: {selection.note}", err=True)
    return selection.sources
