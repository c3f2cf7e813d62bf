"""Running every check of a job before it queues and gathering every problem (not the first).

    report = check_loaded(loaded, Path.cwd(), script=script, scheduler=True, thorough=True)

Local checks (no command): the trainer config and overrides, the program. Scheduler checks:
the backend's `preflight` (Slurm: partition, nodes, `sbatch --test-only`; thorough adds
sacctmgr's association and QoS limits). `jobkit submit` runs the fast ones (thorough=False).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobkit.check.problems import Problem, placed
from jobkit.core.errors import JobkitError, SchedulerError, SpecError
from jobkit.spec.load import LoadedSpec


@dataclass
class CheckReport:
    """What was checked, every problem found, and notes on what could not be checked."""

    spec_file: str
    backend: str | None = None
    problems: list[Problem] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems

    def summary(self) -> str:
        """The `ok: ...` line."""
        return f"ok: {self.spec_file} ({self.backend}): checked {', '.join(self.checked)}"

    def to_dict(self) -> dict[str, Any]:
        """For --json."""
        return {
            "spec": self.spec_file,
            "backend": self.backend,
            "ok": self.ok,
            "problems": [problem.to_dict() for problem in self.problems],
            "checked": self.checked,
            "notes": self.notes,
        }


def check_loaded(
    loaded: LoadedSpec,
    workdir: Path,
    *,
    script: str | None,
    scheduler: bool,
    thorough: bool,
    trainer: bool = True,
    report: CheckReport | None = None,
) -> CheckReport:
    """Every check of a loaded spec. `script` is the rendered script (None: rendering failed
    or was not done; the scheduler is then not asked); `trainer` False when the caller
    already checked the trainer config."""
    report = report or CheckReport(str(loaded.path))
    spec = loaded.spec
    report.backend = spec.backend
    report.checked.append("spec")
    if trainer and spec.run.train is not None:
        from jobkit.spec.trainer_check import check_trainer_config

        report.checked.append("trainer config")
        try:
            check_trainer_config(loaded, workdir)
        except SpecError as err:
            report.problems.append(Problem.from_error(err))
    from jobkit.check.program import check_program
    from jobkit.render.interpreter import spec_interpreter

    program = check_program(spec, workdir, spec_interpreter(spec))
    report.checked.append("program")
    report.problems += [placed(loaded, f.key, f.message) for f in program.findings]
    report.notes += program.notes
    if spec.container is not None:
        from jobkit.container.preflight import container_findings

        report.checked.append("container")
        from jobkit.backends.registry import backend_class

        here = backend_class(spec.backend).runs_here
        found = container_findings(spec, workdir, on_this_machine=here)
        report.problems += [placed(loaded, f.key, f.message) for f in found]
    from jobkit.render.notes import spec_notes

    report.notes += spec_notes(spec, spec_interpreter(spec))
    if scheduler and script is not None:
        _ask_scheduler(loaded, script, workdir, thorough, report)
    return report


def _ask_scheduler(
    loaded: LoadedSpec, script: str, workdir: Path, thorough: bool, report: CheckReport
) -> None:
    from jobkit.backends.registry import get_backend

    backend = get_backend(loaded.spec.backend)
    try:
        answer = backend.preflight(loaded.spec, script, workdir, thorough=thorough)
    except SchedulerError as err:
        report.notes.append(f"scheduler checks not run: {err.show()}")
        return
    report.checked += answer.checked
    report.notes += answer.notes
    report.problems += [placed(loaded, f.key, f.message) for f in answer.findings]


def check_spec(
    load: Any, workdir: Path, spec_file: str, *, scheduler: bool = True, thorough: bool = True
) -> CheckReport:
    """`jobkit check`: load (`load()` returns the LoadedSpec), render, then check_loaded. A
    spec that does not load is its one problem; a script that does not render is a problem
    and the scheduler is not asked."""
    report = CheckReport(spec_file)
    try:
        loaded: LoadedSpec = load()
    except SpecError as err:
        report.problems += [Problem.from_error(each) for each in err.every()]
        return report
    from jobkit.backends.registry import get_backend

    script: str | None = None
    try:
        script = get_backend(loaded.spec.backend).script(loaded.spec, loaded.template_dir, workdir)
    except SpecError as err:
        if err.file is None and err.key is not None:  # a template's check names the key only
            report.problems.append(placed(loaded, err.key, err.message))
        else:
            report.problems.append(Problem.from_error(err))
    except JobkitError as err:
        report.problems.append(Problem(str(loaded.path), None, None, err.show()))
    return check_loaded(
        loaded, workdir, script=script, scheduler=scheduler, thorough=thorough, report=report
    )
