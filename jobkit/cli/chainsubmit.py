"""`jobkit submit A.yaml B.yaml C.yaml --chain [ok|any|fail]` and `jobkit submit X.yaml --after
ID[:COND]`: stages submitted in order, each after the previous one (docs/chains.md)."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobkit.cli.common import SpecArgs
from jobkit.core.errors import UsageError

if TYPE_CHECKING:
    from jobkit.backends.base import After
    from jobkit.manager.submit import Plan
    from jobkit.registry.store import JobRecord, Store


def submit_chain_cli(
    spec_args: SpecArgs,
    more_specs: tuple[str, ...],
    *,
    chain: str | None,
    after: str | None,
    keep_broken: bool,
    dry_run: bool,
    no_check: bool,
    wait: bool,
    as_json: bool,
) -> int:
    """Load and check every stage first (nothing is submitted when one is bad), then submit
    them in order; with --wait follow each stage in turn. Exit as `jobkit submit`."""
    from jobkit.chain.links import chain_condition, parse_after
    from jobkit.chain.submit import check_stages, placeholder_after, submit_chain
    from jobkit.cli.submitted import EXIT_PROBLEMS, show_problems
    from jobkit.manager import submit as pipeline
    from jobkit.spec.trainer_check import check_trainer_config

    if more_specs and chain is None:
        raise UsageError("several SPECs are a chain: add --chain (or --chain any)")
    condition = chain_condition(chain) if chain is not None else "ok"
    wanted = parse_after(after) if after else None
    loaded = [replace(spec_args, spec=path).load() for path in (spec_args.spec, *more_specs)]
    for one in loaded:
        if one.spec.sweep is not None:
            raise UsageError(f"{one.spec.name}: a sweep cannot be a stage of a chain")
        check_trainer_config(one, Path.cwd())
    check_stages([one.spec for one in loaded], None)  # --after's job: checked once it is read

    def plan_for(index: int, waits: tuple[After, ...]) -> Plan:
        one = loaded[index]
        return pipeline.plan_submission(
            one.spec,
            workdir=Path.cwd(),
            template_dir=one.template_dir,
            after=waits,
            keep_broken=keep_broken,
        )

    plans = [
        plan_for(i, (placeholder_after(i, condition),) if i or wanted else ())
        for i in range(len(loaded))
    ]
    if not no_check:
        from jobkit.manager.prepare import fast_problems

        for one, plan in zip(loaded, plans, strict=True):
            problems = fast_problems(one, Path.cwd(), plan.script, scheduler=not dry_run)
            if problems:
                show_problems(problems)
                return EXIT_PROBLEMS
    if dry_run:
        _dry_run(plans, as_json)
        return 0
    from jobkit.manager.envcheck import check_environment
    from jobkit.registry.ids import resolve_job
    from jobkit.registry.store import Store
    from jobkit.render.interpreter import spec_interpreter

    for one in loaded:
        check_environment(one, spec_interpreter(one.spec), Path.cwd())
    from jobkit.manager.prepare import freeze_code

    def frozen_plan_for(index: int, waits: tuple[After, ...]) -> Plan:
        """A stage's plan with its code frozen (docs/provenance.md), its note said."""
        plan, note = freeze_code(plan_for(index, waits), loaded[index])
        if note:
            click.echo(f"jobkit: note: {note}", err=True)
        return plan

    with Store() as store:
        from jobkit.cli.submitted import reconcile

        reconcile(store)
        before = resolve_job(store, wanted.job) if wanted else None
        check_stages([one.spec for one in loaded], before)
        done = submit_chain(
            store,
            frozen_plan_for,
            len(loaded),
            condition=condition,
            before=before,
            before_condition=wanted.condition if wanted else "ok",
            keep_broken=keep_broken,
            on_submitted=None if as_json else _say_submitted,
        )
        from jobkit.chain.view import chain_views

        views = chain_views(store, done.records)
        if as_json and not wait:
            click.echo(json.dumps([v.to_dict() for v in views], indent=2))
        elif not as_json:
            for view in views:
                click.echo(view.line())
        if not wait:
            return 0
        return _wait_stages(store, done.records, as_json=as_json)


def _say_submitted(record: JobRecord) -> None:
    from jobkit.cli.jobview import submitted_line

    click.echo(submitted_line(record))


def _dry_run(plans: list[Plan], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in plans], indent=2))
        return
    for index, plan in enumerate(plans, 1):
        sys.stdout.write(f"# --- stage {index}: {plan.spec.name}\n{plan.script}")
        sys.stdout.flush()
        click.echo(
            f"# stage {index} would run (in {plan.workdir}): {shlex.join(plan.argv)}", err=True
        )


def _wait_stages(store: Store, records: list[JobRecord], *, as_json: bool) -> int:
    """Follow each stage to its end in turn; stop at a stage that will never start (said
    once by the chain's settling). The exit status of the first stage that did not succeed."""
    from jobkit.chain.settle import broken_reason, settle_chains
    from jobkit.cli.submitted import wait_for_job
    from jobkit.manager.refresh import exit_status_for

    code = 0
    for record in records:
        if broken_reason(store.get(record.jobkit_id)):
            break
        final = wait_for_job(store, record, stream=not as_json)
        for line in settle_chains(store, [final]):
            click.echo(f"jobkit: {line}", err=True)
        if as_json:
            click.echo(json.dumps(final.to_dict(), indent=2))
        code = code or exit_status_for(final)
    from jobkit.chain.view import chain_views, chains_text

    if not as_json:
        click.echo(chains_text(chain_views(store, records)), err=True)
    return code
