"""Before a job starts: does its Python environment exist on every host its backend names?

    check_environment(loaded, interpreter, workdir=Path.cwd())   # SpecError on the first miss

One small bash check per host of Backend.checked_hosts (this machine for local, each ssh host
over ssh; all hosts at once) looks for the env.conda environment (a name `conda env list`
knows, or a prefix; where that shell has conda and no env.modules / env.setup come first),
the env.venv activate script, the env.python
interpreter and, for the bundled trainer with env.python, torch in that interpreter (found,
not imported). A
miss is one line naming the spec key, the path and the host, before anything is recorded or
launched. Batch jobs cannot be checked from here: their script checks the same things first
(templates/common/env.sh.j2) and leaves the line in the run folder for `jobkit status`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.backends.registry import get_backend
from jobkit.core.errors import SchedulerError, SpecError
from jobkit.core.proc import run_parallel
from jobkit.render.interpreter import Interpreter
from jobkit.render.quoting import quote_path
from jobkit.spec.load import LoadedSpec

if TYPE_CHECKING:
    from jobkit.spec.env_section import Env

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
    if conda_checked(spec.env):
        lines += _conda_check(spec.env.conda or "")
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


def conda_checked(env: Env) -> bool:
    """Whether env.conda is looked for at submit: not where env.modules or env.setup run
    first in the job (`module load anaconda` may be what brings conda, or another one)."""
    return bool(env.conda) and not env.modules and not env.setup


def _conda_check(env: str) -> list[str]:
    """bash that prints `env.conda<TAB>WHAT` when the named environment (a name in `conda
    env list`, or a prefix: a folder with conda-meta/) is missing. Where this shell has no
    conda (it may come from the login shell's setup) or conda cannot list its environments,
    the job's own check (templates/common/env.sh.j2) decides, with the same line."""
    return [
        f"e={shlex.quote(env)}",
        "c=${CONDA_EXE:-$(command -v conda || true)}",
        'if [[ -z "$c" ]]; then',
        "  :",
        'elif [[ "$e" == */* ]]; then',
        '  [[ -d "$e/conda-meta" ]] || printf \'env.conda\\tthe conda environment %s\\n\' "$e"',
        'elif [[ "$e" != base ]] && envs=$("$c" env list --json 2>/dev/null); then',
        '  grep -qF -- "/$e\\"" <<<"$envs" ||',
        "    printf 'env.conda\\tthe conda environment %s\\n' \"$e\"",
        "fi",
    ]


def find_missing(loaded: LoadedSpec, interpreter: Interpreter, workdir: Path) -> list[Missing]:
    """What each host lacks, hosts in order; SchedulerError when a host cannot be asked."""
    script = check_script(loaded, interpreter, workdir)
    hosts = get_backend(loaded.spec.backend).checked_hosts(loaded.spec) or []
    commands = [ssh if ssh is not None else ["bash", "-s"] for _, ssh in hosts]
    outcomes = run_parallel(commands, timeout=CHECK_TIMEOUT_S, input=script)
    missing: list[Missing] = []
    for (host, _), done in zip(hosts, outcomes, strict=True):
        if done.error is not None:
            raise SchedulerError(done.argv, None, "", "", reason=done.error)
        if done.timed_out:
            reason = f"checking the environment on {host} timed out"
            raise SchedulerError(done.argv, None, done.stdout, done.stderr, reason=reason)
        if done.returncode != 0:
            reason = f"could not check the environment on {host}"
            raise SchedulerError(
                done.argv, done.returncode, done.stdout, done.stderr, reason=reason
            )
        for line in done.stdout.splitlines():
            key, _, what = line.partition("\t")
            if what:
                missing.append(Missing(key, what, host))
    return missing


def check_environment(loaded: LoadedSpec, interpreter: Interpreter, workdir: Path) -> None:
    """Raise SpecError naming the file, line, key, path and host of the first thing missing."""
    if get_backend(loaded.spec.backend).checked_hosts(loaded.spec) is None:
        return  # the job's script checks where it runs
    env = loaded.spec.env
    if not env.venv and not conda_checked(env) and interpreter.path is None:
        return  # nothing to look for (env.python system)
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
    if key == "env.conda" and first.what.startswith("the conda environment"):
        message += " (`conda env list` names the environments there)"
    if key == "env.python" and loaded.origin(key) == "default":
        message += f" ({interpreter.rule})"
    where = loaded.origins.get(tuple(key.split(".")))
    raise SpecError(
        message,
        file=where.file if where else str(loaded.path),
        line=where.line if where else None,
        key=key,
    )
