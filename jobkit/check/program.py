"""Does `run.command`'s program exist? Checked on this machine (docs/check.md).

Assumed: a batch job's nodes see the submission directory (a shared filesystem) and have the
programs this machine has on PATH, unless `env.modules`, `env.setup`, `env.conda` or a PATH in
`env.vars` may change PATH there (a bare name not found here is then a note, not a problem).
A backend's remote hosts (Backend.remote_hosts) are not this machine: the program is not
checked for them.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from jobkit.backends.preflight import Finding
from jobkit.backends.registry import backend_class
from jobkit.render.interpreter import Interpreter
from jobkit.spec.schema import JobSpec

_PYTHON = re.compile(r"python[\d.]*$")


@dataclass(frozen=True)
class ProgramCheck:
    """Problems about run.command / run.workdir, and notes about what was not checked."""

    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()


def check_program(spec: JobSpec, workdir: Path, interpreter: Interpreter) -> ProgramCheck:
    """run.workdir exists; run.command's program (and a python script it names) exists."""
    if backend_class(spec.backend).remote_hosts:
        return ProgramCheck(notes=(f"program not checked: it runs on the {spec.backend} hosts",))
    base = workdir
    if spec.run.workdir:
        base = workdir / Path(spec.run.workdir).expanduser()
        if not base.is_dir():
            return ProgramCheck((Finding("run.workdir", f"no such directory: {base}"),))
    if spec.run.command is None:
        return ProgramCheck()
    argv = list(spec.run.command)
    program = argv[0]
    found: list[Finding] = []
    notes: list[str] = []
    if "/" in program:
        path = base / Path(program).expanduser()
        if not path.exists():
            found.append(
                Finding("run.command", f"program {program!r} not found (looked for {path})")
            )
        elif path.is_dir() or not os.access(path, os.X_OK):
            found.append(
                Finding("run.command", f"program {program!r} is not an executable file ({path})")
            )
    elif spec.container is not None:
        notes.append(f"{program!r} runs inside container.image: not looked for here")
    elif _which(program, interpreter) is None:
        if _path_may_change(spec):
            notes.append(
                f"{program!r} is not on this machine's PATH; env.modules/setup/conda may"
                " provide it on the nodes"
            )
        else:
            found.append(
                Finding(
                    "run.command",
                    f"program {program!r} not found on PATH (searched {_path_text(interpreter)})",
                )
            )
    script = python_script(argv)
    if script is not None and not (base / Path(script).expanduser()).is_file():
        found.append(
            Finding(
                "run.command", f"python script {script!r} not found (looked for {base / script})"
            )
        )
    return ProgramCheck(tuple(found), tuple(notes))


def python_script(argv: list[str]) -> str | None:
    """The script a `python [options] SCRIPT ...` command runs (None: -m, -c, or not python)."""
    if not _PYTHON.match(os.path.basename(argv[0])):
        return None
    for word in argv[1:]:
        if word in ("-m", "-c") or (word.startswith(("-m", "-c")) and not word.startswith("--")):
            return None
        if word == "-":
            return None
        if not word.startswith("-"):
            return word if word.endswith(".py") else None
    return None


def _search_path(interpreter: Interpreter) -> str:
    """PATH as the job sees it: the interpreter's bin/ first (render/interpreter.py)."""
    parts = [interpreter.bin_dir] if interpreter.bin_dir else []
    return os.pathsep.join([*parts, os.environ.get("PATH", os.defpath)])


def _which(program: str, interpreter: Interpreter) -> str | None:
    return shutil.which(program, path=_search_path(interpreter))


def _path_text(interpreter: Interpreter) -> str:
    text = _search_path(interpreter)
    return text if len(text) <= 120 else text[:117] + "..."


def _path_may_change(spec: JobSpec) -> bool:
    env = spec.env
    return bool(env.modules or env.setup or env.conda or "PATH" in env.vars)
