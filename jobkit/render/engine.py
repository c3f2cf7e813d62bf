"""Rendering a job spec into the script a backend runs: sandboxed Jinja, quoted values.

`render(spec)` is pure: it reads template files and runs no command. Every value from the
spec reaches the script through a quoting filter (`q` for shell words, `dq` for #SBATCH /
#PBS directive values); `env.setup` lines are the one field emitted as written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
from jobkit.render.interpreter import Interpreter, choose_interpreter
from jobkit.spec.schema import NODE_LAUNCHERS, JobSpec
from jobkit.spec.sweep import SweepTask, sweep_tasks, value_text

BUILTIN_PREFIX = "builtin"
"""`{% extends "builtin/slurm/job.sh.j2" %}` always names the built-in template."""

DEBUG_VARS = {
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_CPP_LOG_LEVEL": "INFO",
    "TORCH_SHOW_CPP_STACKTRACES": "1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,NET",
    "PYTHONFAULTHANDLER": "1",
    "LOGLEVEL": "INFO",
    "CUDA_LAUNCH_BLOCKING": "1",
}
"""What `env.debug: true` exports (torchrun reads LOGLEVEL for its own logging;
CUDA_LAUNCH_BLOCKING=1 makes a CUDA error point at the kernel that caused it, slowly)."""

LOG_LEVEL_VARS = {
    "DEBUG": {
        "JOBKIT_LOG_LEVEL": "DEBUG",
        "LOGLEVEL": "DEBUG",
        "TORCH_CPP_LOG_LEVEL": "INFO",
        "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    },
    "INFO": {"JOBKIT_LOG_LEVEL": "INFO", "LOGLEVEL": "INFO", "TORCH_CPP_LOG_LEVEL": "INFO"},
    "WARNING": {
        "JOBKIT_LOG_LEVEL": "WARNING",
        "LOGLEVEL": "WARNING",
        "TORCH_CPP_LOG_LEVEL": "WARNING",
    },
    "ERROR": {"JOBKIT_LOG_LEVEL": "ERROR", "LOGLEVEL": "ERROR", "TORCH_CPP_LOG_LEVEL": "ERROR"},
}
"""What `env.log_level` exports: the bundled trainer's level (train/runlog.py reads
JOBKIT_LOG_LEVEL), torchrun's (LOGLEVEL) and PyTorch's C++ one (TORCH_CPP_LOG_LEVEL, which has
no DEBUG: INFO is its most verbose)."""

NCCL_PRESETS = {
    "auto": {},
    "ethernet": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"},
    "infiniband": {"NCCL_IB_DISABLE": "0"},
}
"""What each `env.nccl.preset` exports; the nccl keys and nccl.vars override them."""

NCCL_KEYS = {
    "socket_ifname": "NCCL_SOCKET_IFNAME",
    "ib_hca": "NCCL_IB_HCA",
    "ib_gid_index": "NCCL_IB_GID_INDEX",
    "p2p_level": "NCCL_P2P_LEVEL",
    "socket_nthreads": "NCCL_SOCKET_NTHREADS",
    "nsocks_perthread": "NCCL_NSOCKS_PERTHREAD",
}
"""env.nccl keys and the variable each sets."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIRECTIVE_SAFE = re.compile(r"^[A-Za-z0-9@%+=:,./_-]+$")


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
    chosen = interpreter or choose_interpreter(spec.env)
    counted = nproc_at_run_time(spec)
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
        "exports": env_exports(spec),
        "sweep_tasks": [sweep_case(spec, task) for task in sweep_tasks(spec)],
        "attempt": None,  # a later attempt of a run: render(..., attempt=)
        **template_constants(),
        **backend_class(spec.backend).template_context(spec),
    }


