"""`jobkit check SPEC`: every problem knowable before queueing, one `FILE:LINE: KEY: message`
line each (exit 2), or `ok: ...` (docs/check.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from jobkit.cli.common import SpecArgs, spec_options

EXIT_PROBLEMS = 2


@click.command()
@spec_options
@click.option(
    "--fast",
    is_flag=True,
    help="Only what `jobkit submit` checks (no sacctmgr, sbatch --test-only or qsub -w v).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the problems and notes as JSON.")
def check(spec_args: SpecArgs, fast: bool, as_json: bool) -> int:
    """Check SPEC against the trainer, the program and the scheduler's limits; queue nothing."""
    from jobkit.check.run import check_spec

    _note_cluster(spec_args)
    report = check_spec(spec_args.load, Path.cwd(), spec_args.spec, thorough=not fast)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for problem in report.problems:
            click.echo(problem.line_text())
        for note in report.notes:
            click.echo(f"note: {note}", err=not report.ok)
        if report.ok:
            click.echo(report.summary())
    return 0 if report.ok else EXIT_PROBLEMS


def _note_cluster(spec_args: SpecArgs) -> None:
    """A spec with `cluster:` is checked here as written: said in one line (docs/remote.md).
    A spec that cannot be read is left to the check itself, which reports it."""
    from jobkit.core.errors import SpecError
    from jobkit.remote.speckey import spec_cluster

    try:
        remote = spec_cluster(spec_args.spec, spec_args.sets)
    except SpecError:
        return
    if remote is not None:
        click.echo(
            f"jobkit: note: cluster: {remote.name} ({remote.where}): checked here as written,"
            " with this machine's scheduler; `jobkit clusters check"
            f" {remote.name}` checks the cluster",
            err=True,
        )
