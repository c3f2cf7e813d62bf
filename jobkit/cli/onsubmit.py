"""`jobkit submit SPEC --on CLUSTER`: the submission to a cluster over ssh (docs/remote.md).

The checks that need the scheduler are left to the cluster (sbatch refuses there, in one
line); the program check runs on the laptop's code, which is what is shipped.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import click

from jobkit.cli import sweepsubmit
from jobkit.cli.common import SpecArgs
from jobkit.registry.store import JobRecord, Store


def submit_on(
    spec_args: SpecArgs, name: str, *, dry_run: bool, no_check: bool, wait: bool, as_json: bool
) -> int:
    """Render with the cluster's facts, record, ship, sbatch there; `--wait` follows it."""
    from jobkit.cli.jobview import submitted_line
    from jobkit.cli.submitted import EXIT_PROBLEMS, reconcile, show_problems
    from jobkit.manager.prepare import prepare_submission
    from jobkit.remote.clusters import get_cluster
    from jobkit.remote.submit import cluster_sets, remote_plan, submit_remote

    cluster = get_cluster(name)
    sets = (*cluster_sets(cluster, spec_args.backend), *spec_args.sets)
    loaded = replace(spec_args, backend=None, sets=sets).load()
    sweep = loaded.spec.sweep is not None  # one array job there: docs/sweeps.md
    prepared = prepare_submission(loaded, Path.cwd(), check=not no_check, scheduler=False)
    if prepared.problems:
        show_problems(prepared.problems)
        return EXIT_PROBLEMS
    for note in prepared.notes:
        click.echo(f"jobkit: note: {note}", err=True)
    if dry_run:
        plan = replace(prepared.plan, workdir=Path(cluster.workdir))
        if as_json:
            data = sweepsubmit.dry_run_data(plan) if sweep else plan.to_dict()
            click.echo(json.dumps({**data, "cluster": cluster.name}, indent=2))
            return 0
        sys.stdout.write(plan.script)
        sys.stdout.flush()
        where = f"{cluster.host}:{cluster.workdir}"
        click.echo(
            f"# would run (on {cluster.name}, in {where}): {shlex.join(plan.argv)}", err=True
        )
        if sweep:
            click.echo("\n".join(sweepsubmit.dry_run_lines(plan)), err=True)
        return 0
    plan, frozen_note = remote_plan(prepared.plan, loaded, cluster)
    if frozen_note:
        click.echo(f"jobkit: note: {frozen_note}", err=True)
    with Store() as store:
        reconcile(store)
        if sweep:
            return sweepsubmit.submit_and_report(store, plan, wait=wait, as_json=as_json)
        record = submit_remote(store, plan)
        if as_json and not wait:
            click.echo(json.dumps(record.to_dict(), indent=2))
        elif not as_json:
            click.echo(submitted_line(record))
        if not wait:
            return 0
        code = _follow_there(store, record)
        if as_json:
            click.echo(json.dumps(store.get(record.jobkit_id).to_dict(), indent=2))
        return code


def _follow_there(store: Store, record: JobRecord) -> int:
    """`--wait`: what `jobkit logs -f` shows (copies fetched after each poll), its exit."""
    from jobkit.cli.logs import _follow
    from jobkit.logs.files import job_view
    from jobkit.remote.mirror import local_view

    here = local_view(record)
    selection = job_view(here.log_paths, here.spec, here.extra)
    if selection.note:
        click.echo(f"jobkit: {selection.note}", err=True)
    return _follow(store, [here], selection.sources, None)