def nproc_at_run_time(spec: JobSpec) -> bool:
    """launch.nproc_per_node auto where no scheduler hands out GPUs (local, ssh) and
    resources.gpus_per_node is not given: each host counts its own GPUs when the job starts
    (one process per GPU, as torchrun's own auto; 1 without GPUs)."""
    from jobkit.backends.launcher_files import LauncherJobs

    return (
        spec.launch.nproc_per_node == "auto"
        and not spec.resources.gpus_per_node
        and issubclass(backend_class(spec.backend), LauncherJobs)
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
    chosen = interpreter or choose_interpreter(spec.env)
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


def env_exports(spec: JobSpec) -> list[tuple[str, str]]:
    """Exported variables, later sources winning: the GPU request, NCCL preset, the nccl
    keys, threads per process, debug, log_level, torchrun restart fix, nccl.vars, env.vars."""
    nccl = spec.env.nccl
    exports: dict[str, str] = {}
    if spec.resources.gpus_per_node:
        # The bundled trainer then trains on CUDA or stops: never silently on CPU.
        exports["JOBKIT_GPUS_PER_NODE"] = str(spec.resources.gpus_per_node)
    exports.update(NCCL_PRESETS[nccl.preset])
    for key, name in NCCL_KEYS.items():
        value = getattr(nccl, key)
        if value is not None and value != "":  # an empty text leaves NCCL's own default
            exports[name] = str(value)
    threads = spec.cpus_per_process
    submitit = backend_class(spec.backend).task_per_process  # one task per process: no torchrun
    if threads is not None:
        exports["OMP_NUM_THREADS"] = str(threads)
    elif spec.launch.launcher in NODE_LAUNCHERS and spec.procs_per_node > 1 and not submitit:
        # What torchrun sets anyway for several processes, said here: no warning banner.
        exports["OMP_NUM_THREADS"] = "1"
    if spec.env.debug:
        exports.update(DEBUG_VARS)
    if spec.env.log_level:
        exports.update(LOG_LEVEL_VARS[spec.env.log_level])
    if spec.launch.launcher in ("torchrun", "distributed-launch") and spec.launch.max_restarts > 0:
        # torchrun's store shared with its workers hands restarted workers the previous
        # attempt's addresses on several nodes (pytorch#135712): they fail or hang.
        exports["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    for source in (nccl.vars, spec.env.vars):
        for name, value in source.items():
            exports[name] = shell_word(value)
    for name in exports:
        if not _ENV_NAME.match(name):
            raise SpecError(f"is not a valid environment variable name: {name!r}", key="env.vars")
    return list(exports.items())


def shell_word(value: object) -> str:
    """A scalar as text: booleans as YAML writes them (true/false), numbers as Python does."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises its own error here
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(
        f"cannot quote {type(value).__name__} value {value!r} (expected text or a number)"
    )


def quote(value: object) -> str:
    """The `q` filter: one shell word, quoted like shlex.quote."""
    return shlex.quote(shell_word(value))


def quote_path(value: object) -> str:
    """The `qpath` filter: like `q`, but a leading `~/` means $HOME (of the host it runs on)."""
    text = shell_word(value)
    if text == "~":
        return '"$HOME"'
    if text.startswith("~/"):
        rest = text[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"/'
    return shlex.quote(text)


def quote_join(values: Iterable[object]) -> str:
    """The `qjoin` filter: each item quoted, joined by spaces."""
    if isinstance(values, (str, bytes)):
        raise TypeError("qjoin needs a list of words, not a single string")
    return " ".join(quote(value) for value in values)


def directive_quote(value: object) -> str:
    """The `dq` filter: a value inside an #SBATCH / #PBS line.

    sbatch (and Slurm's PBS wrappers) read these lines with their own rules: a backslash
    escapes the next character even inside quotes, and an unquoted `#` starts a comment.
    Double quotes with `\\` and `"` escaped read back the same there and in POSIX shlex.
    """
    text = shell_word(value)
    if _DIRECTIVE_SAFE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def directive_words(line: str) -> str:
    """The `dqwords` filter: a scheduler.extra entry split like a shell and each word quoted."""
    try:
        words = shlex.split(shell_word(line))
    except ValueError as err:
        raise SpecError(f"cannot split {line!r} into words: {err}", key="scheduler.extra") from None
    return " ".join(directive_quote(word) for word in words)


def indent_lines(text: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    """The `indent` filter, breaking lines at "\n" only.

    Jinja's own uses str.splitlines(), which also breaks at U+2028, NEL, vertical tab, form
    feed...: a quoted value holding one would come out changed (a newline and the
    indentation in its middle).
    """
    indention = width if isinstance(width, str) else " " * width
    lines = (text + "\n").split("\n")[:-1]
    if blank:
        result = ("\n" + indention).join(lines)
    else:
        result = lines.pop(0) if lines else ""
        if lines:
            result += "\n" + "\n".join(indention + line if line else line for line in lines)
    return indention + result if first else result


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
