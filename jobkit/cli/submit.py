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
from jobkit.cli.submitted import EXIT_PROBLEMS, reconcile, show_problems, wait_for_job
from jobkit.manager.badnodes import submit_note
from jobkit.registry.store import Store

if TYPE_CHECKING:
    from jobkit.manager.submit import Plan
    from jobkit.spec.load import LoadedSpec


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
@click.argument("more_specs", nargs=-1, metavar="[SPEC]...")
@click.option(
    "--chain",
    is_flag=False,
    flag_value="ok",
    default=None,
    metavar="[ok|any|fail]",
    help="The SPECs are a chain: each starts after the previous one succeeded (any: ended;"
    " fail: failed). docs/chains.md",
)
@click.option(
    "--after",
    metavar="ID[:ok|any|fail]",
    help="Start (the first SPEC) after job ID succeeded (any: ended; fail: failed).",
)
@click.option(
    "--keep-broken",
    is_flag=True,
    help="A stage that can never start stays waiting (shown) instead of being cancelled.",
)
@click.option(
    "--on",
    "cluster",
    metavar="CLUSTER",
    help="Submit to this cluster of clusters.yaml over ssh (docs/remote.md).",
)
def submit(
    spec_args: SpecArgs,
    dry_run: bool,
    wait: bool,
    no_check: bool,
    as_json: bool,
    more_specs: tuple[str, ...],
    chain: str | None,
    after: str | None,
    keep_broken: bool,
    cluster: str | None,
) -> int:
    """Submit SPEC to its backend and track it; prints the jobkit id and the scheduler's id.
    Several SPECs with --chain (or one with --after): stages in order (docs/chains.md)."""
    from jobkit.remote.speckey import chosen_cluster, spec_cluster

    chained = bool(more_specs) or chain is not None or after is not None
    specs = (spec_args.spec, *more_specs)
    if chained and (cluster or any(spec_cluster(s, spec_args.sets) for s in specs)):
        raise click.UsageError(
            "chains (--chain, --after) are not submitted to a cluster over ssh yet"
            " (--on, cluster:): submit each stage on its own (docs/remote.md)"
        )
    cluster = chosen_cluster(spec_args.spec, spec_args.sets, cluster)
    if cluster is not None:  # over ssh: docs/remote.md
        from jobkit.cli.onsubmit import submit_on

        return submit_on(
            spec_args, cluster, dry_run=dry_run, no_check=no_check, wait=wait, as_json=as_json
        )
    if more_specs or chain is not None or after is not None:  # docs/chains.md
        from jobkit.cli.chainsubmit import submit_chain_cli

        return submit_chain_cli(
            spec_args,
            more_specs,
            chain=chain,
            after=after,
            keep_broken=keep_broken,
            dry_run=dry_run,
            no_check=no_check,
            wait=wait,
            as_json=as_json,
        )
    from jobkit.manager import submit as pipeline
    from jobkit.manager.prepare import check_job_environment, prepare_submission

    loaded = spec_args.load()
    prepared = prepare_submission(loaded, Path.cwd(), check=not no_check, scheduler=not dry_run)
    plan = prepared.plan
    if prepared.problems:
        show_problems(prepared.problems)
        return EXIT_PROBLEMS
    for spec_note in prepared.notes:  # what a seed-style spec may not expect: said
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
    check_job_environment(loaded, Path.cwd())
    plan = _frozen(plan, loaded)  # the code snapshot and provenance: docs/provenance.md
    with Store() as store:
        reconcile(store)
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
        final = wait_for_job(store, record, stream=not as_json)
        if as_json:
            click.echo(json.dumps(final.to_dict(), indent=2))
        from jobkit.manager.refresh import exit_status_for

        return exit_status_for(final)


def _frozen(plan: Plan, loaded: LoadedSpec) -> Plan:
    """The plan with its code frozen (a note when it cannot be: outside git, a backend
    that runs the submit folder in place)."""
    from jobkit.manager.prepare import freeze_code

    frozen, note = freeze_code(plan, loaded)
    if note:
        click.echo(f"jobkit: note: {note}", err=True)
    return frozen
