"""What `jobkit submit` does before the registry is touched, as one function that the CLI
and jobkit.api share: the trainer config checked, the plan made, the fast checks of
`jobkit check` run, the seed-style notes gathered."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobkit.check.problems import Problem
    from jobkit.manager.submit import Plan
    from jobkit.spec.load import LoadedSpec


@dataclass(frozen=True)
class Prepared:
    """A submission ready to be recorded: its plan, the problems the checks found (nothing
    may be submitted while there is one) and the notes to show."""

    plan: Plan
    problems: list[Problem]
    notes: list[str]


def prepare_submission(
    loaded: LoadedSpec, workdir: Path, *, check: bool = True, scheduler: bool = True
) -> Prepared:
    """Check the trainer config (SpecError), render the plan, and unless `check` is False
    run the fast checks (`scheduler`: the scheduler's fast answers too, not for a dry run)."""
    from jobkit.manager.submit import plan_submission
    from jobkit.render.notes import spec_notes
    from jobkit.spec.trainer_check import check_trainer_config

    check_trainer_config(loaded, workdir)
    from jobkit.notify.jobfile import job_webhook  # notify.from: job needs it set now

    job_webhook(loaded.spec)
    plan = plan_submission(loaded.spec, workdir=workdir, template_dir=loaded.template_dir)
    problems = fast_problems(loaded, workdir, plan.script, scheduler=scheduler) if check else []
    return Prepared(plan, problems, list(spec_notes(loaded.spec)))


def fast_problems(
    loaded: LoadedSpec, workdir: Path, script: str, *, scheduler: bool
) -> list[Problem]:
    """The fast checks of `jobkit check` on one rendered script (`scheduler`: the scheduler's
    fast answers too); a chain's stages are checked one by one with it."""
    from jobkit.check.run import check_loaded

    report = check_loaded(
        loaded, workdir, script=script, scheduler=scheduler, thorough=False, trainer=False
    )
    return list(report.problems)


def check_job_environment(loaded: LoadedSpec, workdir: Path) -> None:
    """local/ssh: the job's Python environment exists on every host (SpecError if not)."""
    from jobkit.manager.envcheck import check_environment
    from jobkit.render.interpreter import spec_interpreter

    check_environment(loaded, spec_interpreter(loaded.spec), workdir)


def freeze_code(plan: Plan, loaded: LoadedSpec) -> tuple[Plan, str | None]:
    """The plan with its code frozen, and the one-line note when it cannot be (outside git,
    a backend that runs the submit folder in place): docs/provenance.md. After the checks,
    never for a dry run: a snapshot is taken only for what is submitted."""
    from jobkit.provenance.record import freeze, with_code

    spec_file = loaded.path.resolve() if loaded.path.is_file() else None
    frozen = freeze(plan, spec_file=spec_file)
    return with_code(plan, frozen), frozen.note
