"""`jobkit run SPEC --here`: the job's script in the allocation this shell is in, in the
foreground, tracked like any job (docs/interactive.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from jobkit.cli.common import SpecArgs, spec_options
from jobkit.core.errors import JobkitError, UsageError
from jobkit.registry.store import JobRecord


@click.command()
@spec_options
@click.option(
    "--here",
    is_flag=True,
    help="Run in the allocation this shell is in (salloc, `jobkit shell`); required.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the finished job as JSON (the job's own output then goes to stderr).",
)
def run(spec_args: SpecArgs, here: bool, as_json: bool) -> int:
    """Run SPEC's script now, in the current allocation, and wait for it.

    The script `jobkit render` prints runs here (Slurm: its srun steps use this allocation);
    its output shows on the terminal and goes to the job's usual .out/.err and run folder.
    The registry records it (backend `here`): `jobkit status`, `logs` and `doctor` work on
    it. Ctrl-C stops it. Exits with the job's exit code.
    """
    if not here:
        raise UsageError(
            "run: needs --here: it runs SPEC in the allocation this shell is in"
            " (to queue the job instead: jobkit submit SPEC)"
        )
    from jobkit.backends.base import Backend
    from jobkit.backends.registry import backend_class
    from jobkit.manager.here import run_here
    from jobkit.manager.refresh import exit_status_for
    from jobkit.manager.submit import render_script
    from jobkit.registry.store import Store
    from jobkit.spec.trainer_check import check_trainer_config

    loaded = spec_args.load()
    spec = loaded.spec
    backend = backend_class(spec.backend)
    if backend.current_allocation is Backend.current_allocation:
        raise UsageError(
            f"run --here: the {spec.backend} backend has no allocation to run in"
            f" (run the job with: jobkit submit {spec_args.spec} --wait)"
        )
    allocation = backend.current_allocation(os.environ)
    if allocation is None:
        raise UsageError(
            f"run --here: not inside a {spec.backend} allocation; start one"
            f" (jobkit shell {spec_args.spec}) or queue the job (jobkit submit {spec_args.spec})"
        )
    if spec.scheduler.array:
        raise UsageError(
            "run --here: scheduler.array: a job array cannot run in one allocation"
            " (queue it with jobkit submit)"
        )
    workdir = Path.cwd()
    check_trainer_config(loaded, workdir)
    script = render_script(spec, loaded.template_dir, workdir)

    def started(record: JobRecord) -> None:
        click.echo(
            f"jobkit: {record.jobkit_id} runs in {spec.backend} allocation"
            f" {allocation.job_id}: {record.name} (run folder {record.log_paths.get('run_dir')})",
            err=True,
        )

    with Store() as store:
        try:
            final = run_here(
                store,
                spec,
                script,
                workdir=workdir,
                allocation=allocation,
                scheduler=spec.backend,
                on_start=started,
                stdout_to_stderr=as_json,
            )
        except KeyboardInterrupt:  # a Ctrl-C outside the wait: the run was recorded already
            raise JobkitError("interrupted") from None
        words = [f"jobkit: {final.jobkit_id} {final.state}"]
        if final.exit_code is not None:
            words.append(f"exit code {final.exit_code}")
        if final.reason:
            words.append(f"- {final.reason}")
        click.echo(" ".join(words), err=True)
        if as_json:
            click.echo(json.dumps(final.to_dict(), indent=2))
        return exit_status_for(final)
