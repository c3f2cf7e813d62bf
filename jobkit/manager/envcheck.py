"""Before a job starts: does its Python environment exist on every host its backend names?

    check_environment(loaded, interpreter, workdir=Path.cwd())   # SpecError on the first miss

One small bash check per host of Backend.checked_hosts (this machine for local, each ssh host
over ssh; all hosts at once) looks for the env.venv activate script, the env.python
interpreter and, for the bundled trainer with env.python, torch in that interpreter (found,
not imported). A
miss is one line naming the spec key, the path and the host, before anything is recorded or
launched. Batch jobs cannot be checked from here: their script checks the same things first
(templates/common/env.sh.j2) and leaves the line in the run folder for `jobkit status`.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from jobkit.backends.registry import get_backend
from jobkit.core.errors import SchedulerError, SpecError
from jobkit.render.engine import quote_path
from jobkit.render.interpreter import Interpreter
from jobkit.spec.load import LoadedSpec

CHECK_TIMEOUT_S = 30.0
"""How long one host's check may take (ssh connection included)."""

_TORCH_FOUND = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"


@dataclass(frozen=True)
class Missing:
    """One thing a host lacks: the spec key that asked for it and what was looked for."""

    key: str
    what: str
    host: str


def check_script(loaded: LoadedSpec, interpreter: Interpreter, workdir: Path) -> str:
    """The bash code run on each host; it prints `KEY<TAB>WHAT` for each thing missing."""
    spec = loaded.spec
    where = shlex.quote(str(workdir))
    lines = [f"cd -- {where} 2>/dev/null || {{ printf 'workdir\\t%s\\n' {where}; exit 0; }}"]
    if spec.env.venv:
        lines += [
            f"p={quote_path(spec.env.venv + '/bin/activate')}",
            '[[ "$p" == /* ]] || p="$PWD/$p"',
            '[[ -r "$p" ]] || printf \'env.venv\\t%s\\n\' "$p"',
        ]
    if interpreter.path:
        lines += [
            f"py={quote_path(interpreter.path)}",
            'if [[ ! -x "$py" ]]; then printf \'env.python\\t%s\\n\' "$py"',
        ]
        if spec.run.train is not None and spec.run.python is None:
            lines += [
                f'elif ! "$py" -c {shlex.quote(_TORCH_FOUND)} 2>/dev/null; then',
                "  printf 'torch\\t%s\\n' \"$py\"",
            ]
        lines.append("fi")
    return "\n".join(lines) + "\n"


def find_missing(loaded: LoadedSpec, interpreter: Interpreter, workdir: Path) -> list[Missing]:
    """What each host lacks, hosts in order; SchedulerError when a host cannot be asked."""
    script = check_script(loaded, interpreter, workdir)
    started = []
    for host, ssh in get_backend(loaded.spec.backend).checked_hosts(loaded.spec) or []:
        argv = ssh if ssh is not None else ["bash", "-s"]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
            )
        except OSError as err:
            raise SchedulerError(argv, None, "", "", reason=f"cannot run: {err}") from None
        started.append((host, argv, proc))
    missing: list[Missing] = []
    for host, argv, proc in started:
        try:
            out, errors = proc.communicate(script, timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, errors = proc.communicate()
            reason = f"checking the environment on {host} timed out"
            raise SchedulerError(argv, None, out, errors, reason=reason) from None
        if proc.returncode != 0:
            reason = f"could not check the environment on {host}"
            raise SchedulerError(argv, proc.returncode, out, errors, reason=reason)
        for line in out.splitlines():
            key, _, what = line.partition("\t")
            if what:
                missing.append(Missing(key, what, host))
    return missing


def check_environment(loaded: LoadedSpec, interpreter: Interpreter, workdir: Path) -> None:
    """Raise SpecError naming the file, line, key, path and host of the first thing missing."""
    if get_backend(loaded.spec.backend).checked_hosts(loaded.spec) is None:
        return  # the job's script checks where it runs
    if not loaded.spec.env.venv and interpreter.path is None:
        return  # nothing to look for (env.python system, or conda: activated by the job)
    found = find_missing(loaded, interpreter, workdir)
    if not found:
        return
    first = found[0]
    key = "env.python" if first.key == "torch" else first.key
    if first.key == "torch":
        message = (
            f"{first.what} cannot import torch on {first.host} (the bundled trainer needs it:"
            " install jobkit[train] there, or set env.venv / env.python)"
        )
    elif first.key == "workdir":
        message = f"the submission directory {first.what} does not exist on {first.host}"
        key = "ssh.hosts"
    else:
        message = f"{first.what} not found on {first.host}"
    if key == "env.python" and loaded.origin(key) == "default":
        message += f" ({interpreter.rule})"
    where = loaded.origins.get(tuple(key.split(".")))
    raise SpecError(
        message,
        file=where.file if where else str(loaded.path),
        line=where.line if where else None,
        key=key,
    )
