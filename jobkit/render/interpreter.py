"""Which Python a job runs with (`env.python`), decided when the script is rendered.

    chosen = choose_interpreter(spec.env)      # Interpreter(path=..., rule=...)

`auto` (the default), without env.venv or env.conda: the environment jobkit was invoked from,
as submitit does: the active virtualenv ($VIRTUAL_ENV), else the active conda environment
($CONDA_PREFIX), else the interpreter running jobkit (sys.executable, symlinks kept: a
virtualenv's bin/python is a link to the base interpreter). `system`: whatever PATH finds on
the node. A path: that interpreter. The path is written into the script, so `jobkit render`
run from the same environment prints what `jobkit submit` sends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobkit.spec.env_section import Env
    from jobkit.spec.schema import JobSpec


@dataclass(frozen=True)
class Interpreter:
    """The chosen interpreter: an absolute path (None: PATH decides) and why it was chosen."""

    path: str | None
    rule: str

    @property
    def bin_dir(self) -> str | None:
        """The folder of the interpreter (its environment's bin/: torchrun lives there too)."""
        return os.path.dirname(self.path) if self.path else None


def choose_interpreter(
    env: Env,
    environ: Mapping[str, str] | None = None,
    executable: str | None = None,
    *,
    container: bool = False,
) -> Interpreter:
    """The interpreter for `env` (see the module docstring); `environ` and `executable`
    default to this process's. In a container (`container`) the image's python3."""
    wanted = env.python
    if container:
        return Interpreter(None, "container: the image's python3 and torchrun (PATH inside)")
    if wanted == "system":
        return Interpreter(None, "env.python system: python3 and torchrun as found on PATH")
    if wanted != "auto":
        return Interpreter(wanted, "env.python")
    if env.venv or env.conda:
        key = "env.venv" if env.venv else "env.conda"
        return Interpreter(None, f"env.python auto: {key} is activated, its python is used")
    variables = os.environ if environ is None else environ
    virtual_env = variables.get("VIRTUAL_ENV", "")
    if os.path.isabs(virtual_env):
        return Interpreter(
            os.path.join(virtual_env, "bin", "python"),
            "env.python auto: the virtualenv jobkit was run from ($VIRTUAL_ENV)",
        )
    conda_prefix = variables.get("CONDA_PREFIX", "")
    if os.path.isabs(conda_prefix):
        return Interpreter(
            os.path.join(conda_prefix, "bin", "python"),
            "env.python auto: the conda environment jobkit was run from ($CONDA_PREFIX)",
        )
    running = executable if executable is not None else sys.executable
    if running:
        return Interpreter(
            os.path.abspath(running), "env.python auto: the interpreter jobkit runs with"
        )
    return Interpreter(None, "env.python auto: no interpreter known, python3 from PATH")


def spec_interpreter(spec: JobSpec) -> Interpreter:
    """The interpreter of a whole spec: env.python's, or the image's with `container:`."""
    return choose_interpreter(spec.env, container=spec.container is not None)
