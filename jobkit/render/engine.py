"""Rendering a job spec into the script a backend runs: sandboxed Jinja, quoted values.

`render(spec)` is pure: it reads template files and runs no command. Every value from the
spec reaches the script through a quoting filter (`q` for shell words, `dq` for #SBATCH /
#PBS directive values); `env.setup` lines are the one field emitted as written.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from jobkit.backends.registry import backend_class
from jobkit.core.conventions import template_constants
from jobkit.core.errors import JobkitError, SpecError
from jobkit.core.overrides import set_word
from jobkit.core.paths import templates_dir
from jobkit.core.units import format_hms, format_memory, format_slurm_time
from jobkit.render.attempt import Attempt
from jobkit.render.cache import bytecode_cache
from jobkit.render.environment import env_exports
from jobkit.render.interpreter import Interpreter, spec_interpreter
from jobkit.render.quoting import (
    directive_quote,
    directive_words,
    indent_lines,
    quote,
    quote_join,
    quote_path,
)
from jobkit.spec.sweep import SweepTask, sweep_tasks, value_text

if TYPE_CHECKING:
    from jobkit.container.launch import ContainerLaunch
    from jobkit.spec.schema import JobSpec

BUILTIN_PREFIX = "builtin"
"""`{% extends "builtin/slurm/job.sh.j2" %}` always names the built-in template."""


class TemplateError(JobkitError):
    """A template could not be rendered: `FILE:LINE: message`, exit 2."""

    exit_code = 2


def render(
    spec: JobSpec,
    template_dir: Path | None = None,
    interpreter: Interpreter | None = None,
    *,
    template_name: str | None = None,
    extra: dict[str, Any] | None = None,
    attempt: Attempt | None = None,
) -> str:
    """The script for `spec.backend` ("" for submitit: backends/submitit.py sbatch_text).

    `template_dir` (a site's templates) is searched before the built-in ones; `interpreter`
    is env.python's choice (default: chosen from this process's environment).
    `template_name` renders another template (render/by_hand.py) with `extra` variables.
    `attempt`: a later attempt of a run (render/attempt.py); None for a first attempt.
    """
    name = template_name or backend_class(spec.backend).template
    if name is None:
        return ""
    env = _environment(template_dir)
    env.filters.update(backend_class(spec.backend).template_filters())
    try:
        template = env.get_template(name)
        context = {**template_context(spec, interpreter), **(extra or {})}
        script = template.render({**context, "attempt": attempt} if attempt else context)
    except JobkitError:
        raise
    except jinja2.TemplateSyntaxError as err:
        where = err.filename or err.name or name
        raise TemplateError(f"{where}:{err.lineno}: template syntax error: {err.message}") from err
    except jinja2.TemplateNotFound as err:
        raise TemplateError(f"{_where(err, env) or name}: template not found: {err.name}") from err
    except Exception as err:  # undefined names, sandbox refusals, bad filter input
        where = _where(err, env) or name
        raise TemplateError(f"{where}: {_describe(err)}") from err
    if template_name is None:
        backend_class(spec.backend).check_script(spec, script)
    return script


def template_context(spec: JobSpec, interpreter: Interpreter | None = None) -> dict[str, Any]:
    """The variables every template sees (documented in docs/templates.md)."""
    chosen = spec_interpreter(spec) if spec.container else interpreter or spec_interpreter(spec)
    counted = nproc_at_run_time(spec)
    exports = env_exports(spec)
    return {
        "spec": spec.model_copy(deep=True),
        "backend": spec.backend,
        "nodes": spec.resources.nodes,
        "procs_per_node": spec.procs_per_node,
        "nproc_at_run_time": counted,
        "nproc_word": '"$JOBKIT_NPROC_PER_NODE"' if counted else spec.procs_per_node,
        "tasks_per_node": spec.tasks_per_node,
        "cpus_per_task": spec.cpus_per_scheduler_task,
        "world_size": spec.world_size,
        "extra_args": launcher_extra_args(spec),
        "program": program_argv(spec, chosen),
        "interpreter": chosen,
        "exports": exports,
        "container": _container(spec, [name for name, _ in exports]),
        "sweep_tasks": [sweep_case(spec, task) for task in sweep_tasks(spec)],
        "attempt": None,  # a later attempt of a run: render(..., attempt=)
        "code_in_script": backend_class(spec.backend).code_in_script,
        **template_constants(),
        **backend_class(spec.backend).template_context(spec),
    }


def _container(spec: JobSpec, exported_names: list[str]) -> ContainerLaunch | None:
    """The `container` variable: container/ is imported only for a spec that has one."""
    if spec.container is None:
        return None
    from jobkit.container.render import container_launch

    return container_launch(spec, exported_names)


def nproc_at_run_time(spec: JobSpec) -> bool:
    """launch.nproc_per_node auto where no scheduler hands out GPUs (local, ssh) and
    resources.gpus_per_node is not given: each host counts its own GPUs when the job starts
    (one process per GPU, as torchrun's own auto; 1 without GPUs)."""
    return (
        spec.launch.nproc_per_node == "auto"
        and not spec.resources.gpus_per_node
        and backend_class(spec.backend).counts_gpus_at_start
    )


def launcher_extra_args(spec: JobSpec) -> list[str]:
    """launch.extra_args as words: each entry split like a shell (quoted again by the
    template)."""
    words: list[str] = []
    for entry in spec.launch.extra_args:
        try:
            words += shlex.split(entry)
        except ValueError as err:
            raise SpecError(
                f"cannot split {entry!r} into words: {err}", key="launch.extra_args"
            ) from None
    return words


def program_argv(spec: JobSpec, interpreter: Interpreter | None = None) -> list[str]:
    """What every process runs: the user's command, or the bundled trainer (with run.python,
    else env.python's interpreter, else python3)."""
    run = spec.run
    if run.command is not None:
        return list(run.command)
    assert run.train is not None  # the schema demands exactly one of train / command
    chosen = spec_interpreter(spec) if spec.container else interpreter or spec_interpreter(spec)
    python = run.python or chosen.path or "python3"
    argv = [python, "-m", "train", "--config", run.train.config]
    for key, value in run.train.overrides.items():
        argv += ["--set", set_word(key, value)]  # read back as jobkit read it
    return argv


def sweep_argv(spec: JobSpec, task: SweepTask) -> list[str]:
    """The words a sweep task adds to the program: `--set KEY=VALUE` for the bundled trainer
    (read back as jobkit read it), `KEY=VALUE` after a run.command."""
    if spec.run.command is not None:
        return [f"{key}={value_text(value)}" for key, value in task.overrides.items()]
    words: list[str] = []
    for key, value in task.overrides.items():
        words += ["--set", set_word(key, value)]
    return words


def sweep_case(spec: JobSpec, task: SweepTask) -> dict[str, Any]:
    """What the script's `case "$JOBKIT_TASK_ID"` holds for one task (macros.sh.j2
    sweep_select): its index, words, JSON text and the line that names it."""
    return {
        "index": task.index,
        "words": sweep_argv(spec, task),
        "json": task.json_text(),
        "shown": task.shown(),
    }


def _environment(template_dir: Path | None) -> jinja2.Environment:
    builtin = templates_dir()
    search: list[jinja2.BaseLoader] = [
        jinja2.PrefixLoader({BUILTIN_PREFIX: jinja2.FileSystemLoader(builtin)})
    ]
    if template_dir is not None:
        search.append(jinja2.FileSystemLoader(template_dir))
    search.append(jinja2.FileSystemLoader(builtin))
    env = ImmutableSandboxedEnvironment(
        loader=jinja2.ChoiceLoader(search),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.bytecode_cache = bytecode_cache(env)
    env.filters.update(
        q=quote,
        qpath=quote_path,
        qjoin=quote_join,
        dq=directive_quote,
        dqwords=directive_words,
        slurm_time=format_slurm_time,
        hms=format_hms,
        memory=format_memory,
        indent=indent_lines,
    )
    return env


def _where(err: BaseException, env: jinja2.Environment) -> str | None:
    """FILE:LINE of the innermost template frame in the error's traceback."""
    import traceback  # only on an error path

    found = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename.endswith(".j2") or _is_template_file(frame.filename, env):
            found = f"{frame.filename}:{frame.lineno}"
    return found


def _is_template_file(filename: str, env: jinja2.Environment) -> bool:
    loader = env.loader
    roots: list[str] = []
    if isinstance(loader, jinja2.ChoiceLoader):
        for sub in loader.loaders:
            if isinstance(sub, jinja2.FileSystemLoader):
                roots.extend(str(Path(p).resolve()) for p in sub.searchpath)
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return any(resolved.startswith(root + "/") for root in roots)


def _describe(err: BaseException) -> str:
    if isinstance(err, jinja2.exceptions.SecurityError):
        return f"refused by the template sandbox: {err}"
    if isinstance(err, jinja2.UndefinedError):
        return f"undefined value: {err}"
    return f"{type(err).__name__}: {err}"
